//! nostr-bench against each relay: the relay alone on a fresh data
//! directory, one run at a time, with its CPU time read from `/proc`
//! around the run; for `req`, the seed events replayed first and the
//! equal-work check.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::{Filter, RelayMessage};

use super::interrupt;
use super::procs::{self, Env, Kind};
use crate::client::{unescaped_len, MAX_MESSAGE_BYTES};
use crate::nostr_bench::{self, BenchRun, Check, RunContext, Test};
use crate::rng::Rng;
use crate::ws::{self, Counters, WsUrl};
use crate::Error;

/// How the nostr-bench part runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The tests, in order.
    pub tests: Vec<Test>,
    /// `-k`: each run's length in seconds.
    pub seconds: u64,
    /// Rounds.
    pub rounds: u64,
    /// `-t`.
    pub threads: u64,
    /// The limit of the REQs.
    pub req_limit: u64,
    /// Seed notes per hashtag (the seed holds 1,000 × this).
    pub per_tag: u64,
}

/// The first port the nostr-bench runs use (each run takes the next one).
const FIRST_PORT: u16 = 7990;

/// Runs every test against every relay in alternating rounds (every test
/// against every relay in turn, A B A B …, so a slow spell of the shared
/// machine falls on all), appending each record to `out/nostr-bench.jsonl`
/// and keeping nostr-bench's output under `out/nostr-bench/`.
pub fn run(
    env: &Env,
    relays: &[Kind],
    opts: &BenchOptions,
    out: &Path,
) -> Result<Vec<BenchRun>, Error> {
    let exe = env.peers_dir.join("bin/nostr-bench");
    if !exe.is_file() {
        return Err(Error::Usage(format!(
            "nostr-bench is not installed at {} (scripts/compare-relays.sh --install-only installs it)",
            exe.display()
        )));
    }
    fs::create_dir_all(out.join("nostr-bench"))?;
    let jsonl = out.join("nostr-bench.jsonl");
    fs::write(&jsonl, "")?;
    let seed = env.work.join("nostr-bench-seed.jsonl");
    {
        let newest = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut f = std::io::BufWriter::new(File::create(&seed)?);
        nostr_bench::write_seed(&mut f, opts.per_tag, 100, 1, newest)?;
    }
    let ctx = Ctx {
        env,
        exe,
        seed,
        seed_count: opts.per_tag * nostr_bench::TAGS,
        opts,
        out,
    };
    let mut port = FIRST_PORT;
    let mut runs = Vec::new();
    for round in 1..=opts.rounds {
        for test in &opts.tests {
            for &kind in relays {
                match ctx.one(kind, test, round, &mut port) {
                    Ok(rec) => {
                        let mut line = serde_json::to_string(&rec).map_err(io_err)?;
                        line.push('\n');
                        append(&jsonl, &line)?;
                        runs.push(rec);
                    }
                    Err(Error::Interrupted) => return Err(Error::Interrupted),
                    Err(e) => eprintln!(
                        "bench relays: nostr-bench: {} did not start: skipping {} ({e})",
                        kind.name(),
                        test.name()
                    ),
                }
            }
        }
    }
    Ok(runs)
}

fn io_err(e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(e.to_string()))
}

fn append(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write;
    fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())?;
    Ok(())
}

struct Ctx<'a> {
    env: &'a Env,
    exe: PathBuf,
    seed: PathBuf,
    seed_count: u64,
    opts: &'a BenchOptions,
    out: &'a Path,
}

impl Ctx<'_> {
    /// One run: the relay started on a fresh data directory, seeded and
    /// checked for `req`, nostr-bench with the relay's CPU read around it,
    /// the relay stopped.
    fn one(&self, kind: Kind, test: &Test, round: u64, port: &mut u16) -> Result<BenchRun, Error> {
        let dir = self.env.data_dir(kind);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        let mut relay = procs::start(self.env, kind, *port, false)?;
        *port = relay.port + 1;
        let base =
            self.out
                .join("nostr-bench")
                .join(format!("{}-{}-r{round}", kind.name(), test.name()));
        let greeting = procs::greeting(relay.port);
        let (mut seeded, mut check) = (None, None);
        if test.tool == "req" {
            seeded = self.seed_relay(&relay.url, &base)?;
            check = Some(req_check(&relay.url, self.opts.req_limit));
        }
        eprintln!(
            "bench relays: nostr-bench: round {round}, {}, {} with {} connections",
            kind.name(),
            test.tool,
            test.connections
        );
        let t0 = crate::host::cpu_ticks(relay.pid());
        let mut cmd = Command::new(&self.exe);
        cmd.arg(&test.tool)
            .arg(&relay.url)
            .args(["-c", &test.connections.to_string()])
            .args(["-r", &test.connections.to_string()])
            .args(["-k", &self.opts.seconds.to_string()])
            .args(["-t", &self.opts.threads.to_string()]);
        if test.tool == "req" {
            cmd.args(["--limit", &self.opts.req_limit.to_string()]);
        }
        cmd.arg("--json")
            .stdin(Stdio::null())
            .stdout(File::create(base.with_extension("out"))?)
            .stderr(File::create(base.with_extension("err"))?);
        let limit = Duration::from_secs(self.opts.seconds + 60);
        let ended = run_bounded(&mut cmd, limit)?;
        if ended != Ended::Ok {
            eprintln!(
                "bench relays: nostr-bench: {} against {} ended with an error (see {}.err)",
                test.tool,
                kind.name(),
                base.display()
            );
        }
        let t1 = crate::host::cpu_ticks(relay.pid());
        let relay_up = relay.alive();
        relay.stop(Duration::from_secs(10));
        let relay_cpu_s = match (t0, t1, crate::host::clock_ticks()) {
            (Some(a), Some(b), Some(tck)) => Some(b.saturating_sub(a) as f64 / tck as f64),
            _ => None,
        };
        let output = fs::read_to_string(base.with_extension("out")).unwrap_or_default();
        let ctx = RunContext {
            relay: kind.name().to_string(),
            test: test.clone(),
            round,
            seconds: self.opts.seconds,
            threads: self.opts.threads,
            greeting: greeting.to_string(),
            seeded,
            relay_up,
            relay_cpu_s,
            check,
        };
        let mut rec = nostr_bench::record(&ctx, &output);
        if ended == Ended::Stopped {
            // Its figures stop where it hung: named, and no ratio from the round.
            let why = format!(
                "nostr-bench did not end within {} s: stopped",
                limit.as_secs()
            );
            rec.error = Some(match rec.error {
                Some(e) => format!("{why}; {e}"),
                None => why,
            });
        }
        Ok(rec)
    }

    /// Replays the seed file into the relay (not timed; a generous timeout,
    /// so a slow writer still gets them all); the events it accepted.
    fn seed_relay(&self, url: &str, base: &Path) -> Result<Option<u64>, Error> {
        let report = base.with_extension("seed.json");
        let txt = File::create(base.with_extension("seed.txt"))?;
        let ok = interrupt::run_logged(
            self.env
                .load()
                .args(["--relay", url, "--scenario", "publish", "--replay"])
                .arg(&self.seed)
                .args(["--count", &self.seed_count.to_string()])
                .args([
                    "--connections",
                    "100",
                    "--duration",
                    "300",
                    "--timeout",
                    "10",
                ])
                .args(["--rounds", "1", "--quiet", "--report"])
                .arg(&report),
            txt,
        )?;
        if !ok {
            eprintln!(
                "bench relays: nostr-bench: seeding {url} failed (see {}.seed.txt)",
                base.display()
            );
        }
        let v = fs::read_to_string(&report)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        Ok(v.map(|v| {
            v["totals"][0]["ops"]["publish"]["successes"]
                .as_u64()
                .unwrap_or(0)
        }))
    }
}

