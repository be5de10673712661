//! Stage 6a, read side: REQ and COUNT on read snapshots, on a pool of
//! workers. A job examines at most `query_slice` index entries, then goes to
//! the back of its connection's queue, and the workers take client
//! addresses in turn, then their connections ([`Queue`]), each turn paid
//! for by the time the job's last slice took: one client's heavy or
//! numerous queries, over however many connections, cannot starve
//! another's light ones.

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_wire::transport::{self, BatchBuilder};

use crate::memory::Short;
use crate::msg::{Held, Phase, QueryKind, Sub, Texts};
use crate::store::AsStored;
use crate::store::{Found, QueryCursor, ScanStatus, StoreError};
use crate::turns::AddressTurns;
use crate::Shared;

/// The query pool's queue: a queue of jobs per connection, and the client
/// addresses with work in turn, then their connections, so each slice goes
/// to the next client, not the next job (nor the next of one client's many
/// connections).
#[derive(Debug)]
pub struct Queue {
    state: Mutex<Waiting>,
    ready: Condvar,
}

#[derive(Debug)]
struct Waiting {
    jobs: AddressTurns<IpAddr, Job>,
    /// Jobs waiting for their connection to read (stored results paced by
    /// its queue), or for the relay's memory, each until the time it is
    /// tried again: parked rather than turned over and over. One queue per
    /// waiting time, so each is in time order.
    parked: [VecDeque<(Instant, Job)>; 2],
    /// Set when the relay stops: the workers end.
    closed: bool,
    /// Workers asleep in [`Queue::pop`]: a new job wakes one only when
    /// there is one (a wake-up is a system call, paid by every REQ).
    idle: usize,
}

/// Index entries the first slice of a new query examines (then twice as
/// many each slice, up to `performance.query_slice`).
const FIRST_SLICE: usize = 512;

/// Microseconds of work a client address may do per turn: turns are
/// paid for by the time each job's last slice took.
const QUANTUM_MICROS: u64 = 500;

/// How long a job whose connection's queue is full waits before it is
/// tried again.
const PARK: Duration = Duration::from_millis(5);
/// How long a job waiting for the relay's memory waits before it is
/// tried again.
const STARVED: Duration = Duration::from_millis(50);

impl Default for Queue {
    fn default() -> Self {
        Queue {
            state: Mutex::new(Waiting {
                jobs: AddressTurns::new(QUANTUM_MICROS),
                parked: Default::default(),
                closed: false,
                idle: 0,
            }),
            ready: Condvar::new(),
        }
    }
}

