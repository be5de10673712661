//! The typed inboxes between thread roles, and the per-connection outbox.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use nostrwire_event::message::write;
use nostrwire_event::{EventId, Filter, PublicKey};
use nostrwire_wire::transport::{self, BatchBuilder, SetHash, Version};

use crate::dictionaries::{self, Dictionaries};
use crate::store::AsStored;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;

use crate::memory::Short;
pub use crate::memory::{Budget, Held};
use crate::policy::KindGate;
use crate::search::Query;
use crate::store::Admitted;

/// Connection number, unique for the life of the process.
pub type ConnId = u64;

/// A frame queued for a connection's socket.
#[derive(Debug)]
pub enum Outgoing {
    /// A text frame's payload. UTF-8 by construction: every text message is
    /// written from `&str`s and ASCII by the `message::write` functions or
    /// `write_json`, so it is not checked again on its way out.
    Text(Vec<u8>),
    /// Text frames' payloads written one after another: a query's JSON
    /// results of one turn, queued at once.
    Texts(Texts),
    /// A binary frame (`nostrwire.v1` and `nostrwire.v2` connections).
    Binary(Vec<u8>),
    /// A control message (`OK`, `EOSE`, `CLOSED`, `NOTICE`, `AUTH`, a
    /// `COUNT` answer): a text frame's payload on text connections, a
    /// binary frame's on binary ones. Counted in the connection's
    /// [`CONTROL_ALLOWANCE`], not its budget.
    Control(Vec<u8>),
    /// A pong answering a ping, with the ping's payload (in the control
    /// allowance too).
    Pong(Vec<u8>),
    /// A ping, to learn whether a quiet client is still there.
    Ping,
    /// Close the connection with this status code after sending what is queued.
    Close(u16),
}

impl Outgoing {
    /// Bytes it counts for until it is written: in the connection's budget,
    /// and in its control allowance.
    pub fn room(&self) -> (usize, usize) {
        match self {
            Outgoing::Text(b) | Outgoing::Binary(b) => (b.len(), 0),
            Outgoing::Texts(texts) => (texts.bytes.len(), 0),
            Outgoing::Control(b) | Outgoing::Pong(b) => (0, b.len()),
            Outgoing::Ping | Outgoing::Close(_) => (0, 0),
        }
    }
}

/// Text messages in one buffer, each to be sent as its own frame.
#[derive(Debug, Default)]
pub struct Texts {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Texts {
    /// Adds `["EVENT",<subscription_id>,<json>]`.
    pub fn push_event(&mut self, subscription_id: &str, json: &[u8]) {
        write::relay_event_json(&mut self.bytes, subscription_id, |o| {
            o.extend_from_slice(json)
        });
        self.ends.push(self.bytes.len());
    }

    /// Room for `messages` more messages of `bytes` in all, taken at once
    /// rather than grown into.
    pub fn reserve(&mut self, bytes: usize, messages: usize) {
        self.bytes.reserve(bytes);
        self.ends.reserve(messages);
    }

    /// Bytes of all the messages.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it holds no message.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The messages, in the order added.
    pub fn messages(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.bytes[s..e])
    }
}

/// Bytes of control messages (`OK`, `EOSE`, `CLOSED`, `NOTICE`, `AUTH`,
/// `COUNT` answers, pongs) a connection may leave unread outside its
/// budget, when the budget has no room for them (pongs always go here):
/// they are small, and they must reach a client whatever its budget or
/// the relay's holds, or a client above its share would be cut off by the
/// very answer that tells it so. They count in the relay's memory (never
/// refused by it); a client that leaves this much of them unread besides
/// is a slow reader and is cut off. One message is always taken when none
/// is waiting, however large.
pub const CONTROL_ALLOWANCE: usize = 16 << 10;

/// Close status: normal closure (RFC 6455 §7.4.1).
pub const CLOSE_NORMAL: u16 = 1000;
/// Close status: the relay is shutting down.
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Close status: the connection broke a policy (here: it did not read).
pub const CLOSE_POLICY: u16 = 1008;

/// Room a client frame takes in the queues between the socket and the
/// writer: relay-wide (`limits.ingest_queue_bytes`) and in the connection's
/// share, until the frame is handled (an event: until its `OK`). The socket
/// task waits for room before it reads on, so a client that sends faster
/// than the relay handles its messages stops being read rather than
/// buffered.
#[derive(Debug)]
pub struct Admission {
    _permits: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
}

