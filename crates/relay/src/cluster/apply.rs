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
//! consumer and makes a new one after the last sequence handed to the
//! writer. (async-nats' ordered consumer does the same, but its heartbeat is
//! fixed at 15 s and it waits for two misses: a minute of a node serving
//! nothing new after a server's death.) A gap in the consumer's own
//! sequence is handled the same way, so no event is passed over.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use futures_util::StreamExt;
use nostrwire_event::SignedFields;
use nostrwire_wire::EventView;

use super::publish::lock;
use super::{events_subject, ClusterError, State};
use crate::msg::{Accepted, Admission, Reply, Ticket, WriterMsg};

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
    loop {
        let Some(context) = state.ready().await else {
            return;
        };
        let start = lock(&state).forwarded + 1;
        let result = tokio::select! {
            result = consume(&state, &context, start) => result,
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
) -> Result<(), ClusterError> {
    let stream_error = |e: &dyn std::fmt::Display| ClusterError::Stream(e.to_string());
    let stream = context
        .get_stream(&state.settings.stream)
        .await
        .map_err(|e| stream_error(&e))?;
    let consumer = stream
        .create_consumer(pull::Config {
            filter_subject: events_subject(&state.settings.stream),
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
    while let Some(message) = messages.next().await {
        // A missed heartbeat, a deleted consumer, a server gone: all end
        // this consumer, and `run` makes another.
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
        match forward(state, sequence, &message.payload) {
            Err(ClusterError::Record(e)) => {
                // Not from a node: passed over, never applied.
                tracing::error!("stream message {sequence} is not an event record: {e}");
                let mut waiters = lock(state);
                waiters.forwarded = waiters.forwarded.max(sequence);
            }
            other => other?,
        }
    }
    Err(ClusterError::Stream("the consumer ended".into()))
}

/// Hands the event at `sequence` to the writer: this node's publishers'
/// own admitted event when they wait for it, otherwise the record admitted
/// here.
fn forward(state: &State, sequence: u64, record: &[u8]) -> Result<(), ClusterError> {
    let id = EventView::decode(record)
        .map(|view| *view.id())
        .map_err(|e| ClusterError::Record(e.to_string()))?;
    let waiting = {
        let mut waiters = lock(state);
        if sequence <= waiters.forwarded {
            return Ok(());
        }
        waiters.forwarded = sequence;
        waiters.take(&id)
    };
    let accepted = match waiting {
        Some(mut accepted) => {
            accepted.sequence = Some(sequence);
            accepted
        }
        None => Accepted {
            event: admit(state, record)?,
            publisher: 0,
            sequence: Some(sequence),
            ticket: Ticket {
                received: Instant::now(),
                reply: Reply::nobody(),
                admission: Admission::none(),
            },
        },
    };
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
    let json = EventView::decode(record)
        .map_err(|e| ClusterError::Record(e.to_string()))?
        .to_json_bytes();
    Ok(state.store.admit(record.to_vec(), json)?)
}
