//! Output: the summary table, the JSON report, Markdown and an SVG latency chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::abuse::{AbuseParams, RelayState};
use crate::host::Host;
use crate::runner::{main_op, throughput, RunReport, ScenarioResult};
use crate::scenario::{Scenario, Status};
use crate::stats::{OpStats, Percentiles};

/// Labels whose throughput is not a measurement (setup work).
const UNTIMED: [&str; 2] = ["seed", "subscribe"];

/// One operation's figures in the JSON report.
#[derive(Debug, Serialize)]
pub struct OpJson {
    /// Successful operations.
    pub successes: u64,
    /// Failed operations.
    pub failures: u64,
    /// Failures by reason.
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Successes per second of measured time (absent for setup work).
    pub throughput_per_s: Option<f64>,
    /// Events received in answers.
    pub events_received: u64,
    /// Bytes of those event messages (queries: payloads as sent, frame
    /// headers not counted), so relays can be seen to serve the same work.
    pub bytes_received: u64,
    /// The same with JSON string escapes counted as the characters they
    /// stand for: equal for relays that return the same events.
    pub bytes_unescaped: u64,
    /// Latency of successes, milliseconds.
    pub latency_ms: Percentiles,
}

/// One scenario × relay (× round) in the JSON report.
#[derive(Debug, Serialize)]
pub struct ResultJson {
    /// Scenario name.
    pub scenario: String,
    /// Relay URL.
    pub relay: String,
    /// Round (from 1); absent in totals.
    pub round: Option<usize>,
    /// Rounds summed.
    pub rounds: usize,
    /// `completed` or `unsupported`.
    pub status: String,
    /// Why the scenario is unsupported.
    pub unsupported_reason: Option<String>,
    /// Measured time, seconds.
    pub elapsed_s: f64,
    /// Wall time including setup and seeding, seconds.
    pub wall_s: f64,
    /// Figures per operation.
    pub ops: BTreeMap<String, OpJson>,
    /// Bytes received from the relay.
    pub bytes_in: u64,
    /// Bytes sent to the relay.
    pub bytes_out: u64,
    /// Client user CPU, seconds.
    pub client_cpu_user_s: f64,
    /// Client system CPU, seconds.
    pub client_cpu_system_s: f64,
    /// Client CPU over wall time (1.0 = one core busy): a client bottleneck shows here.
    pub client_cpu_cores: f64,
    /// Relay CPU seconds over the whole scenario (setup and seeding
    /// included), when the relay runs as this user on this host.
    pub relay_cpu_s: Option<f64>,
    /// Relay CPU seconds over the measured phase only.
    pub relay_cpu_measured_s: Option<f64>,
    /// Operations of the measured phase (successes and failures of every
    /// timed operation), the divisor of `relay_cpu_us_per_op`.
    pub measured_ops: u64,
    /// Relay CPU microseconds per operation of the measured phase.
    pub relay_cpu_us_per_op: Option<f64>,
    /// Relay resident memory at the end, KiB.
    pub relay_rss_kib: Option<u64>,
    /// The anonymous part of it, KiB: without the pages of mapped files
    /// (an LMDB database), which the kernel can drop under pressure.
    pub relay_rss_anon_kib: Option<u64>,
    /// Unsolicited relay messages by type.
    pub anomalies: BTreeMap<String, u64>,
    /// The first relay message seen for each failure reason.
    pub failure_examples: BTreeMap<String, String>,
    /// Scenario-specific figures.
    pub metrics: BTreeMap<String, f64>,
    /// Remarks.
    pub notes: Vec<String>,
    /// The abuse summary (abuse scenarios only).
    pub abuse: Option<AbuseJson>,
}

