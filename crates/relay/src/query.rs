//! Stage 6a, read side: REQ and COUNT on read snapshots, on a pool of
//! workers. A job examines at most `query_slice` index entries, then goes to
//! the back of the queue, so one heavy REQ cannot starve the others.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use nostrwire_event::message::write;

use crate::msg::{Phase, QueryKind, Sub};
use crate::store::{QueryCursor, ScanStatus};
use crate::Shared;

/// A query in progress.
#[derive(Debug)]
pub struct Job {
    /// The subscription (for COUNT, a subscription that never goes live).
    pub sub: Arc<Sub>,
    /// REQ or COUNT.
    pub kind: QueryKind,
    /// One cursor per filter.
    pub cursors: Vec<QueryCursor>,
    /// The filter being scanned.
    pub current: usize,
    /// When the request arrived.
    pub started: Instant,
}

impl Job {
    /// A REQ job: limits clamped to the configured maximum.
    pub fn req(shared: &Shared, sub: Arc<Sub>) -> Job {
        let limits = &shared.config.limits;
        let cursors = sub
            .filters
            .iter()
            .map(|f| {
                let limit = f
                    .limit
                    .map_or(limits.default_limit, |l| (l.min(usize::MAX as u64)) as usize)
                    .min(limits.max_limit);
                QueryCursor::new(limit)
            })
            .collect();
        Job {
            sub,
            kind: QueryKind::Req,
            cursors,
            current: 0,
            started: Instant::now(),
        }
    }

    /// A COUNT job.
    pub fn count(shared: &Shared, sub: Arc<Sub>) -> Job {
        let cap = shared.config.limits.count_cap;
        let cursors = sub.filters.iter().map(|_| QueryCursor::counting(cap)).collect();
        Job {
            sub,
            kind: QueryKind::Count,
            cursors,
            current: 0,
            started: Instant::now(),
        }
    }
}

/// Runs a worker until the relay stops.
pub fn run(shared: Arc<Shared>, queue: Receiver<Job>, requeue: Sender<Job>) {
    let budget = shared.config.performance.query_slice.max(1);
    loop {
        let mut job = match queue.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(job) => job,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if shared.stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        };
        if job.sub.is_cancelled() {
            continue;
        }
        match slice(&shared, &mut job, budget) {
            Ok(ScanStatus::More) => {
                let _ = requeue.send(job);
            }
            Ok(ScanStatus::Done) => finish(&shared, job),
            Err(e) => {
                tracing::error!("query failed: {e}");
                let mut out = Vec::new();
                write::closed(&mut out, &job.sub.id, "error: query failed");
                job.sub.outbox.send(String::from_utf8(out).expect("UTF-8"));
            }
        }
    }
}

fn slice(shared: &Shared, job: &mut Job, budget: usize) -> Result<ScanStatus, crate::store::StoreError> {
    let now = crate::now();
    while job.current < job.cursors.len() {
        let filter = &job.sub.filters[job.current];
        let status = shared
            .store
            .scan(filter, &mut job.cursors[job.current], budget, now)?;
        if status == ScanStatus::More {
            return Ok(ScanStatus::More);
        }
        job.current += 1;
    }
    Ok(ScanStatus::Done)
}

fn finish(shared: &Shared, job: Job) {
    let sub = job.sub;
    match job.kind {
        QueryKind::Count => {
            // Filters are OR-ed: count each match once.
            let mut seen = HashSet::new();
            let mut capped = false;
            for c in &job.cursors {
                capped |= c.count() >= shared.config.limits.count_cap as u64;
                seen.extend(c.seen_serials());
            }
            let count = seen.len() as u64;
            let mut out = Vec::new();
            write::count_result(&mut out, &sub.id, count);
            if capped {
                // Same message with the approximate flag (NIP-45).
                out.truncate(out.len() - 2);
                out.extend_from_slice(b",\"approximate\":true}]");
            }
            sub.outbox.send(String::from_utf8(out).expect("UTF-8"));
        }
        QueryKind::Req => {
            let mut results = Vec::new();
            let mut seen = HashSet::new();
            for c in job.cursors {
                for f in c.into_results() {
                    if seen.insert(f.serial) {
                        results.push(f);
                    }
                }
            }
            results.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            for f in &results {
                let mut out = Vec::with_capacity(f.json.len() + sub.id.len() + 16);
                write::relay_event_json(&mut out, &sub.id, |o| o.extend_from_slice(f.json.as_bytes()));
                if !sub.outbox.send(String::from_utf8(out).expect("UTF-8")) {
                    return;
                }
            }
            let mut out = Vec::new();
            write::eose(&mut out, &sub.id);
            sub.outbox.send(String::from_utf8(out).expect("UTF-8"));
            shared
                .metrics
                .query_seconds
                .observe(job.started.elapsed().as_secs_f64());
            // Go live; flush what arrived meanwhile and was not already sent.
            let waiting = {
                let mut phase = sub.phase.lock().expect("phase lock");
                match std::mem::replace(&mut *phase, Phase::Live) {
                    Phase::Pending(w) => w,
                    Phase::Live => Vec::new(),
                }
            };
            for e in waiting {
                if e.serial != 0 && seen.contains(&e.serial) {
                    continue;
                }
                let mut out = Vec::with_capacity(e.json.len() + sub.id.len() + 16);
                write::relay_event_json(&mut out, &sub.id, |o| o.extend_from_slice(e.json.as_bytes()));
                sub.outbox.send(String::from_utf8(out).expect("UTF-8"));
            }
        }
    }
}