impl Admission {
    /// Room held in the relay's and the connection's queues.
    pub fn new(relay: OwnedSemaphorePermit, connection: OwnedSemaphorePermit) -> Admission {
        Admission {
            _permits: Some((relay, connection)),
        }
    }

    /// Room in no queue, for events that did not come through a socket.
    pub fn none() -> Admission {
        Admission { _permits: None }
    }
}

/// Sends frames to one connection. What is queued counts against the
/// connection's [`Budget`]: a client that does not read is cut off instead
/// of growing the relay's memory.
///
/// It also knows the connection's transport: NIP-01 JSON in text frames,
/// `nostrwire.v1` binary frames, or `nostrwire.v2` batches of records as
/// stored (`spec/transport.md`), so every stage sends the same calls and
/// the outbox picks the encoding.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: UnboundedSender<Outgoing>,
    queued: Arc<AtomicUsize>,
    dead: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
    /// When the socket last took queued bytes (or, with nothing taken
    /// yet, when the connection opened): milliseconds since `opened`.
    progress: Arc<AtomicU64>,
    opened: Instant,
    budget: Arc<Budget>,
    /// Its control messages' room ([`CONTROL_ALLOWANCE`]), outside the
    /// budget.
    control: Arc<Budget>,
    /// How much of the results its queries find they render while they
    /// scan: a quarter of the budget, a quota rather than memory (what is
    /// rendered is counted in the budget as it is found), so scans never
    /// crowd out the queue.
    scan_budget: Arc<Budget>,
    transport: Transport,
}

/// A connection's transport, as negotiated.
#[derive(Clone, Debug)]
pub enum Transport {
    /// NIP-01 JSON in text frames.
    Json,
    /// `nostrwire.v1`: one binary frame per event, uncompressed records.
    V1,
    /// `nostrwire.v2`: batches of records as stored.
    V2(Arc<V2>),
}

impl Transport {
    /// The transport for a negotiated version (`None`: JSON).
    pub fn new(version: Option<Version>, dictionaries: &Arc<Dictionaries>) -> Transport {
        match version {
            None => Transport::Json,
            Some(Version::V1) => Transport::V1,
            Some(Version::V2) => Transport::V2(Arc::new(V2 {
                dictionaries: dictionaries.clone(),
                held: AtomicU64::new(0),
            })),
        }
    }
}

/// What a `nostrwire.v2` connection holds.
#[derive(Debug)]
pub struct V2 {
    dictionaries: Arc<Dictionaries>,
    /// Tag of the relay's current set when the client last said it holds
    /// it (0: it holds none the relay compresses with).
    held: AtomicU64,
}

impl V2 {
    /// Which stored records the client can be sent as stored: those
    /// compressed without a dictionary always, every one when it holds the
    /// relay's current set. A store keeps one set for good, so a record's
    /// dictionary is the current set's (or none).
    pub fn as_stored(&self) -> AsStored {
        let held = self.held.load(Ordering::Acquire);
        if held != 0 && held == self.dictionaries.current_tag() {
            AsStored::Always
        } else {
            AsStored::WithoutDictionary
        }
    }

    /// The client named the sets it holds (`0x08`): only the relay's
    /// current set counts.
    pub fn hold(&self, sets: &[SetHash]) {
        let held = match self.dictionaries.current() {
            Some(current) if sets.contains(&current) => dictionaries::tag(&current),
            _ => 0,
        };
        self.held.store(held, Ordering::Release);
    }
}

impl crate::memory::Member for Outbox {
    fn holding(&self) -> usize {
        self.budget.used() + self.control.used()
    }

    fn unread(&self) -> usize {
        self.queued()
    }

    fn idle_for(&self) -> std::time::Duration {
        let last = std::time::Duration::from_millis(self.progress.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }

    fn is_gone(&self) -> bool {
        self.is_dead()
    }

    fn cut_off(&self) {
        Outbox::cut_off(self);
    }
}

impl Outbox {
    /// An outbox feeding `tx`, its queue counted in `budget`, encoding for
    /// `transport`.
    pub fn new(tx: UnboundedSender<Outgoing>, budget: Arc<Budget>, transport: Transport) -> Outbox {
        Outbox {
            tx,
            queued: Arc::new(AtomicUsize::new(0)),
            dead: Arc::new(AtomicBool::new(false)),
            cut: Arc::new(AtomicBool::new(false)),
            progress: Arc::new(AtomicU64::new(0)),
            opened: Instant::now(),
            control: Budget::new(CONTROL_ALLOWANCE, budget.relay().cloned()),
            scan_budget: Budget::new(budget.cap() / 4, None),
            budget,
            transport,
        }
    }

