//! Stages 2–5: client frames → messages → validated events → policy.
//!
//! All frames of one connection come to the same worker, so a connection's
//! REQ, CLOSE and EVENT are handled in the order it sent them. Cheap checks
//! run first: structure and policy, then the id hash and the signature. A
//! valid event is admitted (`EventStore::admit`: derived and compressed
//! once, here) and goes to the writer, which alone tells a duplicate (an
//! invalid event never learns whether its id is stored). Requests that
//! open subscriptions are parsed once here (searches included) and charged
//! to the connection's budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use nostrwire_event::message::write;
use nostrwire_event::{ClientMessage, Error, ErrorKind, EventId, SignedFields};

use crate::memory::Short;
use crate::msg::{
    Accepted, Admission, Conn, ConnId, FanoutMsg, IngestMsg, LiveEvent, Phase, Sub, Ticket,
    WriterMsg,
};
use crate::plugin::{Decision, Plugin};
use crate::policy::{check_auth, first_tag_value, KindGate, WritePolicy, AUTH_KIND};
use crate::query::Job;
use crate::ratelimit::Budget;
use crate::search::Query;
use crate::signatures::{Unsigned, Waiting};
use crate::store::Admitted;
use crate::turns::AddressTurns;
use crate::Shared;
use nostrwire_wire::transport::{self, ClientFrame};
use nostrwire_wire::EventView;

fn send(conn: &Conn, build: impl FnOnce(&mut Vec<u8>)) {
    let mut out = Vec::with_capacity(128);
    build(&mut out);
    conn.outbox.send_control(out);
}

fn ok_false(shared: &Shared, conn: &Conn, id: &EventId, reason: &str, message: &str) {
    shared.metrics.rejected(reason);
    conn.before_answer(message);
    conn.outbox.send_ok(id, false, message);
}

/// What this worker owns: the subscriptions and sync sessions of its
/// connections, and its own write-policy plugin process.
#[derive(Default)]
struct Subs {
    by_conn: HashMap<ConnId, HashMap<String, Arc<Sub>>>,
    /// NIP-77 sync sessions.
    sync: crate::sync::Sessions,
    /// The `[policy] plugin`, if one is configured.
    plugin: Option<Plugin>,
    /// EVENTs waiting for their signature check (`signatures.rs`).
    waiting: Waiting,
}

/// Runs one ingest worker until its inbox closes.
pub fn run(shared: Arc<Shared>, inbox: Receiver<IngestMsg>) {
    let policy = &shared.config.policy;
    let mut subs = Subs {
        plugin: (!policy.plugin.as_os_str().is_empty()).then(|| {
            Plugin::new(
                policy.plugin.clone(),
                Duration::from_millis(policy.plugin_timeout_ms.max(1)),
            )
        }),
        ..Subs::default()
    };
    // Frames wait here, by client address and connection, and are taken
    // in turns: one client's megabyte messages, over however many
    // connections, never hold up another's small one for longer than the
    // message being handled.
    let mut turns: AddressTurns<IpAddr, Work> = AddressTurns::new(TURN_BYTES);
    let mut stopping = false;
    loop {
        // Everything waiting joins the turns (bounded by the admission
        // room the frames hold); wait only when there is nothing to do.
        let mut next = if turns.is_empty() && !stopping {
            // Nothing else to do: the events waiting for their signature
            // check go on before the worker sleeps.
            if inbox.is_empty() {
                settle(&shared, &mut subs);
            }
            match inbox.recv() {
                Ok(msg) => Some(msg),
                Err(_) => return,
            }
        } else {
            inbox.try_recv().ok()
        };
        while let Some(msg) = next.take() {
            match msg {
                IngestMsg::Frame(conn, bytes, received, admission) => {
                    let cost = bytes.len() as u64 + 64;
                    let (address, id) = (conn.address, conn.id);
                    turns.push(
                        address,
                        id,
                        Work::Frame(conn, bytes, received, admission),
                        cost,
                    );
                }
                // After the connection's last frame.
                IngestMsg::Closed(conn, address) => {
                    turns.push(address, conn, Work::Closed(conn), 1)
                }
                IngestMsg::SyncReady(ready) => subs.sync.ready(&shared, ready),
                IngestMsg::Shutdown => stopping = true,
            }
            next = inbox.try_recv().ok();
        }
        match turns.pop() {
            Some(Work::Frame(conn, bytes, received, admission)) => {
                handle(&shared, &mut subs, &conn, &bytes, received, admission);
                if subs.waiting.handled(bytes.len()) {
                    settle(&shared, &mut subs);
                }
            }
            Some(Work::Closed(conn)) => {
                if let Some(list) = subs.by_conn.remove(&conn) {
                    for sub in list.values() {
                        sub.cancelled.store(true, Ordering::Relaxed);
                    }
                }
                subs.sync.close_conn(conn);
                shared.fanout_pending.remove_conn(conn);
            }
            None if stopping => return settle(&shared, &mut subs),
            None => {}
        }
    }
}