/// One row of the abuse table: what an attack did to the relay and to
/// the probe that kept using it.
#[derive(Debug, Serialize)]
pub struct AbuseJson {
    /// Attack name (without `abuse-`).
    pub attack: String,
    /// The relay still answered a REQ after the attack.
    pub relay_up: bool,
    /// `up`, `unresponsive` (handshakes, but no answer to a REQ) or `down`.
    pub relay_state: String,
    /// Peak resident memory of the relay during the attack, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Peak anonymous resident memory (without mapped files), MiB.
    pub peak_rss_anon_mib: Option<f64>,
    /// Anonymous resident memory before the attack, MiB (earlier attacks
    /// of the same run may have left some).
    pub rss_anon_before_mib: Option<f64>,
    /// p99 of the probe's EVENT → OK, ms (none if nothing succeeded).
    pub probe_ok_p99_ms: Option<f64>,
    /// p99 of the probe's REQ → EOSE, ms.
    pub probe_eose_p99_ms: Option<f64>,
    /// p99 of the probe's events' delivery to a live subscriber, ms.
    pub live_delivery_p99_ms: Option<f64>,
    /// p99 of the probe's new connections (handshake), ms.
    pub probe_connect_p99_ms: Option<f64>,
    /// Probe events the relay answered `OK true`.
    pub acked: u64,
    /// Of those, not returned by an id lookup after the attack (none when
    /// the relay was down or the lookup failed).
    pub acked_lost: Option<u64>,
    /// `pass`, `pass: …`, `fail: …` or `n/a: …`.
    pub verdict: String,
}

/// A relay's figures relative to the first relay's.
#[derive(Debug, Serialize)]
pub struct RatioJson {
    /// Scenario name.
    pub scenario: String,
    /// Operation compared.
    pub op: String,
    /// Relay URL.
    pub relay: String,
    /// Throughput / baseline throughput.
    pub throughput: Option<f64>,
    /// p50 / baseline p50.
    pub p50: Option<f64>,
    /// p99 / baseline p99.
    pub p99: Option<f64>,
    /// Throughput of each round, events/s (shows drift and noise).
    pub round_throughputs: Vec<f64>,
}

/// Settings as recorded in the report.
#[derive(Debug, Serialize)]
pub struct SettingsJson {
    relays: Vec<String>,
    scenarios: Vec<String>,
    count: usize,
    connections: usize,
    duration_s: f64,
    rate: f64,
    replay: Option<String>,
    seed: u64,
    timeout_s: f64,
    rounds: usize,
    authors: usize,
    kind_mix: String,
    corpus: String,
    idle_connections: usize,
    subscribers: usize,
    burst_size: usize,
    burst_gap_ms: u128,
    large_events: usize,
    seed_events: usize,
    threads: Option<usize>,
    abuse: Option<AbuseParams>,
}

/// The whole JSON report.
#[derive(Debug, Serialize)]
pub struct JsonReport {
    /// Producer and version.
    pub tool: String,
    /// Run start, seconds since the epoch.
    pub started_unix: u64,
    /// The load-generating host.
    pub host: Host,
    /// Settings.
    pub settings: SettingsJson,
    /// Events signed or loaded before the clocks started, and how long that took.
    pub prepared_events: usize,
    /// Seconds spent preparing events.
    pub preparation_s: f64,
    /// Per scenario and relay, summed over rounds.
    pub totals: Vec<ResultJson>,
    /// Per round, in execution order.
    pub rounds: Vec<ResultJson>,
    /// Ratios to the first relay.
    pub ratios: Vec<RatioJson>,
}

fn op_json(label: &str, s: &OpStats, elapsed: f64) -> OpJson {
    OpJson {
        successes: s.successes,
        failures: s.failure_count(),
        failures_by_reason: s.failures.clone(),
        throughput_per_s: (!UNTIMED.contains(&label) && elapsed > 0.0)
            .then(|| s.successes as f64 / elapsed),
        events_received: s.events_received,
        bytes_received: s.bytes_received,
        bytes_unescaped: s.bytes_unescaped,
        latency_ms: s.percentiles(),
    }
}

/// Operations of the measured phase: successes and failures of every timed
/// operation (setup work such as seeding not counted).
pub fn measured_ops(r: &ScenarioResult) -> u64 {
    r.outcome
        .ops
        .iter()
        .filter(|(l, _)| !UNTIMED.contains(&l.as_str()))
        .map(|(_, s)| s.successes + s.failure_count())
        .sum()
}

