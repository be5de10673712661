//! One relay connection and the closed-loop operations on it.
//!
//! Every answer is matched to its request: an `OK` by event id, an `EOSE` or
//! `CLOSED` by subscription id. Anything else that arrives meanwhile (an `OK`
//! for another event, a `NOTICE`, an `AUTH` challenge) is counted as an
//! anomaly and never taken as the awaited answer. A missing answer is a
//! [`Failure::Timeout`].

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::{EventId, Filter, RelayMessage, SignedFields};
use nostrwire_wire::transport::{self, RelayFrame};
use tokio::time::timeout_at;

use crate::rng::Rng;
use crate::stats::{message_prefix, Failure};
use crate::v2::{self, V2Conn};
use crate::workload::Prepared;
use crate::ws::{self, opcode, Admitted, Counters, WsReader, WsUrl, WsWriter};
use crate::Error;

/// Decoding limits for relay frames: the largest message accepted.
const WIRE_LIMITS: nostrwire_wire::Limits = nostrwire_wire::Limits {
    max_record_bytes: MAX_MESSAGE_BYTES,
    max_string_bytes: MAX_MESSAGE_BYTES,
    ..nostrwire_wire::Limits::DEFAULT
};

/// Largest message accepted from a relay.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Things a relay sent that answer nothing we asked, by name, and the first
/// message seen for each failure reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Anomalies {
    /// Unsolicited messages by type (`notice`, `unmatched_ok`, …).
    pub counts: BTreeMap<String, u64>,
    /// The first relay message seen for each failure key (`rejected:invalid` → its text).
    pub samples: BTreeMap<String, String>,
}

impl Anomalies {
    /// Counts one occurrence of `name`.
    pub fn add(&mut self, name: &str) {
        *self.counts.entry(name.to_string()).or_default() += 1;
    }

    /// Keeps `message` as the example of failure `key`, if it is the first.
    pub fn sample(&mut self, key: String, message: &str) {
        self.samples
            .entry(key)
            .or_insert_with(|| message.chars().take(200).collect());
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Anomalies) {
        for (k, v) in &other.counts {
            *self.counts.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.samples {
            self.samples.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }

    /// Counts an unsolicited relay message by its type.
    pub fn unsolicited(&mut self, msg: &RelayMessage<'_>) {
        self.add(match msg {
            RelayMessage::Ok { .. } => "unmatched_ok",
            RelayMessage::Eose(_) => "unmatched_eose",
            RelayMessage::Closed { .. } => "unmatched_closed",
            RelayMessage::Notice(_) => "notice",
            RelayMessage::Auth(_) => "auth_challenge",
            RelayMessage::Event { .. } => "unmatched_event",
            RelayMessage::Count { .. } => "unmatched_count",
            _ => "unknown_message",
        });
    }
}

/// What every connection of a run shares.
#[derive(Clone, Debug)]
pub struct Target {
    /// The relay.
    pub url: WsUrl,
    /// Bytes in and out, summed over connections.
    pub counters: Arc<Counters>,
    /// How long to wait for any single answer.
    pub timeout: Duration,
}

/// A checked query: the filter and what its answer must contain.
#[derive(Clone, Debug)]
pub struct Query {
    /// Label for the report (e.g. `query:author`).
    pub label: &'static str,
    /// The filter sent.
    pub filter: Filter,
    /// Event ids that must be in the answer (stored events the filter selects).
    pub must_include: Vec<EventId>,
}

/// What the relay returned for one query before its `EOSE` (or before it failed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Event messages for the query's subscription.
    pub events: u64,
    /// Their bytes: each message's payload as sent (JSON text, or the
    /// binary transport's frame), WebSocket frame headers not counted.
    pub bytes: u64,
    /// The same with every JSON string escape counted as the bytes of the
    /// character it stands for ([`unescaped_len`]): relays that escape
    /// differently (`>` as `\u003e`) count alike for the same events.
    pub unescaped: u64,
}

/// The length of a JSON message with each string escape counted as the
/// UTF-8 bytes of the character it stands for: `\n` and `\u003e` as one,
/// `\u00e9` as two, a surrogate pair (`\ud83d\ude00`) as four. A backslash
/// appears in JSON only inside strings, so no parsing is needed.
pub fn unescaped_len(msg: &[u8]) -> u64 {
    fn hex4(b: &[u8]) -> Option<u32> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u32::from_str_radix(s, 16).ok()
    }
    let mut n = msg.len() as u64;
    let mut i = 0;
    while let Some(off) = msg[i..].iter().position(|&b| b == b'\\') {
        let j = i + off;
        match msg.get(j + 1) {
            Some(b'u') => match hex4(&msg[j + 2..]) {
                Some(hi)
                    if (0xD800..0xDC00).contains(&hi)
                        && msg.get(j + 6..j + 8) == Some(b"\\u".as_slice())
                        && hex4(&msg[j + 8..]).is_some_and(|lo| (0xDC00..0xE000).contains(&lo)) =>
                {
                    n -= 12 - 4;
                    i = j + 12;
                }
                Some(cp) => {
                    let utf8 = match cp {
                        0..=0x7F => 1,
                        0x80..=0x7FF => 2,
                        _ => 3,
                    };
                    n -= 6 - utf8;
                    i = j + 6;
                }
                None => i = j + 2,
            },
            Some(_) => {
                n -= 1;
                i = j + 2;
            }
            None => break,
        }
        if i >= msg.len() {
            break;
        }
    }
    n
}

