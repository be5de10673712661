//! `nostrwire bench formats`: every format on the real corpus, written to
//! `--out` as results.json, report.md and SVG charts.
//!
//! The competitor crates are compiled only with the `bench-formats` feature;
//! without it the subcommand exists and explains how to get it.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `nostrwire bench formats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON Lines corpus of valid signed events.
    #[arg(long, default_value_os_t = crate::default_corpus())]
    pub corpus: PathBuf,
    /// Network kind mix (`kind<TAB>share` lines) for the weighted averages.
    #[arg(long, default_value_os_t = crate::default_kind_mix())]
    pub kind_mix: PathBuf,
    /// Fewer timing samples (3 instead of 15); sizes are the same. Under 2 minutes.
    #[arg(long)]
    pub quick: bool,
    /// Directory for results.json, report.md and the charts.
    #[arg(long, default_value = "bench-out/formats")]
    pub out: PathBuf,
    /// Timed samples per measurement (overrides the --quick / full default).
    #[arg(long)]
    pub samples: Option<usize>,
    /// zstd level for every compressed size.
    #[arg(long, default_value_t = 3)]
    pub level: i32,
    /// Skip the allocation counts (they run in a child process).
    #[arg(long)]
    pub no_allocs: bool,
    /// Internal: count allocations and print them as JSON (the child process).
    #[arg(long, hide = true)]
    pub alloc_child: bool,
}

#[cfg(not(feature = "bench-formats"))]
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    eprintln!(
        "nostrwire: `bench formats` is not in this build: the competitor format crates are \
         compiled only on request. Rebuild and run with:\n\n    \
         cargo run --release --features bench-formats -- bench formats\n"
    );
    Ok(ExitCode::from(2))
}

#[cfg(feature = "bench-formats")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use nostrwire_bench_formats::{allocs, corpus, run, write_outputs};

    let corpus_path = crate::input::input_file(&args.corpus, "--corpus")?;
    let corpus_bytes = crate::input::read_all(&corpus_path)?;
    // The child is given only --corpus, so --kind-mix is checked after it.
    if args.alloc_child {
        let events = corpus::parse(&corpus_bytes)?;
        println!("{}", serde_json::to_string(&allocs::count(&events)?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mix_path = crate::input::input_file(&args.kind_mix, "--kind-mix")?;
    if cfg!(debug_assertions) {
        eprintln!("warning: unoptimized build; use `cargo run --release` for meaningful figures");
    }
    let mix_text = std::fs::read_to_string(&mix_path)
        .with_context(|| format!("reading {}", mix_path.display()))?;
    let kind_mix = corpus::parse_kind_mix(&mix_text)?;
    let mut options = if args.quick {
        run::Options::quick()
    } else {
        run::Options::full()
    };
    if let Some(s) = args.samples {
        options.samples = s.max(2);
    }
    options.level = args.level;

    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:<28} [{bar:40}] {pos}/{len} {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut phase = String::new();
    let mut results = run::run(
        &corpus_bytes,
        &kind_mix,
        &options,
        &mut |name: &str, done: usize, total: usize| {
            if name != phase {
                phase = name.to_string();
                bar.set_message(phase.clone());
                bar.set_length(total as u64);
            }
            bar.set_position(done as u64);
        },
    )?;
    if !args.no_allocs {
        bar.set_message("allocations (child process)");
        bar.set_length(1);
        bar.set_position(0);
        // Counted in a separate process so the timings above never count.
        let exe = std::env::current_exe()?;
        let output = std::process::Command::new(exe)
            .args(["bench", "formats", "--alloc-child", "--corpus"])
            .arg(&corpus_path)
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("starting the allocation-counting process")?;
        anyhow::ensure!(
            output.status.success(),
            "allocation-counting process failed: {}",
            output.status
        );
        results.allocs = Some(serde_json::from_slice(&output.stdout)?);
    }
    bar.finish_and_clear();
    for path in write_outputs(&results, &args.out)? {
        eprintln!("wrote {}", path.display());
    }
    for t in nostrwire_bench_formats::report::targets(&results) {
        eprintln!(
            "{:<58} nwb {:>10.1}  best {:>10.1} ({}), rank {}  {}",
            t.metric,
            t.nwb,
            t.best,
            t.best_format,
            t.rank,
            if t.met { "met" } else { "MISSED" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
