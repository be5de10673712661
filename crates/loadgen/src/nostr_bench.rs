//! rnostr's nostr-bench as a relay comparison runs it: the events its `req`
//! looks for, the parsing of its `--json` output into one record per run,
//! and `nostr-bench.md`, one line per run.
//!
//! A record ([`BenchRun`]) is one line of a run's `nostr-bench.jsonl`; the
//! headline ([`crate::headline`]) reads the same lines back.

use std::io::{self, Write};

use nostrwire_event::{Keys, Kind, SignedFields, Tag, Timestamp, UnsignedEvent};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The content of every nostr-bench note.
const CONTENT: &str = "This is a message from nostr-bench client";
/// The `e` tag of every nostr-bench note.
const E_TAG: &str = "378f145897eea948952674269945e88612420db35791784abf0616b4fed56ef7";
/// nostr-bench draws its hashtags from `nostr-bench-0` to `nostr-bench-999`.
pub const TAGS: u64 = 1000;

/// Writes the events `nostr-bench req` finds: `per_tag × 1000` kind-1 notes
/// shaped like the ones `nostr-bench event` publishes, one JSON event per
/// line.
///
/// `nostr-bench req` asks `{"#t":["nostr-bench-N"],"limit":L}` with N drawn
/// from 0..1000, so a relay that never stored such events answers with EOSE
/// alone and the query measures nothing. Event i (from 0) is by author
/// `Keys::derive(seed, i % authors)`, has the tags nostr-bench gives its
/// notes (`p` of the author, the same `e` id, `t` "nostr-bench-" and `t`
/// "nostr-bench-{i % 1000}") and the same content, and `created_at` one
/// second after event i-1, the last one at `newest`. The same arguments give
/// the same bytes.
pub fn write_seed(
    out: &mut impl Write,
    per_tag: u64,
    authors: u64,
    seed: u64,
    newest: u64,
) -> io::Result<()> {
    let authors = authors.max(1);
    let total = per_tag * TAGS;
    let first = newest.saturating_sub(total.saturating_sub(1));
    let keys: Vec<Keys> = (0..authors).map(|i| Keys::derive(seed, i)).collect();
    let mut line = Vec::with_capacity(1024);
    for i in 0..total {
        let k = &keys[(i % authors) as usize];
        let author = k.public_key().to_hex();
        let hashtag = format!("nostr-bench-{}", i % TAGS);
        let tags = vec![
            Tag::from_strs(&["p", &author]),
            Tag::from_strs(&["e", E_TAG]),
            Tag::from_strs(&["t", "nostr-bench-"]),
            Tag::from_strs(&["t", &hashtag]),
        ];
        let created_at = Timestamp::new(first + i)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "timestamp out of range"))?;
        let event = UnsignedEvent::new(k, created_at, Kind(1), tags, CONTENT).sign(k);
        line.clear();
        event.write_json(&mut line);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    out.flush()
}

/// One nostr-bench test: its tool and how many connections it opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// `event` or `req`.
    pub tool: String,
    /// `-c` (and `-r`): connections, all opened in the first second.
    pub connections: u64,
}

impl Test {
    /// Parses `TOOL-cCONNECTIONS` (`event-c20`, `req-c1000`).
    pub fn parse(name: &str) -> Result<Test, Error> {
        let bad = || {
            Error::Usage(format!(
                "nostr-bench test {name:?}: expected event-cN or req-cN (N connections)"
            ))
        };
        let (tool, conns) = name.split_once("-c").ok_or_else(bad)?;
        if tool != "event" && tool != "req" {
            return Err(bad());
        }
        let connections: u64 = conns.parse().map_err(|_| bad())?;
        if connections == 0 {
            return Err(bad());
        }
        Ok(Test {
            tool: tool.to_string(),
            connections,
        })
    }

    /// `TOOL-cCONNECTIONS`.
    pub fn name(&self) -> String {
        format!("{}-c{}", self.tool, self.connections)
    }
}