/// What a connection may spend per turn, in bytes of frames: small
/// messages take one turn, a megabyte one saves up for sixteen.
const TURN_BYTES: u64 = 64 << 10;

/// A connection's work, in the order it arrived.
enum Work {
    Frame(Arc<Conn>, Vec<u8>, Instant, Admission),
    Closed(ConnId),
}

/// Best effort for unparseable input: the message type and, for REQ/COUNT
/// and NEG-*, the subscription id, so the error can be answered with the
/// right message. (EVENT and AUTH ids are recovered by `claimed_event_id`.)
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

/// Answers a message the parser refused. NIP-01 answers every EVENT (and
/// NIP-42 every AUTH) with an OK, so whenever the event's id can be read,
/// wherever it sits and whatever limit the event broke, the refusal is an
/// `OK false` under that id; a NOTICE only when no id can be recovered.
fn parse_error(shared: &Shared, conn: &Conn, bytes: &[u8], err: &Error) {
    let message = format!("invalid: {} ({})", err, err.kind());
    if let Some(id) = nostrwire_event::message::claimed_event_id(bytes) {
        return ok_false(shared, conn, &id, err.kind().as_str(), &message);
    }
    match sniff(bytes) {
        (Some("REQ" | "COUNT"), Some(sub)) => send(conn, |o| write::closed(o, &sub, &message)),
        (Some("NEG-OPEN" | "NEG-MSG"), Some(sub)) => {
            send(conn, |o| write::neg_err(o, &sub, &message))
        }
        _ => send(conn, |o| write::notice(o, &message)),
    }
}

fn handle(
    shared: &Arc<Shared>,
    subs: &mut Subs,
    conn: &Arc<Conn>,
    bytes: &[u8],
    received: Instant,
    admission: Admission,
) {
    if !conn.outbox.is_binary() {
        return handle_json(shared, subs, conn, bytes, received, admission);
    }
    // nostrwire.v1 and v2 (spec/transport.md): events arrive as nwb records.
    let decoded = match conn.outbox.v2() {
        Some(_) => transport::decode_client_v2(bytes, &shared.wire_limits),
        None => transport::decode_client(bytes, &shared.wire_limits),
    };
    match decoded {
        Ok(ClientFrame::Json(json)) => handle_json(shared, subs, conn, json, received, admission),
        Ok(ClientFrame::Event(event)) => {
            shared.metrics.message("EVENT");
            if over_budget(shared, conn, Budget::Events) {
                return ok_false(shared, conn, event.id(), "rate_limited", RATE_LIMITED);
            }
            let arrival = Arrival {
                received,
                admission,
            };
            event_message(shared, subs, conn, &event, arrival, |e| e.record().to_vec());
        }
        Ok(ClientFrame::Auth(event)) => {
            shared.metrics.message("AUTH");
            auth_message(shared, conn, &event);
        }
        Ok(ClientFrame::Hold(sets)) => {
            shared.metrics.message("HOLD");
            if let Some(v2) = conn.outbox.v2() {
                v2.hold(&sets);
            }
        }
        Ok(_) => {
            shared.metrics.message("invalid");
            send(conn, |o| write::notice(o, "invalid: unknown message"));
        }
        Err(e) => {
            shared.metrics.message("invalid");
            let message = format!("invalid: {e}");
            // An EVENT whose record prefix is complete is answered by its id.
            let id = match bytes.split_first() {
                Some((&(transport::EVENT | transport::AUTH), record)) => {
                    nostrwire_wire::peek_id(record).ok()
                }
                _ => None,
            };
            match id {
                Some(id) => ok_false(shared, conn, &id, e.as_str(), &message),
                None => send(conn, |o| write::notice(o, &message)),
            }
        }
    }
}

