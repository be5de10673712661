//! `nostrwire compact`: a compacted copy of the relay database.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use nostrwire_store::EventStore;

use crate::status::Status;

/// Arguments of `nostrwire compact`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// Directory to write the compacted `data.mdb` into (created if needed;
    /// an existing `data.mdb` there is never overwritten).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.database.load()?;
    let store = nostrwire_relay::open_store(&config, false)?;
    let before = store.stats()?;
    eprintln!(
        "compacting {} ({} events, {:.1} MB) into {}",
        config.relay.data.display(),
        before.events,
        before.disk_bytes as f64 / 1e6,
        args.output.display()
    );
    let started = Instant::now();
    let mut status = Status::stderr();
    let mut shown = String::new();
    let after = store
        .compact_to(&args.output, &mut |table, entries| {
            // One line per table, rewritten in place on a terminal.
            if table != shown {
                status.finish();
                shown = table.to_string();
            }
            status.update(
                &format!("  {table}"),
                &format!("  {table}: {entries} entries"),
            );
        })
        .with_context(|| format!("cannot write the copy into {}", args.output.display()))?;
    status.finish();
    let mut files = vec![std::path::PathBuf::from("data.mdb")];
    if args.output.join("search/data.mdb").exists() {
        files.push("search/data.mdb".into());
    }
    let moves: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "{} in place of {}",
                args.output.join(f).display(),
                config.relay.data.join(f).display()
            )
        })
        .collect();
    eprintln!(
        "wrote {:.1} MB ({:.0}% of {:.1} MB) in {:.1} s; to use it, stop the relay and put {}",
        after as f64 / 1e6,
        100.0 * after as f64 / before.disk_bytes.max(1) as f64,
        before.disk_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        moves.join(", and "),
    );
    Ok(ExitCode::SUCCESS)
}