impl Queue {
    /// Adds a job at the back of its connection's queue.
    pub fn push(&self, job: Job) {
        let (address, conn, cost) = (job.sub.address, job.sub.conn, job.cost);
        let mut state = self.state.lock().expect("query queue");
        state.jobs.push(address, conn, job, cost);
        let wake = state.idle > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Charges a client address for work that cost more than its job was
    /// queued with.
    pub fn charge(&self, address: IpAddr, extra: u64) {
        // Less than a turn's worth is not worth the lock (most REQs end in
        // one short step).
        if extra >= QUANTUM_MICROS {
            self.state
                .lock()
                .expect("query queue")
                .jobs
                .charge(address, extra);
        }
    }

    /// Sets aside a job that waits (for its connection to read: 5 ms; for
    /// the relay's memory: 50 ms) until it is tried again.
    pub fn park(&self, job: Job, wait: Duration) {
        let mut state = self.state.lock().expect("query queue");
        let queue = usize::from(wait != PARK);
        state.parked[queue].push_back((Instant::now() + wait, job));
    }

    /// The next connection's next job, waiting for one as long as it takes
    /// (an idle pool sleeps); `None` once the queue is closed.
    pub fn pop(&self) -> Option<Job> {
        let mut state = self.state.lock().expect("query queue");
        loop {
            if state.closed {
                return None;
            }
            let now = Instant::now();
            // Parked jobs whose time has come take their turns again.
            let Waiting { jobs, parked, .. } = &mut *state;
            for queue in parked.iter_mut() {
                while queue.front().is_some_and(|(at, _)| *at <= now) {
                    let (_, job) = queue.pop_front().expect("a due job");
                    let (address, conn, cost) = (job.sub.address, job.sub.conn, job.cost);
                    jobs.push(address, conn, job, cost);
                }
            }
            if let Some(job) = state.jobs.pop() {
                return Some(job);
            }
            // Woken by a new job or by `close`; a parked job's time ends
            // the wait too.
            let wake = state
                .parked
                .iter()
                .filter_map(|q| q.front().map(|(at, _)| *at))
                .min();
            state.idle += 1;
            state = match wake {
                Some(wake) => {
                    let left = wake.saturating_duration_since(now);
                    self.ready.wait_timeout(state, left).expect("query queue").0
                }
                None => self.ready.wait(state).expect("query queue"),
            };
            state.idle -= 1;
        }
    }

    /// Ends the pool (the relay is stopping and its connections are
    /// closed): every worker's [`Queue::pop`] returns `None`, and the jobs
    /// left are dropped.
    pub fn close(&self) {
        self.state.lock().expect("query queue").closed = true;
        self.ready.notify_all();
    }
}

/// A query in progress.
#[derive(Debug)]
pub struct Job {
    /// The subscription (for COUNT, a subscription that never goes live).
    pub sub: Arc<Sub>,
    /// REQ or COUNT.
    pub kind: QueryKind,
    /// One cursor per filter.
    pub cursors: Vec<QueryCursor>,
    /// The filter being scanned.
    pub current: usize,
    /// When the request arrived.
    pub started: Instant,
    /// Results being sent (after the scan finished).
    delivery: Option<Delivery>,
    /// Scan quota held for the results the scan rendered (REQ), taken as
    /// they are found and given back when the scan ends.
    scan_room: Option<Held>,
    /// What the matches found so far hold (REQ), taken slice by slice
    /// from the connection's budget: when the relay's is spent and the
    /// connection holds more than its share, the scan waits.
    matches: Option<Held>,
    /// Since when the scan has waited for the relay's memory.
    waiting_since: Option<Instant>,
    /// What its next turn costs its address: microseconds its last took.
    cost: u64,
    /// Slices scanned so far.
    slices: u32,
}

/// Stored results on their way out, paced by the connection's queue.
#[derive(Debug)]
struct Delivery {
    results: Vec<Found>,
    /// Their room in the connection's budget, given back as each is sent.
    held: Held,
    next: usize,
    serials: HashSet<u64, foldhash::fast::RandomState>,
    low_water: usize,
    stalled_since: Instant,
}

enum Progress {
    Done,
    More,
    /// Waits for its connection to read.
    Blocked,
    /// Waits for the relay's memory.
    Starved,
    /// Ended with `CLOSED` and this reason.
    Refused(&'static str),
}

impl Job {
    /// A REQ job: limits clamped to the configured maximum.
    pub fn req(shared: &Shared, sub: Arc<Sub>) -> Job {
        let limits = &shared.config.limits;
        // Results rendered while scanning take room in the connection's
        // scan quota (a quarter of its budget) as they are found, a step
        // before each cursor's turn (`grant_render`), held until the scan
        // ends, so its queries together never render more than that;
        // later results are kept by serial and rendered as they are sent.
        let scan_room = Some(sub.outbox.scan_budget().hold_none());
        let alone = sub.filters.len() == 1;
        let cursors = sub
            .filters
            .iter()
            .map(|f| {
                let limit = f
                    .limit
                    .map_or(limits.default_limit, |l| {
                        (l.min(usize::MAX as u64)) as usize
                    })
                    .min(limits.max_limit);
                let cursor = QueryCursor::new(limit);
                let cursor = if alone { cursor.alone() } else { cursor };
                cursor
                    .gated(sub.gate.clone())
                    .with_records(sub.outbox.is_binary())
                    .as_stored(sub.outbox.as_stored())
                    .rendering_at_most(0)
            })
            .collect();
        let sub_matches = sub.outbox.budget().hold_none();
        Job {
            sub,
            kind: QueryKind::Req,
            cursors,
            current: 0,
            started: Instant::now(),
            delivery: None,
            matches: Some(sub_matches),
            waiting_since: None,
            cost: 1,
            slices: 0,
            scan_room,
        }
    }

