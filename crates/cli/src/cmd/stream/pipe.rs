//! One direction of one stream: a live REQ on the source relay, each event
//! published to the destination relay with `EVENT` and its `OK` awaited.
//!
//! Up to `in_flight` events wait for their `OK` at once; at that many the
//! source is not read (its socket fills, and the relay's slow-consumer
//! rules apply), so memory is bounded whatever the rates. A lost
//! connection on either side ends the session; the next one starts after a
//! backoff and asks again from the cursor, less the overlap.
//!
//! The cursor moves in arrival order: past an event only once it and every
//! event received before it were answered by the destination (accepted,
//! duplicate, or refused for good). During a REQ's stored events (before
//! its EOSE), which arrive newest first, it does not move; once they are
//! all answered it moves to the time the REQ was sent. After that, a live
//! event moves it to its `created_at`, but never past this machine's clock
//! when the event arrived.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::{EventId, Filter, PreimageFields, RelayMessage, SignedFields, Timestamp};
use nostrwire_loadgen::client::{Conn, Target};
use nostrwire_loadgen::stats::message_prefix;
use nostrwire_loadgen::ws::{opcode, Admitted, Counters, WsUrl};

use super::state::State;

/// Ids known to be on one relay, the most recent `cap` of them: an event
/// read from a relay is not published back to it, and one a relay
/// acknowledged is not sent again after a reconnect.
#[derive(Debug)]
pub struct Recent {
    cap: usize,
    inner: Mutex<(HashSet<EventId>, VecDeque<EventId>)>,
}

impl Recent {
    /// An empty set that keeps the last `cap` ids.
    pub fn new(cap: usize) -> Recent {
        Recent {
            cap: cap.max(1),
            inner: Mutex::new((HashSet::new(), VecDeque::new())),
        }
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: &EventId) -> bool {
        self.inner.lock().expect("recent ids").0.contains(id)
    }

    /// Adds `id`, forgetting the oldest when full.
    pub fn insert(&self, id: EventId) {
        let mut inner = self.inner.lock().expect("recent ids");
        let (set, order) = &mut *inner;
        if !set.insert(id) {
            return;
        }
        order.push_back(id);
        if order.len() > self.cap {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }
}

/// Settings every pipe of a process shares.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Seconds asked again before the cursor.
    pub overlap: u64,
    /// Events published and not yet answered, at most.
    pub in_flight: usize,
    /// How long to wait for a connection or an `OK`.
    pub timeout: Duration,
    /// The longest wait between reconnections.
    pub max_backoff: Duration,
}

/// What one pipe did, for the progress lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Accepted by the destination.
    pub moved: u64,
    /// The destination had them already (`duplicate:`).
    pub duplicate: u64,
    /// Not sent: the destination was known to have them.
    pub skipped: u64,
    /// Refused by the destination, by reason prefix.
    pub refused: BTreeMap<String, u64>,
    /// Sessions that ended and were started again.
    pub reconnects: u64,
    /// The cursor, in seconds.
    pub cursor: u64,
    /// Events published and not yet answered.
    pub waiting: usize,
}

/// One direction of one stream.
#[derive(Debug)]
pub struct Pipe {
    /// `down ws://…` or `up ws://…` (with the group's name, from a config).
    pub label: String,
    /// The key of its cursor in the state file.
    pub key: String,
    /// Where events are read.
    pub source: WsUrl,
    /// Where they are published.
    pub dest: WsUrl,
    /// The filter of the source's REQ.
    pub filter: Filter,
    /// Ids the source has.
    pub at_source: Arc<Recent>,
    /// Ids the destination has.
    pub at_dest: Arc<Recent>,
    /// Shared settings.
    pub settings: Settings,
    /// The cursors.
    pub state: Arc<State>,
    /// What it did.
    pub counts: Arc<Mutex<Counts>>,
}

/// Why a session ended.
#[derive(Debug)]
enum End {
    /// A connection could not be made, or was lost.
    Lost(String),
    /// The destination refused an event for a reason that may pass
    /// (`rate-limited:`, `error:`): it is asked for again.
    Retry(String),
}

/// One event from the source, waiting for the destination.
#[derive(Debug)]
struct Flight {
    /// Where the cursor may move once it is answered.
    mark: u64,
    done: bool,
}

