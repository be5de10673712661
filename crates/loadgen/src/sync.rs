//! The client side of the `sync` scenario: NIP-77 negentropy reconciliation
//! of a local set of ids against the relay, and the REQ re-download it is
//! meant to replace. Both count the bytes they move.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostrwire_event::message::write;
use nostrwire_event::{EventId, EventRef, Filter, PreimageFields, RelayMessage, SignedFields};
use tokio::time::timeout_at;

use crate::client::Conn;
use crate::stats::{message_prefix, Failure};
use crate::ws::{opcode, Admitted};

/// Largest negentropy message the client sends (the relay caps its own).
const FRAME_LIMIT: u64 = 60_000;

/// Ids per REQ when fetching the events a sync found missing.
const IDS_PER_REQ: usize = 500;

/// Bytes of WebSocket payload moved by one operation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Traffic {
    /// Payload bytes sent.
    pub sent: u64,
    /// Payload bytes received.
    pub received: u64,
}

/// Why a sync operation did not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncError {
    /// The relay does not do NIP-77 (it refused NEG-OPEN, or never answered it).
    Unsupported(String),
    /// The operation failed; counted in the report.
    Failed(Failure),
}

/// A finished negentropy reconciliation.
#[derive(Clone, Debug)]
pub struct Reconciled {
    /// Ids only the client has.
    pub have: HashSet<EventId>,
    /// Ids only the relay has.
    pub need: HashSet<EventId>,
    /// NEG-MSG rounds the relay answered.
    pub rounds: u32,
    /// Time from NEG-OPEN to the last round.
    pub latency: Duration,
    /// Bytes moved.
    pub traffic: Traffic,
}

/// Events a REQ returned: (created_at, id) of each.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The events, in arrival order.
    pub items: Vec<(u64, EventId)>,
    /// Time from the REQ to EOSE.
    pub latency: Duration,
    /// Bytes moved.
    pub traffic: Traffic,
}

async fn send(conn: &mut Conn, text: &[u8], traffic: &mut Traffic) -> Result<(), SyncError> {
    traffic.sent += text.len() as u64;
    conn.writer
        .send_text(text)
        .await
        .map_err(|_| SyncError::Failed(Failure::ConnectionLost))
}

/// The next text message, answering pings; bytes are counted.
async fn next_text(
    conn: &mut Conn,
    deadline: tokio::time::Instant,
    traffic: &mut Traffic,
) -> Result<Vec<u8>, SyncError> {
    loop {
        let incoming = match timeout_at(deadline, conn.reader.next()).await {
            Err(_) => return Err(SyncError::Failed(Failure::Timeout)),
            Ok(Err(e)) => return Err(SyncError::Failed(e.as_failure())),
            Ok(Ok(i)) => i,
        };
        match incoming {
            Admitted::Text(t) => {
                traffic.received += t.len() as u64;
                return Ok(t.to_vec());
            }
            Admitted::Ping(p) => {
                conn.writer.queue_control(opcode::PONG, p);
                let _ = conn.writer.flush().await;
            }
            Admitted::Pong(_) | Admitted::Binary(_) => {}
            Admitted::Close(_) => return Err(SyncError::Failed(Failure::ConnectionLost)),
        }
    }
}

