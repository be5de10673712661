//! Admitted events → the stream. One task publishes them in the order the
//! ingest workers hand them over (so a connection's events keep their
//! order), each with its id as the message id; the publisher's `OK` waits
//! here, keyed by event id, until the stream's reader (`apply.rs`) hands
//! the event to the writer, which answers with the store's verdict. A
//! publish that JetStream does not acknowledge in time is refused with
//! `error: cluster unavailable (…)`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use nostrwire_event::EventId;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{events_subject, State, NODE_HEADER};
use crate::msg::Accepted;
use crate::store::{Presence, Verdict};
use crate::writer::STORAGE_ERROR;

/// Pause before publishing again an event the stream did not acknowledge.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The publishers of this node waiting for their events, and how far the
/// stream has been handed to the writer. One lock for both: an
/// acknowledgement that arrives after the reader passed its sequence finds
/// out here that nobody else will answer.
#[derive(Debug)]
pub(super) struct Waiters {
    by_id: HashMap<EventId, Vec<(u64, Accepted)>>,
    next_token: u64,
    /// The highest stream sequence handed to the writer.
    pub(super) forwarded: u64,
}

impl Waiters {
    pub(super) fn new(applied: u64) -> Waiters {
        Waiters {
            by_id: HashMap::new(),
            next_token: 0,
            forwarded: applied,
        }
    }

    fn insert(&mut self, accepted: Accepted) -> u64 {
        self.next_token += 1;
        let token = self.next_token;
        self.by_id
            .entry(*accepted.event.id())
            .or_default()
            .push((token, accepted));
        token
    }

    /// Takes one publisher's wait back (its publish failed).
    fn remove(&mut self, id: &EventId, token: u64) -> Option<Accepted> {
        let waiting = self.by_id.get_mut(id)?;
        let at = waiting.iter().position(|(t, _)| *t == token)?;
        let (_, accepted) = waiting.swap_remove(at);
        if waiting.is_empty() {
            self.by_id.remove(id);
        }
        Some(accepted)
    }

    /// Everyone on this node waiting for `id`, as one event for the writer
    /// (the first publisher's admitted event, every publisher answered).
    pub(super) fn take(&mut self, id: &EventId) -> Option<Accepted> {
        let mut waiting = self.by_id.remove(id)?.into_iter();
        let (_, mut first) = waiting.next()?;
        for (_, other) in waiting {
            first.ticket.reply.join(other.ticket.reply);
        }
        Some(first)
    }
}

/// Publishes the events the ingest workers hand over until the node stops.
/// (Ephemeral events take a path of their own, `ephemeral.rs`.)
pub(super) async fn run(state: Arc<State>, mut inbox: UnboundedReceiver<Accepted>) {
    let subject = events_subject(&state.settings.stream);
    while let Some(accepted) = inbox.recv().await {
        publish_event(&state, &subject, accepted).await;
    }
}

async fn publish_event(state: &Arc<State>, subject: &str, accepted: Accepted) {
    let id = *accepted.event.id();
    let Some(context) = state.context.get() else {
        return refuse(state, accepted, "not connected to NATS");
    };
    let payload = Bytes::copy_from_slice(accepted.event.record());
    // The client's clock: from the moment its message was read, not from
    // the moment this task got to it.
    let deadline =
        tokio::time::Instant::from_std(accepted.ticket.received) + state.publish_timeout();
    let token = lock(state).insert(accepted);
    match send(state, context, subject, &id, payload.clone(), deadline).await {
        Ok(ack) => {
            let (state, context, subject) = (state.clone(), context.clone(), subject.to_string());
            tokio::spawn(async move {
                confirm(
                    &state, &context, &subject, &id, token, payload, ack, deadline,
                )
                .await
            });
        }
        Err(reason) => refuse_waiting(state, &id, token, &reason),
    }
}

/// Hands one copy of the event to the NATS connection.
async fn send(
    state: &State,
    context: &jetstream::Context,
    subject: &str,
    id: &EventId,
    payload: Bytes,
    deadline: tokio::time::Instant,
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

/// Waits for JetStream's acknowledgement, publishing the event again
/// (the same message id: JetStream keeps one copy) while the stream has no
/// leader, until the deadline. Usually the reader hands the event to the
/// writer, which answers; this answers when the stream did not take the
/// event, or already held it (a duplicate within the duplicate window) at
/// a sequence the reader had passed.
#[allow(clippy::too_many_arguments)]
async fn confirm(
    state: &State,
    context: &jetstream::Context,
    subject: &str,
    id: &EventId,
    token: u64,
    payload: Bytes,
    mut ack: PublishAckFuture,
    deadline: tokio::time::Instant,
) {
    let sequence = loop {
        let reason = match tokio::time::timeout_at(deadline, ack).await {
            Ok(Ok(ack)) => break ack.sequence,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "no acknowledgement within {} ms",
                state.settings.publish_timeout_ms
            ),
        };
        // A leader election takes a moment: try again while there is time.
        tokio::time::sleep(RETRY_AFTER).await;
        if tokio::time::Instant::now() + RETRY_AFTER >= deadline {
            return refuse_waiting(state, id, token, &reason);
        }
        ack = match send(state, context, subject, id, payload.clone(), deadline).await {
            Ok(ack) => ack,
            Err(reason) => return refuse_waiting(state, id, token, &reason),
        };
    };
    state.stream_last.fetch_max(sequence, Ordering::Relaxed);
    let passed = {
        let mut waiters = lock(state);
        if sequence <= waiters.forwarded {
            waiters.remove(id, token)
        } else {
            None
        }
    };
    match passed {
        Some(accepted) => answer_applied(state, context, accepted, sequence, deadline).await,
        None => answer_if_unapplied(state, id, token, deadline).await,
    }
}

/// The stream's reader answers an acknowledged event once it hands it to
/// the writer. When it is late (its consumer being created again after a
/// NATS server failed), the client is answered at its deadline. The reader
/// then applies the event with nobody to answer.
async fn answer_if_unapplied(
    state: &State,
    id: &EventId,
    token: u64,
    deadline: tokio::time::Instant,
) {
    tokio::time::sleep_until(deadline).await;
    let waiting = lock(state).remove(id, token);
    if let Some(accepted) = waiting {
        answer_unapplied(accepted);
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

/// Answers a publisher whose event the stream held before, once the writer
/// reports the stream applied up to it: the verdict the store would give a
/// second copy. A node still behind at the deadline answers as for an
/// event not yet applied.
async fn answer_applied(
    state: &State,
    context: &jetstream::Context,
    accepted: Accepted,
    sequence: u64,
    deadline: tokio::time::Instant,
) {
    // As of now: a deletion that followed the event counts.
    let last = match context.get_stream(&state.settings.stream).await {
        Ok(stream) => stream.cached_info().state.last_sequence.max(sequence),
        Err(_) => sequence,
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
    if let Some(accepted) = waiting {
        refuse(state, accepted, reason);
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
