//! Measurement: latency histograms, outcomes by reason, process CPU time.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histograms hold, in microseconds (one hour); larger
/// values are clamped to it.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Why an operation failed. Each reason is reported separately.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// No answer within the timeout (never a success).
    Timeout,
    /// `OK false`, keyed by the machine-readable prefix of the message.
    Rejected(String),
    /// The relay ended the subscription with `CLOSED`, keyed by prefix.
    Closed(String),
    /// An event returned for a filter does not match it.
    WrongResult,
    /// A returned event has a wrong id or signature (checked on a sample).
    InvalidEvent,
    /// An event known to be stored was not returned for a lookup that must find it.
    MissingResult,
    /// A subscriber did not receive a published event.
    MissedDelivery,
    /// The connection closed or failed before the answer.
    ConnectionLost,
    /// The relay sent something that is not valid NIP-01 or WebSocket.
    Protocol,
    /// The connection could not be opened.
    ConnectFailed,
}

/// The prefix of a NIP-01 `OK`/`CLOSED` message (`"rate-limited: slow"` → `rate-limited`).
pub fn message_prefix(message: &str) -> String {
    match message.split_once(':') {
        Some((p, _)) if !p.is_empty() && p.len() <= 32 && !p.contains(' ') => p.to_string(),
        _ if message.is_empty() => "no-reason".to_string(),
        _ => "other".to_string(),
    }
}

impl Failure {
    /// Stable name used in reports.
    pub fn key(&self) -> String {
        match self {
            Failure::Timeout => "timeout".into(),
            Failure::Rejected(p) => format!("rejected:{p}"),
            Failure::Closed(p) => format!("closed:{p}"),
            Failure::WrongResult => "wrong_result".into(),
            Failure::InvalidEvent => "invalid_event".into(),
            Failure::MissingResult => "missing_result".into(),
            Failure::MissedDelivery => "missed_delivery".into(),
            Failure::ConnectionLost => "connection_lost".into(),
            Failure::Protocol => "protocol_error".into(),
            Failure::ConnectFailed => "connect_failed".into(),
        }
    }
}

/// Outcomes of one kind of operation (e.g. `publish`, `query:author`).
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Latency of successful operations, in microseconds.
    pub latency_us: Histogram<u64>,
    /// Successful operations.
    pub successes: u64,
    /// Failed operations by reason key.
    pub failures: BTreeMap<String, u64>,
    /// Events received in answers (queries and subscriptions).
    pub events_received: u64,
    /// Bytes of the event messages received in answers to queries (each
    /// message's payload as the relay sent it, frame headers not counted).
    pub bytes_received: u64,
    /// The same with JSON string escapes counted as the characters they
    /// stand for (`client::unescaped_len`), which compares relays that
    /// escape differently.
    pub bytes_unescaped: u64,
}

impl Default for OpStats {
    fn default() -> OpStats {
        OpStats::new()
    }
}

impl OpStats {
    /// Empty statistics.
    pub fn new() -> OpStats {
        OpStats {
            latency_us: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .expect("static histogram bounds are valid"),
            successes: 0,
            failures: BTreeMap::new(),
            events_received: 0,
            bytes_received: 0,
            bytes_unescaped: 0,
        }
    }

    /// Records a success with its latency.
    pub fn success(&mut self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        self.latency_us
            .record(us)
            .expect("value clamped into bounds");
        self.successes += 1;
    }

    /// Records a failure.
    pub fn fail(&mut self, failure: Failure) {
        *self.failures.entry(failure.key()).or_default() += 1;
    }

    /// Total failures.
    pub fn failure_count(&self) -> u64 {
        self.failures.values().sum()
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &OpStats) {
        self.latency_us
            .add(&other.latency_us)
            .expect("histograms share bounds");
        self.successes += other.successes;
        self.events_received += other.events_received;
        self.bytes_received += other.bytes_received;
        self.bytes_unescaped += other.bytes_unescaped;
        for (k, v) in &other.failures {
            *self.failures.entry(k.clone()).or_default() += v;
        }
    }

    /// Latency summary in milliseconds.
    pub fn percentiles(&self) -> Percentiles {
        let h = &self.latency_us;
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// Latency percentiles in milliseconds (zero when nothing succeeded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// User and system CPU time of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTime {
    /// User time.
    pub user: Duration,
    /// System time.
    pub system: Duration,
}

impl CpuTime {
    /// CPU time used by this process so far (all threads).
    pub fn now() -> CpuTime {
        // SAFETY: getrusage writes into the zeroed struct we own and reads nothing else.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_SELF is valid and `usage` is a valid out-pointer.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        if rc != 0 {
            return CpuTime::default();
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        CpuTime {
            user: tv(usage.ru_utime),
            system: tv(usage.ru_stime),
        }
    }

    /// Time used since `earlier`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_recorded_values() {
        let mut s = OpStats::new();
        for ms in 1..=1000u64 {
            s.success(Duration::from_millis(ms));
        }
        let p = s.percentiles();
        assert!((p.p50 - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.p90 - 900.0).abs() < 1.0, "{p:?}");
        assert!((p.p99 - 990.0).abs() < 1.5, "{p:?}");
        assert!((p.max - 1000.0).abs() < 1.0, "{p:?}");
        assert_eq!(s.successes, 1000);
    }

    #[test]
    fn failures_are_not_latencies() {
        let mut s = OpStats::new();
        s.fail(Failure::Timeout);
        s.fail(Failure::Timeout);
        s.fail(Failure::Rejected("blocked".into()));
        s.fail(Failure::Closed("error".into()));
        assert_eq!(s.successes, 0);
        assert!(s.latency_us.is_empty());
        assert_eq!(s.failures["timeout"], 2);
        assert_eq!(s.failures["rejected:blocked"], 1);
        assert_eq!(s.failures["closed:error"], 1);
        assert_eq!(s.failure_count(), 4);
        assert_eq!(s.percentiles(), Percentiles::default());
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = OpStats::new();
        a.success(Duration::from_millis(1));
        a.fail(Failure::Timeout);
        let mut b = OpStats::new();
        b.success(Duration::from_millis(100));
        b.fail(Failure::Timeout);
        b.events_received = 3;
        b.bytes_received = 700;
        a.merge(&b);
        assert_eq!(a.successes, 2);
        assert_eq!(a.failures["timeout"], 2);
        assert_eq!(a.events_received, 3);
        assert_eq!(a.bytes_received, 700);
        assert!(a.percentiles().max >= 99.0);
    }

    #[test]
    fn prefixes() {
        assert_eq!(message_prefix("rate-limited: slow down"), "rate-limited");
        assert_eq!(message_prefix("duplicate: have it"), "duplicate");
        assert_eq!(message_prefix(""), "no-reason");
        assert_eq!(message_prefix("something went wrong"), "other");
    }

    #[test]
    fn cpu_time_advances() {
        let a = CpuTime::now();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let d = CpuTime::now().since(a);
        assert!(d.user + d.system > Duration::ZERO);
    }
}
