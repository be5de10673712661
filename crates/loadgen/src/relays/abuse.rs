//! The abuse scenarios across relays: one relay at a time on a fresh data
//! directory, one attack at a time (`nostrwire load --scenario abuse-…`);
//! a relay an attack leaves down or unresponsive is recorded as such and
//! restarted (same data directory) for the next attack.

use std::fs::{self, File};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::interrupt;
use super::procs::{self, Env, Kind, Running};
use crate::Error;

/// Every attack, in the order `abuse` runs them.
pub const ATTACKS: [&str; 11] = [
    "abuse-slow-readers",
    "abuse-idle-flood",
    "abuse-oversized-subs",
    "abuse-deflate-bomb",
    "abuse-quadratic-json",
    "abuse-hostile-search",
    "abuse-deletion-undo",
    "abuse-auth-relayed",
    "abuse-spread-slow-readers",
    "abuse-spread-oversized-subs",
    "abuse-spread-heavy-queries",
];

/// How the attacks run.
#[derive(Clone, Debug)]
pub struct AbuseOptions {
    /// The attacks, in order.
    pub attacks: Vec<String>,
    /// `nostrwire load --timeout`.
    pub timeout: String,
    /// `--duration`.
    pub duration: String,
    /// `--connections`.
    pub connections: u64,
    /// `--attack-seconds`.
    pub attack_seconds: u64,
    /// More `nostrwire load` flags.
    pub extra: Vec<String>,
}

/// The first port the abuse runs use (one per relay).
const FIRST_PORT: u16 = 7890;

/// Runs every attack against every relay; writes `abuse.txt`,
/// `abuse.json`, `abuse.md` and `abuse/<relay>-<attack>.{txt,json}`.
pub fn run(env: &Env, relays: &[Kind], opts: &AbuseOptions, out: &Path) -> Result<(), Error> {
    fs::create_dir_all(out.join("abuse"))?;
    let mut txt = String::new();
    let mut status = Vec::new();
    let mut port = FIRST_PORT;
    for &kind in relays {
        let dir = env.data_dir(kind);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        eprintln!(
            "bench relays: abuse: starting {} on a fresh data directory",
            kind.name()
        );
        let mut relay = match procs::start(env, kind, port, true) {
            Ok(r) => r,
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => {
                eprintln!("bench relays: skipping {} ({e})", kind.name());
                continue;
            }
        };
        let rport = relay.port;
        for attack in &opts.attacks {
            interrupt::check()?;
            if !relay.alive() {
                eprintln!(
                    "bench relays: abuse: {} is not running: restarting it",
                    kind.name()
                );
                relay = match restart(env, kind, rport) {
                    Some(r) => r,
                    None => break,
                };
            }
            eprintln!("bench relays: abuse: {attack} against {}", kind.name());
            let base = out.join("abuse").join(format!("{}-{attack}", kind.name()));
            attack_once(env, &relay.url, attack, opts, &base)?;
            let text = fs::read_to_string(base.with_extension("txt")).unwrap_or_default();
            txt.push_str(&text.replace(&relay.url, kind.name()));
            let state = fs::read_to_string(base.with_extension("json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| {
                    v["totals"][0]["abuse"]["relay_state"]
                        .as_str()
                        .map(String::from)
                })
                .unwrap_or_else(|| "unknown".into());
            let name = kind.name();
            if !relay.alive() {
                status.push(format!(
                    "- {attack}: {name} exited during the attack; restarted for the next one"
                ));
            } else if state != "up" {
                status.push(format!(
                    "- {attack}: {name} {state} after the attack; restarted for the next one"
                ));
                relay.stop(Duration::from_secs(10));
            } else {
                continue;
            }
            relay = match restart(env, kind, rport) {
                Some(r) => r,
                None => break,
            };
        }
        relay.stop(Duration::from_secs(10));
        port = rport + 1;
    }
    fs::write(out.join("abuse.txt"), txt)?;
    let read = |f: &Path| {
        fs::read_to_string(f)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
    };
    let mut rows = Vec::new();
    for &kind in relays {
        for attack in &opts.attacks {
            let f = out
                .join("abuse")
                .join(format!("{}-{attack}.json", kind.name()));
            if let Some(v) = read(&f) {
                rows.push(abuse_row(kind.name(), &v["totals"][0]["abuse"]));
            }
        }
    }
    // abuse.json: every report in the directory, in file-name order.
    let mut files: Vec<_> = fs::read_dir(out.join("abuse"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let reports: Vec<Value> = files.iter().filter_map(|f| read(f)).collect();
    if reports.is_empty() {
        return Err(Error::Input("abuse: no report written".into()));
    }
    let mut merged = Vec::new();
    for v in &reports {
        for t in v["totals"].as_array().into_iter().flatten() {
            let mut o = serde_json::Map::new();
            o.insert("relay".into(), t["relay"].clone());
            if let Some(a) = t["abuse"].as_object() {
                o.extend(a.clone());
            }
            o.insert("notes".into(), t["notes"].clone());
            merged.push(Value::Object(o));
        }
    }
    let json = serde_json::to_string_pretty(&merged)
        .map_err(|e| Error::Input(format!("abuse.json: {e}")))?;
    fs::write(out.join("abuse.json"), json + "\n")?;
    let extra = if opts.extra.is_empty() {
        String::new()
    } else {
        format!("; {}", opts.extra.join(" "))
    };
    let md = format!(
        "# Abuse scenarios\n\nStarted by `nostrwire bench relays` on {}: each relay alone on 127.0.0.1 with a fresh data directory, one attack at a time ({} s each{extra}). Method: docs/bench-methodology.md, \"Abuse scenarios\".\n\n\
         | attack | relay | up | peak RSS / anon (+since start) MiB | OK p99 ms | EOSE p99 ms | live p99 ms | acked lost | verdict |\n\
         |---|---|---|---|---|---|---|---|---|\n{}\n{}",
        super::utc_now(),
        opts.attack_seconds,
        rows.join(""),
        status.iter().map(|s| format!("{s}\n")).collect::<String>()
    );
    fs::write(out.join("abuse.md"), &md)?;
    print!("{md}");
    Ok(())
}

fn restart(env: &Env, kind: Kind, port: u16) -> Option<Running> {
    match procs::start(env, kind, port, true) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!(
                "bench relays: abuse: {} does not restart ({e})",
                kind.name()
            );
            None
        }
    }
}