/// The outcome of one query.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryOutcome {
    /// `EOSE` arrived and the answer passed every check.
    Ok {
        /// From the REQ write to the EOSE.
        latency: Duration,
        /// Events received before EOSE.
        received: Received,
    },
    /// The query failed.
    Failed(Failure, Received),
}

/// One WebSocket connection to the relay.
#[derive(Debug)]
pub struct Conn {
    /// Reading half.
    pub reader: WsReader,
    /// Writing half.
    pub writer: WsWriter,
    /// Unsolicited messages seen on this connection.
    pub anomalies: Anomalies,
    /// Used for masks, sampling and subscription ids.
    pub rng: Rng,
    next_sub: u64,
    /// Subscriptions this connection has closed (recent ones), so that events
    /// still in flight for them are told apart from unexplained ones.
    closed_subs: std::collections::VecDeque<String>,
    /// Speaks the `nostrwire.v1` binary transport (or v2, with `v2`).
    pub binary: bool,
    /// Speaks `nostrwire.v2`, holding the relay's dictionary set.
    pub v2: Option<V2Conn>,
}

/// Classifies one data message by transport; `None` for a frame of the
/// other transport (counted as an anomaly).
/// On `nostrwire.v2` the relay's dictionary set, named again after it
/// trained one, is taken in silently: records it cannot be sent arrive
/// uncompressed.
fn answer<'a>(
    binary: bool,
    v2: bool,
    anomalies: &mut Anomalies,
    incoming: &Admitted<'a>,
) -> Option<Answer<'a>> {
    match incoming {
        Admitted::Text(t) if !binary => Some(Answer::Json(t)),
        Admitted::Binary(b) if binary => {
            let decoded = match v2 {
                true => transport::decode_relay_v2(b, &WIRE_LIMITS),
                false => transport::decode_relay(b, &WIRE_LIMITS),
            };
            Some(match decoded {
                Ok(RelayFrame::Json(j)) => Answer::Json(j),
                Ok(RelayFrame::DictionarySet(_)) => return None,
                Ok(frame) => Answer::Frame(frame),
                Err(_) => Answer::Bad,
            })
        }
        Admitted::Text(_) => {
            anomalies.add("text_frame");
            None
        }
        Admitted::Binary(_) => {
            anomalies.add("binary_frame");
            None
        }
        _ => None,
    }
}

/// The outcome of a matched `OK`.
fn ok_outcome(
    anomalies: &mut Anomalies,
    accepted: bool,
    message: &str,
    start: Instant,
) -> Result<Duration, Failure> {
    if accepted {
        if message.starts_with("duplicate:") {
            anomalies.add("ok_duplicate");
        }
        Ok(start.elapsed())
    } else {
        let f = Failure::Rejected(message_prefix(message));
        anomalies.sample(f.key(), message);
        Err(f)
    }
}