/// The events of one session in arrival order, and the cursor they allow.
#[derive(Debug, Default)]
struct Window {
    queue: VecDeque<Flight>,
    /// Sequence number of `queue[0]`.
    first: u64,
    index: HashMap<EventId, u64>,
    /// Sequence number of the first event after EOSE, once it came.
    live_from: Option<u64>,
    /// The highest mark of the events answered so far.
    mark: u64,
}

impl Window {
    fn next_seq(&self) -> u64 {
        self.first + self.queue.len() as u64
    }

    fn push(&mut self, id: EventId, mark: u64, done: bool) {
        if !done {
            self.index.insert(id, self.next_seq());
        }
        self.queue.push_back(Flight { mark, done });
    }

    /// Marks `id` answered; false when it is not waiting.
    fn answer(&mut self, id: &EventId) -> bool {
        let Some(seq) = self.index.remove(id) else {
            return false;
        };
        self.queue[(seq - self.first) as usize].done = true;
        true
    }

    /// Pops the answered events at the front; the cursor they allow, once
    /// every stored event before EOSE was answered.
    fn advance(&mut self) -> Option<u64> {
        while self.queue.front().is_some_and(|f| f.done) {
            let flight = self.queue.pop_front().expect("front");
            self.mark = self.mark.max(flight.mark);
            self.first += 1;
        }
        match self.live_from {
            Some(from) if self.first >= from => Some(self.mark),
            _ => None,
        }
    }

    fn waiting(&self) -> usize {
        self.index.len()
    }
}

/// The live subscription's id.
const LIVE: &str = "live";

/// Stored events asked per page.
const PAGE: u64 = 500;

/// The stored events from `since`, newest first, a page at a time: the
/// live REQ's stored events, then REQs each ending (`until`) at the oldest
/// `created_at` of the page before, so events of that second come again and
/// are told apart by the ids kept for it. Done at the first page with no
/// new event.
#[derive(Debug)]
struct CatchUp {
    /// The page's subscription id.
    sub: String,
    pages: u64,
    until: u64,
    /// Ids of the events at `until` that an earlier page returned.
    boundary: HashSet<EventId>,
    /// New events in this page.
    new: u64,
    oldest: u64,
    at_oldest: HashSet<EventId>,
}

impl CatchUp {
    /// The live REQ's stored events, the first page.
    fn new() -> CatchUp {
        CatchUp {
            sub: LIVE.into(),
            pages: 1,
            until: u64::MAX,
            boundary: HashSet::new(),
            new: 0,
            oldest: u64::MAX,
            at_oldest: HashSet::new(),
        }
    }

    /// Whether an event of this page was not in an earlier one.
    fn is_new(&mut self, id: EventId, created_at: u64) -> bool {
        if created_at > self.until || (created_at == self.until && self.boundary.contains(&id)) {
            return false;
        }
        self.new += 1;
        if created_at < self.oldest {
            self.oldest = created_at;
            self.at_oldest.clear();
        }
        if created_at == self.oldest {
            self.at_oldest.insert(id);
        }
        true
    }

    /// Moves on to the page before this one.
    fn next(&mut self) {
        self.sub = format!("page{}", self.pages);
        self.pages += 1;
        if self.oldest < self.until {
            self.until = self.oldest;
            self.boundary = std::mem::take(&mut self.at_oldest);
        } else {
            self.boundary.extend(self.at_oldest.drain());
        }
        self.new = 0;
        self.oldest = u64::MAX;
    }
}

fn timestamp(secs: u64) -> Timestamp {
    Timestamp::new(secs).unwrap_or(Timestamp::MAX)
}