    /// How much of their results the connection's queries may render
    /// while they scan (a quarter of its budget; a quota, taken as matches
    /// are found: the memory they hold is counted in the budget).
    pub fn scan_budget(&self) -> &Arc<Budget> {
        &self.scan_budget
    }

    /// The connection's memory budget.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// Whether the connection speaks the binary transport (either version).
    pub fn is_binary(&self) -> bool {
        !matches!(self.transport, Transport::Json)
    }

    /// The connection's `nostrwire.v2` state, if it speaks version 2.
    pub fn v2(&self) -> Option<&V2> {
        match &self.transport {
            Transport::V2(v2) => Some(v2),
            _ => None,
        }
    }

    /// Which stored records its queries return as stored.
    pub fn as_stored(&self) -> AsStored {
        self.v2().map_or(AsStored::Never, V2::as_stored)
    }

    /// Queues a finished `nostrwire.v2` frame (a batch, the dictionary set).
    pub fn send_frame(&self, frame: Vec<u8>) -> bool {
        self.queue(frame.len(), Outgoing::Binary(frame))
    }

    /// [`Outbox::send_frame`] for a batch of the connection's own stored
    /// results (as [`Outbox::send_result`]).
    pub fn send_results_frame(&self, frame: Vec<u8>) -> bool {
        self.queue_as(frame.len(), Outgoing::Binary(frame), true)
    }

    /// Queues a turn of the connection's own stored results as JSON text
    /// messages (as [`Outbox::send_result`] queues one).
    pub fn send_results_texts(&self, texts: Texts) -> bool {
        self.queue_as(texts.len(), Outgoing::Texts(texts), true)
    }

    /// Queues live events for a subscription: one batch on a
    /// `nostrwire.v2` connection (each event in its stored form when the
    /// client can read it, compressed once when it was admitted), one
    /// message per event otherwise.
    pub fn send_live(&self, subscription_id: &str, events: &[Arc<LiveEvent>]) -> bool {
        let Some(v2) = self.v2() else {
            return events
                .iter()
                .all(|e| self.send_event(subscription_id, e.event.json(), e.event.record()));
        };
        let as_stored = v2.as_stored();
        let mut batch = BatchBuilder::new(subscription_id, transport::BATCH_TARGET_BYTES);
        for e in events {
            let record = match e.event.stored() {
                Some(stored) if as_stored.keeps(stored) => stored,
                _ => e.event.record(),
            };
            if !batch.fits(record.len()) {
                let full = std::mem::replace(
                    &mut batch,
                    BatchBuilder::new(subscription_id, transport::BATCH_TARGET_BYTES),
                );
                if !self.send_frame(full.finish()) {
                    return false;
                }
            }
            batch.push(record);
        }
        batch.is_empty() || self.send_frame(batch.finish())
    }

    fn queue(&self, n: usize, frame: Outgoing) -> bool {
        self.queue_as(n, frame, false)
    }

    /// Queues `frame`. What does not fit the connection's budget cuts it
    /// off. What does not fit the relay's (the connection holds more than
    /// its share of a spent budget) is queued all the same if `result` (a
    /// stored result, which the query sends only while the connection's
    /// queue is short, and whose room its results held) or if the client
    /// reads what it is sent; it cuts off only a client that leaves its
    /// output unread.
    fn queue_as(&self, n: usize, frame: Outgoing, result: bool) -> bool {
        if self.dead.load(Ordering::Relaxed) {
            return false;
        }
        let taken = match self.budget.take(n) {
            Ok(()) => Ok(()),
            Err(Short::Relay) if result => {
                self.budget.take_anyway(n);
                Ok(())
            }
            Err(Short::Relay) if self.is_reading() => self.budget.take_within(n),
            Err(short) => Err(short),
        };
        if taken.is_err() {
            self.cut_off();
            return false;
        }
        self.enqueue(n, frame)
    }

