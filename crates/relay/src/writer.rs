//! Stage 6a: the relay's side of the store's one writer
//! ([`nostrwire_store::Writer`], which batches, commits and keeps the
//! trailing indexes). Once a batch is committed, `Answers` sends each
//! publisher its `OK`, counts what was stored, and hands the stored events
//! to fan-out; the frames' room in the ingest queues is freed with them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::config::Config;
use crate::msg::{FanoutMsg, LiveEvent, Ticket, WriterMsg};
use crate::store::{writer_inbox, Admitted, Committed, StoreError, Verdict, Writer, WriterOptions};
use crate::Shared;

/// Messages the writer's inbox holds (at least a batch's worth).
const WRITER_QUEUE: usize = 8_192;

/// The relay's batching settings.
pub fn options(config: &Config) -> WriterOptions {
    WriterOptions {
        max_batch: config.performance.writer_batch.max(1),
        linger: Duration::from_micros(config.performance.writer_linger_us),
    }
}

/// The writer's inbox (at least a batch's worth).
pub fn inbox(config: &Config) -> (Sender<WriterMsg>, Receiver<WriterMsg>) {
    writer_inbox(WRITER_QUEUE.max(options(config).max_batch))
}

/// Starts the store's writer on `inbox`; its answers report to `shared`.
pub fn spawn(shared: &Arc<Shared>, inbox: Receiver<WriterMsg>) -> std::io::Result<Writer> {
    Writer::spawn(
        shared.store.clone(),
        options(&shared.config),
        inbox,
        shared.search_indexer.clone(),
        Answers {
            shared: shared.clone(),
        },
    )
}

/// Answers the publishers of committed batches.
struct Answers {
    shared: Arc<Shared>,
}

impl Committed<Ticket> for Answers {
    fn committed(&mut self, batch: Vec<(Admitted, Ticket, Verdict)>) {
        let shared = &*self.shared;
        shared.metrics.writer_batch.observe(batch.len() as f64);
        let mut live = Vec::new();
        for (event, ticket, verdict) in batch {
            shared
                .metrics
                .write_seconds
                .observe(ticket.received.elapsed().as_secs_f64());
            // Counted before the answer: a publisher that reads the
            // counters after its OK sees its event.
            match verdict {
                Verdict::Stored(_) => {
                    shared.metrics.events_stored.fetch_add(1, Ordering::Relaxed);
                    shared
                        .metrics
                        .json_bytes_stored
                        .fetch_add(event.json().len() as u64, Ordering::Relaxed);
                }
                Verdict::Duplicate => {}
                Verdict::Superseded => shared.metrics.rejected("superseded"),
                Verdict::Deleted => shared.metrics.rejected("deleted"),
            }
            let (accepted, message) = answer(&verdict);
            ticket.reply.send_ok(event.id(), accepted, message);
            if let Verdict::Stored(serial) = verdict {
                live.push(Arc::new(LiveEvent { serial, event }));
            }
        }
        if !live.is_empty() {
            let _ = shared.fanout_tx.send(FanoutMsg::Events(live));
        }
    }

    fn failed(&mut self, batch: Vec<(Admitted, Ticket)>, _error: &StoreError) {
        let shared = &*self.shared;
        for (event, ticket) in batch {
            shared.metrics.rejected("storage_error");
            if shared.cluster.is_some() {
                // Read from the stream, which holds it: this node applies
                // it when it reads the stream again (docs/cluster.md), and
                // the others apply it meanwhile.
                ticket.reply.send_ok(event.id(), true, "");
            } else {
                ticket.reply.send_ok(event.id(), false, STORAGE_ERROR);
            }
        }
    }

    fn applied(&mut self, applied: u64, through: u64) {
        if let Some(cluster) = &self.shared.cluster {
            cluster.applied(applied, through);
        }
    }
}

/// The answer to a publisher whose event failed to be stored.
pub const STORAGE_ERROR: &str = "error: could not store the event";

/// The `OK` a publisher gets for what the store did with its event: the
/// one mapping, for a single relay's events and for a cluster's (whose
/// publishers may learn the verdict from the store after the fact).
pub fn answer(verdict: &Verdict) -> (bool, &'static str) {
    match verdict {
        Verdict::Stored(_) => (true, ""),
        Verdict::Duplicate => (true, "duplicate: already have this event"),
        Verdict::Superseded => (false, "duplicate: a newer version of this event is stored"),
        Verdict::Deleted => (false, "blocked: this event was deleted"),
    }
}
