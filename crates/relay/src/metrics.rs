//! Counters and histograms, rendered in the Prometheus text format at `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::store::Stats;

/// A fixed-bucket histogram.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation (`value` in the histogram's unit).
    pub fn observe(&self, value: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| value <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((value * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            cumulative += self.counts[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        cumulative += self.counts[self.bounds.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {}", self.count.load(Ordering::Relaxed));
    }
}

/// All relay metrics.
#[derive(Debug)]
pub struct Metrics {
    /// Open connections.
    pub connections_open: AtomicU64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Accepted sockets, upgraded to WebSocket or not yet.
    pub sockets_open: AtomicU64,
    /// Times a limit that protects the relay was hit, by limit.
    limits_hit: Mutex<Vec<(String, u64)>>,
    /// Messages received, by type.
    messages: Mutex<Vec<(String, u64)>>,
    /// Events stored.
    pub events_stored: AtomicU64,
    /// Canonical JSON bytes of the events stored.
    pub json_bytes_stored: AtomicU64,
    /// Events rejected, by reason prefix and kind of error.
    rejected: Mutex<Vec<(String, u64)>>,
    /// Queries (REQ, COUNT, NEG-OPEN) ended with `CLOSED` or `NEG-ERR`
    /// after they started, by reason.
    queries_failed: Mutex<Vec<(String, u64)>>,
    /// Signatures found valid by a batch check (`signatures.rs`).
    pub signatures_batched: AtomicU64,
    /// Batch checks of signatures that passed (`signatures_batched` over
    /// this is the average batch).
    pub signature_batches: AtomicU64,
    /// Batch checks of signatures that failed (each of their signatures
    /// then checked alone).
    pub signature_batches_failed: AtomicU64,
    /// Seconds from REQ to EOSE.
    pub query_seconds: Histogram,
    /// Events per writer transaction.
    pub writer_batch: Histogram,
    /// Seconds from reading an EVENT frame to answering its `OK`, for the
    /// events that reach the writer.
    pub write_seconds: Histogram,
}

const LATENCY_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
const WRITE_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
const BATCH_BOUNDS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            connections_open: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            sockets_open: AtomicU64::new(0),
            limits_hit: Mutex::new(Vec::new()),
            messages: Mutex::new(Vec::new()),
            events_stored: AtomicU64::new(0),
            json_bytes_stored: AtomicU64::new(0),
            rejected: Mutex::new(Vec::new()),
            queries_failed: Mutex::new(Vec::new()),
            signatures_batched: AtomicU64::new(0),
            signature_batches: AtomicU64::new(0),
            signature_batches_failed: AtomicU64::new(0),
            query_seconds: Histogram::new(LATENCY_BOUNDS),
            writer_batch: Histogram::new(BATCH_BOUNDS),
            write_seconds: Histogram::new(WRITE_BOUNDS),
        }
    }
}

fn bump(list: &Mutex<Vec<(String, u64)>>, label: &str) {
    let mut list = list.lock().expect("metrics lock");
    match list.iter_mut().find(|(l, _)| l == label) {
        Some((_, n)) => *n += 1,
        None => list.push((label.to_string(), 1)),
    }
}

impl Metrics {
    /// Counts a received message of type `kind`.
    pub fn message(&self, kind: &str) {
        bump(&self.messages, kind);
    }

    /// Counts a rejected event with `reason` (a stable error kind or policy name).
    pub fn rejected(&self, reason: &str) {
        bump(&self.rejected, reason);
    }

    /// Counts a hit of a limit that protects the relay (docs/security.md):
    /// a connection refused, cut off or closed, a request refused for its
    /// size.
    pub fn limit_hit(&self, limit: &str) {
        bump(&self.limits_hit, limit);
    }

    /// Counts a query that failed after it started.
    pub fn query_failed(&self, reason: &str) {
        bump(&self.queries_failed, reason);
    }

    /// Prometheus text exposition.
    pub fn render(&self, stats: Option<Stats>) -> String {
        let mut out = String::new();
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        gauge(
            &mut out,
            "nostrwire_connections_open",
            "Open WebSocket connections.",
            "gauge",
            self.connections_open.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_connections_total",
            "Connections accepted.",
            "counter",
            self.connections_total.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_sockets_open",
            "Accepted sockets, WebSocket or not yet upgraded.",
            "gauge",
            self.sockets_open.load(Ordering::Relaxed),
        );
        let _ = writeln!(out, "# HELP nostrwire_limits_hit_total Times a protective limit was hit, by limit (docs/security.md).\n# TYPE nostrwire_limits_hit_total counter");
        for (limit, n) in self.limits_hit.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "nostrwire_limits_hit_total{{limit=\"{limit}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP nostrwire_messages_total Client messages received.\n# TYPE nostrwire_messages_total counter");
        for (kind, n) in self.messages.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "nostrwire_messages_total{{type=\"{kind}\"}} {n}");
        }
        gauge(
            &mut out,
            "nostrwire_events_stored_total",
            "Events stored.",
            "counter",
            self.events_stored.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_event_json_bytes_stored_total",
            "Canonical JSON bytes of the events stored.",
            "counter",
            self.json_bytes_stored.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_signatures_batched_total",
            "Event signatures found valid by a batch check.",
            "counter",
            self.signatures_batched.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_signature_batches_total",
            "Batch checks of signatures that passed (signatures_batched_total over this is the average batch).",
            "counter",
            self.signature_batches.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "nostrwire_signature_batches_failed_total",
            "Batch checks of signatures that failed; their signatures were then checked one by one.",
            "counter",
            self.signature_batches_failed.load(Ordering::Relaxed),
        );
        let _ = writeln!(out, "# HELP nostrwire_queries_failed_total Queries ended before their results, by reason (search_behind: the search index was being built).\n# TYPE nostrwire_queries_failed_total counter");
        for (reason, n) in self.queries_failed.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "nostrwire_queries_failed_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(out, "# HELP nostrwire_events_rejected_total Events refused, by reason.\n# TYPE nostrwire_events_rejected_total counter");
        for (reason, n) in self.rejected.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "nostrwire_events_rejected_total{{reason=\"{reason}\"}} {n}"
            );
        }
        self.query_seconds.render(
            &mut out,
            "nostrwire_query_seconds",
            "Time from REQ to EOSE.",
        );
        self.writer_batch.render(
            &mut out,
            "nostrwire_writer_batch_events",
            "Events per write transaction.",
        );
        self.write_seconds.render(
            &mut out,
            "nostrwire_event_write_seconds",
            "Time from reading an EVENT frame to sending its OK, for events that reach the writer.",
        );
        if let Some(stats) = stats {
            gauge(
                &mut out,
                "nostrwire_db_events",
                "Events in the database.",
                "gauge",
                stats.events,
            );
            gauge(
                &mut out,
                "nostrwire_db_bytes",
                "Size of the database file.",
                "gauge",
                stats.disk_bytes,
            );
            gauge(
                &mut out,
                "nostrwire_db_index_backlog_events",
                "Stored or removed events whose time-ordered index entries are not written or deleted yet.",
                "gauge",
                stats.index_backlog,
            );
            gauge(
                &mut out,
                "nostrwire_db_search_backlog_events",
                "Stored events the search index does not hold yet.",
                "gauge",
                stats.search_backlog,
            );
        }
        out
    }
}