    /// Queues a control message's frame payload: in the connection's
    /// budget while it has room (as for a client that reads, whatever the
    /// relay's budget says), else in its control allowance. Refused, and
    /// the connection cut off, only when the client left
    /// [`CONTROL_ALLOWANCE`] of them unread besides.
    fn queue_answer(&self, payload: Vec<u8>) -> bool {
        if self.dead.load(Ordering::Relaxed) {
            return false;
        }
        let n = payload.len();
        let in_budget = match self.budget.take(n) {
            Ok(()) => true,
            Err(Short::Relay) if self.is_reading() => self.budget.take_within(n).is_ok(),
            Err(_) => false,
        };
        if !in_budget {
            return self.queue_control(Outgoing::Control(payload));
        }
        match self.is_binary() {
            true => self.enqueue(n, Outgoing::Binary(payload)),
            false => self.enqueue(n, Outgoing::Text(payload)),
        }
    }

    /// Queues `frame` (a control message or a pong) in the control
    /// allowance, as [`Outgoing::room`] counts it: refused, and the
    /// connection cut off, only when the client left
    /// [`CONTROL_ALLOWANCE`] of them unread.
    fn queue_control(&self, frame: Outgoing) -> bool {
        if self.dead.load(Ordering::Relaxed) {
            return false;
        }
        let (_, n) = frame.room();
        if self.control.take_within(n).is_err() {
            if self.control.used() > 0 {
                self.cut_off();
                return false;
            }
            // Nothing of the allowance waits: one message, however large.
            self.control.take_anyway(n);
        }
        self.enqueue(n, frame)
    }

