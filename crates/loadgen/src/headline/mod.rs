//! The headline of a relay comparison (`nostrwire bench relays`): both
//! tools' figures for each relay side by side, and the ratio ours / best
//! peer under three rules:
//!
//! - **timeouts are reported**: a relay's figure covers every round, and a
//!   round in which any relay timed out on (nostr-bench: failed) more than
//!   [`GATE`] of its requests is named beside the figure;
//! - **ratios only from clean rounds**: such a round is left out of the
//!   ratio, which says so ("from 2 of 3 rounds; …");
//! - **ratios only where the work is equal**: a REQ figure gets no ratio
//!   when a peer returned more than [`BYTES_TOL`] more or fewer (unescaped)
//!   bytes per REQ than ours, in any query class, or ran without the
//!   check, or returned events where ours returned none.
//!
//! Inputs are the run's files: `relays.json` (`nostrwire load --report`),
//! `nostr-bench.jsonl` (one record per nostr-bench run) and `names.tsv`
//! (each load-tester URL and its relay's name).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::figures::fmt;
pub use crate::nostr_bench::BenchRun;
use crate::Error;

/// Our relay's name in both tools' records.
pub const OURS: &str = "nostrwire";

/// Most requests a relay may time out on (or fail) in a round for the
/// round to count in a ratio: 0.1 %.
pub const GATE: f64 = 0.001;

/// How far a peer's bytes per REQ may be from ours for a ratio: 1 %.
pub const BYTES_TOL: f64 = 0.01;

/// The settings the run was made with, as the headline states them.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Seed notes per nostr-bench hashtag (the `req` seed is 1,000 × this).
    pub per_tag: u64,
    /// `nostrwire load` connections.
    pub connections: u64,
    /// nostr-bench's `-k`.
    pub bench_seconds: u64,
    /// nostr-bench's `-t`.
    pub bench_threads: u64,
    /// The limit of nostr-bench's REQs.
    pub req_limit: u64,
}

/// One operation label of a load-tester round.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Op {
    /// Answered.
    pub successes: u64,
    /// Failed, for any reason.
    pub failures: u64,
    /// Failures by reason (`timeout`, …).
    #[serde(default)]
    pub failures_by_reason: BTreeMap<String, u64>,
    /// Bytes received.
    #[serde(default)]
    pub bytes_received: Option<f64>,
    /// Bytes received, JSON string escapes counted as what they stand for.
    #[serde(default)]
    pub bytes_unescaped: Option<f64>,
    /// Events received.
    #[serde(default)]
    pub events_received: Option<f64>,
}

/// One scenario, relay and round of `relays.json`.
#[derive(Clone, Debug, Deserialize)]
pub struct LoadRound {
    /// The scenario.
    pub scenario: String,
    /// The relay's URL.
    pub relay: String,
    /// Round, from 0.
    pub round: u64,
    /// Measured seconds.
    pub elapsed_s: f64,
    /// Operations by label.
    pub ops: BTreeMap<String, Op>,
    /// The relay's CPU seconds over the measured operations.
    #[serde(default)]
    pub relay_cpu_measured_s: Option<f64>,
    /// Operations that CPU time covers.
    #[serde(default)]
    pub measured_ops: Option<u64>,
}

/// A relay of `relays.json`'s totals.
#[derive(Clone, Debug, Deserialize)]
pub struct LoadTotal {
    /// The relay's URL.
    pub relay: String,
}

/// `relays.json`, as far as the headline reads it.
#[derive(Clone, Debug, Deserialize)]
pub struct LoadReport {
    /// Every scenario, relay and round.
    pub rounds: Vec<LoadRound>,
    /// One entry per relay (and scenario), in the run's order.
    pub totals: Vec<LoadTotal>,
}