/// A message read from one side, owned, so both sides can be read at once.
enum Incoming {
    Text(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
}

async fn read(conn: &mut Conn) -> Result<Incoming, String> {
    loop {
        match conn.reader.next().await.map_err(|e| e.to_string())? {
            Admitted::Text(t) => return Ok(Incoming::Text(t.to_vec())),
            Admitted::Ping(p) => return Ok(Incoming::Ping(p.to_vec())),
            Admitted::Pong(_) => return Ok(Incoming::Pong),
            Admitted::Close(_) => return Err("closed by the relay".into()),
            Admitted::Binary(_) => continue,
        }
    }
}

/// The text of a message read from `side`, which is then heard from; a
/// ping is answered and a pong taken (`None`).
async fn text(
    incoming: Result<Incoming, String>,
    conn: &mut Conn,
    side: &mut Side,
) -> Result<Option<Vec<u8>>, End> {
    let lost = |e: &dyn std::fmt::Display| End::Lost(format!("{}: {e}", side.name));
    let incoming = incoming.map_err(|e| lost(&e))?;
    side.heard = Instant::now();
    match incoming {
        Incoming::Text(t) => Ok(Some(t)),
        Incoming::Pong => Ok(None),
        Incoming::Ping(p) => {
            conn.writer.queue_control(opcode::PONG, &p);
            conn.writer.flush().await.map_err(|e| lost(&e))?;
            Ok(None)
        }
    }
}

/// When one side of a session was last heard from, and pinged: a side
/// quiet for `timeout` is pinged, and one quiet for twice as long is taken
/// for lost (a connection whose peer vanished without closing it).
struct Side {
    name: &'static str,
    heard: Instant,
    pinged: Option<Instant>,
}

impl Side {
    fn new(name: &'static str) -> Side {
        Side {
            name,
            heard: Instant::now(),
            pinged: None,
        }
    }

    async fn check(&mut self, conn: &mut Conn, timeout: Duration) -> Result<(), End> {
        let quiet = self.heard.elapsed();
        if quiet > timeout * 2 {
            return Err(End::Lost(format!(
                "nothing from the {} in {} s",
                self.name,
                quiet.as_secs()
            )));
        }
        if quiet > timeout && self.pinged.is_none_or(|at| at.elapsed() > timeout) {
            self.pinged = Some(Instant::now());
            conn.writer.queue_control(opcode::PING, b"stream");
            if let Err(e) = conn.writer.flush().await {
                return Err(End::Lost(format!("{}: {e}", self.name)));
            }
        }
        Ok(())
    }
}

/// Whether a refusal may pass if the event is sent again later.
fn transient(prefix: &str) -> bool {
    matches!(prefix, "rate-limited" | "error")
}

impl Pipe {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().expect("counts")
    }

    fn log(&self, line: &str) {
        eprintln!("stream: {}: {line}", self.label);
    }