fn attack_once(
    env: &Env,
    url: &str,
    attack: &str,
    opts: &AbuseOptions,
    base: &Path,
) -> Result<(), Error> {
    let txt = File::create(base.with_extension("txt"))?;
    let ok = interrupt::run_logged(
        env.load()
            .args(["--relay", url, "--scenario", attack, "--rounds", "1"])
            .args(["--timeout", &opts.timeout, "--duration", &opts.duration])
            .args(["--connections", &opts.connections.to_string()])
            .args(["--attack-seconds", &opts.attack_seconds.to_string()])
            .args(&opts.extra)
            .args(["--quiet", "--report"])
            .arg(base.with_extension("json")),
        txt,
    )?;
    if !ok {
        eprintln!(
            "bench relays: abuse: {attack} against {url}: nostrwire load failed (see {}.txt)",
            base.display()
        );
    }
    Ok(())
}

/// Milliseconds as the abuse table shows them: whole above 100, two
/// decimals below, "–" for none.
pub fn ms(v: &Value) -> String {
    match v.as_f64() {
        None => "–".into(),
        Some(x) if x >= 100.0 => format!("{}", x.round()),
        Some(x) => format!("{}", (x * 100.0).round() / 100.0),
    }
}

/// One line of the abuse table from a report's `totals[0].abuse`.
pub fn abuse_row(relay: &str, x: &Value) -> String {
    let round = |v: &Value| v.as_f64().map_or("–".into(), |f| format!("{}", f.round()));
    let peak = if x["peak_rss_mib"].is_null() {
        "–".to_string()
    } else {
        let growth = match (
            x["peak_rss_anon_mib"].as_f64(),
            x["rss_anon_before_mib"].as_f64(),
        ) {
            (Some(p), Some(b)) => format!(" (+{})", (p - b).max(0.0).round()),
            _ => String::new(),
        };
        format!(
            "{} / {}{growth}",
            round(&x["peak_rss_mib"]),
            round(&x["peak_rss_anon_mib"])
        )
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "?".into(),
        other => other.to_string(),
    };
    format!(
        "| {} | {relay} | {} | {peak} | {} | {} | {} | {} of {} | {} |\n",
        text(&x["attack"]),
        text(&x["relay_state"]),
        ms(&x["probe_ok_p99_ms"]),
        ms(&x["probe_eose_p99_ms"]),
        ms(&x["live_delivery_p99_ms"]),
        text(&x["acked_lost"]),
        text(&x["acked"]),
        text(&x["verdict"]),
    )
}