/// How a bounded command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited 0.
    Ok,
    /// It exited with an error.
    Failed,
    /// It ran past its limit and was killed.
    Stopped,
}

/// Runs `cmd` for at most `limit`, then kills it.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<Ended, Error> {
    let mut child = cmd.spawn()?;
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(if status.success() {
                Ended::Ok
            } else {
                Ended::Failed
            });
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Ended::Stopped);
        }
        if interrupt::interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Equal work for nostr-bench's `req`: asks the relay for 100 of the
/// hashtags nostr-bench draws (`{"#t":["nostr-bench-N"],"limit":L}`, N = 0,
/// 10, … 990), one REQ at a time on one connection, and counts the REQs
/// answered with EOSE, the events and the bytes of the event messages
/// returned (messages parsed as NIP-01 relay messages by `nostrwire-event`;
/// an `EVENT` that is not a valid event is not counted). nostr-bench's own
/// byte count cannot tell: every connection's last REQ is cut off by `-k`
/// part-way through its answer.
pub fn req_check(url: &str, limit: u64) -> Check {
    let run = async {
        tokio::time::timeout(Duration::from_secs(60), check_async(url, limit))
            .await
            .unwrap_or_else(|_| Err(Error::Protocol("no answer within 60 s".into())))
    };
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::from)
        .and_then(|rt| rt.block_on(run));
    result.unwrap_or_else(|e| Check {
        error: Some(format!("check failed: {e}")),
        ..Check::default()
    })
}

async fn check_async(url: &str, limit: u64) -> Result<Check, Error> {
    let url = WsUrl::parse(url)?;
    let mut rng = Rng::new(1);
    let (mut rd, mut wr) = ws::connect(
        &url,
        Arc::new(Counters::default()),
        &mut rng,
        MAX_MESSAGE_BYTES,
    )
    .await?;
    let mut check = Check::default();
    for (i, n) in (0..nostr_bench::TAGS).step_by(10).enumerate() {
        let sub = format!("check{i}");
        let filter = Filter {
            limit: Some(limit),
            ..Filter::new()
        }
        .with_tag(b't', vec![format!("nostr-bench-{n}")]);
        let mut msg = Vec::new();
        write::req(&mut msg, &sub, &[filter]);
        wr.send_text(&msg).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let Some(raw) = rd.next_text_before(deadline).await? else {
                return Err(Error::Protocol(format!("no EOSE for {sub} within 10 s")));
            };
            match classify(raw, &sub) {
                Answer::Event => {
                    check.events += 1;
                    check.bytes += raw.len() as u64;
                    check.unescaped += unescaped_len(raw);
                }
                Answer::Eose => {
                    check.reqs += 1;
                    break;
                }
                Answer::Closed => break,
                Answer::Other => {}
            }
        }
        msg.clear();
        write::close(&mut msg, &sub);
        wr.send_text(&msg).await?;
    }
    Ok(check)
}

/// What a relay message is to the check's subscription `sub`.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// `["EVENT", sub, …]`.
    Event,
    /// `["EOSE", sub]`.
    Eose,
    /// `["CLOSED", sub, …]`.
    Closed,
    /// Anything else (another subscription, a NOTICE, bad JSON).
    Other,
}

/// Classifies one relay message for subscription `sub`.
pub fn classify(raw: &[u8], sub: &str) -> Answer {
    match RelayMessage::parse(raw) {
        Ok(RelayMessage::Event {
            subscription_id, ..
        }) if subscription_id == sub => Answer::Event,
        Ok(RelayMessage::Eose(s)) if s == sub => Answer::Eose,
        Ok(RelayMessage::Closed {
            subscription_id, ..
        }) if subscription_id == sub => Answer::Closed,
        _ => Answer::Other,
    }
}