    /// Runs until the process stops: sessions, each after a backoff.
    pub async fn run(self) {
        let start = Timestamp::now().as_u64();
        let cursor = self.state.cursor_or(&self.key, start);
        self.counts().cursor = cursor;
        let mut backoff = Duration::from_millis(100);
        loop {
            let (end, reached_eose) = self.session().await;
            let why = match end {
                End::Lost(why) => why,
                End::Retry(why) => format!("the destination asks to retry ({why})"),
            };
            if reached_eose {
                backoff = Duration::from_millis(100);
            }
            self.counts().reconnects += 1;
            self.log(&format!(
                "{why}; reconnecting in {:.1} s",
                backoff.as_secs_f64()
            ));
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.settings.max_backoff);
        }
    }

    async fn connect(&self, url: &WsUrl, side: &str) -> Result<Conn, End> {
        let target = Target {
            url: url.clone(),
            counters: Arc::new(Counters::default()),
            timeout: self.settings.timeout,
        };
        Conn::open(&target, rand_seed())
            .await
            .map_err(|e| End::Lost(format!("cannot connect to the {side}: {e}")))
    }

    /// One session: both connections, the REQ, and events moved until a
    /// connection is lost. Returns why it ended and whether it caught up
    /// with the stored events.
    async fn session(&self) -> (End, bool) {
        let mut caught_up = false;
        let end = self.session_inner(&mut caught_up).await;
        (end, caught_up)
    }

    async fn session_inner(&self, caught_up: &mut bool) -> End {
        let mut dest = match self.connect(&self.dest, "destination").await {
            Ok(c) => c,
            Err(e) => return e,
        };
        let mut source = match self.connect(&self.source, "source").await {
            Ok(c) => c,
            Err(e) => return e,
        };
        let cursor = self.counts().cursor;
        let since = cursor.saturating_sub(self.settings.overlap);
        let since = match self.filter.since {
            Some(s) => s.as_u64().max(since),
            None => since,
        };
        // One REQ from `since`, kept open: its stored events (the newest
        // `PAGE`; relays cap how many one REQ returns) then live ones. The
        // older stored events come a page at a time after its EOSE.
        let asked_at = Timestamp::now().as_u64();
        let mut live = self.filter.clone();
        live.since = Some(timestamp(since));
        live.limit = Some(PAGE);
        let mut out = Vec::with_capacity(512);
        write::req(&mut out, LIVE, std::slice::from_ref(&live));
        let mut catch_up = Some(CatchUp::new());
        let mut live_eose = false;
        if let Err(e) = source.send_message(&out).await {
            return End::Lost(format!("source: {e}"));
        }
        self.log(&format!(
            "connected; asking since {since} (cursor {cursor})"
        ));
        let mut window = Window::default();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut oldest_wait: Option<Instant> = None;
        let (mut source_side, mut dest_side) = (Side::new("source"), Side::new("destination"));
        loop {
            let reading = window.queue.len() < self.settings.in_flight;
            tokio::select! {
                incoming = read(&mut source), if reading => {
                    let text = match text(incoming, &mut source, &mut source_side).await {
                        Ok(Some(t)) => t,
                        Ok(None) => continue,
                        Err(e) => return e,
                    };
                    match RelayMessage::parse(&text) {
                        Ok(RelayMessage::Event { subscription_id, event }) => {
                            let id = *event.id();
                            let created_at = event.created_at().as_u64();
                            let live_event = subscription_id == LIVE && live_eose;
                            if !live_event {
                                match catch_up.as_mut() {
                                    Some(page) if page.sub == subscription_id => {
                                        if !page.is_new(id, created_at) {
                                            continue;
                                        }
                                    }
                                    // A page closed before its last events came.
                                    _ => continue,
                                }
                            }
                            self.at_source.insert(id);
                            if window.index.contains_key(&id) {
                                continue;
                            }
                            let mark = created_at.min(Timestamp::now().as_u64());
                            if !self.filter.matches(&event) {
                                self.refused("not matching the filter", &id, "");
                                window.push(id, mark, true);
                            } else if self.at_dest.contains(&id) {
                                self.counts().skipped += 1;
                                window.push(id, mark, true);
                            } else {
                                out.clear();
                                write::client_event(&mut out, &event);
                                if let Err(e) = dest.writer.send_text(&out).await {
                                    return End::Lost(format!("destination: {e}"));
                                }
                                if window.waiting() == 0 {
                                    oldest_wait = Some(Instant::now());
                                }
                                window.push(id, mark, false);
                            }
                        }
                        Ok(RelayMessage::Eose(s)) if catch_up.as_ref().is_some_and(|p| p.sub == s) => {
                            if s == LIVE {
                                live_eose = true;
                            } else {
                                out.clear();
                                write::close(&mut out, &s);
                                if let Err(e) = source.send_message(&out).await {
                                    return End::Lost(format!("source: {e}"));
                                }
                            }
                            let page = catch_up.as_mut().expect("a page");
                            if page.new == 0 {
                                catch_up = None;
                            } else {
                                page.next();
                                if let Err(e) = self.ask_page(&mut source, &mut out, since, Some(page)).await {
                                    return e;
                                }
                            }
                        }
                        Ok(RelayMessage::Closed { subscription_id, message }) => {
                            return End::Lost(format!(
                                "the source closed subscription {subscription_id}: {message}"
                            ));
                        }
                        Ok(RelayMessage::Notice(message)) => self.log(&format!("source says: {message}")),
                        _ => {}
                    }
                    if live_eose && catch_up.is_none() && window.live_from.is_none() {
                        *caught_up = true;
                        window.live_from = Some(window.next_seq());
                        window.mark = window.mark.max(asked_at);
                    }
                }
                incoming = read(&mut dest) => {
                    let text = match text(incoming, &mut dest, &mut dest_side).await {
                        Ok(Some(t)) => t,
                        Ok(None) => continue,
                        Err(e) => return e,
                    };
                    match RelayMessage::parse(&text) {
                        Ok(RelayMessage::Ok { event_id, accepted, message }) => {
                            let prefix = message_prefix(&message);
                            if !accepted && transient(&prefix) {
                                return End::Retry(message.into_owned());
                            }
                            if !window.answer(&event_id) {
                                continue;
                            }
                            if accepted || prefix == "duplicate" {
                                self.at_dest.insert(event_id);
                                let mut counts = self.counts();
                                match prefix.as_str() {
                                    "duplicate" => counts.duplicate += 1,
                                    _ => counts.moved += 1,
                                }
                            } else {
                                self.refused(&prefix, &event_id, &message);
                            }
                            oldest_wait = (window.waiting() > 0).then(Instant::now);
                        }
                        Ok(RelayMessage::Notice(message)) => self.log(&format!("destination says: {message}")),
                        _ => {}
                    }
                }
                _ = tick.tick() => {
                    if oldest_wait.is_some_and(|t| t.elapsed() > self.settings.timeout) {
                        return End::Lost(format!(
                            "no OK from the destination in {} s",
                            self.settings.timeout.as_secs()
                        ));
                    }
                    if !reading {
                        // Not read, so not heard: the wait is ours.
                        source_side.heard = Instant::now();
                    }
                    let timeout = self.settings.timeout;
                    if let Err(e) = source_side.check(&mut source, timeout).await {
                        return e;
                    }
                    if let Err(e) = dest_side.check(&mut dest, timeout).await {
                        return e;
                    }
                }
            }
            self.counts().waiting = window.waiting();
            if let Some(cursor) = window.advance() {
                let mut counts = self.counts();
                if cursor > counts.cursor {
                    counts.cursor = cursor;
                    drop(counts);
                    self.state.advance(&self.key, cursor);
                }
            }
        }
    }

    /// Asks for the next page of stored events, if the catch-up goes on.
    async fn ask_page(
        &self,
        source: &mut Conn,
        out: &mut Vec<u8>,
        since: u64,
        page: Option<&mut CatchUp>,
    ) -> Result<(), End> {
        let Some(page) = page else { return Ok(()) };
        let mut filter = self.filter.clone();
        filter.since = Some(timestamp(since));
        filter.until = Some(timestamp(page.until));
        filter.limit = Some(PAGE);
        out.clear();
        write::req(out, &page.sub, std::slice::from_ref(&filter));
        source
            .send_message(out)
            .await
            .map_err(|e| End::Lost(format!("source: {e}")))
    }

    fn refused(&self, reason: &str, id: &EventId, message: &str) {
        let first = {
            let mut counts = self.counts();
            let n = counts.refused.entry(reason.to_string()).or_default();
            *n += 1;
            *n == 1
        };
        if first {
            self.log(&format!(
                "refused {} ({reason}) {message}; further refusals for this reason are counted",
                id.to_hex()
            ));
        }
    }
}