/// Reconciles `local` with the relay's events matching `filter` (NIP-77).
pub async fn reconcile(
    conn: &mut Conn,
    filter: &Filter,
    local: &[(u64, EventId)],
    timeout: Duration,
) -> Result<Reconciled, SyncError> {
    let mut storage = NegentropyStorageVector::with_capacity(local.len());
    for (created_at, id) in local {
        let _ = storage.insert(*created_at, Id::from_byte_array(*id.as_bytes()));
    }
    let bad = |e: negentropy::Error| SyncError::Failed(Failure::Rejected(format!("client:{e}")));
    storage.seal().map_err(bad)?;
    let mut neg = Negentropy::owned(storage, FRAME_LIMIT).map_err(bad)?;
    let initial = neg.initiate().map_err(bad)?;
    let sub = conn.new_sub_id("neg");
    let mut traffic = Traffic::default();
    let mut out = Vec::with_capacity(2 * initial.len() + 128);
    write::neg_open(&mut out, &sub, filter, &initial);
    let start = Instant::now();
    send(conn, &out, &mut traffic).await?;
    let (mut have, mut need) = (Vec::new(), Vec::new());
    let mut rounds = 0u32;
    loop {
        let deadline = tokio::time::Instant::now() + timeout;
        let text = match next_text(conn, deadline, &mut traffic).await {
            // No answer at all to the first message: the relay ignores NEG-OPEN.
            Err(SyncError::Failed(Failure::Timeout)) if rounds == 0 => {
                return Err(SyncError::Unsupported(
                    "no answer to NEG-OPEN within the timeout".into(),
                ))
            }
            other => other?,
        };
        let reply = match RelayMessage::parse(&text) {
            Ok(RelayMessage::NegMsg {
                subscription_id,
                message,
            }) if subscription_id == sub => message,
            Ok(RelayMessage::NegErr {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(match rounds {
                    0 if !message.starts_with("blocked:") => {
                        SyncError::Unsupported(format!("relay refused: NEG-ERR \"{message}\""))
                    }
                    _ => SyncError::Failed(Failure::Closed(message_prefix(&message))),
                });
            }
            Ok(RelayMessage::Notice(m)) if rounds == 0 => {
                return Err(SyncError::Unsupported(format!(
                    "relay refused: NOTICE \"{m}\""
                )))
            }
            Ok(RelayMessage::Closed { message, .. }) if rounds == 0 => {
                return Err(SyncError::Unsupported(format!(
                    "relay refused: CLOSED \"{message}\""
                )))
            }
            Ok(other) => {
                conn.anomalies.unsolicited(&other);
                continue;
            }
            Err(_) => {
                conn.anomalies.add("unparseable_message");
                continue;
            }
        };
        rounds += 1;
        let next = neg
            .reconcile_with_ids(&reply, &mut have, &mut need)
            .map_err(|_| SyncError::Failed(Failure::Protocol))?;
        out.clear();
        match next {
            Some(next) => {
                write::neg_msg(&mut out, &sub, &next);
                send(conn, &out, &mut traffic).await?;
            }
            None => break,
        }
    }
    let latency = start.elapsed();
    out.clear();
    write::neg_close(&mut out, &sub);
    send(conn, &out, &mut traffic).await?;
    let ids = |v: Vec<Id>| {
        v.into_iter()
            .map(|i| EventId::from_bytes(*i.as_bytes()))
            .collect()
    };
    Ok(Reconciled {
        have: ids(have),
        need: ids(need),
        rounds,
        latency,
        traffic,
    })
}

/// Downloads every event of `filter` (one REQ to EOSE); checks each against it.
pub async fn fetch(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
) -> Result<Fetched, SyncError> {
    let mut items = Vec::new();
    let (latency, traffic) = fetch_each(conn, filter, timeout, &mut |event| {
        items.push((event.created_at().as_u64(), *event.id()))
    })
    .await?;
    Ok(Fetched {
        items,
        latency,
        traffic,
    })
}

/// Downloads every event of `filter` (one REQ to EOSE), handing each to
/// `on_event` as it arrives (nothing is kept); an event that does not match
/// the filter fails the fetch. Returns the time to EOSE and the bytes moved.
pub async fn fetch_each(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
    on_event: &mut (dyn FnMut(&EventRef<'_>) + Send),
) -> Result<(Duration, Traffic), SyncError> {
    let sub = conn.new_sub_id("dl");
    let mut traffic = Traffic::default();
    let mut out = Vec::with_capacity(256);
    write::req(&mut out, &sub, std::slice::from_ref(filter));
    let start = Instant::now();
    send(conn, &out, &mut traffic).await?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let text = next_text(conn, deadline, &mut traffic).await?;
        match RelayMessage::parse(&text) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub => {
                if !filter.matches(&event) {
                    return Err(SyncError::Failed(Failure::WrongResult));
                }
                on_event(&event);
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(SyncError::Failed(Failure::Closed(message_prefix(&message))))
            }
            Ok(other) => conn.anomalies.unsolicited(&other),
            Err(_) => conn.anomalies.add("unparseable_message"),
        }
    }
    let latency = start.elapsed();
    out.clear();
    write::close(&mut out, &sub);
    send(conn, &out, &mut traffic).await?;
    Ok((latency, traffic))
}

/// Publishes events (each given as its id and canonical JSON) without
/// waiting between them, then reads the relay's `OK`s: the answer to each,
/// in the order given, as `(accepted, message)`. Text transport only.
pub async fn publish_all(
    conn: &mut Conn,
    events: &[(EventId, Vec<u8>)],
    timeout: Duration,
) -> Result<(Vec<(bool, String)>, Traffic), SyncError> {
    let mut traffic = Traffic::default();
    let mut out = Vec::new();
    let mut waiting = std::collections::HashMap::with_capacity(events.len());
    for (i, (id, json)) in events.iter().enumerate() {
        out.clear();
        out.extend_from_slice(b"[\"EVENT\",");
        out.extend_from_slice(json);
        out.push(b']');
        send(conn, &out, &mut traffic).await?;
        waiting.insert(*id, i);
    }
    let mut answers = vec![(false, String::new()); events.len()];
    let deadline = tokio::time::Instant::now() + timeout;
    while !waiting.is_empty() {
        let text = next_text(conn, deadline, &mut traffic).await?;
        match RelayMessage::parse(&text) {
            Ok(RelayMessage::Ok {
                event_id,
                accepted,
                message,
            }) => match waiting.remove(&event_id) {
                Some(i) => answers[i] = (accepted, message.into_owned()),
                None => conn.anomalies.add("unmatched_ok"),
            },
            Ok(other) => conn.anomalies.unsolicited(&other),
            Err(_) => conn.anomalies.add("unparseable_message"),
        }
    }
    Ok((answers, traffic))
}

/// Fetches events by id, `IDS_PER_REQ` per REQ; returns the ones received.
pub async fn fetch_ids(
    conn: &mut Conn,
    ids: &[EventId],
    timeout: Duration,
) -> Result<Fetched, SyncError> {
    let mut all = Fetched {
        items: Vec::with_capacity(ids.len()),
        latency: Duration::ZERO,
        traffic: Traffic::default(),
    };
    let mut ids = ids.to_vec();
    // `Filter` holds its lists sorted (matching searches them).
    ids.sort_unstable();
    ids.dedup();
    for chunk in ids.chunks(IDS_PER_REQ) {
        let filter = Filter {
            ids: Some(chunk.to_vec()),
            ..Filter::new()
        };
        let got = fetch(conn, &filter, timeout).await?;
        all.items.extend(got.items);
        all.latency += got.latency;
        all.traffic.sent += got.traffic.sent;
        all.traffic.received += got.traffic.received;
    }
    Ok(all)
}