fn handle_json(
    shared: &Arc<Shared>,
    subs: &mut Subs,
    conn: &Arc<Conn>,
    bytes: &[u8],
    received: Instant,
    admission: Admission,
) {
    let message = match ClientMessage::parse_with(bytes, &shared.event_limits) {
        Ok(m) => m,
        Err(e) => {
            shared.metrics.message("invalid");
            parse_error(shared, conn, bytes, &e);
            return;
        }
    };
    shared.metrics.message(message.type_name());
    if let Some(refusal) = rate_limited(shared, conn, &message) {
        return refusal;
    }
    match message {
        ClientMessage::Event(event) => {
            let arrival = Arrival {
                received,
                admission,
            };
            event_message(shared, subs, conn, &event, arrival, |e| {
                nostrwire_wire::encode_json_event(e)
            })
        }
        ClientMessage::Req {
            subscription_id,
            filters,
        } => {
            let sub_id = subscription_id.into_owned();
            // A binary EVENT frame carries the id's length in one byte (spec/transport.md).
            if conn.outbox.is_binary() && sub_id.len() > transport::MAX_SUBSCRIPTION_ID_BYTES {
                return send(conn, |o| {
                    write::closed(o, &sub_id, "invalid: subscription id longer than 64 bytes")
                });
            }
            let list = subs.by_conn.entry(conn.id).or_default();
            let max = shared.config.limits.max_subscriptions;
            if !list.contains_key(&sub_id) && list.len() >= max {
                // Subscriptions the relay ended (CLOSED) no longer count.
                list.retain(|_, s| !s.cancelled.load(Ordering::Relaxed));
            }
            if !list.contains_key(&sub_id) && list.len() >= max {
                shared.metrics.limit_hit("max_subscriptions");
                send(conn, |o| {
                    write::closed(
                        o,
                        &sub_id,
                        "rate-limited: too many open subscriptions on this connection",
                    )
                });
                return;
            }
            // A replaced subscription gives its room back first.
            if let Some(old) = list.remove(&sub_id) {
                old.cancelled.store(true, Ordering::Relaxed);
                shared.fanout_pending.remove(&old);
            }
            let sub = match open_sub(
                shared,
                conn,
                sub_id.clone(),
                filters,
                Phase::Pending(Vec::new()),
            ) {
                Ok(sub) => sub,
                Err(reason) => {
                    conn.subscriptions.store(list.len(), Ordering::Relaxed);
                    return send(conn, |o| write::closed(o, &sub_id, &reason));
                }
            };
            list.insert(sub_id, sub.clone());
            conn.subscriptions.store(list.len(), Ordering::Relaxed);
            // Registered before the query takes its snapshot, so nothing
            // committed after it is missed (`fanout::Pending`).
            shared.fanout_pending.add(sub.clone());
            shared.queries.push(Job::req(shared, sub));
        }
        ClientMessage::Count {
            subscription_id,
            filters,
        } => {
            let id = subscription_id.into_owned();
            match open_sub(shared, conn, id.clone(), filters, Phase::Live(Vec::new())) {
                Ok(sub) => {
                    shared.queries.push(Job::count(shared, sub));
                }
                Err(reason) => send(conn, |o| write::closed(o, &id, &reason)),
            }
        }
        ClientMessage::Close(id) => {
            if let Some(list) = subs.by_conn.get_mut(&conn.id) {
                if let Some(sub) = list.remove(id.as_ref()) {
                    conn.subscriptions.store(list.len(), Ordering::Relaxed);
                    sub.cancelled.store(true, Ordering::Relaxed);
                    shared.fanout_pending.remove(&sub);
                }
            }
        }
        ClientMessage::Auth(event) => auth_message(shared, conn, &event),
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
            let sub = match open_sub(
                shared,
                conn,
                id.clone(),
                vec![*filter],
                Phase::Live(Vec::new()),
            ) {
                Ok(sub) => sub,
                Err(reason) => return send(conn, |o| write::neg_err(o, &id, &reason)),
            };
            sessions.opening(conn.id, sub.clone());
            shared
                .queries
                .push(Job::sync(shared, sub, conn.clone(), message));
        }
        ClientMessage::NegMsg {
            subscription_id,
            message,
        } => subs.sync.message(shared, conn, &subscription_id, &message),
        ClientMessage::NegClose(id) => subs.sync.close(conn.id, &id),
        _ => send(conn, |o| write::notice(o, "invalid: unsupported message")),
    }
}