/// The equal-work check before `req`: 100 of nostr-bench's hashtags asked
/// one REQ at a time, and what came back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// REQs answered with EOSE.
    #[serde(default)]
    pub reqs: u64,
    /// Events returned.
    #[serde(default)]
    pub events: u64,
    /// Bytes of the event messages (payloads; frame headers not counted).
    #[serde(default)]
    pub bytes: u64,
    /// The same with each JSON string escape counted as what it stands for.
    #[serde(default)]
    pub unescaped: u64,
    /// Why the check has no figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One nostr-bench run: a line of `nostr-bench.jsonl`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BenchRun {
    /// The relay's name.
    pub relay: String,
    /// `TOOL-cCONNECTIONS`.
    pub test: String,
    /// `event` or `req`.
    pub tool: String,
    /// Connections.
    pub connections: u64,
    /// Round, from 1.
    pub round: u64,
    /// nostr-bench's `-k`.
    #[serde(default)]
    pub seconds: u64,
    /// nostr-bench's `-t`.
    #[serde(default)]
    pub threads: u64,
    /// What the relay sent on connect before the client spoke.
    #[serde(default)]
    pub greeting: Option<String>,
    /// Events of the seed file the relay accepted (`req` only).
    #[serde(default)]
    pub seeded: Option<u64>,
    /// Whether the relay was still running after the run.
    #[serde(default = "yes")]
    pub relay_up: bool,
    /// The relay's CPU seconds over the run.
    #[serde(default)]
    pub relay_cpu_s: Option<f64>,
    /// The equal-work check (`req` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// Bytes of the event messages per REQ (the check before `req`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_req: Option<f64>,
    /// The same with JSON string escapes counted as what they stand for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unescaped_per_req: Option<f64>,
    /// Events per REQ in the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_per_req: Option<f64>,
    /// Why there are no figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// nostr-bench's mean milliseconds per answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_ms: Option<f64>,
    /// Requests answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<f64>,
    /// Answers that were errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<f64>,
    /// Answered requests that were not errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successes: Option<f64>,
    /// Events nostr-bench counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<f64>,
    /// Bytes nostr-bench counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<f64>,
    /// Connections refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_errors: Option<f64>,
    /// Connections lost during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_lost: Option<f64>,
    /// nostr-bench's 2-second rates while every connection was sending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tps_intervals: Vec<f64>,
    /// Median rate while every connection was sending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps: Option<f64>,
    /// Relay CPU µs per answered request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_op: Option<f64>,
}

fn yes() -> bool {
    true
}

/// What is known of a run besides nostr-bench's output.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The relay's name.
    pub relay: String,
    /// The test.
    pub test: Test,
    /// Round, from 1.
    pub round: u64,
    /// `-k`.
    pub seconds: u64,
    /// `-t`.
    pub threads: u64,
    /// What the relay sent on connect before the client spoke.
    pub greeting: String,
    /// Seed events the relay accepted (`req`).
    pub seeded: Option<u64>,
    /// Whether the relay still ran after the run.
    pub relay_up: bool,
    /// The relay's CPU seconds over the run, from `/proc`.
    pub relay_cpu_s: Option<f64>,
    /// The equal-work check (`req`).
    pub check: Option<Check>,
}

/// The median of `xs` (the mean of the middle two for an even count).
fn median(xs: &[f64]) -> Option<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

