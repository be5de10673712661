//! `nostrwire bench relays`: our relay beside peer relays, under
//! `nostrwire load` and under rnostr's nostr-bench, side by side.
//!
//! Starts each relay on its own loopback port with a fresh data directory
//! and rate limits lifted ([`procs`]), runs the scenarios against all of
//! them in interleaved rounds (`nostrwire load --compare`, ours first: every
//! ratio is relative to ours), then nostr-bench against each relay alone
//! ([`bench`](mod@bench)), then the abuse scenarios ([`abuse`]); writes the run's
//! files and `headline.md` ([`crate::headline`]: ratios only from rounds
//! without timeouts and only where the work was equal). Installing the
//! peers is `scripts/compare-relays.sh`'s job. All traffic stays on
//! 127.0.0.1; every part is bounded by counts and seconds. SIGINT or
//! SIGTERM stops a run: relays stopped, scratch directory removed
//! ([`interrupt`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::nostr_bench::{self, Test};
use crate::Error;

pub mod abuse;
pub mod bench;
pub mod interrupt;
pub mod procs;

#[cfg(test)]
mod tests;

use procs::{Env, Kind, Running};

/// Everything a comparison is run with (the command line's flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// The `nostrwire` binary: our relay and the load tester.
    pub nostrwire: PathBuf,
    /// Where the peers are installed (`bin/` below it).
    pub peers_dir: PathBuf,
    /// The peers, in order.
    pub peers: Vec<Kind>,
    /// Whether ours runs (every ratio needs it).
    pub ours: bool,
    /// `nostrwire load` scenarios and abuse attacks, comma-separated as given.
    pub scenarios: String,
    /// `--count`.
    pub count: u64,
    /// `--duration` seconds per scenario and round.
    pub duration: f64,
    /// `--rounds`.
    pub rounds: u64,
    /// `--connections`.
    pub connections: u64,
    /// `--timeout`: how long the load tester waits for any one answer.
    pub timeout: f64,
    /// The run directory.
    pub out: PathBuf,
    /// Stop every relay after the load part and measure its data directory.
    pub disk: bool,
    /// Each attack's length in seconds.
    pub attack_seconds: u64,
    /// More `nostrwire load` flags for the attacks.
    pub abuse_args: Vec<String>,
    /// nostr-bench's tests, comma-separated (`event-c20,req-c1000`).
    pub bench_tests: String,
    /// nostr-bench's `-k`.
    pub bench_seconds: u64,
    /// nostr-bench rounds (default: `rounds`, at least 2).
    pub bench_rounds: Option<u64>,
    /// nostr-bench's `-t`.
    pub bench_threads: u64,
    /// The limit of nostr-bench's REQs.
    pub req_limit: u64,
    /// Seed notes per nostr-bench hashtag.
    pub per_tag: u64,
    /// Whether nostr-bench runs.
    pub nostr_bench: bool,
    /// Whether `nostrwire load` runs.
    pub load: bool,
    /// The load tester's `--kind-mix`.
    pub kind_mix: PathBuf,
    /// The load tester's `--corpus`.
    pub corpus: PathBuf,
}

/// The scenarios split: the `nostrwire load` ones with `query` first (on
/// fresh data every relay serves the same events; after a publishing
/// scenario, a relay that could not take all `--count` events would hold
/// fewer, and answer with less), and the attacks (`abuse` for all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `nostrwire load` scenarios, in the order they run.
    pub normal: Vec<String>,
    /// Abuse attacks, in the order they run.
    pub attacks: Vec<String>,
    /// Whether `query` was moved to the front.
    pub query_moved: bool,
}

impl Plan {
    /// Splits a comma-separated scenario list.
    pub fn new(scenarios: &str) -> Plan {
        let (mut normal, mut attacks) = (Vec::new(), Vec::new());
        for sc in scenarios
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match sc {
                "abuse" => attacks.extend(abuse::ATTACKS.iter().map(|a| a.to_string())),
                a if a.starts_with("abuse-") => attacks.push(a.to_string()),
                other => normal.push(other.to_string()),
            }
        }
        let mut ordered: Vec<String> = normal.iter().filter(|s| *s == "query").cloned().collect();
        ordered.extend(normal.iter().filter(|s| *s != "query").cloned());
        let query_moved = ordered != normal;
        Plan {
            normal: ordered,
            attacks,
            query_moved,
        }
    }
}

/// What the headlines of this command's runs say wrote them.
pub const WRITER: &str = "nostrwire bench relays";