    fn enqueue(&self, n: usize, frame: Outgoing) -> bool {
        // Unread output counts from when it was queued: a client that
        // read everything and then had nothing to read is not idle.
        if self.queued.fetch_add(n, Ordering::Relaxed) == 0 {
            self.progress
                .store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        self.tx.send(frame).is_ok()
    }

    /// Whether the client takes what it is sent: nothing of it waits, or
    /// it took some within the last half second.
    pub fn is_reading(&self) -> bool {
        use crate::memory::Member;
        self.queued() == 0 || self.idle_for() < crate::memory::NOT_READING
    }

    /// Queues a control message given as JSON text (`CLOSED`, `NOTICE`,
    /// `AUTH`, a `COUNT` answer, `NEG-ERR`; a `0x00` frame on binary
    /// connections): in the budget while it has room, else in the
    /// control allowance ([`CONTROL_ALLOWANCE`]), so it reaches the client
    /// whatever its budget and the relay's hold.
    pub fn send_control(&self, json: Vec<u8>) -> bool {
        if self.is_binary() {
            let mut frame = Vec::with_capacity(json.len() + 1);
            transport::write_json(&mut frame, &json);
            return self.queue_answer(frame);
        }
        self.queue_answer(json)
    }

    /// Queues a NIP-01 message given as JSON text (UTF-8, as the message
    /// writers produce it; a `0x00` frame on binary connections) in the
    /// connection's budget (`NEG-MSG`; control messages go by
    /// [`Outbox::send_control`]); false if the connection is gone or was
    /// cut off.
    pub fn send(&self, json: Vec<u8>) -> bool {
        if self.is_binary() {
            let mut frame = Vec::with_capacity(json.len() + 1);
            transport::write_json(&mut frame, &json);
            return self.queue(frame.len(), Outgoing::Binary(frame));
        }
        self.queue(json.len(), Outgoing::Text(json))
    }

    /// Queues an event for a subscription: `json` on text connections,
    /// `record` (nwb; on `nostrwire.v2`, as the client may be sent it) on
    /// binary ones, a batch of one on `nostrwire.v2`. Only the one the
    /// transport needs has to be filled in.
    pub fn send_event(&self, subscription_id: &str, json: &[u8], record: &[u8]) -> bool {
        self.event_as(subscription_id, json, record, false)
    }

    /// [`Outbox::send_event`] for a stored result of the connection's own
    /// query: when the relay's budget is spent it does not cut the
    /// connection off (the query sends results only while its queue is
    /// short, and their room was held by its results).
    pub fn send_result(&self, subscription_id: &str, json: &[u8], record: &[u8]) -> bool {
        self.event_as(subscription_id, json, record, true)
    }

    fn event_as(&self, subscription_id: &str, json: &[u8], record: &[u8], result: bool) -> bool {
        if self.v2().is_some() {
            let mut batch = BatchBuilder::new(subscription_id, 0);
            batch.push(record);
            let frame = batch.finish();
            return self.queue_as(frame.len(), Outgoing::Binary(frame), result);
        }
        if self.is_binary() {
            let mut frame = Vec::new();
            transport::write_relay_event(&mut frame, subscription_id, record);
            return self.queue_as(frame.len(), Outgoing::Binary(frame), result);
        }
        let mut out = Vec::with_capacity(json.len() + subscription_id.len() + 16);
        write::relay_event_json(&mut out, subscription_id, |o| o.extend_from_slice(json));
        self.queue_as(out.len(), Outgoing::Text(out), result)
    }

    /// Queues an `OK` (a control message).
    pub fn send_ok(&self, id: &EventId, accepted: bool, message: &str) -> bool {
        if self.is_binary() {
            let mut frame = Vec::with_capacity(34 + message.len());
            transport::write_ok(&mut frame, id, accepted, message);
            return self.queue_answer(frame);
        }
        let mut out = Vec::with_capacity(100 + message.len());
        write::ok(&mut out, id, accepted, message);
        self.queue_answer(out)
    }

    /// Queues an `EOSE` (a control message).
    pub fn send_eose(&self, subscription_id: &str) -> bool {
        if self.is_binary() {
            let mut frame = Vec::with_capacity(1 + subscription_id.len());
            transport::write_eose(&mut frame, subscription_id);
            return self.queue_answer(frame);
        }
        let mut out = Vec::new();
        write::eose(&mut out, subscription_id);
        self.queue_answer(out)
    }

    /// Closes a connection that does not read what it asked for: what is
    /// queued is dropped, and the socket task sends [`Outbox::cut_off_notice`]
    /// and a close frame, then closes the socket.
    pub fn cut_off(&self) {
        if self.cut.swap(true, Ordering::Relaxed) {
            return;
        }
        self.dead.store(true, Ordering::Relaxed);
        // Wakes the socket task, which drops the queue.
        let _ = self.tx.send(Outgoing::Close(CLOSE_POLICY));
    }

    /// True once the connection was cut off.
    pub fn is_cut_off(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    /// The NOTICE a connection that is cut off gets, framed for its transport.
    pub fn cut_off_notice(&self) -> Outgoing {
        let mut notice = Vec::new();
        write::notice(
            &mut notice,
            "error: connection closed: too much unread data (slow reader)",
        );
        if self.is_binary() {
            let mut frame = Vec::new();
            transport::write_json(&mut frame, &notice);
            Outgoing::Binary(frame)
        } else {
            Outgoing::Text(notice)
        }
    }

    /// Above this many queued bytes, stored results wait for the
    /// connection to read (a quarter of its budget, so live events and
    /// answers still fit).
    pub fn high_water(&self) -> usize {
        self.budget.cap() / 4
    }

    /// Asks the socket task to close the connection after what is queued
    /// (status 1000, normal closure).
    pub fn close(&self) {
        self.close_with(CLOSE_NORMAL);
    }

    /// Asks the socket task to close the connection after what is queued,
    /// with an RFC 6455 status code.
    pub fn close_with(&self, code: u16) {
        if !self.dead.swap(true, Ordering::Relaxed) {
            let _ = self.tx.send(Outgoing::Close(code));
        }
    }

    /// Queues a ping.
    pub fn ping(&self) {
        if !self.dead.load(Ordering::Relaxed) {
            let _ = self.tx.send(Outgoing::Ping);
        }
    }

    /// Queues a pong (in the control allowance).
    pub fn pong(&self, payload: &[u8]) {
        self.queue_control(Outgoing::Pong(payload.to_vec()));
    }

    /// Called by the socket task after writing (or dropping) queued frames
    /// that counted for `room` ([`Outgoing::room`], summed).
    pub fn sent(&self, room: (usize, usize)) {
        let (budget, control) = room;
        self.queued.fetch_sub(budget + control, Ordering::Relaxed);
        self.budget.give_back(budget);
        self.control.give_back(control);
        self.progress
            .store(self.opened.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Bytes queued now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// True once the connection was cut off or closed.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed) || self.tx.is_closed()
    }
}

/// A connection as the worker threads see it.
#[derive(Debug)]
pub struct Conn {
    /// Its number.
    pub id: ConnId,
    /// Where its replies go.
    pub outbox: Outbox,
    /// The client's address (plugin `sourceInfo`, logs).
    pub ip: IpAddr,
    /// The address its per-address limits and turns count it under: `ip`,
    /// or its IPv6 prefix (`relay.ipv6_prefix`).
    pub address: IpAddr,
    /// The NIP-42 challenge (empty when AUTH is off), sent on connect or
    /// with the first `auth-required:` answer (`auth.challenge_on_connect`).
    pub challenge: String,
    /// Whether the challenge went out.
    challenge_sent: AtomicBool,
    /// The relay's URL as this client reached it (`relay.url`, or the
    /// `Host` header and path of its upgrade request): an AUTH event's
    /// `relay` tag must name it.
    pub url: String,
    /// Pubkeys this connection authenticated as. Written only by the
    /// connection's ingest worker; read when a subscription is opened.
    pub authed: RwLock<Vec<PublicKey>>,
    /// Open subscriptions, as the ingest worker last counted them (a
    /// connection with none is idle when it sends nothing).
    pub subscriptions: AtomicUsize,
}

impl Conn {
    /// A connection with nothing authenticated yet.
    pub fn new(
        id: ConnId,
        outbox: Outbox,
        ip: IpAddr,
        address: IpAddr,
        challenge: String,
        url: String,
    ) -> Conn {
        Conn {
            id,
            outbox,
            ip,
            address,
            challenge,
            challenge_sent: AtomicBool::new(false),
            url,
            authed: RwLock::default(),
            subscriptions: AtomicUsize::new(0),
        }
    }

    /// The authenticated pubkeys, oldest first.
    pub fn authed(&self) -> Vec<PublicKey> {
        self.authed.read().expect("auth lock").clone()
    }

    /// Whether the connection authenticated as `pubkey`.
    pub fn is_authed_as(&self, pubkey: &PublicKey) -> bool {
        self.authed.read().expect("auth lock").contains(pubkey)
    }

    /// Sends the NIP-42 challenge unless it went out already (or AUTH is off).
    pub fn send_challenge(&self) {
        if self.challenge.is_empty() || self.challenge_sent.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut out = Vec::new();
        write::auth_challenge(&mut out, &self.challenge);
        self.outbox.send_control(out);
    }

    /// Before an `auth-required:` answer: the client needs the challenge to
    /// act on it.
    pub fn before_answer(&self, message: &str) {
        if message.starts_with("auth-required:") {
            self.send_challenge();
        }
    }
}

/// Inbox of an ingest worker. All messages of one connection go to the same
/// worker, so they are handled in order.
#[derive(Debug)]
pub enum IngestMsg {
    /// A frame from a client, when the socket layer read it, and the room
    /// it holds in the queues.
    Frame(Arc<Conn>, Vec<u8>, Instant, Admission),
    /// The connection (from this address) closed.
    Closed(ConnId, std::net::IpAddr),
    /// A NIP-77 sync session's items were collected by the query pool.
    SyncReady(SyncItems),
    /// Finish and exit.
    Shutdown,
}

/// The (created_at, id) items of a NEG-OPEN's filter, on their way back to
/// the connection's ingest worker, which owns the session.
#[derive(Debug)]
pub struct SyncItems {
    /// The connection.
    pub conn: Arc<Conn>,
    /// The NEG-OPEN's job (its id is the session id).
    pub sub: Arc<Sub>,
    /// The client's initial negentropy message.
    pub message: Vec<u8>,
    /// Matching events (at most `max_sync_items`), or the NEG-ERR reason.
    pub items: Result<Vec<(u64, EventId)>, String>,
}

/// An event accepted for storage, as the store's writer receives it.
pub type Accepted = nostrwire_store::Submission<Ticket>;

/// What the writer hands back with an accepted event's verdict.
#[derive(Debug)]
pub struct Ticket {
    /// When the socket layer read the EVENT frame (for the write latency).
    pub received: Instant,
    /// Who to answer.
    pub reply: Reply,
    /// The room its frame holds until the `OK`.
    pub admission: Admission,
}

/// Who the writer answers for an event: the connection that published it;
/// in a cluster, nobody (another node's event) or every client of this node
/// that published it while it was on its way.
#[derive(Clone, Debug, Default)]
pub struct Reply(Vec<Outbox>);

impl Reply {
    /// Nobody to answer.
    pub fn nobody() -> Reply {
        Reply(Vec::new())
    }

    /// Answers these clients too.
    pub fn join(&mut self, other: Reply) {
        self.0.extend(other.0);
    }

    /// Sends `OK` to each.
    pub fn send_ok(&self, id: &EventId, accepted: bool, message: &str) {
        for outbox in &self.0 {
            outbox.send_ok(id, accepted, message);
        }
    }
}

impl From<Outbox> for Reply {
    fn from(outbox: Outbox) -> Reply {
        Reply(vec![outbox])
    }
}

/// Inbox of the store's writer.
pub type WriterMsg = nostrwire_store::Write<Ticket>;

/// An event on its way to live subscribers.
#[derive(Debug)]
pub struct LiveEvent {
    /// Storage serial, or 0 for ephemeral events.
    pub serial: u64,
    /// The event: its record for matching, its JSON for sending.
    pub event: Admitted,
}

/// Where a subscription stands.
#[derive(Debug)]
pub enum Phase {
    /// Stored events are still being sent; live matches wait here.
    Pending(Vec<Arc<LiveEvent>>),
    /// EOSE was sent; live matches go straight out, except these serials:
    /// stored results already sent that the fan-out had not yet seen when
    /// the subscription went live (it would otherwise send them twice).
    Live(Vec<u64>),
}

/// One REQ subscription.
#[derive(Debug)]
pub struct Sub {
    /// The client's address: the query pool's turns go by address first.
    pub address: std::net::IpAddr,
    /// The connection.
    pub conn: ConnId,
    /// Subscription id chosen by the client.
    pub id: String,
    /// Its filters (OR).
    pub filters: Vec<Filter>,
    /// Each filter's NIP-50 search, parsed once when the request came.
    pub searches: Vec<Option<Query>>,
    /// Where matches go.
    pub outbox: Outbox,
    /// Set by CLOSE, replacement or disconnect.
    pub cancelled: AtomicBool,
    /// Who may see restricted kinds through it (`None`: its filters cannot
    /// match one).
    pub gate: Option<Arc<KindGate>>,
    /// Pending or live.
    pub phase: Mutex<Phase>,
    /// What it holds of the connection's budget, given back when the last
    /// stage lets go of it.
    pub held: Held,
}

impl Sub {
    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || self.outbox.is_dead()
    }
}

/// Inbox of the fan-out thread. Subscriptions come and go through
/// [`crate::fanout::Pending`], not here.
#[derive(Debug)]
pub enum FanoutMsg {
    /// Apply the subscription changes waiting now (many wait, or the
    /// thread slept).
    Apply,
    /// New events (stored, or ephemeral with serial 0).
    Events(Vec<Arc<LiveEvent>>),
    /// Exit.
    Shutdown,
}

/// What a query job computes.
#[derive(Debug)]
pub enum QueryKind {
    /// REQ: stored events, EOSE, then live.
    Req,
    /// COUNT (NIP-45).
    Count,
    /// NEG-OPEN (NIP-77): collect (created_at, id) of every match.
    Sync {
        /// The client's initial negentropy message.
        message: Vec<u8>,
        /// The connection, for handing the items back to its ingest worker.
        conn: Arc<Conn>,
    },
}

/// The outbox in the relay's memory budget: what its queue holds counts,
/// and the budget cuts off the largest holders that do not read.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Member, RelayMemory, Short};
    use std::time::Duration;

    /// Reading stops counting as such after this long (memory.rs).
    const NOT_READING: Duration = Duration::from_millis(500);

    fn outbox(budget: Arc<Budget>) -> (Outbox, tokio::sync::mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Outbox::new(tx, budget, Transport::Json), rx)
    }

