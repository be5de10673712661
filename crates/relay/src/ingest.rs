//! Stages 2–5: client frames → messages → validated events → policy.
//!
//! All frames of one connection come to the same worker, so a connection's
//! REQ, CLOSE and EVENT are handled in the order it sent them. Cheap checks
//! run first: structure and policy, then the duplicate lookup by id, and only
//! then the id hash and the signature.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Receiver;
use nostrwire_event::message::write;
use nostrwire_event::{
    ClientMessage, Error, ErrorKind, EventId, EventRef, JsonStr, PreimageFields, SignedFields,
};

use crate::msg::{Accepted, Conn, ConnId, FanoutMsg, IngestMsg, LiveEvent, Phase, Sub, WriterMsg};
use crate::query::Job;
use crate::store::Presence;
use crate::Shared;

fn send(conn: &Conn, build: impl FnOnce(&mut Vec<u8>)) {
    let mut out = Vec::with_capacity(128);
    build(&mut out);
    conn.outbox.send(String::from_utf8(out).expect("UTF-8"));
}

fn ok_false(shared: &Shared, conn: &Conn, id: &EventId, reason: &str, message: &str) {
    shared.metrics.rejected(reason);
    send(conn, |o| write::ok(o, id, false, message));
}

/// Subscriptions of the connections this worker owns.
#[derive(Default)]
struct Subs {
    by_conn: HashMap<ConnId, HashMap<String, Arc<Sub>>>,
    /// NIP-77 sync sessions.
    sync: crate::sync::Sessions,
}

/// Runs one ingest worker until its inbox closes.
pub fn run(shared: Arc<Shared>, inbox: Receiver<IngestMsg>) {
    let mut subs = Subs::default();
    while let Ok(msg) = inbox.recv() {
        match msg {
            IngestMsg::Frame(conn, bytes) => handle(&shared, &mut subs, &conn, &bytes),
            IngestMsg::Closed(conn) => {
                if let Some(list) = subs.by_conn.remove(&conn) {
                    for sub in list.values() {
                        sub.cancelled.store(true, Ordering::Relaxed);
                    }
                }
                subs.sync.close_conn(conn);
                let _ = shared.fanout_tx.send(FanoutMsg::RemoveConn(conn));
            }
            IngestMsg::SyncReady(ready) => subs.sync.ready(&shared, ready),
            IngestMsg::Shutdown => return,
        }
    }
}

/// Best effort for unparseable input: the message type and, for EVENT, the
/// claimed id or, for REQ/COUNT, the subscription id, so the error can be
/// answered with the right message.
fn sniff(bytes: &[u8]) -> (Option<&'static str>, Option<String>) {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let t = text.trim_start();
    let kind = [
        "EVENT", "REQ", "COUNT", "CLOSE", "AUTH", "NEG-OPEN", "NEG-MSG",
    ]
    .into_iter()
    .find(|k| {
        t.strip_prefix('[')
            .map(str::trim_start)
            .is_some_and(|r| r.starts_with(&format!("\"{k}\"")))
    });
    let detail = match kind {
        Some("EVENT") => text
            .find("\"id\":\"")
            .and_then(|i| text.get(i + 6..i + 70))
            .filter(|h| EventId::from_hex(h).is_ok())
            .map(str::to_string),
        Some("REQ" | "COUNT" | "NEG-OPEN" | "NEG-MSG") => {
            let rest = t.split_once(',').map_or("", |x| x.1).trim_start();
            rest.strip_prefix('"')
                .and_then(|r| r.split('"').next())
                .filter(|s| !s.is_empty() && s.len() <= 64)
                .map(str::to_string)
        }
        _ => None,
    };
    (kind, detail)
}

