//! Admitted events → the stream. One task publishes them in the order the
//! ingest workers hand them over (so a connection's events keep their
//! order), each with its id as the message id; the publisher's `OK` waits
//! here, keyed by event id, until the stream's reader (`apply.rs`) hands
//! the event to the writer, which answers with the store's verdict. A
//! publish that JetStream does not acknowledge in time is refused with
//! `error: cluster unavailable (…)`.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use nostrwire_event::EventId;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::{events_subject, State, NODE_HEADER};
use crate::msg::Accepted;
use crate::store::{Presence, Verdict};
use crate::writer::STORAGE_ERROR;

/// Pause before publishing again an event the stream did not acknowledge.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// One publisher waiting for its event.
#[derive(Debug)]
struct Waiting {
    token: u64,
    accepted: Accepted,
    /// When it is answered at the latest.
    deadline: Instant,
    /// Whether the stream has acknowledged the event.
    acknowledged: bool,
    /// Why the last attempt at publishing it failed.
    failure: Option<String>,
}

/// The publishers of this node waiting for their events, and how far the
/// stream has been read and handed to the writer. One lock for all: an
/// acknowledgement that arrives after the reader passed its sequence finds
/// out here that nobody else will answer.
///
/// Each wait is also filed by its deadline: one timer ([`run`]) answers
/// the waits that reach theirs, whatever the number of events in flight.
#[derive(Debug)]
pub(super) struct Waiters {
    by_id: HashMap<EventId, Vec<Waiting>>,
    deadlines: BTreeSet<(Instant, u64, EventId)>,
    next_token: u64,
    /// The highest stream sequence read (handed to the writer, or passed
    /// over as not an event).
    pub(super) forwarded: u64,
    /// The highest stream sequence handed to the writer.
    pub(super) handed: u64,
}

/// A wait that reached its deadline, to be answered.
#[derive(Debug)]
pub(super) struct Expired {
    accepted: Accepted,
    acknowledged: bool,
    failure: Option<String>,
}

impl Waiters {
    pub(super) fn new(applied: u64) -> Waiters {
        Waiters {
            by_id: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_token: 0,
            forwarded: applied,
            handed: applied,
        }
    }

    /// The stream is read again after `applied`.
    pub(super) fn rewind(&mut self, applied: u64) {
        self.forwarded = applied;
        self.handed = applied;
    }

    fn insert(&mut self, accepted: Accepted, deadline: Instant) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        let id = *accepted.event.id();
        self.deadlines.insert((deadline, token, id));
        self.by_id.entry(id).or_default().push(Waiting {
            token,
            accepted,
            deadline,
            acknowledged: false,
            failure: None,
        });
        token
    }

    fn find(&mut self, id: &EventId, token: u64) -> Option<&mut Waiting> {
        self.by_id
            .get_mut(id)?
            .iter_mut()
            .find(|waiting| waiting.token == token)
    }

    /// Takes one publisher's wait back.
    fn remove(&mut self, id: &EventId, token: u64) -> Option<Waiting> {
        let waiting = self.by_id.get_mut(id)?;
        let at = waiting.iter().position(|w| w.token == token)?;
        let removed = waiting.swap_remove(at);
        if waiting.is_empty() {
            self.by_id.remove(id);
        }
        self.deadlines.remove(&(removed.deadline, token, *id));
        Some(removed)
    }

    /// Everyone on this node waiting for `id`, as one event for the writer
    /// (the first publisher's admitted event, every publisher answered).
    pub(super) fn take(&mut self, id: &EventId) -> Option<Accepted> {
        let mut waiting = self.by_id.remove(id)?.into_iter();
        let first = waiting.next()?;
        self.deadlines.remove(&(first.deadline, first.token, *id));
        let mut accepted = first.accepted;
        for other in waiting {
            self.deadlines.remove(&(other.deadline, other.token, *id));
            accepted.ticket.reply.join(other.accepted.ticket.reply);
        }
        Some(accepted)
    }

    /// The earliest deadline of a wait.
    fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(deadline, _, _)| *deadline)
    }

    /// Takes the waits whose deadline is `now` or earlier.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<Expired> {
        let mut expired = Vec::new();
        while let Some(&(deadline, token, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            match self.remove(&id, token) {
                Some(waiting) => expired.push(Expired {
                    accepted: waiting.accepted,
                    acknowledged: waiting.acknowledged,
                    failure: waiting.failure,
                }),
                None => {
                    self.deadlines.pop_first();
                }
            }
        }
        expired
    }

    /// Waits in flight (each filed once by its deadline).
    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        (
            self.by_id.values().map(Vec::len).sum(),
            self.deadlines.len(),
        )
    }
}