/// The relay's CPU microseconds per operation of the measured phase.
pub fn relay_cpu_us_per_op(r: &ScenarioResult) -> Option<f64> {
    let cpu = r.outcome.relay_cpu_s?;
    let ops = measured_ops(r);
    (ops > 0).then(|| cpu * 1e6 / ops as f64)
}

fn p99(r: &ScenarioResult, label: &str) -> Option<f64> {
    let s = r.outcome.ops.get(label)?;
    (s.successes > 0).then(|| s.percentiles().p99)
}

/// The abuse row of a result (`None` for other scenarios).
pub fn abuse_json(r: &ScenarioResult) -> Option<AbuseJson> {
    let Scenario::Abuse(attack) = r.scenario else {
        return None;
    };
    let m = &r.outcome.metrics;
    let mib = |k: &str| m.get(k).map(|v| v / 1024.0);
    let state = RelayState::from_metric(m.get("relay_state").copied().unwrap_or(0.0));
    let verdict = match (&r.outcome.status, &r.outcome.verdict) {
        (Status::Unsupported(why), _) => format!("n/a: {why}"),
        (_, Some(v)) => v.clone(),
        (_, None) => "–".into(),
    };
    Some(AbuseJson {
        attack: attack.short_name().to_string(),
        relay_up: state == RelayState::Up,
        relay_state: state.name().to_string(),
        peak_rss_mib: mib("relay_peak_rss_kib"),
        peak_rss_anon_mib: mib("relay_peak_rss_anon_kib"),
        rss_anon_before_mib: mib("relay_rss_anon_before_kib"),
        probe_ok_p99_ms: p99(r, "probe:ok"),
        probe_eose_p99_ms: p99(r, "probe:eose"),
        live_delivery_p99_ms: p99(r, "probe:delivery"),
        probe_connect_p99_ms: p99(r, "probe:connect"),
        acked: m.get("acked").map_or(0, |v| *v as u64),
        acked_lost: m.get("acked_lost").map(|v| *v as u64),
        verdict,
    })
}

fn result_json(r: &ScenarioResult) -> ResultJson {
    let elapsed = r.outcome.elapsed.as_secs_f64();
    let (status, reason) = match &r.outcome.status {
        Status::Completed => ("completed", None),
        Status::Unsupported(why) => ("unsupported", Some(why.clone())),
    };
    ResultJson {
        scenario: r.scenario.name().to_string(),
        relay: r.relay.clone(),
        round: r.round.map(|n| n + 1),
        rounds: r.rounds_merged,
        status: status.to_string(),
        unsupported_reason: reason,
        elapsed_s: elapsed,
        wall_s: r.wall.as_secs_f64(),
        ops: r
            .outcome
            .ops
            .iter()
            .map(|(l, s)| (l.clone(), op_json(l, s, elapsed)))
            .collect(),
        bytes_in: r.bytes_in,
        bytes_out: r.bytes_out,
        client_cpu_user_s: r.client_cpu.user.as_secs_f64(),
        client_cpu_system_s: r.client_cpu.system.as_secs_f64(),
        client_cpu_cores: r.client_cpu_share(),
        relay_cpu_s: r.relay_cpu_s,
        relay_cpu_measured_s: r.outcome.relay_cpu_s,
        measured_ops: measured_ops(r),
        relay_cpu_us_per_op: relay_cpu_us_per_op(r),
        relay_rss_kib: r.relay_rss_kib,
        relay_rss_anon_kib: r.relay_rss_anon_kib,
        anomalies: r.outcome.anomalies.counts.clone(),
        failure_examples: r.outcome.anomalies.samples.clone(),
        metrics: r.outcome.metrics.clone(),
        notes: r.outcome.notes.clone(),
        abuse: abuse_json(r),
    }
}