/// Everything the headline is made from.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// `relays.json`, when the load tester ran.
    pub load: Option<LoadReport>,
    /// `nostr-bench.jsonl`.
    pub bench: Vec<BenchRun>,
    /// Load-tester URL → relay name.
    pub names: HashMap<String, String>,
    /// What ran the comparison (`writer.txt`'s line); a run without it was
    /// written by [`EARLIER_WRITER`].
    pub writer: Option<String>,
}

/// The file of a run directory that names what ran it.
pub const WRITER_FILE: &str = "writer.txt";

/// What ran the comparisons whose run directories have no [`WRITER_FILE`]
/// (every run before `nostrwire bench relays` wrote one), so their
/// headlines are written again as they were.
pub const EARLIER_WRITER: &str = "scripts/compare-relays.sh";

impl Inputs {
    /// Reads a run directory's `relays.json` and `nostr-bench.jsonl` (each
    /// when present) and the names file.
    pub fn read(run: &Path, names: &Path) -> Result<Inputs, Error> {
        let bad =
            |p: &Path, e: &dyn std::fmt::Display| Error::Input(format!("{}: {e}", p.display()));
        let mut inputs = Inputs::default();
        if names.exists() {
            let text = std::fs::read_to_string(names).map_err(|e| bad(names, &e))?;
            for line in text.lines() {
                let (url, name) = line
                    .split_once('\t')
                    .ok_or_else(|| bad(names, &"a line without a tab"))?;
                inputs.names.insert(url.to_string(), name.to_string());
            }
        }
        let writer = run.join(WRITER_FILE);
        if writer.exists() {
            let text = std::fs::read_to_string(&writer).map_err(|e| bad(&writer, &e))?;
            inputs.writer = Some(text.trim().to_string()).filter(|w| !w.is_empty());
        }
        let load = run.join("relays.json");
        if load.exists() {
            let text = std::fs::read_to_string(&load).map_err(|e| bad(&load, &e))?;
            inputs.load = Some(serde_json::from_str(&text).map_err(|e| bad(&load, &e))?);
        }
        let bench = run.join("nostr-bench.jsonl");
        if bench.exists() {
            let text = std::fs::read_to_string(&bench).map_err(|e| bad(&bench, &e))?;
            inputs.bench = crate::nostr_bench::read_runs(&text).map_err(|e| bad(&bench, &e))?;
        }
        Ok(inputs)
    }
}

/// A share as a percentage: two decimals below 10 %, one above.
fn pct(x: f64) -> String {
    if x < 0.1 {
        format!("{:.2} %", x * 100.0)
    } else {
        format!("{:.1} %", x * 100.0)
    }
}

/// A signed difference as a percentage with one decimal (`+1.5%`).
fn signed_pct(d: f64) -> String {
    format!("{:+.1}%", d * 100.0)
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = xs.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// Whether higher or lower is better for a figure.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Better {
    /// Throughput.
    Higher,
    /// CPU per operation.
    Lower,
}

/// Values per relay, in the headline's relay order.
type Vals = Vec<(String, Option<f64>)>;

fn get(vals: &Vals, relay: &str) -> Option<f64> {
    vals.iter().find(|(r, _)| r == relay).and_then(|(_, v)| *v)
}

/// The ratio column: ours over the best peer in the clean rounds, or why
/// there is none.
pub fn ratio_text(
    better: Better,
    clean: &Vals,
    gate_notes: &[String],
    bytes_note: Option<&str>,
    n_clean: usize,
    n_all: usize,
    left_out: Option<&str>,
) -> String {
    if let Some(note) = bytes_note {
        return format!("— ({note})");
    }
    let mut notes = gate_notes.to_vec();
    if let Some(l) = left_out {
        notes.push(l.to_string());
    }
    let ours = get(clean, OURS);
    let cands: Vec<(&str, f64)> = clean
        .iter()
        .filter(|(r, v)| r != OURS && v.is_some_and(|v| v > 0.0))
        .map(|(r, v)| (r.as_str(), v.unwrap_or(0.0)))
        .collect();
    let Some(ours) = ours.filter(|_| n_clean > 0 && !cands.is_empty()) else {
        let why = if ours.is_none() && notes.is_empty() {
            "no figure of ours".to_string()
        } else if notes.is_empty() {
            "no peer figure".to_string()
        } else {
            notes.join("; ")
        };
        return format!("— ({why})");
    };
    // The first best, in relay order.
    let mut best = cands[0];
    for c in &cands[1..] {
        let ahead = match better {
            Better::Higher => c.1 > best.1,
            Better::Lower => c.1 < best.1,
        };
        if ahead {
            best = *c;
        }
    }
    let mut text = format!("{:.2} vs {}", ours / best.1, best.0);
    if n_clean < n_all {
        let _ = write!(
            text,
            " (from {n_clean} of {n_all} rounds; {})",
            notes.join("; ")
        );
    } else if let Some(l) = left_out {
        let _ = write!(text, " ({l})");
    }
    text
}

