//! `nostrwire scan`: the stored events a NIP-01 filter matches, as JSON
//! Lines, newest first, found by the query planner REQs use. Read-only: it
//! takes no writer lock, so it runs beside a relay on the same data
//! directory (LMDB readers never wait on the writer, nor it on them).

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;
use nostrwire_event::Filter;
use nostrwire_store::{EventStore, LmdbStore};

/// Arguments of `nostrwire scan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// The NIP-01 filter (JSON); its `limit`, if any, caps the output.
    #[arg(long)]
    pub filter: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let filter = parse_filter(&args.filter)?;
    let store = open_for_reading(args.database)?;
    check_search(&store, &filter)?;
    let found = nostrwire_relay::admin::matching(&store, &filter, nostrwire_relay::now())?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let written = write_events(&store, &found, &mut out).and_then(|()| out.flush());
    match written {
        // A closed pipe (e.g. `| head`) is a normal way to stop reading.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// `--filter` as a NIP-01 filter.
pub(crate) fn parse_filter(text: &str) -> anyhow::Result<Filter> {
    Filter::from_json(text.as_bytes()).context("invalid --filter")
}

/// The database of `database`, opened without its writer lock.
pub(crate) fn open_for_reading(database: super::relay::DatabaseArgs) -> anyhow::Result<LmdbStore> {
    let config = database.load()?;
    anyhow::ensure!(
        config.relay.data.join("data.mdb").exists(),
        "no database in {}",
        config.relay.data.display()
    );
    nostrwire_relay::open_store(&config, false)
}

/// A `search` filter needs the search index.
pub(crate) fn check_search(store: &LmdbStore, filter: &Filter) -> anyhow::Result<()> {
    anyhow::ensure!(
        filter.search.is_none() || store.has_search_index(),
        "this database has no search index to read (search is off, or the relay has not \
         built it yet): a `search` filter would match nothing"
    );
    Ok(())
}

/// Each of `found` as a line of JSON (those removed since the scan are
/// left out).
pub(crate) fn write_events(
    store: &dyn EventStore,
    found: &[nostrwire_store::Found],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for f in found {
        let rendered = store
            .render(f.serial, false)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Some(event) = rendered {
            out.write_all(&event.json)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}