fn num(v: &serde_json::Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// One record from nostr-bench's `--json` output (one JSON object per
/// line every 2 s, cumulative; other lines are ignored) and the run's
/// context.
///
/// The figures come from the last line. `tps` is the median of the
/// 2-second rates while every connection was sending: after the first line
/// (connections opening, then nostr-bench's 1 s wait) and up to the end of
/// `-k`; with no such interval, the answered requests over `-k` less one
/// second. `cpu_us_per_op` is the relay's CPU over every answered request.
pub fn record(ctx: &RunContext, output: &str) -> BenchRun {
    let mut rec = BenchRun {
        relay: ctx.relay.clone(),
        test: ctx.test.name(),
        tool: ctx.test.tool.clone(),
        connections: ctx.test.connections,
        round: ctx.round,
        seconds: ctx.seconds,
        threads: ctx.threads,
        greeting: Some(ctx.greeting.clone()),
        seeded: ctx.seeded,
        relay_up: ctx.relay_up,
        relay_cpu_s: ctx.relay_cpu_s,
        ..BenchRun::default()
    };
    if ctx.test.tool == "req" {
        let chk = ctx.check.clone().unwrap_or_else(|| Check {
            error: Some("check failed".into()),
            ..Check::default()
        });
        if chk.reqs > 0 {
            let reqs = chk.reqs as f64;
            rec.bytes_per_req = Some(chk.bytes as f64 / reqs);
            rec.unescaped_per_req = Some(chk.unescaped as f64 / reqs);
            rec.events_per_req = Some(chk.events as f64 / reqs);
        }
        rec.check = Some(chk);
    }
    let lines: Vec<serde_json::Value> = output
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let Some(last) = lines.last() else {
        rec.error = Some("no output".into());
        return rec;
    };
    let m = |k: &str| num(last, &["message_stats", k]);
    let complete = m("complete").unwrap_or(0.0);
    let errors = m("error").unwrap_or(0.0);
    rec.avg_ms = num(last, &["message_stats", "success_time", "avg"]);
    rec.complete = Some(complete);
    rec.errors = Some(errors);
    rec.successes = Some(complete - errors);
    rec.events = m("event");
    rec.size = m("size");
    rec.connect_errors = num(last, &["connect_stats", "error"]);
    rec.connections_lost = num(last, &["connect_stats", "lost"]);
    let secs = ctx.seconds as f64;
    rec.tps_intervals = lines
        .iter()
        .skip(1)
        .filter_map(|l| {
            let elapsed = num(l, &["elapsed"])?;
            let last = num(l, &["last_elapsed"])?;
            (elapsed - last >= 2000.0 && elapsed <= secs * 1000.0).then(|| num(l, &["tps"]))?
        })
        .collect();
    rec.tps = median(&rec.tps_intervals)
        .or_else(|| Some((complete - errors) / (ctx.seconds.saturating_sub(1).max(1)) as f64));
    rec.cpu_us_per_op = ctx
        .relay_cpu_s
        .filter(|_| complete > 0.0)
        .map(|cpu| cpu * 1e6 / complete);
    rec
}

/// `nostr-bench.md`: one line per run.
pub fn markdown(runs: &[BenchRun]) -> String {
    let f = |v: Option<f64>, d: usize| crate::figures::fmt(v, d);
    let mut out = String::from(
        "# nostr-bench runs\n\n\
         One line per run: the relay alone on a fresh data directory. tps: median of nostr-bench's\n\
         2-second rates while every connection was sending; relay CPU: utime + stime from /proc\n\
         around the run (handshakes included); µs per op: that CPU over the operations nostr-bench\n\
         counted as answered. mean ms: nostr-bench's mean time from a request to its answer (whole\n\
         milliseconds). greeting: what the relay sent on connect before the client spoke.\n\
         bytes and events per REQ: the equal-work check before `req` (100 of nostr-bench's hashtags,\n\
         one REQ at a time; bytes of the event messages returned). seeded: events of the seed file\n\
         the relay accepted.\n\n\
         | round | test | relay | greeting | tps | mean ms | answered | failed | relay CPU s | µs CPU / op | bytes / REQ | events / REQ | seeded | notes |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for x in runs {
        let mut notes = Vec::new();
        if let Some(e) = &x.error {
            notes.push(e.clone());
        }
        if let Some(n) = x.connect_errors.filter(|&n| n != 0.0) {
            notes.push(format!("{n} connections refused"));
        }
        if let Some(n) = x.connections_lost.filter(|&n| n != 0.0) {
            notes.push(format!("{n} connections lost"));
        }
        if !x.relay_up {
            notes.push("relay exited".into());
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            x.round,
            x.test,
            x.relay,
            x.greeting.as_deref().unwrap_or("–"),
            f(x.tps, 0),
            f(x.avg_ms, 0),
            f(x.complete, 0),
            f(x.errors, 0),
            f(x.relay_cpu_s, 2),
            f(x.cpu_us_per_op, 0),
            f(x.bytes_per_req, 0),
            f(x.events_per_req, 1),
            f(x.seeded.map(|s| s as f64), 0),
            notes.join("; ")
        ));
    }
    out
}