    /// A NEG-OPEN job: every match's (created_at, id).
    pub fn sync(
        shared: &Shared,
        sub: Arc<Sub>,
        conn: Arc<crate::msg::Conn>,
        message: Vec<u8>,
    ) -> Job {
        // One more than the maximum, so an oversized set is detected, not cut;
        // a smaller `limit` (the newest N) is honoured.
        let cap = shared.config.limits.max_sync_items.saturating_add(1);
        let cursors = sub
            .filters
            .iter()
            .map(|f| {
                let limit = f.limit.map_or(cap, |l| (l.min(cap as u64)) as usize);
                QueryCursor::ids(limit).gated(sub.gate.clone())
            })
            .collect();
        Job {
            sub,
            kind: QueryKind::Sync { message, conn },
            cursors,
            current: 0,
            started: Instant::now(),
            delivery: None,
            scan_room: None,
            matches: None,
            waiting_since: None,
            cost: 1,
            slices: 0,
        }
    }

    /// A COUNT job.
    pub fn count(shared: &Shared, sub: Arc<Sub>) -> Job {
        let cap = shared.config.limits.count_cap;
        let cursors = sub
            .filters
            .iter()
            .map(|_| QueryCursor::counting(cap).gated(sub.gate.clone()))
            .collect();
        Job {
            sub,
            kind: QueryKind::Count,
            cursors,
            current: 0,
            started: Instant::now(),
            delivery: None,
            scan_room: None,
            matches: None,
            waiting_since: None,
            cost: 1,
            slices: 0,
        }
    }
}

/// Scan quota a REQ's current cursor may render in one turn, taken from
/// the connection's scan quota before the turn; what it did not render is
/// given back after it.
const RENDER_STEP: usize = 256 << 10;

impl Job {
    /// Before the current cursor scans: up to [`RENDER_STEP`] more of the
    /// connection's scan quota for it to render into; none while the
    /// relay's budget is spent (its matches are rendered when sent, so a
    /// scan under pressure holds little and stays within its share).
    fn grant_render(&mut self) {
        let Some(room) = &mut self.scan_room else {
            return;
        };
        let quota = self.sub.outbox.scan_budget();
        let short = self
            .sub
            .outbox
            .budget()
            .relay()
            .is_some_and(|r| r.is_short());
        let step = match short {
            true => 0,
            false => RENDER_STEP.min(quota.cap().saturating_sub(quota.used())),
        };
        let step = if room.grow(step).is_ok() { step } else { 0 };
        let cursor = &mut self.cursors[self.current];
        cursor.render_bytes = Some(cursor.rendered_bytes() + step);
    }

