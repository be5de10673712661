//! The stream, in order → the writer. An ephemeral pull consumer of one
//! replica (no acks: the position that counts is the one the store records
//! with each batch, `EventStore::submit_at`) starts after the store's
//! applied sequence, so a restarted node resumes where its last commit left
//! off, and a new or wiped one, or one started from another node's
//! `compact` copy, reads what it lacks.
//!
//! The consumer lives on one NATS server. When that server goes, nothing
//! more arrives and nothing says so but the missing idle heartbeats; they
//! come every [`HEARTBEAT`], so within two of them the reader drops the
//! consumer and makes a new one. (async-nats' ordered consumer does the
//! same, but its heartbeat is fixed at 15 s and it waits for two misses: a
//! minute of a node serving nothing new after a server's death.)
//!
//! No event is passed over. A new consumer starts after what the store
//! committed, once the writer is through with what the last one handed it
//! (so a batch that failed is read again). Each message must follow the
//! last one read: a jump in the stream's sequence (a consumer on a server
//! whose copy of the stream is behind or being rebuilt moves past messages
//! it does not hold) ends the consumer, unless the stream's leader holds
//! nothing in between. Each event goes to the writer with the position of
//! the one before it, and the writer applies it only right after that one
//! (`LogPosition`): when it cannot (a failed commit), it says so and the
//! consumer is made again from the store's position.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use futures_util::StreamExt;
use nostrwire_event::SignedFields;
use nostrwire_wire::EventView;

use tokio::sync::watch;

use super::publish::lock;
use super::{events_subject, ClusterError, State};
use crate::msg::{Accepted, Admission, Reply, Ticket, WriterMsg};
use crate::store::LogPosition;

/// How often the consumer's server says it is there while it has nothing
/// to send; two missed in a row and the consumer is made again.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long one pull request waits for messages (the server allows a
/// heartbeat of at most half of it).
const PULL_EXPIRES: Duration = Duration::from_secs(5);

/// How long the server keeps a consumer nobody pulls from: one left by a
/// reader that made a new one is deleted after this.
const INACTIVE: Duration = Duration::from_secs(30);

/// Messages a pull asks for.
const BATCH: usize = 500;

/// Reads the stream until the node stops.
pub(super) async fn run(state: Arc<State>) {
    let mut through = state.through.subscribe();
    loop {
        let Some(context) = state.ready().await else {
            return;
        };
        // Everything handed to the writer is applied or refused first; then
        // the store's position is the one to resume from.
        let handed = lock(&state).handed;
        tokio::select! {
            result = through.wait_for(|&through| through >= handed) => {
                if result.is_err() {
                    return;
                }
            }
            () = state.stop.cancelled() => return,
        }
        let applied = *state.applied.borrow();
        lock(&state).rewind(applied);
        through.borrow_and_update();
        let start = applied + 1;
        let result = tokio::select! {
            result = consume(&state, &context, start, &mut through) => result,
            () = state.stop.cancelled() => return,
        };
        if let Err(e) = result {
            tracing::warn!("reading the cluster stream from {start}: {e}; starting again");
            if !state.pause(Duration::from_millis(250)).await {
                return;
            }
        }
    }
}

