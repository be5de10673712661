//! `nostrwire bench relays`: ours beside installed peer relays, under
//! `nostrwire load` and nostr-bench (the run is `nostrwire_loadgen::relays`;
//! `scripts/compare-relays.sh` installs the peers, then calls this).

use std::path::PathBuf;
use std::process::ExitCode;

use nostrwire_loadgen::relays::{self, procs::Kind, Options};
use nostrwire_loadgen::Error;

use crate::input::input_file;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Peers, comma-separated: khatru-lmdb, khatru-badger, nostr-rs-relay,
    /// rnostr (empty: none).
    #[arg(
        long,
        default_value = "khatru-lmdb,khatru-badger,nostr-rs-relay,rnostr"
    )]
    pub peers: String,
    /// Scenarios, comma-separated; `abuse` (or `abuse-…`) runs the attacks
    /// apart, one relay at a time; `query` always runs first.
    #[arg(long, default_value = "query,publish,publish-open,mixed,fanout")]
    pub scenarios: String,
    /// Events per scenario and round.
    #[arg(long, default_value_t = 5000)]
    pub count: u64,
    /// Seconds per scenario and round at most.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Interleaved rounds (every relay in turn, ours first).
    #[arg(long, default_value_t = 3)]
    pub rounds: u64,
    /// `nostrwire load` connections.
    #[arg(long, default_value_t = 8)]
    pub connections: u64,
    /// Seconds the load tester waits for any one answer: a relay that
    /// leaves some unanswered stalls that connection this long each time.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// The run directory (default: bench-runs/DATE-HOST).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Leave our relay out.
    #[arg(long)]
    pub no_ours: bool,
    /// After the load part, stop every relay (SIGTERM) and write disk.md:
    /// each data directory's size and the JSON of the events ours kept.
    #[arg(long)]
    pub disk: bool,
    /// Each attack's length in seconds.
    #[arg(long, default_value_t = 15)]
    pub attack_seconds: u64,
    /// More `nostrwire load` flags for the attacks, space-separated
    /// (e.g. "--idle-flood 2000 --probe-rate 20").
    #[arg(long, default_value = "")]
    pub abuse_args: String,
    /// nostr-bench runs, each TOOL-cCONNECTIONS (tool event or req).
    #[arg(long, default_value = "event-c20,event-c1000,req-c1000")]
    pub bench_tests: String,
    /// Each nostr-bench run's length (its -k).
    #[arg(long, default_value_t = 15)]
    pub bench_seconds: u64,
    /// nostr-bench rounds (default: --rounds, at least 2).
    #[arg(long)]
    pub bench_rounds: Option<u64>,
    /// nostr-bench's -t.
    #[arg(long, default_value_t = 1)]
    pub bench_threads: u64,
    /// The limit of nostr-bench's REQs.
    #[arg(long, default_value_t = 10)]
    pub req_limit: u64,
    /// Seed notes per nostr-bench hashtag (the `req` seed is 1,000 × this).
    #[arg(long, default_value_t = 10)]
    pub per_tag: u64,
    /// Skip nostr-bench.
    #[arg(long)]
    pub no_nostr_bench: bool,
    /// Skip the `nostrwire load` part.
    #[arg(long)]
    pub no_load: bool,
    /// Run nothing: write --out's nostr-bench.md and headline.md again
    /// from its nostr-bench.jsonl, relays.json, names.tsv and writer.txt (give the
    /// settings the run was made with: --per-tag, --connections,
    /// --bench-seconds, --bench-threads, --req-limit).
    #[arg(long, requires = "out")]
    pub rewrite: bool,
    /// The load tester's kind mix (`nostrwire load --kind-mix`).
    #[arg(long, default_value_os_t = crate::default_kind_mix())]
    pub kind_mix: PathBuf,
    /// The load tester's corpus (`nostrwire load --corpus`).
    #[arg(long, default_value_os_t = crate::default_corpus())]
    pub corpus: PathBuf,
    /// Where the peers and nostr-bench are installed, bin/ below it
    /// (default: $PEERS_DIR, else ~/.cache/nostrwire-peers).
    #[arg(long)]
    pub peers_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let peers = args
        .peers
        .split(',')
        .filter(|p| !p.is_empty())
        .map(Kind::peer)
        .collect::<Result<Vec<_>, _>>()?;
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let out = args.out.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_or_else(|_| "host".to_string(), |h| h.trim().to_string());
        let date = &relays::utc_now()[..10];
        PathBuf::from(format!("bench-runs/{date}-{host}"))
    });
    for (name, v) in [("--duration", args.duration), ("--timeout", args.timeout)] {
        if !(v.is_finite() && v > 0.0) {
            anyhow::bail!("{name} must be a positive number of seconds");
        }
    }
    let rewrite = args.rewrite;
    // Absolute, so the load testers it starts read the same files; checked
    // before any relay starts.
    let (kind_mix, corpus) = if rewrite {
        (args.kind_mix, args.corpus)
    } else {
        (
            input_file(&args.kind_mix, "--kind-mix")?,
            input_file(&args.corpus, "--corpus")?,
        )
    };
    let opts = Options {
        nostrwire: std::env::current_exe()?,
        peers_dir: args
            .peers_dir
            .or_else(|| std::env::var_os("PEERS_DIR").map(PathBuf::from))
            .unwrap_or_else(|| home.join(".cache/nostrwire-peers")),
        peers,
        ours: !args.no_ours,
        scenarios: args.scenarios,
        count: args.count,
        duration: args.duration,
        rounds: args.rounds.max(1),
        connections: args.connections,
        timeout: args.timeout,
        out,
        disk: args.disk,
        attack_seconds: args.attack_seconds,
        abuse_args: args
            .abuse_args
            .split_whitespace()
            .map(String::from)
            .collect(),
        bench_tests: args.bench_tests,
        bench_seconds: args.bench_seconds,
        bench_rounds: args.bench_rounds,
        bench_threads: args.bench_threads,
        req_limit: args.req_limit,
        per_tag: args.per_tag,
        nostr_bench: !args.no_nostr_bench,
        load: !args.no_load,
        kind_mix,
        corpus,
    };
    if rewrite {
        relays::rewrite(&opts)?;
    } else {
        match relays::run(&opts) {
            Err(Error::Interrupted) => {
                eprintln!("bench relays: interrupted: relays stopped, scratch directory removed");
                return Ok(ExitCode::from(130));
            }
            result => result?,
        }
    }
    Ok(ExitCode::SUCCESS)
}