    /// After a cursor scanned: the scan quota held is what its cursors
    /// rendered (a cursor renders past its grant by at most one match).
    fn settle_render(&mut self) {
        let Some(room) = &mut self.scan_room else {
            return;
        };
        let rendered: usize = self.cursors.iter().map(|c| c.rendered_bytes()).sum();
        match room.bytes().cmp(&rendered) {
            std::cmp::Ordering::Greater => room.release(room.bytes() - rendered),
            std::cmp::Ordering::Less => room.grow_anyway(rendered - room.bytes()),
            std::cmp::Ordering::Equal => {}
        }
    }
}

/// Runs a worker until the relay stops.
pub fn run(shared: Arc<Shared>) {
    let budget = shared.config.performance.query_slice.max(1);
    let queue = &shared.queries;
    while let Some(mut job) = queue.pop() {
        if job.sub.is_cancelled() {
            continue;
        }
        let started = Instant::now();
        let progress = step(&shared, &mut job, budget);
        // A turn costs what it took: the address pays what its job was
        // queued with, then the rest now (a new job's first slice is not
        // known in advance), and the job's next turn is queued at this
        // one's cost. An address whose queries take long slices sits out
        // the turns that lighter clients get.
        let took = (started.elapsed().as_micros() as u64).max(1);
        queue.charge(job.sub.address, took.saturating_sub(job.cost));
        job.cost = took;
        match progress {
            Ok(Progress::More) => queue.push(job),
            Ok(Progress::Blocked) => queue.park(job, PARK),
            Ok(Progress::Starved) => queue.park(job, STARVED),
            Ok(Progress::Done) => {}
            Ok(Progress::Refused(reason)) => {
                if matches!(job.kind, QueryKind::Sync { .. }) {
                    finish_sync(&shared, &mut job, Some(reason.to_string()));
                } else {
                    close_job(&job, reason);
                }
            }
            Err(e) => {
                let reason = match e {
                    StoreError::SearchBehind { .. } => {
                        tracing::debug!("search refused: {e}");
                        shared.metrics.query_failed("search_behind");
                        format!("error: {e}; try again later")
                    }
                    _ => {
                        tracing::error!("query failed: {e}");
                        shared.metrics.query_failed("storage_error");
                        "error: query failed".to_string()
                    }
                };
                if matches!(job.kind, QueryKind::Sync { .. }) {
                    finish_sync(&shared, &mut job, Some(reason));
                } else {
                    close_job(&job, &reason);
                }
            }
        }
    }
}

/// Ends a REQ or COUNT with `CLOSED`: the fan-out drops it instead of
/// holding its live matches for a query that will not finish.
fn close_job(job: &Job, reason: &str) {
    job.sub.cancelled.store(true, Ordering::Relaxed);
    let mut out = Vec::new();
    write::closed(&mut out, &job.sub.id, reason);
    job.sub.outbox.send_control(out);
}

fn step(
    shared: &Shared,
    job: &mut Job,
    budget: usize,
) -> Result<Progress, crate::store::StoreError> {
    if job.delivery.is_none() {
        if job.sub.outbox.budget().must_wait() {
            // The relay's budget is spent and this connection holds more
            // than its share: its scan waits, and gives up (with what it
            // holds) if that lasts, so that waiting scans cannot hold the
            // budget among themselves for good.
            // Counted once per wait, not once per retry.
            if job.waiting_since.is_none() {
                shared.metrics.limit_hit("relay_memory_bytes");
            }
            job.sub.outbox.budget().make_room();
            let since = *job.waiting_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(shared.config.limits.slow_reader_seconds) {
                return Ok(Progress::Refused(
                    "rate-limited: the relay is short of memory; try again later",
                ));
            }
            return Ok(Progress::Starved);
        }
        job.waiting_since = None;
        // A new job starts with small slices, doubling up to the
        // configured one: what a slice costs is known only once it ran,
        // so a crowd of new queries is not a crowd of full slices ahead of
        // everyone else's turn.
        let budget = budget.min(FIRST_SLICE << job.slices.min(16));
        job.slices += 1;
        let status = slice(shared, job, budget)?;
        if let Some(matches) = &mut job.matches {
            // The scan's matches take their room. They exist already: a
            // refusal from the relay's budget counts them all the same and
            // makes the scan wait (above); one from the connection's leaves
            // the cut to the delivery below.
            let now: usize = job.cursors.iter().map(|c| c.held_bytes()).sum();
            let more = now.saturating_sub(matches.bytes());
            if matches.grow(more) == Err(Short::Relay) {
                matches.grow_anyway(more);
                if status == ScanStatus::More {
                    return Ok(Progress::Starved);
                }
            }
        }
        if status == ScanStatus::More {
            return Ok(Progress::More);
        }
        if matches!(job.kind, QueryKind::Count) {
            finish_count(shared, job);
            return Ok(Progress::Done);
        }
        if matches!(job.kind, QueryKind::Sync { .. }) {
            finish_sync(shared, job, None);
            return Ok(Progress::Done);
        }
        let found: usize = job.cursors.iter().map(|c| c.found_len()).sum();
        let mut results = Vec::with_capacity(found);
        let mut serials = HashSet::with_capacity_and_hasher(found, Default::default());
        // With a search filter, results keep each filter's order (relevance
        // for a search), filter after filter; otherwise newest first overall.
        let ranked = job.cursors.iter().any(|c| c.is_ranked());
        for c in std::mem::take(&mut job.cursors) {
            for f in c.into_results() {
                if serials.insert(f.serial) {
                    results.push(f);
                }
            }
        }
        if !ranked {
            results.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        }
        // The scan's room goes back; the results it found take theirs.
        job.scan_room = None;
        // Results wait here until the connection takes them, so they count
        // against its budget. Rendered ones that do not fit are dropped to
        // their serial, and rendered again when their turn comes; only when
        // not even that fits (hundreds of thousands of results waiting on
        // one connection) are the rest left out, as if the limit were lower.
        let mut held = job.sub.outbox.budget().hold_none();
        let mut fits = results.len();
        for (i, f) in results.iter_mut().enumerate() {
            if held.grow(found_bytes(f)).is_ok() {
                continue;
            }
            if !f.is_deferred() {
                f.json = Vec::new();
                f.record = Vec::new();
            }
            match held.grow(found_bytes(f)) {
                Ok(()) => continue,
                // The scan's matches held this much already: the room only
                // changes hands.
                Err(Short::Relay) => held.grow_anyway(found_bytes(f)),
                Err(_) => {
                    fits = i;
                    break;
                }
            }
        }
        job.matches = None;
        if fits < results.len() {
            shared.metrics.limit_hit("max_connection_bytes");
            results.truncate(fits);
        }
        job.delivery = Some(Delivery {
            results,
            held,
            next: 0,
            serials,
            low_water: usize::MAX,
            stalled_since: Instant::now(),
        });
    }
    Ok(deliver(shared, job))
}

fn slice(
    shared: &Shared,
    job: &mut Job,
    budget: usize,
) -> Result<ScanStatus, crate::store::StoreError> {
    let now = crate::now();
    while job.current < job.cursors.len() {
        job.grant_render();
        let filter = &job.sub.filters[job.current];
        let status = shared
            .store
            .scan(filter, &mut job.cursors[job.current], budget, now);
        job.settle_render();
        let status = status?;
        if status == ScanStatus::More {
            return Ok(ScanStatus::More);
        }
        job.current += 1;
    }
    Ok(ScanStatus::Done)
}

fn finish_count(shared: &Shared, job: &Job) {
    let sub = &job.sub;
    // Filters are OR-ed: count each match once.
    let mut seen = HashSet::new();
    let mut capped = false;
    for c in &job.cursors {
        capped |= c.count() >= shared.config.limits.count_cap as u64 || c.is_capped();
        seen.extend(c.seen_serials());
    }
    let mut out = Vec::new();
    write::count_result(&mut out, &sub.id, seen.len() as u64);
    if capped {
        // Same message with the approximate flag (NIP-45).
        out.truncate(out.len() - 2);
        out.extend_from_slice(b",\"approximate\":true}]");
    }
    sub.outbox.send_control(out);
}

/// Hands a NEG-OPEN's items (or why there are none) to the connection's
/// ingest worker, which owns the session.
fn finish_sync(shared: &Shared, job: &mut Job, failure: Option<String>) {
    let QueryKind::Sync { message, conn } = std::mem::replace(&mut job.kind, QueryKind::Req) else {
        unreachable!("sync job");
    };
    let max = shared.config.limits.max_sync_items;
    let items = match failure {
        Some(reason) => Err(reason),
        None => {
            let items: Vec<(u64, nostrwire_event::EventId)> = std::mem::take(&mut job.cursors)
                .into_iter()
                .flat_map(|c| c.into_results())
                .map(|f| (f.created_at, f.id))
                .collect();
            if items.len() > max {
                Err(format!(
                    "blocked: this filter matches more than {max} events; narrow it (since/until, limit)"
                ))
            } else {
                Ok(items)
            }
        }
    };
    let ready = crate::msg::SyncItems {
        conn: conn.clone(),
        sub: job.sub.clone(),
        message,
        items,
    };
    let _ = shared
        .ingest_for(conn.id)
        .send(crate::msg::IngestMsg::SyncReady(ready));
}

/// Queued bytes below which stored results are still sent to a
/// connection above its share of a spent relay budget.
const SHORT_QUEUE_BYTES: usize = 64 << 10;

/// Bytes of stored results one turn of a query sends.
const DELIVERY_TURN_BYTES: usize = 256 << 10;

/// What a stored result holds in memory.
fn found_bytes(f: &Found) -> usize {
    std::mem::size_of::<Found>() + f.json.len() + f.record.len()
}

/// Stored results gathered before they are queued: for a `nostrwire.v2`
/// connection into batches of [`transport::BATCH_TARGET_BYTES`], for a
/// JSON one into one buffer of text messages per turn (one queue entry,
/// one budget take and one wake-up of the socket's writer for all of
/// them); nothing for `nostrwire.v1`, whose results go out one frame each.
struct Batches<'s> {
    sub: &'s Sub,
    as_stored: AsStored,
    open: Option<BatchBuilder>,
    texts: Texts,
}

impl<'s> Batches<'s> {
    fn new(sub: &'s Sub) -> Batches<'s> {
        Batches {
            sub,
            as_stored: sub.outbox.as_stored(),
            open: None,
            texts: Texts::default(),
        }
    }

    fn is_on(&self) -> bool {
        self.sub.outbox.v2().is_some()
    }

    /// Adds a JSON result (text connections only); false once the
    /// connection is gone.
    fn push_json(&mut self, json: &[u8]) -> bool {
        self.texts.push_event(&self.sub.id, json);
        self.texts.len() < transport::BATCH_TARGET_BYTES || self.flush()
    }

    /// Adds a record (as the client may be sent it); false once the
    /// connection is gone.
    fn push(&mut self, record: &[u8]) -> bool {
        if self.open.as_ref().is_some_and(|b| !b.fits(record.len())) && !self.flush() {
            return false;
        }
        self.open
            .get_or_insert_with(|| BatchBuilder::new(&self.sub.id, transport::BATCH_TARGET_BYTES))
            .push(record);
        true
    }

    /// Sends the batch or the messages being gathered, if any.
    fn flush(&mut self) -> bool {
        if !self.texts.is_empty() {
            let texts = std::mem::take(&mut self.texts);
            return self.sub.outbox.send_results_texts(texts);
        }
        match self.open.take() {
            Some(batch) => self.sub.outbox.send_results_frame(batch.finish()),
            None => true,
        }
    }
}

/// Sends stored results while the connection keeps up; EOSE and go live at the end.
fn deliver(shared: &Shared, job: &mut Job) -> Progress {
    let sub = job.sub.clone();
    let mut batches = Batches::new(&sub);
    let progress = deliver_stored(shared, job, &mut batches);
    batches.flush();
    if let Some(progress) = progress {
        return progress;
    }
    go_live(shared, job);
    Progress::Done
}

/// Sends stored results; `None` when all are sent.
fn deliver_stored(shared: &Shared, job: &mut Job, batches: &mut Batches<'_>) -> Option<Progress> {
    let sub = job.sub.clone();
    let d = job.delivery.as_mut().expect("delivery");
    let high_water = sub.outbox.high_water();
    if !batches.is_on() && !sub.outbox.is_binary() {
        // The `EVENT` messages of this turn's rendered results, sized at
        // once: `["EVENT","<id>",` and `]` around each JSON.
        let (mut bytes, mut messages) = (0, 0);
        for f in d.results[d.next..].iter().take_while(|f| !f.is_deferred()) {
            if bytes >= DELIVERY_TURN_BYTES {
                break;
            }
            bytes += f.json.len() + sub.id.len() + 13;
            messages += 1;
        }
        batches.texts.reserve(bytes, messages);
    }
    let mut sent = 0;
    while d.next < d.results.len() {
        // One turn sends a bounded amount, so another connection's query
        // waits for at most that much of this one's.
        if sent >= DELIVERY_TURN_BYTES {
            return Some(Progress::More);
        }
        let queued = sub.outbox.queued();
        // Waits while its queue is full, or while the relay's budget is
        // spent, it holds more than its share and it has not taken what
        // was sent (a connection that reads keeps being served).
        if queued > high_water || (queued > SHORT_QUEUE_BYTES && sub.outbox.budget().must_wait()) {
            if queued < d.low_water {
                d.low_water = queued;
                d.stalled_since = Instant::now();
            } else if d.stalled_since.elapsed()
                > Duration::from_secs(shared.config.limits.slow_reader_seconds)
            {
                sub.outbox.cut_off();
                return Some(Progress::Done);
            }
            return Some(Progress::Blocked);
        }
        let f = &d.results[d.next];
        d.next += 1;
        // Its room moves from the results to the queue.
        d.held.release(found_bytes(f));
        let rendered;
        let f = if f.is_deferred() {
            let rendered_now = match batches.is_on() {
                true => shared.store.render_stored(f.serial, batches.as_stored),
                false => shared.store.render(f.serial, sub.outbox.is_binary()),
            };
            match rendered_now {
                Ok(Some(found)) => {
                    rendered = found;
                    &rendered
                }
                // Deleted since the scan.
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!("rendering a stored result failed: {e}");
                    continue;
                }
            }
        } else {
            f
        };
        sent += f.json.len() + f.record.len();
        let queued = if batches.is_on() {
            batches.push(&f.record)
        } else if sub.outbox.is_binary() {
            sub.outbox.send_result(&sub.id, &f.json, &f.record)
        } else {
            batches.push_json(&f.json)
        };
        if !queued {
            return Some(Progress::Done);
        }
    }
    None
}

/// EOSE, after the last stored batch; then the subscription goes live.
fn go_live(shared: &Shared, job: &mut Job) {
    let sub = job.sub.clone();
    let d = job.delivery.as_mut().expect("delivery");
    sub.outbox.send_eose(&sub.id);
    shared
        .metrics
        .query_seconds
        .observe(job.started.elapsed().as_secs_f64());
    // Go live; flush what arrived meanwhile and was not already sent.
    // Results the fan-out has not reached yet (committed just before this
    // query read them) are remembered so it does not send them again.
    let waiting = {
        let mut phase = sub.phase.lock().expect("phase lock");
        let fanned = shared.fanned_serial.load(Ordering::SeqCst);
        let skip = d
            .results
            .iter()
            .map(|f| f.serial)
            .filter(|s| *s > fanned)
            .collect();
        match std::mem::replace(&mut *phase, Phase::Live(skip)) {
            Phase::Pending(w) => w,
            Phase::Live(_) => Vec::new(),
        }
    };
    let waiting: Vec<_> = waiting
        .into_iter()
        .filter(|e| e.serial == 0 || !d.serials.contains(&e.serial))
        .collect();
    if !waiting.is_empty() {
        sub.outbox.send_live(&sub.id, &waiting);
    }
}