async fn consume(
    state: &State,
    context: &jetstream::Context,
    start: u64,
    through: &mut watch::Receiver<u64>,
) -> Result<(), ClusterError> {
    let stream_error = |e: &dyn std::fmt::Display| ClusterError::Stream(e.to_string());
    let subject = events_subject(&state.settings.stream);
    let stream = context
        .get_stream(&state.settings.stream)
        .await
        .map_err(|e| stream_error(&e))?;
    let consumer = stream
        .create_consumer(pull::Config {
            filter_subject: subject.clone(),
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            ack_policy: AckPolicy::None,
            num_replicas: 1,
            memory_storage: true,
            inactive_threshold: INACTIVE,
            ..Default::default()
        })
        .await
        .map_err(|e| stream_error(&e))?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(BATCH)
        .expires(PULL_EXPIRES)
        .heartbeat(HEARTBEAT)
        .messages()
        .await
        .map_err(|e| stream_error(&e))?;
    let mut consumer_sequence = 0;
    loop {
        let message = tokio::select! {
            message = messages.next() => message,
            changed = through.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let (handled, applied) = (*through.borrow_and_update(), *state.applied.borrow());
                if handled > applied {
                    return Err(ClusterError::Stream(format!(
                        "the writer applied up to {applied}, not {handled}"
                    )));
                }
                continue;
            }
        };
        // A missed heartbeat, a deleted consumer, a server gone: all end
        // this consumer, and `run` makes another.
        let Some(message) = message else {
            return Err(ClusterError::Stream("the consumer ended".into()));
        };
        let message = message.map_err(|e| stream_error(&e))?;
        let info = message.info().map_err(|e| stream_error(&e))?;
        if info.consumer_sequence != consumer_sequence + 1 {
            return Err(ClusterError::Stream(format!(
                "the consumer skipped from {consumer_sequence} to {}",
                info.consumer_sequence
            )));
        }
        consumer_sequence = info.consumer_sequence;
        let sequence = info.stream_sequence;
        state
            .stream_last
            .fetch_max(sequence + info.pending, Ordering::Relaxed);
        if state.stop.is_cancelled() {
            return Ok(());
        }
        let read = lock(state).forwarded;
        if sequence <= read {
            continue;
        }
        if sequence > read + 1 {
            check_gap(&stream, &subject, read, sequence).await?;
        }
        match forward(state, sequence, &message.payload) {
            Err(ClusterError::Record(e)) => {
                // Not from a node: passed over, never applied.
                tracing::error!("stream message {sequence} is not an event record: {e}");
                lock(state).forwarded = sequence;
            }
            other => other?,
        }
    }
}

/// The consumer went from `read` to `sequence`: fine if the stream's
/// leader holds nothing in between (messages deleted from the stream),
/// otherwise the consumer passed over messages and must be made again.
async fn check_gap(
    stream: &jetstream::stream::Stream,
    subject: &str,
    read: u64,
    sequence: u64,
) -> Result<(), ClusterError> {
    let next = stream
        .raw_message_builder()
        .sequence(read + 1)
        .next_by_subject(subject)
        .send()
        .await
        .map_err(|e| {
            ClusterError::Stream(format!(
                "the consumer went from {read} to {sequence}, and the stream's leader cannot say what lies between: {e}"
            ))
        })?;
    if next.sequence < sequence {
        return Err(ClusterError::Stream(format!(
            "the consumer went from {read} to {sequence}, passing over {}",
            next.sequence
        )));
    }
    Ok(())
}

/// Hands the event at `sequence` to the writer: this node's publishers'
/// own admitted event when they wait for it, otherwise the record admitted
/// here.
fn forward(state: &State, sequence: u64, record: &[u8]) -> Result<(), ClusterError> {
    let id = EventView::decode_with(record, &state.record_limits)
        .map(|view| *view.id())
        .map_err(|e| ClusterError::Record(e.to_string()))?;
    let waiting = {
        let mut waiters = lock(state);
        if sequence <= waiters.forwarded {
            return Ok(());
        }
        waiters.take(&id)
    };
    let mut accepted = match waiting {
        Some(accepted) => accepted,
        None => Accepted {
            event: admit(state, record)?,
            publisher: 0,
            position: None,
            ticket: Ticket {
                received: Instant::now(),
                reply: Reply::nobody(),
                admission: Admission::none(),
            },
        },
    };
    // Read up to here only now: an event that could not be admitted is
    // read again.
    let mut waiters = lock(state);
    accepted.position = Some(LogPosition {
        sequence,
        previous: waiters.handed,
    });
    waiters.forwarded = sequence;
    waiters.handed = sequence;
    drop(waiters);
    // The writer's inbox is bounded: waiting for room is the backpressure
    // that paces the consumer (off the runtime's worker, which other tasks
    // need meanwhile).
    let stopped = || ClusterError::Stream("the writer has stopped".into());
    match state
        .writer_tx
        .try_send(WriterMsg::Event(Box::new(accepted)))
    {
        Ok(()) => Ok(()),
        Err(crossbeam_channel::TrySendError::Full(msg)) => {
            tokio::task::block_in_place(|| state.writer_tx.send(msg)).map_err(|_| stopped())
        }
        Err(crossbeam_channel::TrySendError::Disconnected(_)) => Err(stopped()),
    }
}

fn admit(state: &State, record: &[u8]) -> Result<crate::store::Admitted, ClusterError> {
    let json = EventView::decode_with(record, &state.record_limits)
        .map_err(|e| ClusterError::Record(e.to_string()))?
        .to_json_bytes();
    Ok(state.store.admit(record.to_vec(), json)?)
}