/// Ratios of every relay to the first, per scenario, on each scenario's main operation.
pub fn ratios(report: &RunReport) -> Vec<RatioJson> {
    let mut out = Vec::new();
    for &sc in &report.settings.scenarios {
        let totals: Vec<&ScenarioResult> =
            report.totals.iter().filter(|r| r.scenario == sc).collect();
        let Some(base) = totals.first() else { continue };
        let Some(op) = main_op(base) else { continue };
        let base_tp = throughput(base, &op);
        let base_p = base.outcome.ops.get(&op).map(OpStats::percentiles);
        for r in &totals {
            let tp = throughput(r, &op);
            let p = r.outcome.ops.get(&op).map(OpStats::percentiles);
            let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            out.push(RatioJson {
                scenario: sc.name().to_string(),
                op: op.clone(),
                relay: r.relay.clone(),
                throughput: div(tp, base_tp),
                p50: div(p.map(|p| p.p50), base_p.map(|p| p.p50)),
                p99: div(p.map(|p| p.p99), base_p.map(|p| p.p99)),
                round_throughputs: report
                    .rounds
                    .iter()
                    .filter(|x| x.scenario == sc && x.relay == r.relay)
                    .filter_map(|x| throughput(x, &op))
                    .collect(),
            });
        }
    }
    out
}

/// Builds the JSON report.
pub fn json(report: &RunReport) -> JsonReport {
    let s = &report.settings;
    JsonReport {
        tool: format!("nostrwire-loadgen {}", env!("CARGO_PKG_VERSION")),
        started_unix: report.started_unix,
        host: report.host.clone(),
        settings: SettingsJson {
            relays: s.relays.clone(),
            scenarios: s.scenarios.iter().map(|x| x.name().to_string()).collect(),
            count: s.count,
            connections: s.connections,
            duration_s: s.duration.as_secs_f64(),
            rate: s.rate,
            replay: s.replay.as_ref().map(|p| p.display().to_string()),
            seed: s.seed,
            timeout_s: s.timeout.as_secs_f64(),
            rounds: s.rounds,
            authors: s.authors,
            kind_mix: s.kind_mix.display().to_string(),
            corpus: s.corpus.display().to_string(),
            idle_connections: s.idle_connections,
            subscribers: s.subscribers,
            burst_size: s.burst_size,
            burst_gap_ms: s.burst_gap.as_millis(),
            large_events: s.large_events,
            seed_events: s.seed_events,
            threads: s.threads,
            abuse: s
                .scenarios
                .iter()
                .any(|x| matches!(x, Scenario::Abuse(_)))
                .then(|| s.abuse.clone()),
        },
        prepared_events: report.preparation.events,
        preparation_s: report.preparation.elapsed.as_secs_f64(),
        totals: report.totals.iter().map(result_json).collect(),
        rounds: report.rounds.iter().map(result_json).collect(),
        ratios: ratios(report),
    }
}

fn fmt_rate(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "–".into(),
    }
}

fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_bytes(b: u64) -> String {
    if b >= 10 << 20 {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 10 << 10 {
        format!("{:.0} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// Rows of the summary: one per scenario × relay × operation.
fn rows(report: &RunReport) -> Vec<[String; 12]> {
    let mut out = Vec::new();
    for r in &report.totals {
        if matches!(r.scenario, Scenario::Abuse(_)) {
            continue;
        }
        if let Status::Unsupported(_) = &r.outcome.status {
            let mut row: [String; 12] = Default::default();
            row[0] = r.scenario.name().into();
            row[1] = r.relay.clone();
            row[2] = "unsupported".into();
            out.push(row);
            continue;
        }
        let elapsed = r.outcome.elapsed.as_secs_f64();
        for (label, s) in &r.outcome.ops {
            let j = op_json(label, s, elapsed);
            let p = j.latency_ms;
            out.push([
                r.scenario.name().into(),
                r.relay.clone(),
                label.clone(),
                s.successes.to_string(),
                s.failure_count().to_string(),
                fmt_rate(j.throughput_per_s),
                fmt_ms(p.p50),
                fmt_ms(p.p90),
                fmt_ms(p.p99),
                fmt_ms(p.p999),
                fmt_ms(p.max),
                format!("{:.2}", r.client_cpu_share()),
            ]);
        }
    }
    out
}

const HEADERS: [&str; 12] = [
    "scenario",
    "relay",
    "op",
    "ok",
    "fail",
    "ops/s",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "client cpu",
];

/// Lines under the table: failures, anomalies, bytes, CPU, notes.
fn details(report: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    for r in &report.totals {
        let mut parts = Vec::new();
        if let Status::Unsupported(why) = &r.outcome.status {
            parts.push(format!("unsupported: {why}"));
        }
        for (label, s) in &r.outcome.ops {
            if !s.failures.is_empty() {
                let f: Vec<String> = s.failures.iter().map(|(k, v)| format!("{k} {v}")).collect();
                parts.push(format!("{label} failures: {}", f.join(", ")));
            }
        }
        for (k, m) in &r.outcome.anomalies.samples {
            parts.push(format!("{k} e.g. \"{m}\""));
        }
        if !r.outcome.anomalies.counts.is_empty() {
            let a: Vec<String> = r
                .outcome
                .anomalies
                .counts
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            parts.push(format!("unsolicited: {}", a.join(", ")));
        }
        let answered: u64 = r.outcome.ops.values().map(|s| s.bytes_received).sum();
        if answered > 0 {
            parts.push(format!("query results {}", fmt_bytes(answered)));
        }
        parts.push(format!(
            "bytes out {} in {}; client CPU {:.2} s user + {:.2} s sys",
            fmt_bytes(r.bytes_out),
            fmt_bytes(r.bytes_in),
            r.client_cpu.user.as_secs_f64(),
            r.client_cpu.system.as_secs_f64()
        ));
        if let Some(c) = r.relay_cpu_s {
            let mut s = format!("relay CPU {c:.2} s");
            if let (Some(m), Some(per)) = (r.outcome.relay_cpu_s, relay_cpu_us_per_op(r)) {
                let _ = write!(s, " ({m:.2} s measured: {per:.0} µs per operation)");
            }
            if let Some(m) = r.relay_rss_kib {
                let _ = write!(s, ", RSS {} MiB", m / 1024);
                if let Some(anon) = r.relay_rss_anon_kib {
                    let _ = write!(s, " ({} MiB anonymous)", anon / 1024);
                }
            }
            parts.push(s);
        }
        for (k, v) in &r.outcome.metrics {
            parts.push(format!("{k} {v:.1}"));
        }
        parts.extend(r.outcome.notes.iter().cloned());
        out.push(format!(
            "{} @ {}: {}",
            r.scenario.name(),
            r.relay,
            parts.join("; ")
        ));
    }
    out
}

/// The summary table printed on standard output.
pub fn table(report: &RunReport) -> String {
    let rows = rows(report);
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", report.host.line());
    let _ = writeln!(
        out,
        "{} events prepared and signed in {:.1} s before any clock started",
        report.preparation.events,
        report.preparation.elapsed.as_secs_f64()
    );
    let line = |cells: &[String], out: &mut String| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i] - c.chars().count();
            if i < 3 {
                let _ = write!(s, "{c}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(s, "{}{c}  ", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    if !rows.is_empty() {
        line(&HEADERS.map(String::from), &mut out);
        for r in &rows {
            line(r, &mut out);
        }
    }
    out.push_str(&abuse_table(report));
    for d in details(report) {
        let _ = writeln!(out, "  {d}");
    }
    let ratios = ratios(report);
    if report.settings.relays.len() > 1 {
        let _ = writeln!(
            out,
            "ratios to {} (interleaved rounds: {})",
            report.settings.relays[0], report.settings.rounds
        );
        for r in ratios {
            let _ = writeln!(
                out,
                "  {} {} {}: throughput ×{} p50 ×{} p99 ×{} (rounds: {})",
                r.scenario,
                r.op,
                r.relay,
                fmt_ratio(r.throughput),
                fmt_ratio(r.p50),
                fmt_ratio(r.p99),
                r.round_throughputs
                    .iter()
                    .map(|t| format!("{t:.0}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    out
}

const ABUSE_HEADERS: [&str; 9] = [
    "attack",
    "relay",
    "up",
    "peak RSS / anon (+since start) MiB",
    "OK p99 ms",
    "EOSE p99 ms",
    "live p99 ms",
    "acked lost",
    "verdict",
];

/// One row per abuse scenario × relay.
fn abuse_rows(report: &RunReport) -> Vec<[String; 9]> {
    let ms = |v: Option<f64>| v.map_or("–".into(), fmt_ms);
    report
        .totals
        .iter()
        .filter_map(|r| {
            let a = abuse_json(r)?;
            let mem = match (a.peak_rss_mib, a.peak_rss_anon_mib, a.rss_anon_before_mib) {
                (Some(rss), Some(anon), Some(before)) => {
                    format!("{rss:.0} / {anon:.0} (+{:.0})", (anon - before).max(0.0))
                }
                (Some(rss), Some(anon), None) => format!("{rss:.0} / {anon:.0}"),
                _ => "–".into(),
            };
            Some([
                a.attack,
                r.relay.clone(),
                match a.relay_state.as_str() {
                    "up" => "yes",
                    "unresponsive" => "HUNG",
                    _ => "NO",
                }
                .into(),
                mem,
                ms(a.probe_ok_p99_ms),
                ms(a.probe_eose_p99_ms),
                ms(a.live_delivery_p99_ms),
                match a.acked_lost {
                    Some(n) => format!("{n} of {}", a.acked),
                    None => format!("? of {}", a.acked),
                },
                a.verdict,
            ])
        })
        .collect()
}

/// The abuse table (empty when no abuse scenario ran).
fn abuse_table(report: &RunReport) -> String {
    let rows = abuse_rows(report);
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let mut widths: Vec<usize> = ABUSE_HEADERS.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let right = |i: usize| (3..8).contains(&i);
    let mut line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = " ".repeat(widths[i] - c.chars().count());
            if i + 1 == cells.len() {
                s.push_str(c);
            } else if right(i) {
                let _ = write!(s, "{pad}{c}  ");
            } else {
                let _ = write!(s, "{c}{pad}  ");
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    line(&ABUSE_HEADERS.map(String::from));
    for r in &rows {
        line(r);
    }
    out
}

fn fmt_ratio(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

/// The Markdown report; `chart` is a relative link to the SVG, if written.
pub fn markdown(report: &RunReport, chart: Option<&str>) -> String {
    let s = &report.settings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# nostrwire load: {}\n",
        s.scenarios
            .iter()
            .map(|x| x.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "- {}", report.host.line());
    let _ = writeln!(out, "- relays: {}", s.relays.join(", "));
    let _ = writeln!(
        out,
        "- count {}, connections {}, duration bound {} s, timeout {} s, rate {}/s, rounds {} (interleaved), seed {}, authors {}{}",
        s.count,
        s.connections,
        s.duration.as_secs_f64(),
        s.timeout.as_secs_f64(),
        s.rate,
        s.rounds,
        s.seed,
        s.authors,
        s.replay.as_ref().map(|p| format!(", replay {}", p.display())).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "- {} events signed in {:.1} s before any clock started\n",
        report.preparation.events,
        report.preparation.elapsed.as_secs_f64()
    );
    let rows = rows(report);
    if !rows.is_empty() {
        let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len()));
        for r in rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        let _ = writeln!(out);
    }
    let abuse = abuse_rows(report);
    if !abuse.is_empty() {
        let _ = writeln!(out, "| {} |", ABUSE_HEADERS.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(ABUSE_HEADERS.len()));
        for r in abuse {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        let _ = writeln!(out);
    }
    for d in details(report) {
        let _ = writeln!(out, "- {d}");
    }
    if s.relays.len() > 1 {
        let _ = writeln!(out, "\n## Ratios to {}\n", s.relays[0]);
        let _ = writeln!(
            out,
            "| scenario | op | relay | throughput | p50 | p99 | per-round ops/s |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|");
        for r in ratios(report) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.scenario,
                r.op,
                r.relay,
                fmt_ratio(r.throughput),
                fmt_ratio(r.p50),
                fmt_ratio(r.p99),
                r.round_throughputs
                    .iter()
                    .map(|t| format!("{t:.0}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    if let Some(c) = chart {
        let _ = writeln!(out, "\n![latency percentiles]({c})");
    }
    out
}

fn escape_xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Quantiles plotted: 0 to 99.99 %, evenly spaced on the `1/(1-q)` log axis.
fn plot_quantiles() -> Vec<f64> {
    (0..=40)
        .map(|i| 1.0 - 10f64.powf(-(i as f64) / 10.0))
        .collect()
}

/// An SVG chart of the latency percentile spectrum of every scenario's main
/// operation on every relay (log latency against log `1/(1-q)`).
pub fn svg(report: &RunReport) -> String {
    let (left, right, top, bottom) = (70.0, 330.0, 40.0, 50.0);
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in &report.totals {
        let Some(op) = main_op(r) else { continue };
        let Some(s) = r.outcome.ops.get(&op) else {
            continue;
        };
        if s.latency_us.is_empty() {
            continue;
        }
        let pts = plot_quantiles()
            .into_iter()
            .map(|q| (q, s.latency_us.value_at_quantile(q).max(1) as f64 / 1000.0))
            .collect();
        let name = if report.settings.relays.len() > 1 {
            format!("{} {} @ {}", r.scenario.name(), op, r.relay)
        } else {
            format!("{} {}", r.scenario.name(), op)
        };
        series.push((name, pts));
    }
    // Room for the plot and for one legend line per series.
    let w = 1000.0f64;
    let h = (520.0f64).max(top + 24.0 + 18.0 * series.len() as f64 + bottom);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for (_, pts) in &series {
        for (_, v) in pts {
            lo = lo.min(*v);
            hi = hi.max(*v);
        }
    }
    if series.is_empty() {
        lo = 0.01;
        hi = 1.0;
    }
    let ylo = 10f64.powf(lo.log10().floor());
    let yhi = 10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let xmax = 4.0; // log10(1/(1-0.9999))
    let x = |q: f64| left + pw * ((1.0 / (1.0 - q)).log10() / xmax).min(1.0);
    let y = |v: f64| top + ph * (1.0 - (v.log10() - ylo.log10()) / (yhi.log10() - ylo.log10()));
    let colors = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#bcbd22", "#17becf",
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="22" font-size="14">Latency by percentile ({})</text>"#,
        escape_xml(&report.host.line())
    );
    // Axes and grid.
    let mut decade = ylo;
    while decade <= yhi * 1.0001 {
        let yy = y(decade);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            yy + 4.0,
            fmt_ms(decade)
        );
        decade *= 10.0;
    }
    for (q, label) in [
        (0.0, "0%"),
        (0.9, "90%"),
        (0.99, "99%"),
        (0.999, "99.9%"),
        (0.9999, "99.99%"),
    ] {
        let xx = x(q);
        let _ = writeln!(
            out,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#ddd"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + ph,
            top + ph + 18.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text><text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">latency, ms (log)</text>"#,
        left + pw / 2.0,
        h - 10.0,
        top + ph / 2.0,
        top + ph / 2.0
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|(q, v)| format!("{:.1},{:.1}", x(*q), y(*v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        let ly = top + 14.0 + 18.0 * i as f64;
        let lx = left + pw + 14.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 4.0,
            lx + 18.0,
            ly - 4.0,
            lx + 24.0,
            escape_xml(name)
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_reach_four_nines() {
        let q = plot_quantiles();
        assert_eq!(q[0], 0.0);
        assert!((q[40] - 0.9999).abs() < 1e-9);
        assert!(q.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_ms(0.123), "0.12");
        assert_eq!(fmt_ms(12.34), "12.3");
        assert_eq!(fmt_ms(1234.0), "1234");
        assert_eq!(fmt_rate(None), "–");
        assert_eq!(fmt_bytes(100), "100 B");
        assert_eq!(escape_xml("a<b&c"), "a&lt;b&amp;c");
    }
}