/// Builds a subscription (REQ, COUNT or NEG-OPEN) once: its searches
/// parsed, its read gate, and its room in the connection's budget; or the
/// `CLOSED` reason.
fn open_sub(
    shared: &Shared,
    conn: &Conn,
    id: String,
    filters: Vec<nostrwire_event::Filter>,
    phase: Phase,
) -> Result<Arc<Sub>, String> {
    let config = &shared.config;
    let mut searches = Vec::with_capacity(filters.len());
    for filter in &filters {
        let Some(text) = &filter.search else {
            searches.push(None);
            continue;
        };
        if !config.search.enabled {
            return Err("invalid: search (NIP-50) is not supported".into());
        }
        match Query::parse_at_most(text, config.search.max_terms) {
            Some(query) => searches.push(Some(query)),
            None => {
                shared.metrics.limit_hit("search_max_terms");
                return Err(format!(
                    "invalid: a search may have at most {} terms",
                    config.search.max_terms
                ));
            }
        }
    }
    let gate = read_gate(shared, conn, &filters)?;
    let bytes = std::mem::size_of::<Sub>()
        + id.len()
        + filters.iter().map(filter_footprint).sum::<usize>()
        + searches
            .iter()
            .flatten()
            .map(Query::footprint)
            .sum::<usize>()
        + gate.as_deref().map_or(0, KindGate::footprint);
    let budget = conn.outbox.budget();
    let held = match budget.hold(bytes) {
        Ok(held) => held,
        Err(Short::Relay) => {
            shared.metrics.limit_hit("relay_memory_bytes");
            return Err(
                "rate-limited: the relay is short of memory and this connection holds more than its share; read what it sent, or try again later"
                    .into(),
            );
        }
        Err(_) => {
            shared.metrics.limit_hit("max_connection_bytes");
            return Err(format!(
                "rate-limited: this request needs {bytes} bytes and the connection holds {} of its {}; close some subscriptions",
                budget.used(),
                budget.cap()
            ));
        }
    };
    Ok(Arc::new(Sub {
        address: conn.address,
        conn: conn.id,
        id,
        filters,
        searches,
        outbox: conn.outbox.clone(),
        cancelled: Default::default(),
        gate,
        phase: Mutex::new(phase),
        held,
    }))
}

/// Heap bytes a filter holds, counted twice: once in the subscription and
/// once in the fan-out's index, which has an entry per value.
fn filter_footprint(f: &nostrwire_event::Filter) -> usize {
    use std::mem::size_of;
    let values = f.ids.as_ref().map_or(0, |v| v.len() * 32)
        + f.authors.as_ref().map_or(0, |v| v.len() * 32)
        + f.kinds.as_ref().map_or(0, |v| v.len() * 2)
        + f.tags
            .iter()
            .map(|c| {
                size_of::<nostrwire_event::TagCondition>()
                    + c.values
                        .iter()
                        .map(|v| size_of::<String>() + v.len())
                        .sum::<usize>()
            })
            .sum::<usize>()
        + f.search.as_ref().map_or(0, String::len);
    size_of::<nostrwire_event::Filter>() + 2 * values
}

const RATE_LIMITED: &str = "rate-limited: slow down, too many messages";

/// Takes a token from the sender's bucket; true when it was empty.
fn over_budget(shared: &Shared, conn: &Conn, budget: Budget) -> bool {
    if !shared.rate.limits(budget) {
        return false;
    }
    let pubkey = conn.authed.read().expect("auth lock").first().copied();
    !shared.rate.allow(budget, conn.address, pubkey)
}

