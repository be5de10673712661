//! Stage 6a: the one writer. It drains its inbox into a batch, commits the
//! batch in one transaction (group commit), and only then answers `OK` and
//! hands stored events to fan-out and signals the search indexer. When its
//! inbox stays empty it brings the time-ordered indexes that trail the
//! stored events (entries waiting in `pending` and `removed`) up to date,
//! and once it starts the training of the database's compression
//! dictionaries.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::msg::{Accepted, ConnId, FanoutMsg, LiveEvent, WriterMsg};
use crate::store::Verdict;
use crate::Shared;

fn ok(reply: &crate::msg::Reply, id: &nostrwire_event::EventId, accepted: bool, message: &str) {
    reply.send_ok(id, accepted, message);
}

/// How long the inbox must stay empty before the writer brings the trailing
/// indexes up to date, and the most events it indexes per transaction then.
const INDEX_WHEN_IDLE: Duration = Duration::from_millis(20);
const INDEX_CHUNK: usize = 1_000;

/// Runs until [`WriterMsg::Shutdown`] (everything queued before it is
/// committed), then syncs the store.
pub fn run(shared: Arc<Shared>, inbox: Receiver<WriterMsg>) {
    let max_batch = shared.config.performance.writer_batch.max(1);
    let linger = Duration::from_micros(shared.config.performance.writer_linger_us);
    let mut batch: Vec<Accepted> = Vec::with_capacity(max_batch);
    let mut publishers = Publishers::default();
    let mut purge = false;
    let mut stop = false;
    // Stored events may be waiting for their index entries.
    let mut unindexed = true;
    // Dictionaries are trained at most once per run, on their own thread.
    let mut training = false;
    loop {
        let first = if unindexed {
            match inbox.recv_timeout(INDEX_WHEN_IDLE) {
                Ok(msg) => msg,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    unindexed = match shared.store.index_pending(INDEX_CHUNK) {
                        Ok(more) => more,
                        Err(e) => {
                            tracing::error!("indexing failed: {e}");
                            false
                        }
                    };
                    continue;
                }
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match inbox.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            }
        };
        let deadline = Instant::now() + linger;
        let expected = publishers.expected().min(max_batch);
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                WriterMsg::Event(a) => batch.push(*a),
                WriterMsg::Purge => purge = true,
                WriterMsg::Shutdown => stop = true,
            }
            if stop || batch.len() >= max_batch {
                break;
            }
            next = inbox.try_recv().ok();
            if next.is_none() && batch.len() < expected {
                next = wait_for_more(&inbox, deadline, expected - batch.len());
            }
        }
        if !batch.is_empty() {
            publishers.record(batch.iter().map(|a| a.conn));
            commit(&shared, &mut batch);
            if let Some(indexer) = &shared.search_indexer {
                indexer.committed();
            }
            unindexed = true;
            if !training && shared.store.wants_dictionaries().unwrap_or(false) {
                training = true;
                train_dictionaries(&shared);
            }
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

/// How often a lingering writer looks at its inbox.
const LINGER_SLICE: Duration = Duration::from_micros(250);

/// Waits until `wanted` more messages are queued or `deadline` passes, then
/// takes the next one. It sleeps in slices and counts what came rather than
/// sleeping on the inbox: woken by each event, the writer went through a
/// context switch for nearly every event it stored.
fn wait_for_more(
    inbox: &Receiver<WriterMsg>,
    deadline: Instant,
    wanted: usize,
) -> Option<WriterMsg> {
    loop {
        let now = Instant::now();
        if now >= deadline || inbox.len() >= wanted {
            return inbox.try_recv().ok();
        }
        std::thread::sleep(LINGER_SLICE.min(deadline - now));
    }
}

/// Trains the store's compression dictionaries on a thread of its own (it
/// reads thousands of records and takes seconds); the writer goes on, and
/// new records are compressed with the set once it is installed.
fn train_dictionaries(shared: &Arc<Shared>) {
    let store = Arc::clone(&shared.store);
    let spawned = std::thread::Builder::new()
        .name("dictionaries".into())
        .spawn(move || {
            if let Err(e) = store.train_dictionaries() {
                tracing::error!("training compression dictionaries failed: {e}");
            }
        });
    if let Err(e) = spawned {
        tracing::error!("cannot start the dictionary training thread: {e}");
    }
}

/// The connections that published in the last two commits. With group
/// commit, a client that waits for each `OK` before its next EVENT lands in
/// every other batch (its event arrives while the previous batch commits),
/// so the union of two batches is who is publishing now. The writer holds a
/// batch open, up to `writer_linger_us`, until that many events are in it:
/// they then share one fsync instead of paying for two.
#[derive(Default)]
struct Publishers {
    last: Vec<ConnId>,
    before: Vec<ConnId>,
}

impl Publishers {
    fn record(&mut self, conns: impl Iterator<Item = ConnId>) {
        std::mem::swap(&mut self.last, &mut self.before);
        self.last.clear();
        self.last.extend(conns);
        self.last.sort_unstable();
        self.last.dedup();
    }

    /// Distinct connections in the last two batches.
    fn expected(&self) -> usize {
        let (mut i, mut j, mut n) = (0, 0, 0);
        while i < self.last.len() && j < self.before.len() {
            match self.last[i].cmp(&self.before[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
            n += 1;
        }
        n + (self.last.len() - i) + (self.before.len() - j)
    }
}

fn commit(shared: &Shared, batch: &mut Vec<Accepted>) {
    // The events go to the store as one slice; who to answer stays here.
    // In a cluster, the stream position the batch reaches (docs/cluster.md).
    let sequence = batch.iter().filter_map(|a| a.sequence).max();
    let mut events = Vec::with_capacity(batch.len());
    let mut senders = Vec::with_capacity(batch.len());
    for a in batch.drain(..) {
        events.push(a.event);
        senders.push((a.received, a.reply, a.admission));
    }
    shared.metrics.writer_batch.observe(events.len() as f64);
    let submitted = match sequence {
        Some(sequence) => shared.store.submit_at(&events, crate::now(), sequence),
        None => shared.store.submit(&events, crate::now()),
    };
    let verdicts = match submitted {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("write failed: {e}");
            for (event, (_, reply, _)) in events.iter().zip(&senders) {
                shared.metrics.rejected("storage_error");
                ok(reply, event.id(), false, "error: could not store the event");
            }
            return;
        }
    };
    let mut live = Vec::new();
    for ((event, (received, reply, _admission)), verdict) in
        events.into_iter().zip(senders).zip(verdicts)
    {
        shared
            .metrics
            .write_seconds
            .observe(received.elapsed().as_secs_f64());
        match verdict {
            Verdict::Stored(serial) => {
                shared.metrics.events_stored.fetch_add(1, Ordering::Relaxed);
                let json_bytes = event.json().len() as u64;
                shared
                    .metrics
                    .json_bytes_stored
                    .fetch_add(json_bytes, Ordering::Relaxed);
                ok(&reply, event.id(), true, "");
                live.push(Arc::new(LiveEvent { serial, event }));
            }
            Verdict::Duplicate => ok(
                &reply,
                event.id(),
                true,
                "duplicate: already have this event",
            ),
            Verdict::Superseded => {
                shared.metrics.rejected("superseded");
                ok(
                    &reply,
                    event.id(),
                    false,
                    "duplicate: a newer version of this event is stored",
                );
            }
            Verdict::Deleted => {
                shared.metrics.rejected("deleted");
                ok(&reply, event.id(), false, "blocked: this event was deleted");
            }
        }
    }
    if !live.is_empty() {
        let _ = shared.fanout_tx.send(FanoutMsg::Events(live));
    }
    // After the answers: publishers do not wait for the index batch.
    if let Err(e) = shared.store.index_past_lag() {
        tracing::error!("indexing the waiting events failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(conns: &[ConnId]) -> impl Iterator<Item = ConnId> + '_ {
        conns.iter().copied()
    }

    #[test]
    fn publishers_are_the_distinct_connections_of_the_last_two_batches() {
        let mut p = Publishers::default();
        assert_eq!(p.expected(), 0);
        p.record(batch(&[3, 1, 3]));
        assert_eq!(p.expected(), 2);
        p.record(batch(&[2, 4]));
        assert_eq!(p.expected(), 4);
        p.record(batch(&[1, 2]));
        assert_eq!(p.expected(), 3, "{{2, 4}} ∪ {{1, 2}}");
        p.record(batch(&[7]));
        assert_eq!(
            p.expected(),
            3,
            "{{1, 2}} ∪ {{7}}; batch [3, 1, 3] is forgotten"
        );
    }
}