fn parse_error(shared: &Shared, conn: &Conn, bytes: &[u8], err: &Error) {
    let message = format!("invalid: {} ({})", err, err.kind());
    match sniff(bytes) {
        (Some("EVENT"), Some(id)) => {
            let id = EventId::from_hex(&id).expect("sniffed hex");
            ok_false(shared, conn, &id, err.kind().as_str(), &message);
        }
        (Some("REQ" | "COUNT"), Some(sub)) => send(conn, |o| write::closed(o, &sub, &message)),
        (Some("NEG-OPEN" | "NEG-MSG"), Some(sub)) => {
            send(conn, |o| write::neg_err(o, &sub, &message))
        }
        _ => send(conn, |o| write::notice(o, &message)),
    }
}

fn handle(shared: &Arc<Shared>, subs: &mut Subs, conn: &Arc<Conn>, bytes: &[u8]) {
    let message = match ClientMessage::parse_with(bytes, &shared.event_limits) {
        Ok(m) => m,
        Err(e) => {
            shared.metrics.message("invalid");
            parse_error(shared, conn, bytes, &e);
            return;
        }
    };
    shared.metrics.message(message.type_name());
    match message {
        ClientMessage::Event(event) => event_message(shared, conn, &event),
        ClientMessage::Req {
            subscription_id,
            filters,
        } => {
            let sub_id = subscription_id.into_owned();
            let list = subs.by_conn.entry(conn.id).or_default();
            if !list.contains_key(&sub_id) && list.len() >= shared.config.limits.max_subscriptions {
                send(conn, |o| {
                    write::closed(
                        o,
                        &sub_id,
                        "rate-limited: too many open subscriptions on this connection",
                    )
                });
                return;
            }
            if !shared.config.search.enabled && filters.iter().any(|f| f.search.is_some()) {
                send(conn, |o| {
                    write::closed(o, &sub_id, "invalid: search (NIP-50) is not supported")
                });
                return;
            }
            let sub = Arc::new(Sub {
                conn: conn.id,
                id: sub_id.clone(),
                filters,
                outbox: conn.outbox.clone(),
                cancelled: Default::default(),
                phase: Mutex::new(Phase::Pending(Vec::new())),
            });
            if let Some(old) = list.insert(sub_id, sub.clone()) {
                old.cancelled.store(true, Ordering::Relaxed);
            }
            // Registered before the query starts, so nothing committed meanwhile is missed.
            let _ = shared.fanout_tx.send(FanoutMsg::Add(sub.clone()));
            let _ = shared.query_tx.send(Job::req(shared, sub));
        }
        ClientMessage::Count {
            subscription_id,
            filters,
        } => {
            if !shared.config.search.enabled && filters.iter().any(|f| f.search.is_some()) {
                send(conn, |o| {
                    write::closed(
                        o,
                        &subscription_id,
                        "invalid: search (NIP-50) is not supported",
                    )
                });
                return;
            }
            let sub = Arc::new(Sub {
                conn: conn.id,
                id: subscription_id.into_owned(),
                filters,
                outbox: conn.outbox.clone(),
                cancelled: Default::default(),
                phase: Mutex::new(Phase::Live),
            });
            let _ = shared.query_tx.send(Job::count(shared, sub));
        }
        ClientMessage::Close(id) => {
            if let Some(list) = subs.by_conn.get_mut(&conn.id) {
                if let Some(sub) = list.remove(id.as_ref()) {
                    sub.cancelled.store(true, Ordering::Relaxed);
                    let _ = shared
                        .fanout_tx
                        .send(FanoutMsg::Remove(conn.id, id.into_owned()));
                }
            }
        }
        ClientMessage::Auth(event) => {
            ok_false(
                shared,
                conn,
                event.id(),
                "auth_unsupported",
                "error: AUTH (NIP-42) is not supported by this relay",
            );
        }
        ClientMessage::NegOpen {
            subscription_id,
            filter,
            message,
        } => {
            let id = subscription_id.into_owned();
            let sessions = &mut subs.sync;
            if sessions.count(conn.id) >= shared.config.limits.max_sync_sessions {
                return send(conn, |o| {
                    write::neg_err(o, &id, "blocked: too many sync sessions on this connection")
                });
            }
            if filter.search.is_some() {
                return send(conn, |o| {
                    write::neg_err(o, &id, "blocked: search filters cannot be synced")
                });
            }
            let sub = Arc::new(Sub {
                conn: conn.id,
                id,
                filters: vec![*filter],
                outbox: conn.outbox.clone(),
                cancelled: Default::default(),
                phase: Mutex::new(Phase::Live),
            });
            sessions.opening(conn.id, sub.clone());
            let _ = shared
                .query_tx
                .send(Job::sync(shared, sub, conn.clone(), message));
        }
        ClientMessage::NegMsg {
            subscription_id,
            message,
        } => subs.sync.message(shared, conn, &subscription_id, &message),
        ClientMessage::NegClose(id) => subs.sync.close(conn.id, &id),
        _ => send(conn, |o| write::notice(o, "invalid: unsupported message")),
    }
}

