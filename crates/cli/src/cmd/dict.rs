//! `nostrwire dict`: zstd dictionaries for compressed nwb records
//! (`spec/nwb.md` §11).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_event::{parse_event_line, Limits, PreimageFields};
use nostrwire_wire::compress::{DictSet, TrainOptions};
use nostrwire_wire::encode_json_event;

use crate::input::{self, Line, Lines};

/// Arguments of `nostrwire dict`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: DictCommand,
}

/// Dictionary subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DictCommand {
    /// Train a dictionary set on a JSON Lines corpus: a fallback dictionary
    /// and, with --per-kind, one per kind with enough samples. Train on data
    /// disjoint from what you measure.
    Train(TrainArgs),
}

/// Arguments of `nostrwire dict train`.
#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    /// Also train one dictionary per kind.
    #[arg(long)]
    pub per_kind: bool,
    /// JSON Lines corpus of events to train on.
    #[arg(long)]
    pub corpus: PathBuf,
    /// Output dictionary set file.
    #[arg(long, short = 'o', value_name = "DICTS")]
    pub output: PathBuf,
    /// Largest dictionary, in bytes.
    #[arg(long, default_value_t = TrainOptions::default().max_dict_bytes)]
    pub max_dict_bytes: usize,
    /// Fewest events a kind needs for its own dictionary.
    #[arg(long, default_value_t = TrainOptions::default().min_kind_samples)]
    pub min_kind_samples: usize,
    /// zstd level recorded in the set (1 to 19), used by `convert`; the
    /// relay compresses at its own `storage.compression_level`.
    #[arg(long, default_value_t = TrainOptions::default().level,
          value_parser = clap::value_parser!(i32).range(1..=nostrwire_wire::compress::MAX_SET_LEVEL as i64))]
    pub level: i32,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        DictCommand::Train(a) => train(a),
    }
}

fn train(args: TrainArgs) -> anyhow::Result<ExitCode> {
    let limits = Limits::DEFAULT;
    let mut lines = Lines::new(input::open(Some(&args.corpus))?, limits.max_message_bytes);
    let mut samples = Vec::new();
    let mut line_no = 0u64;
    while let Some(line) = lines.next_line()? {
        line_no += 1;
        let text = match line {
            Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Text(t) => t,
            Line::TooLong => {
                eprintln!(
                    "record {line_no}: too_large: line longer than {} bytes",
                    limits.max_message_bytes
                );
                return Ok(ExitCode::from(1));
            }
        };
        // Training data must be clean: stop at the first bad record.
        match parse_event_line(&text, &limits) {
            Ok(event) => samples.push((event.kind(), encode_json_event(&event))),
            Err(e) => {
                eprintln!("record {line_no}: {}: {e}", e.kind());
                return Ok(ExitCode::from(1));
            }
        }
    }
    anyhow::ensure!(!samples.is_empty(), "{}: no events", args.corpus.display());
    let options = TrainOptions {
        per_kind: args.per_kind,
        max_dict_bytes: args.max_dict_bytes,
        min_kind_samples: args.min_kind_samples,
        level: args.level,
    };
    let borrowed: Vec<_> = samples.iter().map(|(k, r)| (*k, r.as_slice())).collect();
    let set = DictSet::train(&borrowed, &options)
        .context("training failed (too few or too small samples?)")?;
    std::fs::write(&args.output, set.to_bytes())
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!(
        "{} events, {} dictionaries, level {}:",
        samples.len(),
        set.dictionaries().len(),
        set.level()
    );
    for d in set.dictionaries() {
        let kind = d
            .kind()
            .map_or_else(|| "fallback".to_string(), |k| format!("kind {k}"));
        eprintln!(
            "  id {:>3}  {kind:<12} {:>7} bytes",
            d.id(),
            d.bytes().len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