/// nostr-bench rounds: as given, else the load rounds but at least two.
pub fn bench_rounds(given: Option<u64>, rounds: u64) -> u64 {
    given.unwrap_or(rounds.max(2))
}

/// A number as a command-line value (`20`, `0.3`).
fn arg(x: f64) -> String {
    format!("{x}")
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The scratch directory of a run, removed with everything in it.
struct Work(PathBuf);

impl Drop for Work {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Takes the machine-wide benchmark lock (`scripts/lib/bench-lock.sh`'s:
/// `$NOSTRWIRE_BENCH_LOCK`, default `/tmp/nostrwire-bench.lock`), waiting
/// and saying so while another benchmark holds it; none when
/// `NOSTRWIRE_BENCH_LOCKED` says a caller holds it. Held until the process
/// exits.
pub fn bench_lock() -> Result<Option<fs::File>, Error> {
    if std::env::var_os("NOSTRWIRE_BENCH_LOCKED").is_some_and(|v| !v.is_empty()) {
        return Ok(None);
    }
    use std::os::fd::AsRawFd;
    let path = std::env::var_os("NOSTRWIRE_BENCH_LOCK")
        .map_or_else(|| PathBuf::from("/tmp/nostrwire-bench.lock"), PathBuf::from);
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        eprintln!(
            "waiting for another benchmark to finish ({})",
            path.display()
        );
        // SAFETY: as above.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let e = std::io::Error::last_os_error();
            interrupt::check()?;
            return Err(Error::Io(e));
        }
    }
    // Benchmarks this one starts do not take it again.
    std::env::set_var("NOSTRWIRE_BENCH_LOCKED", "1");
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    eprintln!("benchmark lock taken; load average {}", load.join(" "));
    Ok(Some(file))
}

/// Runs the comparison and writes its files under `opts.out`.
pub fn run(opts: &Options) -> Result<(), Error> {
    let plan = Plan::new(&opts.scenarios);
    if plan.query_moved {
        eprintln!(
            "bench relays: query runs first (on fresh data, so every relay serves the same events)"
        );
    }
    let tests = opts
        .bench_tests
        .split(',')
        .filter(|t| !t.is_empty())
        .map(Test::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let mut relays: Vec<Kind> = Vec::new();
    if opts.ours {
        relays.push(Kind::Ours);
    }
    relays.extend(opts.peers.iter().copied());
    if relays.is_empty() {
        return Err(Error::Usage("no relay to run".into()));
    }
    fs::create_dir_all(&opts.out)?;
    // The headline names what wrote it from this file, so a run's pages
    // are written again as they were (runs without it: the earlier script).
    fs::write(
        opts.out.join(crate::headline::WRITER_FILE),
        format!("{WRITER}\n"),
    )?;
    interrupt::catch();
    let work =
        Work(std::env::temp_dir().join(format!("nostrwire-bench-relays.{}", std::process::id())));
    fs::create_dir_all(&work.0)?;
    let env = Env {
        nostrwire: opts.nostrwire.clone(),
        peers_dir: opts.peers_dir.clone(),
        work: work.0.clone(),
        kind_mix: opts.kind_mix.clone(),
        corpus: opts.corpus.clone(),
    };
    let _lock = bench_lock()?;
    let with_load = opts.load && !plan.normal.is_empty();
    let with_bench = opts.nostr_bench && !plan.normal.is_empty();
    if with_load {
        run_load(opts, &env, &relays, &plan)?;
    }
    if with_bench {
        let bopts = bench::BenchOptions {
            tests,
            seconds: opts.bench_seconds,
            rounds: bench_rounds(opts.bench_rounds, opts.rounds),
            threads: opts.bench_threads,
            req_limit: opts.req_limit,
            per_tag: opts.per_tag,
        };
        match bench::run(&env, &relays, &bopts, &opts.out) {
            Ok(runs) => {
                fs::write(
                    opts.out.join("nostr-bench.md"),
                    nostr_bench::markdown(&runs),
                )?;
                eprintln!(
                    "bench relays: wrote {}",
                    opts.out.join("nostr-bench.md").display()
                );
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => eprintln!("bench relays: nostr-bench skipped: {e}"),
        }
    }
    if with_load || with_bench {
        print!("{}", write_headline(opts)?);
        eprintln!(
            "bench relays: wrote {}",
            opts.out.join("headline.md").display()
        );
    }
    if !with_load {
        // The relays' rows, each started once for them.
        let abuse_only = plan.normal.is_empty();
        let rows = relays
            .iter()
            .filter_map(|&kind| {
                let port = if abuse_only { 7890 } else { 7990 };
                procs::prepare(&env, kind, port, abuse_only).ok()
            })
            .map(|(_, row)| row)
            .collect::<Vec<_>>();
        write_peers_md(&opts.out, &rows, &[], false)?;
    }
    if !plan.attacks.is_empty() {
        let aopts = abuse::AbuseOptions {
            attacks: plan.attacks.clone(),
            timeout: arg(opts.timeout),
            duration: arg(opts.duration),
            connections: opts.connections,
            attack_seconds: opts.attack_seconds,
            extra: opts.abuse_args.clone(),
        };
        abuse::run(&env, &relays, &aopts, &opts.out)?;
    }
    Ok(())
}

/// `headline.md` from the run directory's `relays.json`,
/// `nostr-bench.jsonl`, `names.tsv` and `writer.txt`; returns its text.
fn write_headline(opts: &Options) -> Result<String, Error> {
    let inputs = crate::headline::Inputs::read(&opts.out, &opts.out.join("names.tsv"))?;
    let settings = crate::headline::Settings {
        per_tag: opts.per_tag,
        connections: opts.connections,
        bench_seconds: opts.bench_seconds,
        bench_threads: opts.bench_threads,
        req_limit: opts.req_limit,
    };
    let text = crate::headline::render(&inputs, &settings);
    fs::write(opts.out.join("headline.md"), &text)?;
    Ok(text)
}

/// Writes a run's `nostr-bench.md` (when it has `nostr-bench.jsonl`) and
/// `headline.md` again from its raw files, running nothing: the settings
/// the headline states come from `opts`, as the run was made.
///
/// A directory that is not a comparison run is refused before anything is
/// written: it needs `relays.json` or `nostr-bench.jsonl` to have figures,
/// and `names.tsv` beside `relays.json` to name the load tester's relays.
pub fn rewrite(opts: &Options) -> Result<(), Error> {
    check_run_dir(&opts.out)?;
    let jsonl = opts.out.join("nostr-bench.jsonl");
    if jsonl.exists() {
        let text = fs::read_to_string(&jsonl)?;
        let runs = nostr_bench::read_runs(&text)
            .map_err(|e| Error::Input(format!("{}: {e}", jsonl.display())))?;
        fs::write(
            opts.out.join("nostr-bench.md"),
            nostr_bench::markdown(&runs),
        )?;
    }
    write_headline(opts)?;
    Ok(())
}

/// Refuses `dir` unless it holds what a comparison run writes (see
/// [`rewrite`]), naming what is missing.
fn check_run_dir(dir: &Path) -> Result<(), Error> {
    let not_run = |what: &str| {
        Err(Error::Usage(format!(
            "{}: not a relay comparison run ({what}); nothing written",
            dir.display()
        )))
    };
    if !dir.is_dir() {
        return not_run("no such directory");
    }
    let has = |name: &str| dir.join(name).is_file();
    match (
        has("relays.json"),
        has("nostr-bench.jsonl"),
        has("names.tsv"),
    ) {
        (false, false, _) => not_run("no relays.json or nostr-bench.jsonl"),
        (true, _, false) => not_run("relays.json without names.tsv, which names its relays"),
        _ => Ok(()),
    }
}

/// `peers.md`: each relay's version, configuration and durability.
fn write_peers_md(
    out: &Path,
    rows: &[String],
    urls: &[(String, String)],
    started: bool,
) -> Result<(), Error> {
    let mut md = String::from("# Relays in this run\n\n");
    if started {
        md.push_str(&format!("Started by `nostrwire bench relays` on {}; every relay on 127.0.0.1 with a fresh data directory.\n\n", utc_now()));
    }
    md.push_str("| relay | version | config | durability |\n|---|---|---|---|\n");
    for r in rows {
        md.push_str(r);
        md.push('\n');
    }
    if !urls.is_empty() {
        md.push('\n');
        for (name, url) in urls {
            md.push_str(&format!("- {name}: {url}\n"));
        }
    }
    fs::write(out.join("peers.md"), md)?;
    Ok(())
}

/// The `nostrwire load` part: every relay started, the scenarios in
/// interleaved rounds, the disk measured (`--disk`), every relay stopped.
fn run_load(opts: &Options, env: &Env, relays: &[Kind], plan: &Plan) -> Result<(), Error> {
    let mut running: Vec<Running> = Vec::new();
    let mut port = 7790;
    for &kind in relays {
        match procs::start(env, kind, port, false) {
            Ok(r) => {
                port = r.port + 1;
                running.push(r);
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) if kind == Kind::Ours => {
                return Err(Error::Usage(format!("our relay did not start: {e}")))
            }
            Err(e) => eprintln!("bench relays: skipping {} ({e})", kind.name()),
        }
    }
    let names: Vec<(String, String)> = running
        .iter()
        .map(|r| (r.kind.name().to_string(), r.url.clone()))
        .collect();
    let tsv: String = names.iter().map(|(n, u)| format!("{u}\t{n}\n")).collect();
    fs::write(opts.out.join("names.tsv"), tsv)?;
    let rows: Vec<String> = running.iter().map(|r| r.describe.clone()).collect();
    write_peers_md(&opts.out, &rows, &names, true)?;
    let list: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    eprintln!("bench relays: running: {}", list.join(" "));
    let mut cmd = env.load();
    cmd.args(["--relay", &running[0].url]);
    if running.len() > 1 {
        cmd.arg("--compare");
        cmd.args(running[1..].iter().map(|r| r.url.as_str()));
    }
    let out = &opts.out;
    cmd.args(["--scenario", &plan.normal.join(",")])
        .args(["--count", &opts.count.to_string()])
        .args(["--duration", &arg(opts.duration)])
        .args(["--rounds", &opts.rounds.to_string()])
        .args(["--connections", &opts.connections.to_string()])
        .args(["--timeout", &arg(opts.timeout), "--quiet", "--report"])
        .arg(out.join("relays.json"))
        .arg("--markdown")
        .arg(out.join("relays.md"))
        .arg("--svg")
        .arg(out.join("relays.svg"))
        .stdin(Stdio::null())
        .stdout(fs::File::create(out.join("relays.txt"))?);
    let status = interrupt::wait(&mut cmd.spawn()?)?;
    print!(
        "{}",
        fs::read_to_string(out.join("relays.txt")).unwrap_or_default()
    );
    if !status.success() {
        return Err(Error::Usage(format!(
            "nostrwire load failed ({status}); see {}",
            out.join("relays.txt").display()
        )));
    }
    eprintln!("bench relays: wrote {}", out.join("relays.md").display());
    if opts.disk {
        if let Some(ours) = running.iter().find(|r| r.kind == Kind::Ours) {
            procs::wait_for_indexes(ours.port);
        }
        procs::stop_all(&mut running, Duration::from_secs(60));
        let md = disk_md(opts, env, &running)?;
        fs::write(out.join("disk.md"), &md)?;
        print!("{md}");
    }
    procs::stop_all(&mut running, Duration::from_secs(10));
    Ok(())
}

/// `du -s` of a directory with the given flag (`-b` bytes, `-k` KiB).
fn du(dir: &Path, flag: &str) -> Option<u64> {
    let out = Command::new("du")
        .arg(flag)
        .arg("-s")
        .arg(dir)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `disk.md`: each data directory's size after the same events, beside the
/// JSON of the events ours kept (`nostrwire export`).
fn disk_md(opts: &Options, env: &Env, running: &[Running]) -> Result<String, Error> {
    let mut md = String::from("# Disk after the run\n\nEach relay's data directory after the same events (`du -sb`: bytes of its files; `du -sk`: blocks allocated, which is what counts for sparse files such as Badger's preallocated logs), every relay stopped with SIGTERM first.\n\n");
    let mut kept_json = 0u64;
    if opts.ours {
        let out = Command::new(&opts.nostrwire)
            .args(["export", "--data"])
            .arg(env.data_dir(Kind::Ours))
            .stderr(Stdio::inherit())
            .output()?;
        let lines: Vec<&[u8]> = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        kept_json = lines.iter().map(|l| l.len() as u64).sum();
        md.push_str(&format!("nostrwire kept {} events: {kept_json} bytes of JSON (`nostrwire export`, one line each, newlines not counted).\n\n", lines.len()));
    }
    md.push_str(
        "| relay | bytes | allocated | allocated / nostrwire's kept JSON |\n|---|---|---|---|\n",
    );
    for r in running {
        let dir = env.data_dir(r.kind);
        let bytes = du(&dir, "-b").unwrap_or(0);
        let alloc = du(&dir, "-k").unwrap_or(0) * 1024;
        let ratio = if kept_json > 0 {
            format!("{:.3}", alloc as f64 / kept_json as f64)
        } else {
            "—".into()
        };
        md.push_str(&format!(
            "| {} | {bytes} | {alloc} | {ratio} |\n",
            r.kind.name()
        ));
    }
    Ok(md)
}
