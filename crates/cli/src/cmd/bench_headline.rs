//! `nostrwire bench headline`: a relay comparison's headline.md from its
//! run directory (`nostrwire bench relays` writes it too; the rules are in
//! `nostrwire_loadgen::headline`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nostrwire_loadgen::headline::{render, Inputs, Settings};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory: relays.json and nostr-bench.jsonl, each when present.
    pub run: PathBuf,
    /// Each load-tester URL and its relay's name, tab-separated (default: RUN/names.tsv).
    #[arg(long)]
    pub names: Option<PathBuf>,
    /// Seed notes per nostr-bench hashtag.
    #[arg(long, default_value_t = 10)]
    pub per_tag: u64,
    /// `nostrwire load` connections.
    #[arg(long, default_value_t = 8)]
    pub connections: u64,
    /// nostr-bench's -k.
    #[arg(long, default_value_t = 15)]
    pub bench_seconds: u64,
    /// nostr-bench's -t.
    #[arg(long, default_value_t = 1)]
    pub bench_threads: u64,
    /// The limit of nostr-bench's REQs.
    #[arg(long, default_value_t = 10)]
    pub req_limit: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let names = args.names.unwrap_or_else(|| args.run.join("names.tsv"));
    let inputs = Inputs::read(&args.run, &names)?;
    let settings = Settings {
        per_tag: args.per_tag,
        connections: args.connections,
        bench_seconds: args.bench_seconds,
        bench_threads: args.bench_threads,
        req_limit: args.req_limit,
    };
    std::io::stdout().write_all(render(&inputs, &settings).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
