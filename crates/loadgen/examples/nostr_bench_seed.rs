//! Events for `nostr-bench req` to find: kind-1 notes shaped like the ones
//! `nostr-bench event` publishes, one JSON event per line on standard output.
//!
//! `nostr-bench req` asks `{"#t":["nostr-bench-N"],"limit":L}` with N drawn
//! from 0..1000 on every query, so a relay that never stored such events
//! answers with EOSE alone and the query measures nothing. Replaying this
//! file into every relay of a comparison (`nostrwire load --scenario publish
//! --replay FILE`) makes each of them serve the same events, byte for byte.
//!
//! ```text
//! cargo run --release -p nostrwire-loadgen --example nostr_bench_seed -- \
//!     [--per-tag 10] [--authors 100] [--seed 1] [--newest UNIX] > seed.jsonl
//! ```
//!
//! The events are [`nostrwire_loadgen::nostr_bench::write_seed`]'s (`nostrwire
//! bench relays` writes the same file itself); the same arguments give the
//! same file.

use std::io::BufWriter;

use nostrwire_event::Timestamp;
use nostrwire_loadgen::nostr_bench::write_seed;

fn main() {
    let mut per_tag = 10u64;
    let mut authors = 100u64;
    let mut seed = 1u64;
    let mut newest: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} needs a number")))
        };
        match a.as_str() {
            "--per-tag" => per_tag = num("--per-tag"),
            "--authors" => authors = num("--authors").max(1),
            "--seed" => seed = num("--seed"),
            "--newest" => newest = Some(num("--newest")),
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let newest = newest.unwrap_or_else(|| Timestamp::now().as_u64());
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if write_seed(&mut out, per_tag, authors, seed, newest).is_err() {
        std::process::exit(1);
    }
}

fn usage(why: &str) -> ! {
    if !why.is_empty() {
        eprintln!("nostr_bench_seed: {why}");
    }
    eprintln!("usage: nostr_bench_seed [--per-tag N] [--authors N] [--seed N] [--newest UNIX]");
    std::process::exit(2);
}