fn first_value_of<'a>(event: &EventRef<'a>, name: &str) -> Option<JsonStr<'a>> {
    event
        .tags()
        .iter()
        .find(|t| t.name().eq_str(name))
        .and_then(|t| t.first_value())
}

fn event_message(shared: &Arc<Shared>, conn: &Arc<Conn>, event: &EventRef<'_>) {
    let id = event.id();
    let limits = &shared.config.limits;
    let now = crate::now();
    let created = event.created_at().as_u64();
    // Policy first: cheap and independent of crypto.
    if limits.future_seconds > 0 && created > now + limits.future_seconds {
        return ok_false(
            shared,
            conn,
            id,
            "future",
            "invalid: created_at is too far in the future",
        );
    }
    if limits.past_seconds > 0 && created + limits.past_seconds < now {
        return ok_false(shared, conn, id, "past", "invalid: created_at is too old");
    }
    if event.kind().as_u16() == 22242 {
        return ok_false(
            shared,
            conn,
            id,
            "auth_event",
            "invalid: kind 22242 is only used for AUTH",
        );
    }
    if event.tags().iter().any(|t| t.name().eq_str("-")) {
        return ok_false(
            shared,
            conn,
            id,
            "protected",
            "auth-required: this event is protected (NIP-70) and this relay does not support AUTH",
        );
    }
    if let Some(value) = first_value_of(event, "expiration") {
        match value.value().parse::<u64>() {
            Ok(t) if t <= now => {
                return ok_false(shared, conn, id, "expired", "invalid: event has expired")
            }
            Ok(_) => {}
            Err(_) => {
                return ok_false(
                    shared,
                    conn,
                    id,
                    "expiration",
                    "invalid: expiration tag is not a number",
                )
            }
        }
    }
    // Duplicates by id before any hashing or signature work.
    match shared.store.presence(id) {
        Ok(Presence::Stored) => {
            return send(conn, |o| {
                write::ok(o, id, true, "duplicate: already have this event")
            });
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!("presence check failed: {e}");
            return ok_false(
                shared,
                conn,
                id,
                "storage_error",
                "error: storage unavailable",
            );
        }
    }
    if let Err(e) = event.verify() {
        let message = match e.kind() {
            ErrorKind::IdMismatch => "invalid: event id does not match its content".to_string(),
            ErrorKind::InvalidSignature => "invalid: bad signature".to_string(),
            _ => format!("invalid: {e}"),
        };
        return ok_false(shared, conn, id, e.kind().as_str(), &message);
    }
    let json = event.to_json();
    if event.kind().is_ephemeral() {
        send(conn, |o| write::ok(o, id, true, ""));
        let live = Arc::new(LiveEvent {
            serial: 0,
            record: nostrwire_wire::encode_json_event(event),
            json,
        });
        let _ = shared.fanout_tx.send(FanoutMsg::Events(vec![live]));
        return;
    }
    let accepted = Accepted {
        id: *id,
        record: nostrwire_wire::encode_json_event(event),
        json,
        reply: conn.outbox.clone(),
    };
    if shared.writer_tx.send(WriterMsg::Event(accepted)).is_err() {
        ok_false(
            shared,
            conn,
            id,
            "shutting_down",
            "error: relay is shutting down",
        );
    }
}
