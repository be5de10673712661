//! Stage 6a: the one writer. It drains its inbox into a batch, commits the
//! batch in one transaction (group commit), and only then answers `OK` and
//! hands stored events to fan-out.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::msg::{Accepted, FanoutMsg, LiveEvent, WriterMsg};
use crate::store::Verdict;
use crate::Shared;

fn ok(reply: &crate::msg::Outbox, id: &nostrwire_event::EventId, accepted: bool, message: &str) {
    reply.send_ok(id, accepted, message);
}

/// Runs until [`WriterMsg::Shutdown`] (everything queued before it is
/// committed), then syncs the store.
pub fn run(shared: Arc<Shared>, inbox: Receiver<WriterMsg>) {
    let max_batch = shared.config.performance.writer_batch.max(1);
    let mut batch: Vec<Accepted> = Vec::with_capacity(max_batch);
    let mut purge = false;
    let mut stop = false;
    while let Ok(first) = inbox.recv() {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                WriterMsg::Event(a) => batch.push(a),
                WriterMsg::Purge => purge = true,
                WriterMsg::Shutdown => stop = true,
            }
            if stop {
                break;
            }
            if batch.len() < max_batch {
                next = inbox.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            commit(&shared, &mut batch);
        }
        if purge {
            purge = false;
            match shared.store.purge_expired(crate::now(), 10_000) {
                Ok(n) if n > 0 => tracing::info!(removed = n, "purged expired events"),
                Ok(_) => {}
                Err(e) => tracing::error!("purge failed: {e}"),
            }
        }
        if stop {
            break;
        }
    }
    if let Err(e) = shared.store.sync() {
        tracing::error!("final sync failed: {e}");
    }
}

fn commit(shared: &Shared, batch: &mut Vec<Accepted>) {
    let records: Vec<Vec<u8>> = batch
        .iter_mut()
        .map(|a| std::mem::take(&mut a.record))
        .collect();
    shared.metrics.writer_batch.observe(batch.len() as f64);
    let verdicts = match shared.store.write_batch(&records, crate::now()) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("write failed: {e}");
            for a in batch.drain(..) {
                shared.metrics.rejected("storage_error");
                ok(&a.reply, &a.id, false, "error: could not store the event");
            }
            return;
        }
    };
    let mut live = Vec::new();
    for ((a, verdict), record) in batch.drain(..).zip(verdicts).zip(records) {
        match verdict {
            Verdict::Stored(serial) => {
                shared.metrics.events_stored.fetch_add(1, Ordering::Relaxed);
                ok(&a.reply, &a.id, true, "");
                live.push(Arc::new(LiveEvent {
                    serial,
                    record,
                    json: a.json,
                }));
            }
            Verdict::Duplicate => ok(&a.reply, &a.id, true, "duplicate: already have this event"),
            Verdict::Superseded => {
                shared.metrics.rejected("superseded");
                ok(
                    &a.reply,
                    &a.id,
                    false,
                    "duplicate: a newer version of this event is stored",
                );
            }
            Verdict::Deleted => {
                shared.metrics.rejected("deleted");
                ok(&a.reply, &a.id, false, "blocked: this event was deleted");
            }
        }
    }
    if !live.is_empty() {
        let _ = shared.fanout_tx.send(FanoutMsg::Events(live));
    }
}