/// One row: figure, tool and setting, a cell per relay, the ratio.
struct Row {
    figure: String,
    what: String,
    cells: HashMap<String, String>,
    ratio: String,
}

/// The relays in headline order: ours first (when it ran), then as the
/// load tester and nostr-bench met them.
fn relays(inputs: &Inputs) -> Vec<String> {
    let mut relays = vec![OURS.to_string()];
    let mut see = |r: &str| {
        if !relays.iter().any(|x| x == r) {
            relays.push(r.to_string());
        }
    };
    if let Some(load) = &inputs.load {
        for t in &load.totals {
            see(inputs.names.get(&t.relay).map_or(t.relay.as_str(), |n| n));
        }
    }
    for x in &inputs.bench {
        see(&x.relay);
    }
    let ours_ran = inputs.bench.iter().any(|x| x.relay == OURS)
        || (inputs.load.is_some() && inputs.names.values().any(|n| n == OURS));
    if !ours_ran {
        relays.retain(|r| r != OURS);
    }
    relays
}

/// nostr-bench's share of failed requests in a run (all of them when it
/// has no figures).
fn failed_share(x: &BenchRun) -> f64 {
    match x.complete {
        Some(c) if x.error.is_none() && c != 0.0 => {
            let bad = if x.tool == "event" {
                x.errors.unwrap_or(0.0)
            } else {
                0.0
            };
            bad / c
        }
        _ => 1.0,
    }
}