    fn member(o: &Outbox) -> Arc<dyn Member> {
        Arc::new(o.clone())
    }

    #[test]
    fn when_the_relay_budget_is_spent_only_connections_within_their_share_are_served() {
        let relay = RelayMemory::new(4 << 20);
        let big = Budget::new(16 << 20, Some(relay.clone()));
        let small = Budget::new(16 << 20, Some(relay.clone()));
        let (big_out, _rx1) = outbox(big.clone());
        let (small_out, _rx2) = outbox(small.clone());
        let _m1 = relay.join(1, member(&big_out));
        let _m2 = relay.join(2, member(&small_out));
        // Two connections: a fair share is 2 MiB.
        assert!(big.take(4 << 20).is_ok());
        assert!(relay.is_short());
        assert!(big.must_wait());
        assert_eq!(big.take(1 << 10), Err(Short::Relay), "above its share");
        assert!(!small.must_wait());
        assert!(small.take(1 << 20).is_ok(), "within its share: overdraws");
        assert_eq!(small.take(2 << 20), Err(Short::Relay), "past its share");
        assert_eq!(relay.used(), 5 << 20);
    }

    #[test]
    fn reclaiming_cuts_off_the_largest_holder_that_does_not_read() {
        let relay = RelayMemory::new(4 << 20);
        let mut members = Vec::new();
        let mut receivers = Vec::new();
        let mut outboxes = Vec::new();
        for (id, bytes) in [(1u64, 3usize << 20), (2, 1 << 20), (3, 0)] {
            let budget = Budget::new(16 << 20, Some(relay.clone()));
            let (out, rx) = outbox(budget.clone());
            members.push(relay.join(id, member(&out)));
            receivers.push(rx);
            if bytes > 0 {
                // Queued and never taken: a reader that stopped.
                assert!(out.send(vec![b' '; bytes]));
            }
            outboxes.push(out);
        }
        std::thread::sleep(NOT_READING + Duration::from_millis(20));
        // The third connection needs room: the first gives way.
        assert!(outboxes[2].budget().take(1 << 20).is_ok());
        assert!(outboxes[0].is_cut_off(), "the largest non-reader");
        assert!(!outboxes[1].is_cut_off(), "within its share");
        assert!(!outboxes[2].is_cut_off());
        assert_eq!(relay.cut_offs.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn answers_reach_a_connection_above_its_share_of_a_spent_budget() {
        let relay = RelayMemory::new(4 << 20);
        let big = Budget::new(16 << 20, Some(relay.clone()));
        let other = Budget::new(16 << 20, Some(relay.clone()));
        let (out, mut rx) = outbox(big.clone());
        let (other_out, _rx2) = outbox(other);
        let _m1 = relay.join(1, member(&out));
        let _m2 = relay.join(2, member(&other_out));
        assert!(big.take(4 << 20).is_ok());
        assert!(big.must_wait(), "above its share of a spent budget");
        let mut closed = Vec::new();
        write::closed(
            &mut closed,
            "s",
            "rate-limited: the relay is short of memory",
        );
        assert!(out.send_control(closed.clone()), "CLOSED");
        assert!(out.send_eose("s"), "EOSE");
        assert!(out.send_ok(&EventId::from_bytes([7; 32]), true, ""), "OK");
        assert!(!out.is_cut_off(), "told, not cut off");
        let Ok(Outgoing::Text(first)) = rx.try_recv() else {
            panic!("no answer queued");
        };
        assert_eq!(first, closed);
    }

    #[test]
    fn a_client_that_leaves_its_answers_unread_is_cut_off() {
        // Its own budget is full: answers go to the control allowance.
        let budget = Budget::new(1 << 10, None);
        let (out, _rx) = outbox(budget.clone());
        assert!(budget.take(1 << 10).is_ok());
        let mut sent = 0;
        while out.send_eose("a subscription") {
            sent += 1;
            assert!(sent < CONTROL_ALLOWANCE, "never cut off");
        }
        assert!(out.is_cut_off());
        let eose = r#"["EOSE","a subscription"]"#.len();
        assert_eq!(
            sent,
            CONTROL_ALLOWANCE / eose,
            "the allowance, then cut off"
        );
        // One the client takes frees its room.
        let (out, _rx) = outbox(Budget::new(0, None));
        assert!(out.send_eose("x"));
        out.sent((0, r#"["EOSE","x"]"#.len()));
        assert_eq!(out.queued(), 0);
        assert_eq!(out.control.used(), 0);
    }

    #[test]
    fn leaving_gives_the_share_back_to_the_others() {
        let relay = RelayMemory::new(8 << 20);
        let b = Budget::new(16 << 20, None);
        let (o1, _r1) = outbox(b.clone());
        let (o2, _r2) = outbox(b);
        let m1 = relay.join(1, member(&o1));
        let _m2 = relay.join(2, member(&o2));
        assert_eq!(relay.fair_share(), 4 << 20);
        drop(m1);
        assert_eq!(relay.fair_share(), 8 << 20);
    }
}