/// Checks one returned event against the query; the first problem found is kept.
fn check_event<E: SignedFields>(
    rng: &mut Rng,
    anomalies: &mut Anomalies,
    query: &Query,
    event: &E,
    content: &str,
    problem: &mut Option<Failure>,
) {
    if problem.is_some() {
        return;
    }
    if !query.filter.matches(event) || !search_matches(&query.filter, content) {
        let f = Failure::WrongResult;
        anomalies.sample(
            f.key(),
            &format!(
                "event {} (kind {}) returned for {}",
                event.id().to_hex(),
                event.kind().as_u16(),
                query.filter.to_json()
            ),
        );
        *problem = Some(f);
    } else if rng.below(VERIFY_EVERY) == 0 && event.verify().is_err() {
        *problem = Some(Failure::InvalidEvent);
    }
}

/// Checks every record of a `nostrwire.v2` batch (decompressed with the
/// held set), as [`check_event`] checks one event.
fn check_batch(
    v2: &mut V2Conn,
    rng: &mut Rng,
    anomalies: &mut Anomalies,
    frame: &[u8],
    query: &Query,
    missing: &mut HashSet<EventId>,
    problem: &mut Option<Failure>,
) {
    let Ok(RelayFrame::Batch { records, .. }) = transport::decode_relay_v2(frame, &WIRE_LIMITS)
    else {
        anomalies.add("unparseable_message");
        return;
    };
    for stored in records.records() {
        let event = v2
            .decompressor
            .record(stored, &WIRE_LIMITS)
            .and_then(|r| nostrwire_wire::EventView::decode_with(r, &WIRE_LIMITS));
        let Ok(event) = event else {
            anomalies.add("unreadable_record");
            *problem = problem.take().or(Some(Failure::InvalidEvent));
            continue;
        };
        missing.remove(event.id());
        check_event(rng, anomalies, query, &event, event.content(), problem);
    }
}