fn bench_rows(inputs: &Inputs, relays: &[String], settings: &Settings, rows: &mut Vec<Row>) {
    let peers: Vec<&String> = relays.iter().filter(|r| *r != OURS).collect();
    let mut tests: Vec<&str> = Vec::new();
    for x in &inputs.bench {
        if !tests.contains(&x.test.as_str()) {
            tests.push(&x.test);
        }
    }
    let key = |t: &str| {
        let (tool, c) = t.split_once("-c").unwrap_or((t, "0"));
        (tool != "event", c.parse::<u64>().unwrap_or(0))
    };
    tests.sort_by_key(|t| key(t));
    for test in tests {
        let recs: Vec<&BenchRun> = inputs.bench.iter().filter(|x| x.test == test).collect();
        let tool = recs[0].tool.as_str();
        let c = recs[0].connections;
        let mut rounds: Vec<u64> = recs.iter().map(|x| x.round).collect();
        rounds.sort_unstable();
        rounds.dedup();
        // A relay that greets with AUTH is misread by nostr-bench's event loop.
        let mut misread: Vec<&str> = recs
            .iter()
            .filter(|x| tool == "event" && x.greeting.as_deref() == Some("AUTH"))
            .map(|x| x.relay.as_str())
            .collect();
        misread.sort_unstable();
        misread.dedup();
        let mut clean_rounds = Vec::new();
        let mut notes = Vec::new();
        for &r in &rounds {
            let mut bad = Vec::new();
            for x in recs
                .iter()
                .filter(|x| x.round == r && !misread.contains(&x.relay.as_str()))
            {
                let share = failed_share(x);
                if let Some(e) = &x.error {
                    bad.push(format!("{} {e}", x.relay));
                } else if share > GATE {
                    bad.push(format!("{} {} failed", x.relay, pct(share)));
                } else if !x.relay_up {
                    bad.push(format!("{} exited", x.relay));
                }
            }
            if bad.is_empty() {
                clean_rounds.push(r);
            } else {
                notes.push(format!("round {r}: {}", bad.join(", ")));
            }
        }
        let vals = |has: &dyn Fn(&BenchRun) -> bool,
                    rs: &[u64],
                    agg: &dyn Fn(&[&BenchRun]) -> Option<f64>|
         -> Vals {
            relays
                .iter()
                .map(|rel| {
                    let xs: Vec<&BenchRun> = recs
                        .iter()
                        .copied()
                        .filter(|x| &x.relay == rel && rs.contains(&x.round) && has(x))
                        .collect();
                    (rel.clone(), if xs.is_empty() { None } else { agg(&xs) })
                })
                .collect()
        };
        let has_tps = |x: &BenchRun| x.tps.is_some();
        let has_cpu = |x: &BenchRun| x.cpu_us_per_op.is_some();
        let mean_tps = |xs: &[&BenchRun]| mean(xs.iter().map(|x| x.tps.unwrap_or(0.0)));
        let cpu_per = |xs: &[&BenchRun]| {
            let n: f64 = xs.iter().map(|x| x.complete.unwrap_or(0.0)).sum();
            let cpu: f64 = xs.iter().map(|x| x.relay_cpu_s.unwrap_or(0.0)).sum();
            (n != 0.0).then(|| cpu * 1e6 / n)
        };
        let shown_tps = vals(&has_tps, &rounds, &mean_tps);
        let shown_cpu = vals(&has_cpu, &rounds, &cpu_per);
        let keep = |v: Vals| -> Vals {
            v.into_iter()
                .filter(|(r, _)| !misread.contains(&r.as_str()))
                .collect()
        };
        let clean_tps = keep(vals(&has_tps, &clean_rounds, &mean_tps));
        let clean_cpu = keep(vals(&has_cpu, &clean_rounds, &cpu_per));
        let left_out = (!misread.is_empty()).then(|| {
            format!(
                "{} left out: greets with AUTH, which nostr-bench takes for the OK of its first EVENT",
                misread.join(", ")
            )
        });
        let has_bytes = |x: &BenchRun| x.bytes_per_req.is_some();
        let mut bytes_note = None;
        let (mut bpr, mut upr, mut epr) = (Vals::new(), Vals::new(), Vals::new());
        if tool == "req" {
            bpr = vals(&has_bytes, &rounds, &|xs| {
                mean(xs.iter().map(|x| x.bytes_per_req.unwrap_or(0.0)))
            });
            upr = vals(&has_bytes, &rounds, &|xs| {
                mean(
                    xs.iter()
                        .map(|x| x.unescaped_per_req.or(x.bytes_per_req).unwrap_or(0.0)),
                )
            });
            epr = vals(&has_bytes, &rounds, &|xs| {
                mean(xs.iter().map(|x| x.events_per_req.unwrap_or(0.0)))
            });
            let ours_b = get(&upr, OURS).filter(|b| *b != 0.0);
            // A relay that ran without a check (it failed) is no evidence
            // of equal work: no ratio either.
            let ran = |r: &str| recs.iter().any(|x| x.relay == r);
            let mut off: Vec<String> = Vec::new();
            if ran(OURS) && get(&upr, OURS).is_none() {
                off.push(format!("no equal-work check of {OURS}"));
            }
            for p in peers.iter().filter(|p| ran(p)) {
                match (ours_b, get(&upr, p)) {
                    (Some(ours_b), Some(theirs)) => {
                        let d = theirs / ours_b - 1.0;
                        if d.abs() > BYTES_TOL {
                            off.push(format!("{p} returns {} bytes per REQ", signed_pct(d)));
                        }
                    }
                    (_, None) => off.push(format!("no equal-work check of {p}")),
                    (None, Some(theirs)) => {
                        if theirs != 0.0 && get(&upr, OURS) == Some(0.0) {
                            off.push(format!("{p} returns events where {OURS} returns none"));
                        }
                    }
                }
            }
            if !off.is_empty() {
                bytes_note = Some(format!("unequal work: {}", off.join("; ")));
            }
        }
        let has_lat = |x: &BenchRun| x.avg_ms.is_some();
        let lat = vals(&has_lat, &rounds, &|xs| {
            mean(xs.iter().map(|x| x.avg_ms.unwrap_or(0.0)))
        });
        let cell = |rel: &str, v: Option<f64>, digits: usize, with_latency: bool| {
            let mut t = fmt(v, digits);
            if v.is_some() {
                if with_latency {
                    if let Some(l) = get(&lat, rel) {
                        let _ = write!(t, " ({l:.0} ms)");
                    }
                }
                if misread.contains(&rel) {
                    t.push_str(" (misread)");
                }
                let errs: Vec<String> = recs
                    .iter()
                    .filter(|x| x.relay == rel && failed_share(x) > GATE)
                    .map(|x| format!("r{}: {} failed", x.round, pct(failed_share(x))))
                    .collect();
                if !errs.is_empty() {
                    let _ = write!(t, " ({})", errs.join(", "));
                }
            }
            t
        };
        let what = if tool == "req" {
            format!("nostr-bench {tool}, c={c}, limit {}", settings.req_limit)
        } else {
            format!("nostr-bench {tool}, c={c}")
        };
        let (unit, per) = if tool == "event" {
            ("events/s", "µs relay CPU per event")
        } else {
            ("REQs/s", "µs relay CPU per REQ")
        };
        let n = (clean_rounds.len(), rounds.len());
        rows.push(Row {
            figure: format!("{unit} (mean ms per answer)"),
            what: what.clone(),
            cells: relays
                .iter()
                .map(|r| (r.clone(), cell(r, get(&shown_tps, r), 0, true)))
                .collect(),
            ratio: ratio_text(
                Better::Higher,
                &clean_tps,
                &notes,
                bytes_note.as_deref(),
                n.0,
                n.1,
                left_out.as_deref(),
            ),
        });
        rows.push(Row {
            figure: per.to_string(),
            what: what.clone(),
            cells: relays
                .iter()
                .map(|r| (r.clone(), cell(r, get(&shown_cpu, r), 0, false)))
                .collect(),
            ratio: ratio_text(
                Better::Lower,
                &clean_cpu,
                &notes,
                bytes_note.as_deref(),
                n.0,
                n.1,
                left_out.as_deref(),
            ),
        });
        if tool == "req" {
            rows.push(Row {
                figure: "bytes returned per REQ as sent / unescaped (events per REQ), check before the run".into(),
                what,
                cells: relays
                    .iter()
                    .map(|r| {
                        let text = match get(&bpr, r) {
                            Some(b) => format!(
                                "{} / {} ({})",
                                fmt(Some(b), 0),
                                fmt(get(&upr, r), 0),
                                fmt(get(&epr, r), 1)
                            ),
                            None => "–".to_string(),
                        };
                        (r.clone(), text)
                    })
                    .collect(),
                ratio: "unescaped must match ours within 1 %".into(),
            });
        }
    }
}