/// What became of one attempt at publishing an event.
struct Attempt {
    id: EventId,
    token: u64,
    payload: Bytes,
    deadline: Instant,
    /// The stream sequence JetStream acknowledged, or why it did not.
    outcome: Result<u64, String>,
}

type Pending<T> = FuturesUnordered<Pin<Box<dyn Future<Output = T> + Send>>>;

/// Publishes the events the ingest workers hand over until the node
/// stops. (Ephemeral events take a path of their own, `ephemeral.rs`.)
/// The acknowledgements awaited, the answers to second copies and the
/// deadlines are all kept here, in one task, however many events are in
/// flight.
pub(super) async fn run(state: Arc<State>, mut inbox: UnboundedReceiver<Accepted>) {
    let subject = events_subject(&state.settings.stream);
    let mut attempts: Pending<Attempt> = FuturesUnordered::new();
    let mut answers: Pending<()> = FuturesUnordered::new();
    loop {
        let next_deadline = lock(&state).next_deadline();
        tokio::select! {
            accepted = inbox.recv() => {
                let Some(accepted) = accepted else {
                    return;
                };
                if let Some(attempt) = publish_event(&state, &subject, accepted).await {
                    attempts.push(attempt);
                }
            }
            Some(attempt) = attempts.next() => {
                match confirm(&state, &subject, attempt) {
                    Confirmed::Retry(attempt) => attempts.push(attempt),
                    Confirmed::Answer(answer) => answers.push(answer),
                    Confirmed::Done => {}
                }
            }
            Some(()) = answers.next() => {}
            () = sleep_until(next_deadline), if next_deadline.is_some() => {
                expire(&state, Instant::now());
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline).await;
    }
}

/// Answers the waits that reached their deadline: `OK true` for an event
/// the stream acknowledged (this node has not applied it yet), a refusal
/// for one it did not.
fn expire(state: &State, now: Instant) {
    let expired = lock(state).expire(now);
    for wait in expired {
        if wait.acknowledged {
            answer_unapplied(wait.accepted);
        } else {
            let reason = wait.failure.unwrap_or_else(|| no_acknowledgement(state));
            refuse(state, wait.accepted, &reason);
        }
    }
}

fn no_acknowledgement(state: &State) -> String {
    format!(
        "no acknowledgement within {} ms",
        state.settings.publish_timeout_ms
    )
}

/// Hands the event to NATS; the attempt to await, or `None` when it was
/// answered already.
async fn publish_event(
    state: &Arc<State>,
    subject: &str,
    accepted: Accepted,
) -> Option<Pin<Box<dyn Future<Output = Attempt> + Send>>> {
    let id = *accepted.event.id();
    let Some(context) = state.context.get() else {
        refuse(state, accepted, "not connected to NATS");
        return None;
    };
    let payload = Bytes::copy_from_slice(accepted.event.record());
    // The client's clock: from the moment its message was read, not from
    // the moment this task got to it.
    let deadline = Instant::from_std(accepted.ticket.received) + state.publish_timeout();
    let token = lock(state).insert(accepted, deadline);
    match send(state, context, subject, &id, payload.clone(), deadline).await {
        Ok(ack) => Some(Box::pin(acknowledgement(id, token, payload, deadline, ack))),
        Err(reason) => {
            refuse_waiting(state, &id, token, &reason);
            None
        }
    }
}

/// Awaits JetStream's acknowledgement of one attempt, until the deadline.
async fn acknowledgement(
    id: EventId,
    token: u64,
    payload: Bytes,
    deadline: Instant,
    ack: PublishAckFuture,
) -> Attempt {
    let outcome = match tokio::time::timeout_at(deadline, ack).await {
        Ok(Ok(ack)) => Ok(ack.sequence),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(String::new()),
    };
    Attempt {
        id,
        token,
        payload,
        deadline,
        outcome,
    }
}

/// Publishes the event again after a pause.
async fn retry(state: Arc<State>, subject: String, attempt: Attempt) -> Attempt {
    tokio::time::sleep(RETRY_AFTER).await;
    let Some(context) = state.context.get() else {
        return Attempt {
            outcome: Err("not connected to NATS".into()),
            ..attempt
        };
    };
    let sent = send(
        &state,
        context,
        &subject,
        &attempt.id,
        attempt.payload.clone(),
        attempt.deadline,
    )
    .await;
    match sent {
        Ok(ack) => {
            acknowledgement(
                attempt.id,
                attempt.token,
                attempt.payload,
                attempt.deadline,
                ack,
            )
            .await
        }
        Err(reason) => Attempt {
            outcome: Err(reason),
            ..attempt
        },
    }
}

/// Hands one copy of the event to the NATS connection.
async fn send(
    state: &State,
    context: &jetstream::Context,
    subject: &str,
    id: &EventId,
    payload: Bytes,
    deadline: Instant,
) -> Result<PublishAckFuture, String> {
    let message = PublishMessage::build()
        .payload(payload)
        .message_id(id.to_hex())
        .header(NODE_HEADER, state.node.as_str());
    match tokio::time::timeout_at(deadline, context.send_publish(subject.to_string(), message))
        .await
    {
        Ok(Ok(ack)) => Ok(ack),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("NATS takes no more messages".into()),
    }
}

/// What follows an attempt.
enum Confirmed {
    /// Publish it again (the stream has no leader for a moment).
    Retry(Pin<Box<dyn Future<Output = Attempt> + Send>>),
    /// A second copy, answered with the store's verdict once applied.
    Answer(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// Answered, or left to the stream's reader or the deadline.
    Done,
}

/// Takes JetStream's answer to an attempt. An acknowledged event is
/// usually answered by the writer once the stream's reader hands it over
/// (or at its deadline, when the reader is late); this answers when the
/// stream did not take the event, or already held it (a duplicate within
/// the duplicate window) at a sequence the reader had passed. While the
/// stream has no leader the event is published again (the same message
/// id: JetStream keeps one copy) until the deadline.
fn confirm(state: &Arc<State>, subject: &str, attempt: Attempt) -> Confirmed {
    let (id, token, deadline) = (attempt.id, attempt.token, attempt.deadline);
    let sequence = match attempt.outcome {
        Ok(sequence) => sequence,
        Err(reason) => {
            let reason = if reason.is_empty() {
                no_acknowledgement(state)
            } else {
                reason
            };
            // A leader election takes a moment: try again while there is time.
            if Instant::now() + RETRY_AFTER * 2 >= deadline {
                refuse_waiting(state, &id, token, &reason);
                return Confirmed::Done;
            }
            let mut waiters = lock(state);
            let Some(waiting) = waiters.find(&id, token) else {
                return Confirmed::Done;
            };
            waiting.failure = Some(reason);
            drop(waiters);
            let attempt = Attempt {
                outcome: Ok(0),
                ..attempt
            };
            return Confirmed::Retry(Box::pin(retry(state.clone(), subject.to_string(), attempt)));
        }
    };
    state.stream_last.fetch_max(sequence, Ordering::Relaxed);
    let passed = {
        let mut waiters = lock(state);
        if sequence <= waiters.forwarded {
            waiters.remove(&id, token)
        } else {
            if let Some(waiting) = waiters.find(&id, token) {
                waiting.acknowledged = true;
            }
            None
        }
    };
    match passed {
        Some(waiting) => {
            let Some(context) = state.context.get().cloned() else {
                answer_unapplied(waiting.accepted);
                return Confirmed::Done;
            };
            let state = state.clone();
            Confirmed::Answer(Box::pin(async move {
                let name = state.settings.stream.clone();
                let stream_end = async move {
                    let stream = context.get_stream(&name).await.ok()?;
                    Some(stream.cached_info().state.last_sequence)
                };
                answer_applied(&state, waiting.accepted, sequence, deadline, stream_end).await;
            }))
        }
        None => Confirmed::Done,
    }
}

/// The answer for an event the stream acknowledged and this node has not
/// applied by the publisher's deadline, with what is already certain: the
/// stream holds the event, so every node will apply it.
fn answer_unapplied(accepted: Accepted) {
    let id = accepted.event.id();
    tracing::debug!("event {id} acknowledged by the stream, not applied yet: OK sent");
    accepted.ticket.reply.send_ok(id, true, "");
}

/// Answers a publisher whose event the stream held before (at `sequence`),
/// once the writer reports the stream applied up to its end as of now
/// (`stream_end`, so a deletion that followed the event counts): the
/// verdict the store would give a second copy. A node still behind at the
/// deadline, or a stream that does not say where it ends by then, is
/// answered as for an event not yet applied.
async fn answer_applied(
    state: &State,
    accepted: Accepted,
    sequence: u64,
    deadline: Instant,
    stream_end: impl Future<Output = Option<u64>>,
) {
    let last = match tokio::time::timeout_at(deadline, stream_end).await {
        Ok(Some(last)) => last.max(sequence),
        Ok(None) => sequence,
        Err(_) => return answer_unapplied(accepted),
    };
    let mut applied = state.applied.subscribe();
    let caught_up = tokio::time::timeout_at(deadline, applied.wait_for(|&a| a >= last)).await;
    if !matches!(caught_up, Ok(Ok(_))) {
        return answer_unapplied(accepted);
    }
    let id = accepted.event.id();
    let verdict = match state.store.presence(id) {
        Ok(Presence::Stored) => Verdict::Duplicate,
        Ok(Presence::Deleted) => Verdict::Deleted,
        Ok(Presence::Absent) => Verdict::Superseded,
        Err(_) => return accepted.ticket.reply.send_ok(id, false, STORAGE_ERROR),
    };
    let (ok, message) = crate::writer::answer(&verdict);
    accepted.ticket.reply.send_ok(id, ok, message);
}

fn refuse_waiting(state: &State, id: &EventId, token: u64, reason: &str) {
    let waiting = lock(state).remove(id, token);
    if let Some(waiting) = waiting {
        refuse(state, waiting.accepted, reason);
    }
}

fn refuse(state: &State, accepted: Accepted, reason: &str) {
    state.refused.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        "event {} refused: cluster unavailable ({reason})",
        accepted.event.id()
    );
    accepted.ticket.reply.send_ok(
        accepted.event.id(),
        false,
        &format!("error: cluster unavailable ({reason})"),
    );
}

pub(super) fn lock(state: &State) -> std::sync::MutexGuard<'_, Waiters> {
    state.waiters.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nostrwire_event::{EventRef, Keys, Kind, SignedFields, Timestamp, UnsignedEvent};
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    use super::*;
    use crate::memory::Budget;
    use crate::msg::{Admission, Outbox, Outgoing, Reply, Ticket, Transport};
    use crate::store::{EventStore, LmdbStore, OpenOptions};

    /// A note published by a client of this node, and what it is sent.
    fn published(store: &dyn EventStore, n: u64) -> (Accepted, UnboundedReceiver<Outgoing>) {
        let keys = Keys::derive(7, n);
        let event = UnsignedEvent::new(
            &keys,
            Timestamp::new(crate::now()).unwrap(),
            Kind(1),
            Vec::new(),
            format!("note {n}"),
        )
        .sign(&keys);
        let json = event.to_json_bytes();
        let record = nostrwire_wire::encode_json_event(&EventRef::parse(&json).unwrap());
        let (tx, rx) = unbounded_channel();
        let outbox = Outbox::new(tx, Budget::new(1 << 20, None), Transport::Json);
        let accepted = Accepted {
            event: store.admit(record, json).unwrap(),
            publisher: 1,
            position: None,
            ticket: Ticket {
                received: std::time::Instant::now(),
                reply: Reply::from(outbox),
                admission: Admission::none(),
            },
        };
        (accepted, rx)
    }

    fn store(dir: &std::path::Path) -> Arc<dyn EventStore> {
        Arc::new(LmdbStore::open(dir, &OpenOptions::default()).unwrap())
    }

    /// The `OK` a client was sent, as text.
    fn ok(rx: &mut UnboundedReceiver<Outgoing>) -> Option<String> {
        match rx.try_recv().ok()? {
            Outgoing::Text(text) => Some(String::from_utf8(text).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn waits_are_kept_by_deadline_and_forgotten_once_taken() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let start = Instant::now();
        let second = |n: u64| start + Duration::from_secs(n);
        let mut waiters = Waiters::new(0);
        let (a, _) = published(&*store, 1);
        let (b, _) = published(&*store, 2);
        let (c, _) = published(&*store, 3);
        let (a_id, b_id, c_id) = (*a.event.id(), *b.event.id(), *c.event.id());
        let c_token = waiters.insert(c, second(3));
        waiters.insert(a, second(1));
        waiters.insert(b, second(2));
        assert_eq!(waiters.len(), (3, 3));
        assert_eq!(waiters.next_deadline(), Some(second(1)));
        // The reader hands b to the writer: its deadline goes with it.
        assert!(waiters.take(&b_id).is_some());
        assert_eq!(waiters.len(), (2, 2));
        assert!(waiters.expire(start).is_empty());
        let expired = waiters.expire(second(2));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].accepted.event.id(), &a_id);
        assert!(!expired[0].acknowledged);
        waiters.find(&c_id, c_token).unwrap().acknowledged = true;
        let expired = waiters.expire(second(10));
        assert_eq!(expired.len(), 1);
        assert!(expired[0].acknowledged);
        assert_eq!(waiters.len(), (0, 0));
        assert_eq!(waiters.next_deadline(), None);
    }

    #[tokio::test]
    async fn a_second_copy_is_answered_by_its_deadline_when_the_stream_does_not_say_where_it_ends()
    {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let state = super::super::State::for_tests(store.clone());
        let (accepted, mut rx) = published(&*store, 1);
        let id = *accepted.event.id();
        let deadline = Instant::now() + Duration::from_millis(50);
        // The stream's leader never answers; the node has applied the
        // event's sequence.
        state.applied.send_replace(5);
        let answered = tokio::time::timeout(
            Duration::from_secs(30),
            answer_applied(&state, accepted, 5, deadline, std::future::pending()),
        )
        .await;
        assert!(answered.is_ok(), "not answered by its deadline");
        let ok = ok(&mut rx).expect("an OK");
        assert_eq!(ok, format!(r#"["OK","{}",true,""]"#, id.to_hex()));
    }

    #[tokio::test]
    async fn the_one_timer_answers_what_reached_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let state = super::super::State::for_tests(store.clone());
        let now = Instant::now();
        let (acknowledged, mut acknowledged_rx) = published(&*store, 1);
        let (refused, mut refused_rx) = published(&*store, 2);
        let (later, mut later_rx) = published(&*store, 3);
        let (a_id, r_id) = (*acknowledged.event.id(), *refused.event.id());
        {
            let mut waiters = lock(&state);
            let token = waiters.insert(acknowledged, now);
            waiters.find(&a_id, token).unwrap().acknowledged = true;
            let token = waiters.insert(refused, now);
            waiters.find(&r_id, token).unwrap().failure = Some("no stream".into());
            waiters.insert(later, now + Duration::from_secs(60));
        }
        expire(&state, now);
        assert_eq!(
            ok(&mut acknowledged_rx).unwrap(),
            format!(r#"["OK","{}",true,""]"#, a_id.to_hex())
        );
        assert_eq!(
            ok(&mut refused_rx).unwrap(),
            format!(
                r#"["OK","{}",false,"error: cluster unavailable (no stream)"]"#,
                r_id.to_hex()
            )
        );
        assert_eq!(ok(&mut later_rx), None);
        assert_eq!(lock(&state).len(), (1, 1));
    }
}
