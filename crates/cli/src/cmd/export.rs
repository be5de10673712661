//! `nostrwire export`: stored events as JSON Lines, newest first, streamed.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_event::Filter;
use nostrwire_store::EventStore;

/// Arguments of `nostrwire export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// Only events matching this NIP-01 filter (JSON); `limit` is ignored.
    #[arg(long)]
    pub filter: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.database.load()?;
    let filter = match &args.filter {
        Some(text) => Filter::from_json(text.as_bytes()).context("invalid --filter")?,
        None => Filter::new(),
    };
    let store = nostrwire_relay::open_store(&config, false)?;
    if filter.search.is_some() && !store.has_search_index() {
        anyhow::bail!(
            "this database has no search index to read (search is off, or the relay has not \
             built it yet): a `search` filter would match nothing"
        );
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut failed = None;
    store.export(&filter, &mut |found| {
        let result = out
            .write_all(&found.json)
            .and_then(|_| out.write_all(b"\n"));
        match result {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })?;
    match failed {
        // A closed pipe (e.g. `| head`) is a normal way to stop reading.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Some(e) => return Err(e.into()),
        None => {}
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
