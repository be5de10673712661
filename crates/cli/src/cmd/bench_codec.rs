//! `nostrwire bench codec`: event codec stages against named competitors.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nostrwire_bench::codec;

/// Arguments of `nostrwire bench codec`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON Lines corpus of valid signed events.
    #[arg(long, default_value_os_t = crate::default_corpus())]
    pub corpus: PathBuf,
    /// Print one JSON object with every figure instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Timed passes over the corpus per measurement.
    #[arg(long, default_value_t = 15)]
    pub samples: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let corpus = crate::input::read_all(&crate::input::input_file(&args.corpus, "--corpus")?)?;
    if cfg!(debug_assertions) {
        eprintln!("warning: unoptimized build; use `cargo run --release` for meaningful figures");
    }
    let options = codec::Options {
        samples: args.samples.max(2),
    };
    let report = codec::run(&corpus, &options, |done, total| {
        eprint!("\rmeasuring {done}/{total}");
        let _ = std::io::stderr().flush();
    })?;
    eprintln!();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["ratios"] = serde_json::Value::Object(
            report
                .ratios()
                .into_iter()
                .map(|(k, v)| (k, serde_json::json!(v)))
                .collect(),
        );
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(ExitCode::SUCCESS)
}
