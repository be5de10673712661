//! `nostrwire`: one binary, one subcommand per job. Each subcommand lives in
//! its own file under `cmd/`; this file only declares the command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod input;
mod parallel;
mod status;

/// A fast Nostr toolkit: event codec, binary format, relay and load tester.
#[derive(Debug, Parser)]
#[command(name = "nostrwire", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the relay: NIP-01 over WebSocket on LMDB (ws://127.0.0.1:7777 by default).
    ///
    /// Stops cleanly on SIGINT or SIGTERM: stops accepting, commits queued
    /// writes, flushes and exits 0.
    Relay(cmd::relay::Args),
    /// Bulk-load events from JSON Lines into the relay database (verified, batched).
    Import(cmd::import::Args),
    /// Write stored events as JSON Lines, newest first.
    Export(cmd::export::Args),
    /// Print the stored events a filter matches (JSON Lines, newest first),
    /// found as a REQ finds them; read-only, safe beside a running relay.
    Scan(cmd::scan::Args),
    /// Remove the stored events a filter matches: a dry run that prints
    /// them unless --yes; through the one writer (docs/operations.md).
    Delete(cmd::delete::Args),
    /// Reconcile the database with a relay (NIP-77) and move what differs:
    /// down, up or both; a summary of what moved and what was refused, why.
    Sync(cmd::sync::Args),
    /// Mirror events live between upstream relays and the running local
    /// relay, through its WebSocket: down, up or both, each upstream with
    /// its filter (`--config`: several, as strfry's router); resumes from a
    /// cursor after any restart (docs/operations.md).
    Stream(cmd::stream::Args),
    /// Move to nostrwire from another relay (docs/migrate-from-strfry.md).
    #[command(subcommand)]
    Migrate(cmd::migrate::Command),
    /// Write a compacted copy of the relay database: index pages packed
    /// full, without the free pages LMDB keeps for reuse; safe while the
    /// relay runs.
    Compact(cmd::compact::Args),
    /// Write signed synthetic events as JSON Lines: the load tester's
    /// workload (real kind mix, corpus tags, renewed contents), for `import`.
    Generate(cmd::generate::Args),
    /// Verify events from a JSON Lines file: strict parse, id and signature.
    ///
    /// Each line holds an event object, `["EVENT",{...}]` or
    /// `["EVENT","<sub>",{...}]`; blank lines are skipped. Prints one line per
    /// invalid event and a final `N valid, M invalid`. Exit status: 0 if all
    /// are valid, 1 if any is invalid, 2 on a usage or I/O error.
    Verify(cmd::verify::Args),
    /// Convert JSON Lines of events to a stream of nwb binary records, or back.
    ///
    /// `--to nwb` reads JSON Lines and writes length-prefixed records
    /// (compressed with `--dict`); `--to json` reads such a stream and writes
    /// canonical JSON Lines. Invalid records are reported on stderr with their
    /// number and error kind and skipped; the exit status is then 1.
    Convert(cmd::convert::Args),
    /// Train zstd dictionaries for compressed nwb records.
    Dict(cmd::dict::Args),
    /// Print each record of an nwb stream: fields, tags and sizes.
    Inspect(cmd::inspect::Args),
    /// Load a relay: pre-signed events, answers matched by id, HDR latencies.
    ///
    /// Every run is bounded by --count and --duration. Exit status: 0 when
    /// the run completed (failures are counted in the report), 2 on a usage
    /// error or when a relay cannot be reached.
    Load(Box<cmd::load::Args>),
    /// A relay cluster on NATS JetStream (docs/cluster.md).
    #[command(subcommand)]
    Cluster(cmd::cluster::Command),
    /// Benchmarks, measured against named competitors in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Event codec stages (parse, id, signature, serialization) against the
    /// `nostr` crate, a serde_json + sha2 baseline and bare libsecp256k1.
    Codec(cmd::bench_codec::Args),
    /// The nwb binary format against notepack and JSON: sizes (raw and zstd
    /// with per-kind dictionaries on a held-out split) and ns/event.
    Wire(cmd::bench_wire::Args),
    /// nwb against JSON, CBOR, MessagePack, Protobuf, FlatBuffers, Cap'n Proto,
    /// notepack, bincode, postcard, Avro and BSON: sizes (raw, zstd, held-out
    /// dictionaries), ns/event, allocations, per kind; writes results.json,
    /// report.md and SVG charts.
    ///
    /// Needs a build with `--features bench-formats`; without it, exits 2.
    Formats(cmd::bench_formats::Args),
    /// Our relay beside installed peer relays (scripts/compare-relays.sh
    /// installs them), under `nostrwire load` in interleaved rounds and
    /// under nostr-bench, with each relay's CPU per operation; writes the
    /// run's reports and headline.md.
    ///
    /// All traffic stays on 127.0.0.1; takes the machine-wide benchmark
    /// lock. Exit status: 0 when the run completed, 2 on a usage error or
    /// when our relay does not start, 130 when SIGINT or SIGTERM stopped it
    /// (its relays stopped and its scratch directory removed).
    Relays(cmd::bench_relays::Args),
    /// A relay comparison's headline.md (`nostrwire bench relays`) from its
    /// run directory: each relay's figures from both tools, and ours / best
    /// peer only from rounds without timeouts and where the work was equal.
    Headline(cmd::bench_headline::Args),
}

/// A file of the repository's `testdata/` as a default path: relative, so
/// read from the current directory (the repository root). Every command
/// that takes these files takes a flag to name them from elsewhere.
fn testdata(name: &str) -> PathBuf {
    Path::new("testdata").join(name)
}

/// Default corpus path used by commands that take `--corpus`.
pub(crate) fn default_corpus() -> PathBuf {
    testdata("real-events.jsonl")
}

/// Default kind mix path used by commands that take `--kind-mix`.
pub(crate) fn default_kind_mix() -> PathBuf {
    testdata("kind-mix.tsv")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Relay(args) => cmd::relay::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Export(args) => cmd::export::run(args),
        Command::Scan(args) => cmd::scan::run(args),
        Command::Delete(args) => cmd::delete::run(args),
        Command::Compact(args) => cmd::compact::run(args),
        Command::Sync(args) => cmd::sync::run(args),
        Command::Stream(args) => cmd::stream::run(args),
        Command::Migrate(command) => cmd::migrate::run(command),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        Command::Load(args) => cmd::load::run(*args),
        Command::Cluster(command) => cmd::cluster::run(command),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Dict(args) => cmd::dict::run(args),
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Bench(BenchCommand::Codec(args)) => cmd::bench_codec::run(args),
        Command::Bench(BenchCommand::Wire(args)) => cmd::bench_wire::run(args),
        Command::Bench(BenchCommand::Formats(args)) => cmd::bench_formats::run(args),
        Command::Bench(BenchCommand::Headline(args)) => cmd::bench_headline::run(args),
        Command::Bench(BenchCommand::Relays(args)) => cmd::bench_relays::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("nostrwire: {err:#}");
            ExitCode::from(2)
        }
    }
}
