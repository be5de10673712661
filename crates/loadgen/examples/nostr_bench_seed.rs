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
//! Event i (from 0) is by author `Keys::derive(seed, i % authors)`, has the
//! tags nostr-bench gives its notes (`p` of the author, the same `e` id,
//! `t` "nostr-bench-" and `t` "nostr-bench-{i % 1000}") and the same
//! content, and `created_at` one second after event i-1, the last one at
//! `--newest` (default: now). So every `t` value has `--per-tag` events and
//! the same arguments give the same file.

use std::io::{BufWriter, Write};

use nostrwire_event::{Keys, Kind, SignedFields, Tag, Timestamp, UnsignedEvent};

/// The content of every nostr-bench note.
const CONTENT: &str = "This is a message from nostr-bench client";
/// The `e` tag of every nostr-bench note.
const E_TAG: &str = "378f145897eea948952674269945e88612420db35791784abf0616b4fed56ef7";
/// nostr-bench draws its hashtags from `nostr-bench-0` to `nostr-bench-999`.
const TAGS: u64 = 1000;

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
    let total = per_tag * TAGS;
    let newest = newest.unwrap_or_else(|| Timestamp::now().as_u64());
    let first = newest.saturating_sub(total.saturating_sub(1));
    let keys: Vec<Keys> = (0..authors).map(|i| Keys::derive(seed, i)).collect();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
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
        let created_at = Timestamp::new(first + i).expect("timestamp in range");
        let event = UnsignedEvent::new(k, created_at, Kind(1), tags, CONTENT).sign(k);
        line.clear();
        event.write_json(&mut line);
        line.push(b'\n');
        if out.write_all(&line).is_err() {
            std::process::exit(1);
        }
    }
    if out.flush().is_err() {
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
