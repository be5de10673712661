//! `nostrwire generate`: signed synthetic events as JSON Lines — the load
//! tester's workload (real kind mix, tags and content from corpus events of
//! the same kind with prose, encrypted payloads and `e` ids drawn anew, one
//! author of `--authors` per event), written out so a database can be
//! filled with `nostrwire import` before a benchmark.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use nostrwire_event::{SignedFields, Timestamp};
use nostrwire_loadgen::workload::{self, GenSpec, KindMix, Shapes};

use crate::input::input_file;

/// Events built and signed per step (bounds memory; one progress line each).
const CHUNK: usize = 20_000;

/// Arguments of `nostrwire generate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of events.
    #[arg(long)]
    pub count: usize,
    /// Seed: the same seed, count and `--newest` give byte-identical output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Distinct authors (keys derived from the seed).
    #[arg(long, default_value_t = 100)]
    pub authors: usize,
    /// `created_at` of the last event (default: now); events are one second apart.
    #[arg(long)]
    pub newest: Option<u64>,
    /// Kind mix (`kind<TAB>weight` lines).
    #[arg(long, default_value_os_t = crate::default_kind_mix())]
    pub kind_mix: PathBuf,
    /// Corpus the tags and contents are taken from (JSON Lines).
    #[arg(long, default_value_os_t = crate::default_corpus())]
    pub corpus: PathBuf,
    /// Output file (default: standard output).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mix = KindMix::load(&input_file(&args.kind_mix, "--kind-mix")?)?;
    let shapes = Shapes::load(&input_file(&args.corpus, "--corpus")?)?;
    let keys = workload::authors(args.seed, args.authors);
    let newest = args
        .newest
        .unwrap_or_else(|| Timestamp::now().as_u64())
        .max(args.count as u64);
    let sink: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::fs::File::create(path)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let started = Instant::now();
    let mut written = 0usize;
    for (stream, start) in (0..args.count).step_by(CHUNK).enumerate() {
        let count = CHUNK.min(args.count - start);
        let last = newest - (args.count - start - count) as u64;
        let spec = GenSpec {
            seed: args.seed,
            stream: stream as u64,
            count,
            newest: Timestamp::new(last).unwrap_or(Timestamp::MAX),
            extra_tag: None,
        };
        for prepared in workload::mixed_events(&spec, &keys, &mix, &shapes) {
            out.write_all(prepared.event.to_json().as_bytes())?;
            out.write_all(b"\n")?;
        }
        written += count;
        let rate = written as f64 / started.elapsed().as_secs_f64().max(1e-9);
        eprint!(
            "\rgenerated {written} of {} events ({rate:.0}/s)",
            args.count
        );
    }
    out.flush()?;
    eprintln!();
    Ok(ExitCode::SUCCESS)
}