/// A seed for WebSocket masks.
fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId::from_bytes([n; 32])
    }

    #[test]
    fn the_cursor_waits_for_eose_and_for_every_earlier_answer() {
        let mut w = Window::default();
        // Stored events, newest first.
        w.push(id(1), 500, false);
        w.push(id(2), 400, false);
        assert!(w.answer(&id(1)));
        assert_eq!(w.advance(), None);
        w.live_from = Some(w.next_seq());
        w.mark = w.mark.max(450);
        assert_eq!(w.advance(), None, "a stored event is unanswered");
        w.push(id(3), 600, false);
        w.push(id(4), 700, true);
        assert!(w.answer(&id(2)));
        assert_eq!(w.advance(), Some(500));
        assert!(!w.answer(&id(2)), "answered twice");
        assert!(w.answer(&id(3)));
        assert_eq!(w.advance(), Some(700));
        assert_eq!(w.waiting(), 0);
    }

    #[test]
    fn pages_end_at_the_oldest_second_and_skip_its_known_ids() {
        let mut page = CatchUp::new();
        assert_eq!(page.sub, LIVE);
        for (n, t) in [(1, 900), (2, 800), (3, 700), (4, 700)] {
            assert!(page.is_new(id(n), t));
        }
        page.next();
        assert_eq!((page.sub.as_str(), page.until), ("page1", 700));
        // The next page starts at 700 again: ids 3 and 4 are known.
        assert!(!page.is_new(id(3), 700));
        assert!(page.is_new(id(5), 700));
        assert!(page.is_new(id(6), 600));
        assert_eq!(page.new, 2);
        page.next();
        assert_eq!(page.until, 600);
        assert!(!page.is_new(id(6), 600));
        assert_eq!(page.new, 0, "no new event: the catch-up is done");
    }

    #[test]
    fn recent_ids_are_bounded() {
        let recent = Recent::new(2);
        recent.insert(id(1));
        recent.insert(id(2));
        recent.insert(id(2));
        assert!(recent.contains(&id(1)));
        recent.insert(id(3));
        assert!(!recent.contains(&id(1)));
        assert!(recent.contains(&id(2)) && recent.contains(&id(3)));
    }
}