fn load_rows(inputs: &Inputs, relays: &[String], settings: &Settings, rows: &mut Vec<Row>) {
    let Some(load) = &inputs.load else {
        return;
    };
    let peers: Vec<&String> = relays.iter().filter(|r| *r != OURS).collect();
    let name = |x: &LoadRound| -> String {
        inputs
            .names
            .get(&x.relay)
            .cloned()
            .unwrap_or_else(|| x.relay.clone())
    };
    for (sc, unit, per) in [
        ("publish", "events/s", "µs relay CPU per event"),
        ("query", "REQs/s", "µs relay CPU per REQ"),
    ] {
        let res: Vec<&LoadRound> = load.rounds.iter().filter(|x| x.scenario == sc).collect();
        if res.is_empty() {
            continue;
        }
        let timed = |x: &'_ LoadRound| -> Vec<(String, Op)> {
            x.ops
                .iter()
                .filter(|(l, _)| *l != "seed" && *l != "subscribe")
                .map(|(l, o)| (l.clone(), o.clone()))
                .collect()
        };
        let ops_of = |x: &LoadRound| -> Vec<Op> {
            timed(x)
                .into_iter()
                .filter(|(l, _)| sc != "publish" || l == "publish")
                .map(|(_, o)| o)
                .collect()
        };
        let succ = |x: &LoadRound| ops_of(x).iter().map(|o| o.successes).sum::<u64>();
        let timeouts = |x: &LoadRound| {
            let ops = ops_of(x);
            let n: u64 = ops.iter().map(|o| o.successes + o.failures).sum();
            let to: u64 = ops
                .iter()
                .map(|o| o.failures_by_reason.get("timeout").copied().unwrap_or(0))
                .sum();
            if n == 0 {
                0.0
            } else {
                to as f64 / n as f64
            }
        };
        let mut rounds: Vec<u64> = res.iter().map(|x| x.round).collect();
        rounds.sort_unstable();
        rounds.dedup();
        let mut clean_rounds = Vec::new();
        let mut notes = Vec::new();
        for &r in &rounds {
            let bad: Vec<String> = res
                .iter()
                .filter(|x| x.round == r && timeouts(x) > GATE)
                .map(|x| format!("{} {} timed out", name(x), pct(timeouts(x))))
                .collect();
            if bad.is_empty() {
                clean_rounds.push(r);
            } else {
                notes.push(format!("round {r}: {}", bad.join(", ")));
            }
        }
        let tp = |rs: &[u64]| -> Vals {
            relays
                .iter()
                .map(|rel| {
                    let xs: Vec<&&LoadRound> = res
                        .iter()
                        .filter(|x| &name(x) == rel && rs.contains(&x.round))
                        .collect();
                    let el: f64 = xs.iter().map(|x| x.elapsed_s).sum();
                    let s: u64 = xs.iter().map(|x| succ(x)).sum();
                    (
                        rel.clone(),
                        (!xs.is_empty() && el > 0.0).then(|| s as f64 / el),
                    )
                })
                .collect()
        };
        let cpu = |rs: &[u64]| -> Vals {
            relays
                .iter()
                .map(|rel| {
                    let xs: Vec<&&LoadRound> = res
                        .iter()
                        .filter(|x| {
                            &name(x) == rel
                                && rs.contains(&x.round)
                                && x.relay_cpu_measured_s.is_some()
                        })
                        .collect();
                    let n: u64 = xs.iter().map(|x| x.measured_ops.unwrap_or(0)).sum();
                    let c: f64 = xs
                        .iter()
                        .map(|x| x.relay_cpu_measured_s.unwrap_or(0.0))
                        .sum();
                    (
                        rel.clone(),
                        (!xs.is_empty() && n > 0).then(|| c * 1e6 / n as f64),
                    )
                })
                .collect()
        };
        let mut bytes_note = None;
        if sc == "query" {
            // Bytes of returned events per REQ, per query class, against ours.
            let mut per_class: HashMap<&str, Vec<(String, f64)>> = HashMap::new();
            let mut ran: HashMap<&str, HashMap<String, u64>> = HashMap::new();
            for rel in relays {
                let mut acc: Vec<(String, f64, u64)> = Vec::new();
                for x in res.iter().filter(|x| &name(x) == rel) {
                    for (l, o) in timed(x) {
                        if !l.starts_with("query:") {
                            continue;
                        }
                        let b = o.bytes_unescaped.or(o.bytes_received).unwrap_or(0.0);
                        let n = o.successes + o.failures;
                        match acc.iter_mut().find(|(k, _, _)| *k == l) {
                            Some(a) => {
                                a.1 += b;
                                a.2 += n;
                            }
                            None => acc.push((l, b, n)),
                        }
                    }
                }
                per_class.insert(
                    rel,
                    acc.iter()
                        .filter(|(_, _, n)| *n > 0)
                        .map(|(l, b, n)| (l.clone(), b / *n as f64))
                        .collect(),
                );
                ran.insert(rel, acc.iter().map(|(l, _, n)| (l.clone(), *n)).collect());
            }
            let empty = Vec::new();
            let ours_c = per_class.get(OURS).unwrap_or(&empty);
            let mut off = Vec::new();
            for p in &peers {
                let mut worst = 0.0f64;
                let mut wl = "";
                // A class in which ours returned nothing and the peer something.
                let mut none: Option<&str> = None;
                for (l, b) in ours_c {
                    let Some(pb) = per_class
                        .get(p.as_str())
                        .and_then(|c| c.iter().find(|(k, _)| k == l))
                        .map(|(_, v)| *v)
                    else {
                        continue;
                    };
                    if *b == 0.0 {
                        if pb != 0.0 && none.is_none() {
                            none = Some(l.as_str());
                        }
                        continue;
                    }
                    let d = pb / b - 1.0;
                    if d.abs() > worst.abs() {
                        worst = d;
                        wl = l;
                    }
                }
                if worst.abs() > BYTES_TOL {
                    let mut note = format!("{p} returns {} bytes per REQ ({wl}", signed_pct(worst));
                    let count = |r: &str| ran.get(r).and_then(|m| m.get(wl)).copied().unwrap_or(0);
                    let (mine, theirs) = (count(OURS), count(p));
                    if mine != theirs {
                        // --duration ended one of them first: not the same queries.
                        let _ = write!(
                            note,
                            "; {} queries against our {}: raise --duration",
                            fmt(Some(theirs as f64), 0),
                            fmt(Some(mine as f64), 0)
                        );
                    }
                    off.push(note + ")");
                }
                if let Some(l) = none {
                    off.push(format!(
                        "{p} returns events where {OURS} returns none ({l})"
                    ));
                }
            }
            if !off.is_empty() {
                bytes_note = Some(format!("unequal work: {}", off.join("; ")));
            }
        }
        let all = tp(&rounds);
        let tcells: HashMap<String, String> = relays
            .iter()
            .map(|rel| {
                let v = get(&all, rel);
                let mut t = fmt(v, 0);
                let bad: Vec<String> = res
                    .iter()
                    .filter(|x| &name(x) == rel && timeouts(x) > GATE)
                    .map(|x| format!("r{}: {} timed out", x.round, pct(timeouts(x))))
                    .collect();
                if !bad.is_empty() && v.is_some() {
                    let _ = write!(t, " ({})", bad.join(", "));
                }
                (rel.clone(), t)
            })
            .collect();
        let what = format!(
            "nostrwire load {sc}, c={}{}",
            settings.connections,
            if sc == "query" {
                ", six query classes"
            } else {
                ", real kind mix"
            }
        );
        let n = (clean_rounds.len(), rounds.len());
        rows.push(Row {
            figure: unit.to_string(),
            what: what.clone(),
            cells: tcells,
            ratio: ratio_text(
                Better::Higher,
                &tp(&clean_rounds),
                &notes,
                bytes_note.as_deref(),
                n.0,
                n.1,
                None,
            ),
        });
        let cpu_all = cpu(&rounds);
        rows.push(Row {
            figure: per.to_string(),
            what: what.clone(),
            cells: relays
                .iter()
                .map(|r| (r.clone(), fmt(get(&cpu_all, r), 0)))
                .collect(),
            ratio: ratio_text(
                Better::Lower,
                &cpu(&clean_rounds),
                &notes,
                bytes_note.as_deref(),
                n.0,
                n.1,
                None,
            ),
        });
        if sc == "query" {
            let cells = relays
                .iter()
                .map(|rel| {
                    let q: Vec<Op> = res
                        .iter()
                        .filter(|x| &name(x) == rel)
                        .flat_map(|x| timed(x))
                        .filter(|(l, _)| l.starts_with("query:"))
                        .map(|(_, o)| o)
                        .collect();
                    let b: f64 = q.iter().map(|o| o.bytes_received.unwrap_or(0.0)).sum();
                    let u: f64 = q
                        .iter()
                        .map(|o| o.bytes_unescaped.or(o.bytes_received).unwrap_or(0.0))
                        .sum();
                    let n: u64 = q.iter().map(|o| o.successes + o.failures).sum();
                    let e: f64 = q.iter().map(|o| o.events_received.unwrap_or(0.0)).sum();
                    let text = if n > 0 {
                        let n = n as f64;
                        format!(
                            "{} / {} ({})",
                            fmt(Some(b / n), 0),
                            fmt(Some(u / n), 0),
                            fmt(Some(e / n), 1)
                        )
                    } else {
                        "–".to_string()
                    };
                    (rel.clone(), text)
                })
                .collect();
            rows.push(Row {
                figure: "bytes returned per REQ as sent / unescaped (events per REQ)".into(),
                what,
                cells,
                ratio: "unescaped must match ours within 1 % in every query class".into(),
            });
        }
    }
}