/// Reads `nostr-bench.jsonl`.
pub fn read_runs(text: &str) -> Result<Vec<BenchRun>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `nostr-bench event -c 20 -k 15 --json` run, as it printed it.
    const EVENT_OUT: &str = include_str!("../tests/data/nostr-bench-event-c20.out");

    fn ctx(test: &str, cpu: Option<f64>, check: Option<Check>) -> RunContext {
        RunContext {
            relay: "nostrwire".into(),
            test: Test::parse(test).unwrap(),
            round: 1,
            seconds: 15,
            threads: 1,
            greeting: "nothing".into(),
            seeded: None,
            relay_up: true,
            relay_cpu_s: cpu,
            check,
        }
    }

    #[test]
    fn tests_are_named_tool_and_connections() {
        let t = Test::parse("req-c1000").unwrap();
        assert_eq!((t.tool.as_str(), t.connections), ("req", 1000));
        assert_eq!(t.name(), "req-c1000");
        for bad in ["req", "echo-c10", "event-c0", "event-cx", ""] {
            assert!(Test::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_real_run_parses_as_the_script_did() {
        // The figures the shell script's parser wrote for this output
        // (bench-runs/2026-11-26-relays-writer, nostrwire event-c20 round 1).
        let rec = record(&ctx("event-c20", Some(11.67), None), EVENT_OUT);
        assert_eq!(rec.error, None);
        assert_eq!(rec.complete, Some(93820.0));
        assert_eq!(rec.errors, Some(0.0));
        assert_eq!(rec.size, Some(62286075.0));
        assert_eq!(rec.avg_ms, Some(3.0));
        assert_eq!(
            rec.tps_intervals,
            vec![6767.0, 7384.0, 7146.0, 7628.0, 6997.0, 7159.0]
        );
        assert_eq!(rec.tps, Some(7152.5));
        assert_eq!(rec.cpu_us_per_op, Some(11.67 * 1e6 / 93820.0));
        assert!(rec.check.is_none() && rec.bytes_per_req.is_none());
    }

    #[test]
    fn no_output_is_an_error_not_a_zero() {
        let rec = record(&ctx("event-c20", Some(1.0), None), "Cli { … }\nnot json\n");
        assert_eq!(rec.error.as_deref(), Some("no output"));
        assert_eq!(
            (rec.tps, rec.complete, rec.cpu_us_per_op),
            (None, None, None)
        );
        assert!(markdown(&[rec]).contains("| no output |"));
    }

    #[test]
    fn without_a_full_interval_the_rate_is_over_the_run() {
        let out = r#"{"elapsed":0,"last_elapsed":0,"tps":0,"message_stats":{"complete":0,"error":0}}
{"elapsed":1500,"last_elapsed":1500,"tps":10,"message_stats":{"complete":150,"error":10,"success_time":{"avg":2}},"connect_stats":{"error":3,"lost":1}}"#;
        let mut c = ctx("event-c20", None, None);
        c.seconds = 3;
        let rec = record(&c, out);
        assert!(rec.tps_intervals.is_empty());
        assert_eq!(rec.tps, Some(70.0));
        assert_eq!(rec.successes, Some(140.0));
        assert_eq!(rec.cpu_us_per_op, None);
        let md = markdown(&[rec]);
        assert!(
            md.contains("3 connections refused; 1 connections lost"),
            "{md}"
        );
    }

    #[test]
    fn a_req_run_carries_its_equal_work_check() {
        let check = Check {
            reqs: 100,
            events: 1000,
            bytes: 650_000,
            unescaped: 640_000,
            error: None,
        };
        let rec = record(&ctx("req-c1000", Some(2.0), Some(check)), EVENT_OUT);
        assert_eq!(rec.bytes_per_req, Some(6500.0));
        assert_eq!(rec.unescaped_per_req, Some(6400.0));
        assert_eq!(rec.events_per_req, Some(10.0));
        // A failed check leaves no bytes per REQ, so the headline gives no ratio.
        let rec = record(&ctx("req-c1000", Some(2.0), None), EVENT_OUT);
        assert_eq!(rec.bytes_per_req, None);
        assert_eq!(rec.check.unwrap().error.as_deref(), Some("check failed"));
    }

    #[test]
    fn records_read_back_as_written() {
        let rec = record(&ctx("event-c20", Some(11.67), None), EVENT_OUT);
        let line = serde_json::to_string(&rec).unwrap();
        let back = read_runs(&format!("{line}\n\n{line}\n")).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(markdown(&back), markdown(&[rec.clone(), rec]));
        assert!(read_runs("{\"relay\": 1}")
            .unwrap_err()
            .starts_with("line 1"));
    }

    #[test]
    fn the_seed_is_the_same_for_the_same_arguments() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_seed(&mut a, 1, 3, 1, 1_700_000_000).unwrap();
        write_seed(&mut b, 1, 3, 1, 1_700_000_000).unwrap();
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert!(text.lines().last().unwrap().contains("nostr-bench-999"));
    }
}