/// Charges the message to its sender's bucket; the refusal was already
/// sent when it returns `Some`.
fn rate_limited(shared: &Shared, conn: &Conn, message: &ClientMessage<'_>) -> Option<()> {
    let budget = match message {
        ClientMessage::Event(_) => Budget::Events,
        ClientMessage::Req { .. } | ClientMessage::Count { .. } | ClientMessage::NegOpen { .. } => {
            Budget::Reqs
        }
        _ => return None,
    };
    if !over_budget(shared, conn, budget) {
        return None;
    }
    let reason = RATE_LIMITED;
    match message {
        ClientMessage::Event(event) => ok_false(shared, conn, event.id(), "rate_limited", reason),
        ClientMessage::Req {
            subscription_id, ..
        }
        | ClientMessage::Count {
            subscription_id, ..
        } => {
            shared.metrics.rejected("rate_limited");
            send(conn, |o| write::closed(o, subscription_id, reason))
        }
        ClientMessage::NegOpen {
            subscription_id, ..
        } => {
            shared.metrics.rejected("rate_limited");
            send(conn, |o| write::neg_err(o, subscription_id, reason))
        }
        _ => {}
    }
    Some(())
}

/// The read gate of a new subscription, or the `CLOSED` reason when it names
/// restricted kinds the connection may not read yet.
fn read_gate(
    shared: &Shared,
    conn: &Conn,
    filters: &[nostrwire_event::Filter],
) -> Result<Option<Arc<KindGate>>, String> {
    let config = &shared.config;
    let viewers = conn.authed();
    if viewers.is_empty() {
        let named = KindGate::named_kinds(config, filters);
        if !named.is_empty() {
            let kinds = named
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            shared.metrics.rejected("auth_required");
            conn.send_challenge();
            return Err(if config.auth.enabled {
                format!("auth-required: kind {kinds} is only served to its author and recipients; authenticate first")
            } else {
                format!("restricted: kind {kinds} is not served by this relay")
            });
        }
    }
    Ok(KindGate::for_filters(config, filters, &viewers))
}

/// NIP-42: checks the AUTH event against this connection's challenge, then
/// its id and signature, and remembers the pubkey.
fn auth_message<E: SignedFields>(shared: &Shared, conn: &Conn, event: &E) {
    let id = event.id();
    if !shared.config.auth.enabled {
        return ok_false(
            shared,
            conn,
            id,
            "auth_disabled",
            "restricted: AUTH (NIP-42) is turned off on this relay",
        );
    }
    if let Err(reason) = check_auth(
        &shared.config,
        event,
        &conn.challenge,
        &conn.url,
        crate::now(),
    ) {
        return ok_false(shared, conn, id, "auth_invalid", reason);
    }
    let max = shared.config.auth.max_pubkeys;
    {
        let authed = conn.authed.read().expect("auth lock");
        if !authed.contains(event.pubkey()) && authed.len() >= max {
            shared.metrics.limit_hit("auth_max_pubkeys");
            return ok_false(
                shared,
                conn,
                id,
                "auth_max_pubkeys",
                &format!("rate-limited: a connection may authenticate as at most {max} pubkeys"),
            );
        }
    }
    if let Err(e) = event.verify() {
        return ok_false(
            shared,
            conn,
            id,
            e.kind().as_str(),
            &format!("invalid: {e}"),
        );
    }
    {
        let mut authed = conn.authed.write().expect("auth lock");
        if !authed.contains(event.pubkey()) {
            authed.push(*event.pubkey());
        }
    }
    shared.metrics.message("auth_ok");
    conn.outbox.send_ok(id, true, "");
}

/// Authentication and list rules for publishing; the refusal (reason key,
/// message) if any.
fn write_refusal<E: SignedFields>(
    shared: &Shared,
    conn: &Conn,
    event: &E,
) -> Option<(&'static str, &'static str)> {
    let auth = &shared.config.auth;
    let authed_any = || !conn.authed.read().expect("auth lock").is_empty();
    if auth.write_requires_auth && !authed_any() {
        return Some((
            "auth_required",
            "auth-required: this relay accepts events only from authenticated clients",
        ));
    }
    if event.any_tag(&mut |name, _| name == "-") && !conn.is_authed_as(event.pubkey()) {
        return Some(if !auth.enabled {
            (
                "protected",
                "restricted: this event is protected (NIP-70) and AUTH is turned off on this relay",
            )
        } else if authed_any() {
            (
                "protected",
                "restricted: a protected event (NIP-70) may only be published by its author",
            )
        } else {
            (
                "protected",
                "auth-required: this event is protected (NIP-70); authenticate as its author",
            )
        });
    }
    None
}