/// A relay message from either transport, for matching answers. Lives for
/// one read, on the stack, so the size of the decoded frame does not matter.
#[allow(clippy::large_enum_variant)]
enum Answer<'a> {
    /// A NIP-01 message (a text frame, or JSON in a binary frame).
    Json(&'a [u8]),
    /// A binary-transport frame with its own encoding.
    Frame(RelayFrame<'a>),
    /// A frame that does not decode.
    Bad,
}

/// How many closed subscription ids a connection remembers.
const CLOSED_SUBS_KEPT: usize = 64;

/// One returned event in `CHECK_EVERY` is parsed in full and checked against
/// its filter; the others are only matched to their subscription by the
/// message prefix, so the client's CPU stays off the relay's cores. Answers
/// that must contain given ids are always checked in full.
pub const CHECK_EVERY: u64 = 4;

/// One checked event in `VERIFY_EVERY` also has its id and signature verified.
pub const VERIFY_EVERY: u64 = 8;

impl Conn {
    /// Opens a connection (TCP_NODELAY, handshake) within the target's timeout.
    pub async fn open(target: &Target, seed: u64) -> Result<Conn, Error> {
        let mut rng = Rng::new(seed);
        let deadline = tokio::time::Instant::now() + target.timeout;
        let (reader, writer) = timeout_at(
            deadline,
            ws::connect(
                &target.url,
                target.counters.clone(),
                &mut rng,
                MAX_MESSAGE_BYTES,
            ),
        )
        .await
        .map_err(|_| Error::Handshake("timed out".into()))??;
        let mut conn = Conn {
            reader,
            writer,
            anomalies: Anomalies::default(),
            rng,
            next_sub: 0,
            closed_subs: std::collections::VecDeque::new(),
            binary: target.url.binary,
            v2: None,
        };
        if target.url.v2 {
            timeout_at(deadline, conn.hold_relay_set(&target.url))
                .await
                .map_err(|_| Error::Handshake("no dictionary set frame".into()))??;
        }
        Ok(conn)
    }

    /// `nostrwire.v2`: reads the relay's first frame, its dictionary set,
    /// and holds that set (fetched once per process).
    async fn hold_relay_set(&mut self, url: &WsUrl) -> Result<(), Error> {
        let named = loop {
            match self.reader.next().await? {
                Admitted::Binary(b) => match transport::decode_relay_v2(b, &WIRE_LIMITS) {
                    Ok(RelayFrame::DictionarySet(set)) => break set,
                    _ => {
                        return Err(Error::Handshake(
                            "a nostrwire.v2 relay must name its dictionary set first".into(),
                        ))
                    }
                },
                Admitted::Close(_) => return Err(Error::Disconnected),
                _ => continue,
            }
        };
        let set = match named {
            Some(hash) => {
                let set = v2::dictionary_set(url, &hash).await?;
                let mut frame = Vec::with_capacity(33);
                transport::write_hold(&mut frame, &[hash]);
                self.writer.send_binary(&frame).await?;
                Some(set)
            }
            None => None,
        };
        self.v2 = Some(V2Conn::new(set)?);
        Ok(())
    }

    /// Sends a NIP-01 message given as JSON: a text frame, or a `0x00`
    /// frame on the binary transport.
    pub async fn send_message(&mut self, json: &[u8]) -> Result<(), Error> {
        if self.binary {
            let mut frame = Vec::with_capacity(json.len() + 1);
            transport::write_json(&mut frame, json);
            self.writer.send_binary(&frame).await
        } else {
            self.writer.send_text(json).await
        }
    }

    /// A subscription id unique on this connection.
    pub fn new_sub_id(&mut self, prefix: &str) -> String {
        self.next_sub += 1;
        format!("{prefix}{}", self.next_sub)
    }

    /// Sends one EVENT (JSON, or an nwb frame on the binary transport) and
    /// waits for the `OK` with its id.
    pub async fn publish(&mut self, p: &Prepared, timeout: Duration) -> Result<Duration, Failure> {
        let id = &p.event.id;
        let start = Instant::now();
        let sent = if self.binary {
            self.writer.send_binary(&p.frame).await
        } else {
            self.writer.send_text(&p.message).await
        };
        if sent.is_err() {
            return Err(Failure::ConnectionLost);
        }
        let deadline = tokio::time::Instant::from_std(start + timeout);
        loop {
            let incoming = match timeout_at(deadline, self.reader.next()).await {
                Err(_) => return Err(Failure::Timeout),
                Ok(Err(e)) => return Err(e.as_failure()),
                Ok(Ok(incoming)) => incoming,
            };
            let text = match incoming {
                Admitted::Ping(p) => {
                    self.writer.queue_control(opcode::PONG, p);
                    if self.writer.flush().await.is_err() {
                        return Err(Failure::ConnectionLost);
                    }
                    continue;
                }
                Admitted::Pong(_) => continue,
                Admitted::Close(_) => return Err(Failure::ConnectionLost),
                data => match answer(self.binary, self.v2.is_some(), &mut self.anomalies, &data) {
                    Some(Answer::Json(t)) => t,
                    Some(Answer::Frame(RelayFrame::Ok {
                        id: event_id,
                        accepted,
                        message,
                    })) if event_id == *id => {
                        return ok_outcome(&mut self.anomalies, accepted, message, start);
                    }
                    Some(Answer::Frame(_)) => {
                        self.anomalies.add("unmatched_frame");
                        continue;
                    }
                    Some(Answer::Bad) => {
                        self.anomalies.add("unparseable_message");
                        continue;
                    }
                    None => continue,
                },
            };
            match RelayMessage::parse(text) {
                Ok(RelayMessage::Ok {
                    event_id,
                    accepted,
                    message,
                }) if event_id == *id => {
                    return ok_outcome(&mut self.anomalies, accepted, &message, start);
                }
                Ok(other) => self.anomalies.unsolicited(&other),
                Err(_) => self.anomalies.add("unparseable_message"),
            }
        }
    }

    /// Sends a REQ, reads to its `EOSE`, checks the answer, then sends CLOSE.
    pub async fn query(&mut self, query: &Query, timeout: Duration) -> QueryOutcome {
        let sub = self.new_sub_id("q");
        let mut msg = Vec::with_capacity(256);
        write::req(&mut msg, &sub, std::slice::from_ref(&query.filter));
        let start = Instant::now();
        if self.send_message(&msg).await.is_err() {
            return QueryOutcome::Failed(Failure::ConnectionLost, Received::default());
        }
        let deadline = tokio::time::Instant::from_std(start + timeout);
        let mut got = Received::default();
        let mut problem: Option<Failure> = None;
        let mut missing: HashSet<EventId> = query.must_include.iter().copied().collect();
        let check_all = !missing.is_empty();
        let mut event_prefix = Vec::with_capacity(sub.len() + 16);
        if self.binary {
            event_prefix.extend_from_slice(&[transport::RELAY_EVENT, sub.len() as u8]);
            event_prefix.extend_from_slice(sub.as_bytes());
        } else {
            event_prefix.extend_from_slice(b"[\"EVENT\",\"");
            event_prefix.extend_from_slice(sub.as_bytes());
            event_prefix.extend_from_slice(b"\",");
        }
        let latency = loop {
            let incoming = match timeout_at(deadline, self.reader.next()).await {
                Err(_) => return QueryOutcome::Failed(Failure::Timeout, got),
                Ok(Err(e)) => return QueryOutcome::Failed(e.as_failure(), got),
                Ok(Ok(incoming)) => incoming,
            };
            let data = match incoming {
                Admitted::Ping(p) => {
                    self.writer.queue_control(opcode::PONG, p);
                    let _ = self.writer.flush().await;
                    continue;
                }
                Admitted::Pong(_) => continue,
                Admitted::Close(_) => return QueryOutcome::Failed(Failure::ConnectionLost, got),
                Admitted::Text(d) | Admitted::Binary(d) => d,
            };
            let size = data.len() as u64;
            // Only for the event messages counted below (binary frames have no escapes).
            let binary = self.binary;
            let plain = |data: &[u8]| {
                if binary {
                    size
                } else {
                    unescaped_len(data)
                }
            };
            // nostrwire.v2: a batch is counted from its header; one in
            // CHECK_EVERY is checked record by record.
            if let Some(n) = self.v2.as_ref().and_then(|_| v2::batch_len(data, &sub)) {
                got.events += n;
                got.bytes += size;
                got.unescaped += size;
                if check_all || self.rng.below(CHECK_EVERY) == 0 {
                    let v2 = self.v2.as_mut().expect("v2");
                    check_batch(
                        v2,
                        &mut self.rng,
                        &mut self.anomalies,
                        data,
                        query,
                        &mut missing,
                        &mut problem,
                    );
                }
                continue;
            }
            if !check_all && data.starts_with(&event_prefix) && self.rng.below(CHECK_EVERY) != 0 {
                got.events += 1;
                got.bytes += size;
                got.unescaped += plain(data);
                continue;
            }
            let text = match answer(
                self.binary,
                self.v2.is_some(),
                &mut self.anomalies,
                &incoming,
            ) {
                Some(Answer::Json(t)) => t,
                Some(Answer::Frame(RelayFrame::Event {
                    subscription_id,
                    event,
                })) if subscription_id == sub => {
                    got.events += 1;
                    got.bytes += size;
                    got.unescaped += plain(data);
                    missing.remove(event.id());
                    check_event(
                        &mut self.rng,
                        &mut self.anomalies,
                        query,
                        &event,
                        event.content(),
                        &mut problem,
                    );
                    continue;
                }
                Some(Answer::Frame(RelayFrame::Eose(s))) if s == sub => break start.elapsed(),
                Some(Answer::Frame(
                    RelayFrame::Event {
                        subscription_id, ..
                    }
                    | RelayFrame::Batch {
                        subscription_id, ..
                    },
                )) if self.closed_subs.iter().any(|c| c == subscription_id) => {
                    self.anomalies.add("event_after_close");
                    continue;
                }
                Some(Answer::Frame(_)) => {
                    self.anomalies.add("unmatched_frame");
                    continue;
                }
                Some(Answer::Bad) => {
                    self.anomalies.add("unparseable_message");
                    continue;
                }
                None => continue,
            };
            match RelayMessage::parse(text) {
                Ok(RelayMessage::Event {
                    subscription_id,
                    event,
                }) if subscription_id == sub => {
                    got.events += 1;
                    got.bytes += size;
                    got.unescaped += plain(data);
                    missing.remove(event.id());
                    let content = event.content().value();
                    check_event(
                        &mut self.rng,
                        &mut self.anomalies,
                        query,
                        &event,
                        &content,
                        &mut problem,
                    );
                }
                Ok(RelayMessage::Eose(s)) if s == sub => break start.elapsed(),
                Ok(RelayMessage::Event {
                    subscription_id, ..
                }) if self.closed_subs.iter().any(|c| *c == subscription_id) => {
                    self.anomalies.add("event_after_close");
                }
                Ok(RelayMessage::Closed {
                    subscription_id,
                    message,
                }) if subscription_id == sub => {
                    let f = Failure::Closed(message_prefix(&message));
                    self.anomalies.sample(f.key(), &message);
                    return QueryOutcome::Failed(f, got);
                }
                Ok(other) => self.anomalies.unsolicited(&other),
                Err(_) => self.anomalies.add("unparseable_message"),
            }
        };
        msg.clear();
        write::close(&mut msg, &sub);
        if self.send_message(&msg).await.is_err() {
            return QueryOutcome::Failed(Failure::ConnectionLost, got);
        }
        if self.closed_subs.len() == CLOSED_SUBS_KEPT {
            self.closed_subs.pop_front();
        }
        self.closed_subs.push_back(sub);
        // NIP-01's `limit` bounds the initial query; live events may arrive
        // before EOSE on some relays, so more than `limit` is reported, not failed.
        if query.filter.limit.is_some_and(|limit| got.events > limit) {
            self.anomalies.add("over_limit");
        }
        if problem.is_none() && !missing.is_empty() {
            problem = Some(Failure::MissingResult);
        }
        match problem {
            Some(f) => QueryOutcome::Failed(f, got),
            None => QueryOutcome::Ok {
                latency,
                received: got,
            },
        }
    }

    /// Sends a close frame; errors are ignored (the run is over for this connection).
    pub async fn close(mut self) -> Anomalies {
        let _ = self.writer.close().await;
        self.anomalies
    }
}

/// NIP-50 leaves ranking to the relay, but every result must contain each
/// search word (case-insensitive); without `search` this is always true.
pub fn search_matches(filter: &Filter, content: &str) -> bool {
    let Some(search) = &filter.search else {
        return true;
    };
    let content = content.to_lowercase();
    search
        .split_whitespace()
        .filter(|w| !w.contains(':'))
        .all(|w| content.contains(&w.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::unescaped_len;

    #[test]
    fn escapes_count_as_the_characters_they_stand_for() {
        assert_eq!(unescaped_len(br#"["EVENT","s",{"content":"a>b"}]"#), 31);
        // The same string written as Go's encoder writes it.
        assert_eq!(
            unescaped_len(br#"["EVENT","s",{"content":"a\u003eb"}]"#),
            31
        );
        assert_eq!(unescaped_len(br#""a\nb\"c\\d""#), 9);
        assert_eq!(unescaped_len(br#""\u00e9""#), 4);
        assert_eq!(unescaped_len("\"é\"".as_bytes()), 4);
        assert_eq!(unescaped_len(br#""\u20ac""#), 5);
        assert_eq!(unescaped_len(br#""\ud83d\ude00""#), 6);
        assert_eq!(unescaped_len("\"😀\"".as_bytes()), 6);
        // Malformed escapes at the end are left as they are.
        assert_eq!(unescaped_len(br#""\u12"#), 5);
        assert_eq!(unescaped_len(br"\"), 1);
    }
}
