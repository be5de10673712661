//! `nostrwire bench wire`: the nwb binary format against notepack and JSON.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use nostrwire_bench::wire;

/// Arguments of `nostrwire bench wire`.
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
    /// zstd level for the compressed sizes.
    #[arg(long, default_value_t = 19)]
    pub level: i32,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let corpus = crate::input::read_all(&crate::input::input_file(&args.corpus, "--corpus")?)?;
    if cfg!(debug_assertions) {
        eprintln!("warning: unoptimized build; use `cargo run --release` for meaningful figures");
    }
    let options = wire::Options {
        samples: args.samples.max(2),
        level: args.level,
    };
    let report = wire::run(&corpus, &options, |done, total| {
        eprint!("\rmeasuring {done}/{total}");
        let _ = std::io::stderr().flush();
    })?;
    eprintln!();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["targets"] = report
            .targets()
            .into_iter()
            .map(|(name, value, target, met)| serde_json::json!({"name": name, "value": value, "target": target, "met": met}))
            .collect();
        value["traffic_weighted_ingest_ratio"] =
            serde_json::json!(report.traffic_weighted_ingest_ratio());
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(ExitCode::SUCCESS)
}