/// `headline.md`.
pub fn render(inputs: &Inputs, settings: &Settings) -> String {
    let relays = relays(inputs);
    let mut rows = Vec::new();
    bench_rows(inputs, &relays, settings, &mut rows);
    load_rows(inputs, &relays, settings, &mut rows);
    let mut out = String::new();
    out.push_str("# Headline figures\n\n");
    let _ = write!(
        out,
        "Written by {}. ",
        inputs.writer.as_deref().unwrap_or(EARLIER_WRITER)
    );
    out.push_str(
        "Each relay's figure covers every round (nostr-bench: the \
         mean of the rounds' rates; nostrwire load: successes over the measured time of all rounds); \
         a ratio (ours / best peer) uses only the rounds in which no relay timed out on (nostr-bench: \
         failed) more than 0.1 % of its requests, and is refused (—, with the reason) when the relays \
         did not return the same bytes per REQ within 1 % (unescaped: JSON string escapes counted as \
         the characters they stand for, since relays escape differently, e.g. `>` as `\\u003e`). For events/s and REQs/s higher is better, \
         so a ratio above 1 is ours ahead; for µs of relay CPU per operation lower is better, so a \
         ratio below 1 is ours ahead. Relay CPU: utime + stime of the relay process from /proc, \
         read before and after the measured run, divided by the operations the tool counted. \
         Method: docs/bench-methodology.md, \"nostr-bench beside nostrwire load\".\n\n",
    );
    let _ = writeln!(
        out,
        "nostr-bench: `-t {} -k {}`, connections opened at once (`-r` = `-c`), each relay alone \
         on a fresh data directory; before `req`, {} kind-1 notes with nostr-bench's \
         tags ({} per hashtag) replayed into it. nostrwire load: all relays running, scenarios \
         interleaved, events signed before the clock.\n",
        settings.bench_threads,
        settings.bench_seconds,
        fmt(Some((settings.per_tag * 1000) as f64), 0),
        settings.per_tag
    );
    let _ = writeln!(
        out,
        "| figure | tool, setting | {} | ours / best peer |",
        relays.join(" | ")
    );
    let _ = writeln!(out, "|---|---|{}---|", "---|".repeat(relays.len()));
    for row in rows {
        let cells: Vec<&str> = relays
            .iter()
            .map(|r| row.cells.get(r).map_or("–", String::as_str))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            row.figure,
            row.what,
            cells.join(" | "),
            row.ratio
        );
    }
    out
}

#[cfg(test)]
mod tests;