/// How an EVENT frame arrived: when the socket layer read it, and the room
/// it holds in the ingest queues until its `OK`.
struct Arrival {
    received: Instant,
    admission: Admission,
}

/// Why an event is refused: a stable reason (for metrics and `import`'s
/// counts) and the `OK false` message with its NIP-01 prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Stable, for counting.
    pub reason: &'static str,
    /// The message, with its NIP-01 prefix.
    pub message: std::borrow::Cow<'static, str>,
}

impl Refusal {
    fn new(reason: &'static str, message: impl Into<std::borrow::Cow<'static, str>>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }
}

/// The checks of an EVENT that depend on the event alone, cheapest first,
/// the signature last: time bounds, the write policy, proof of work,
/// expiration, the id and the signature. The relay applies them to every
/// EVENT after the checks that depend on its connection (AUTH, NIP-70),
/// and `nostrwire import` to every line, so both admit the same events.
pub fn check_event<E: SignedFields>(
    config: &crate::Config,
    policy: &WritePolicy,
    event: &E,
    now: u64,
) -> Result<(), Refusal> {
    check_event_unsigned(config, policy, event, now)?;
    event.verify_signature().map_err(invalid)
}

/// [`check_event`] but the signature, which the relay's ingest checks in
/// batches (`signatures.rs`).
fn check_event_unsigned<E: SignedFields>(
    config: &crate::Config,
    policy: &WritePolicy,
    event: &E,
    now: u64,
) -> Result<(), Refusal> {
    let limits = &config.limits;
    let created = event.created_at().as_u64();
    if limits.future_seconds > 0 && created > now + limits.future_seconds {
        return Err(Refusal::new(
            "future",
            "invalid: created_at is too far in the future",
        ));
    }
    if limits.past_seconds > 0 && created + limits.past_seconds < now {
        return Err(Refusal::new("past", "invalid: created_at is too old"));
    }
    if event.kind().as_u16() == AUTH_KIND {
        return Err(Refusal::new(
            "auth_event",
            "invalid: kind 22242 is only used for AUTH",
        ));
    }
    if let Some(message) = policy.refuses(event.id(), event.pubkey(), event.kind()) {
        return Err(Refusal::new("policy", message));
    }
    if let Some(message) = policy.pow_refusal(event.id()) {
        return Err(Refusal::new("pow", message));
    }
    if let Some(value) = first_tag_value(event, "expiration") {
        match value.parse::<u64>() {
            Ok(t) if t <= now => return Err(Refusal::new("expired", "invalid: event has expired")),
            Ok(_) => {}
            Err(_) => {
                return Err(Refusal::new(
                    "expiration",
                    "invalid: expiration tag is not a number",
                ))
            }
        }
    }
    // The id and signature are checked before any duplicate lookup, so an
    // invalid event never learns whether its id is stored (a restricted
    // DM's, say).
    event.verify_id().map_err(invalid)
}

/// The refusal of an event whose id or signature does not hold.
fn invalid(e: Error) -> Refusal {
    let message = match e.kind() {
        ErrorKind::IdMismatch => "invalid: event id does not match its content".into(),
        ErrorKind::InvalidSignature => "invalid: bad signature".into(),
        _ => format!("invalid: {e}").into(),
    };
    Refusal {
        reason: e.kind().as_str(),
        message,
    }
}

/// EVENT, from either transport: `record` gives the nwb record to store.
/// Every check but the signature's; the event then waits for a batch
/// check of signatures (`signatures.rs`) and goes on in [`settle`].
fn event_message<E: SignedFields>(
    shared: &Arc<Shared>,
    subs: &mut Subs,
    conn: &Arc<Conn>,
    event: &E,
    arrival: Arrival,
    record: impl FnOnce(&E) -> Vec<u8>,
) {
    let id = event.id();
    let now = crate::now();
    if let Some((reason, message)) = write_refusal(shared, conn, event) {
        return ok_false(shared, conn, id, reason, message);
    }
    let policy = shared.write_policy();
    if let Err(refusal) = check_event_unsigned(&shared.config, &policy, event, now) {
        return ok_false(shared, conn, id, refusal.reason, &refusal.message);
    }
    let unsigned = Unsigned {
        conn: conn.clone(),
        id: *id,
        pubkey: *event.pubkey(),
        sig: *event.sig(),
        kind: event.kind(),
        json: event.to_json_bytes(),
        record: record(event),
        received: arrival.received,
        admission: arrival.admission,
    };
    if subs.waiting.push(unsigned) {
        settle(shared, subs);
    }
}

/// Checks the signatures of the events waiting and takes each on: refused
/// for a bad one, else the write-policy plugin, then storage (or fan-out
/// alone for an ephemeral event).
fn settle(shared: &Arc<Shared>, subs: &mut Subs) {
    if subs.waiting.is_empty() {
        return;
    }
    for (event, verdict) in subs.waiting.settle(&shared.metrics) {
        match verdict {
            Ok(()) => signed_event(shared, subs.plugin.as_mut(), event),
            Err(e) => {
                let refusal = invalid(e);
                ok_false(
                    shared,
                    &event.conn,
                    &event.id,
                    refusal.reason,
                    &refusal.message,
                )
            }
        }
    }
}

/// An EVENT whose every check passed, signature included.
fn signed_event(shared: &Arc<Shared>, plugin: Option<&mut Plugin>, event: Unsigned) {
    let Unsigned {
        conn,
        id,
        kind,
        json,
        record,
        received,
        admission,
        ..
    } = event;
    let (conn, id) = (&conn, &id);
    let now = crate::now();
    // The rules as last reloaded. Duplicates are told by the writer, inside
    // the transaction that would store the event: a lookup here as well
    // would cost every new event a read transaction to spare duplicates
    // the trip.
    let policy = shared.write_policy();
    if policy.asks_for_pow() {
        if let Ok(view) = EventView::decode_with(&record, &shared.wire_limits) {
            if let Some(message) = policy.committed_pow_refusal(&view) {
                return ok_false(shared, conn, id, "pow", &message);
            }
        }
    }
    if let Some(plugin) = plugin {
        let Ok(text) = std::str::from_utf8(&json) else {
            tracing::error!("canonical JSON of {id} is not UTF-8");
            return ok_false(shared, conn, id, "internal", "error: internal error");
        };
        match plugin.decide(id, text, conn.ip, now) {
            Decision::Accept => {}
            Decision::Reject(message) => return ok_false(shared, conn, id, "plugin", &message),
            Decision::ShadowReject => {
                shared.metrics.rejected("plugin_shadow");
                conn.outbox.send_ok(id, true, "");
                return;
            }
        }
    }
    if kind.is_ephemeral() {
        conn.outbox.send_ok(id, true, "");
        if let Some(cluster) = &shared.cluster {
            cluster.publish_ephemeral(&record);
        }
        match Admitted::new(record, json) {
            Ok(event) => {
                let live = Arc::new(LiveEvent { serial: 0, event });
                let _ = shared.fanout_tx.send(FanoutMsg::Events(vec![live]));
            }
            Err(e) => tracing::error!("admitting an ephemeral event failed: {e}"),
        }
        return;
    }
    // Derived and compressed here, on the worker pool, rather than on the
    // one writer.
    let admitted = match shared.store.admit(record, json) {
        Ok(admitted) => admitted,
        Err(e) => {
            tracing::error!("admitting an event failed: {e}");
            return ok_false(shared, conn, id, "internal", "error: internal error");
        }
    };
    let ticket = Ticket {
        received,
        reply: conn.outbox.clone().into(),
        admission,
    };
    let accepted = Accepted {
        event: admitted,
        publisher: conn.id,
        position: None,
        ticket,
    };
    // In a cluster the event goes to the stream; it reaches the writer
    // when this node applies the stream in order.
    if let Some(cluster) = &shared.cluster {
        return cluster.publish(accepted);
    }
    if shared
        .writer_tx
        .send(WriterMsg::Event(Box::new(accepted)))
        .is_err()
    {
        ok_false(
            shared,
            conn,
            id,
            "shutting_down",
            "error: relay is shutting down",
        );
    }
}
