//! `nostrwire import`: bulk-load JSON Lines into the relay database. Events
//! are admitted as the relay admits them (its parser limits and
//! `ingest::check_event`: time window, write policy, proof of work,
//! expiration, id and signature; not the plugin, and not the checks that
//! need a connection's AUTH), in parallel, then written in large batches,
//! one transaction each, through the store's `submit`, as the relay's
//! writer does; the
//! next batch is verified while the previous one is written, and a search
//! thread indexes what is written. A database the import creates is written
//! without a sync per commit and synced once at the end: nothing was in it
//! to lose, and rewriting the same pages once per commit cost a sixth of
//! the import's time (300,000 events: 22,014 → 25,942 events/s).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use nostrwire_event::{parse_event_line, PreimageFields, SignedFields};
use nostrwire_relay::ingest::check_event;
use nostrwire_relay::policy::WritePolicy;
use nostrwire_store::LmdbStore;
use nostrwire_store::{Admitted, EventStore, Verdict};

use crate::input::{self, Line, Lines};
use crate::status::Status;

/// Arguments of `nostrwire import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// JSON Lines input (`-` or nothing: standard input).
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// Verification threads (default: all cores).
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// Events per transaction.
    #[arg(long, default_value_t = 10_000)]
    pub batch: usize,
    /// Keep the database as the import leaves it. By default an import that
    /// creates the database ends by compacting it (as `nostrwire compact`
    /// does, then put in place): the file is about a third smaller.
    ///
    /// An import that creates the database syncs it once, at the end, not
    /// after every commit; if the machine (not just the import) stops before
    /// the end, delete the new database and import again. An import into an
    /// existing database keeps the configured `durability`.
    #[arg(long)]
    pub no_compact: bool,
}

enum Outcome {
    Ready(Box<Admitted>),
    Rejected(&'static str),
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = args.database.load()?;
    let created = !config.relay.data.join("data.mdb").exists();
    if created {
        // Synced once, at the end (`store.sync()` below).
        config.storage.durability = nostrwire_store::Durability::None;
    }
    let store = nostrwire_relay::open_store(&config, true)?;
    let scratch = scratch_dir(&config.relay.data);
    if scratch.exists() {
        // Left by an interrupted compaction (we hold the writer lock, so
        // no other import is writing it): never in use.
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("cannot remove {}", scratch.display()))?;
    }
    let threads = crate::parallel::default_threads(args.threads);
    // The relay's own admission: its parser limits, write policy and checks.
    let policy = WritePolicy::from_config(&config)?;
    let limits = config.event_limits();
    let mut lines = Lines::new(
        input::open(args.input.as_deref())?,
        limits.max_message_bytes,
    );
    // A regular file's size turns the progress line into a percentage.
    let input_bytes = args
        .input
        .as_deref()
        .filter(|p| p.as_os_str() != "-")
        .and_then(|p| std::fs::metadata(p).ok())
        .filter(|m| m.is_file() && m.len() > 0)
        .map(|m| m.len());
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let started = Instant::now();
    // Verification of batch N+1 overlaps the write of batch N: the reader
    // (this thread) verifies on all cores, one writer thread commits, and a
    // search thread indexes what the writer stored, as in the relay.
    let (to_writer, batches) = std::sync::mpsc::sync_channel::<(Vec<Admitted>, Progress)>(1);
    let (to_search, commits) = std::sync::mpsc::sync_channel::<()>(1);
    let search_lag = config.search.index_lag;
    let (seen, verdicts) = std::thread::scope(|scope| -> anyhow::Result<_> {
        let store = &store;
        let search = scope.spawn(move || -> anyhow::Result<()> {
            for () in commits {
                while store.index_search(10_000, search_lag)? {}
            }
            Ok(())
        });
        let writer = scope.spawn(move || -> anyhow::Result<BTreeMap<&'static str, u64>> {
            let mut verdicts = BTreeMap::new();
            let mut status = Status::stderr();
            for (records, progress) in batches {
                let seen = progress.events;
                for verdict in store.submit(&records, nostrwire_relay::now())? {
                    let name = match verdict {
                        Verdict::Stored(_) => "accepted",
                        Verdict::Duplicate => "duplicate",
                        Verdict::Superseded => "superseded",
                        Verdict::Deleted => "deleted",
                    };
                    *verdicts.entry(name).or_default() += 1;
                }
                store.index_past_lag()?;
                // The search thread takes this batch in, or is still busy
                // and will see it: one signal waits at most.
                let _ = to_search.try_send(());
                if store.wants_dictionaries()? {
                    status.update(
                        "training compression dictionaries",
                        &format!("imported {seen} events; training compression dictionaries"),
                    );
                    store.train_dictionaries()?;
                }
                status.update(
                    "importing",
                    &progress.line(started.elapsed().as_secs_f64(), input_bytes),
                );
            }
            status.finish();
            Ok(verdicts)
        });
        let mut seen = 0u64;
        let mut batch = Vec::with_capacity(args.batch.max(1));
        let mut done = false;
        while !done {
            batch.clear();
            while batch.len() < args.batch.max(1) {
                match lines.next_line()? {
                    Some(Line::Text(t)) if t.iter().all(u8::is_ascii_whitespace) => {}
                    Some(line) => batch.push(line),
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            let now = nostrwire_relay::now();
            let outcomes = crate::parallel::map(&batch, threads, |line| match line {
                Line::TooLong => Outcome::Rejected("too_large"),
                Line::Text(t) => match parse_event_line(t, &limits) {
                    Err(err) => Outcome::Rejected(err.kind().as_str()),
                    Ok(e) => match check_event(&config, &policy, &e, now) {
                        Err(refusal) => Outcome::Rejected(refusal.reason),
                        Ok(()) if e.kind().is_ephemeral() => Outcome::Rejected("ephemeral"),
                        Ok(()) => {
                            let record = nostrwire_wire::encode_json_event(&e);
                            match store.admit(record, e.to_json_bytes()) {
                                Ok(admitted) => Outcome::Ready(Box::new(admitted)),
                                Err(_) => Outcome::Rejected("internal"),
                            }
                        }
                    },
                },
            });
            let mut records = Vec::with_capacity(outcomes.len());
            for o in outcomes {
                match o {
                    Outcome::Ready(r) => records.push(*r),
                    Outcome::Rejected(reason) => *counts.entry(reason).or_default() += 1,
                }
            }
            seen += batch.len() as u64;
            let progress = Progress {
                events: seen,
                bytes: lines.bytes_read(),
            };
            if to_writer.send((records, progress)).is_err() {
                break; // the writer failed; its error is reported below
            }
        }
        drop(to_writer);
        let verdicts = writer.join().expect("import writer panicked")?;
        search.join().expect("import search thread panicked")?;
        Ok((seen, verdicts))
    })?;
    for (name, n) in verdicts {
        *counts.entry(name).or_default() += n;
    }
    // The indexes may trail the last batch; leave them complete (the
    // search index first: the writer then deletes the removal rows it
    // took out).
    while store.index_search(10_000, 0)? {}
    while store.index_pending(10_000)? {}
    store.sync()?;
    let elapsed = started.elapsed().as_secs_f64();
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    println!(
        "{seen} events in {elapsed:.2} s ({:.0}/s): {}",
        seen as f64 / elapsed.max(1e-9),
        summary.join(", ")
    );
    if created && !args.no_compact {
        compact_in_place(store, &config.relay.data)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How far the reader got when it handed a batch to the writer.
#[derive(Clone, Copy, Debug)]
struct Progress {
    /// Lines read, blank ones excepted.
    events: u64,
    /// Bytes of input read.
    bytes: u64,
}

impl Progress {
    /// The progress line once this batch is committed, `elapsed` seconds
    /// after the start: events, rate, and with the input's size the share
    /// read and the time left at the rate so far.
    fn line(&self, elapsed: f64, input_bytes: Option<u64>) -> String {
        let elapsed = elapsed.max(1e-9);
        let rate = self.events as f64 / elapsed;
        match input_bytes {
            Some(total) if self.bytes > 0 => {
                let share = (self.bytes as f64 / total as f64).min(1.0);
                let left = elapsed * (1.0 - share) / share;
                format!(
                    "imported {} events ({rate:.0}/s), {:.0}% of the input, about {left:.0} s left",
                    self.events,
                    share * 100.0
                )
            }
            _ => format!("imported {} events ({rate:.0}/s)", self.events),
        }
    }
}

/// Where [`compact_in_place`] writes its copy.
fn scratch_dir(data: &Path) -> PathBuf {
    data.join("compacting")
}

/// Replaces the database in `data` with a compacted copy: written beside it
/// (in `data/compacting`), then renamed over `data.mdb` while the writer
/// lock is still held, so no relay can open the old file in between. An
/// interruption before the rename leaves the database as it was.
fn compact_in_place(store: LmdbStore, data: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let before = store.stats()?.disk_bytes;
    let scratch = scratch_dir(data);
    let mut status = Status::stderr();
    let after = store.compact_to(&scratch, &mut |table, entries| {
        status.update(
            &format!("compacting: {table}"),
            &format!("compacting: {table}, {entries} entries"),
        );
    })?;
    let lock = store.close();
    std::fs::rename(scratch.join("data.mdb"), data.join("data.mdb"))
        .with_context(|| format!("cannot put the compacted database in {}", data.display()))?;
    let search_copy = scratch.join("search").join("data.mdb");
    if search_copy.exists() {
        let search = data.join("search");
        std::fs::rename(&search_copy, search.join("data.mdb")).with_context(|| {
            format!(
                "cannot put the compacted search index in {}",
                search.display()
            )
        })?;
        std::fs::File::open(&search)
            .and_then(|dir| dir.sync_all())
            .with_context(|| format!("cannot sync {}", search.display()))?;
    }
    std::fs::File::open(data)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("cannot sync {}", data.display()))?;
    std::fs::remove_dir_all(&scratch)
        .with_context(|| format!("cannot remove {}", scratch.display()))?;
    drop(lock);
    status.done(&format!(
        "compacted the new database from {:.1} MB to {:.1} MB in {:.1} s",
        before as f64 / 1e6,
        after as f64 / 1e6,
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Progress;

    #[test]
    fn progress_names_the_share_read_when_the_size_is_known() {
        let p = Progress {
            events: 30_000,
            bytes: 250,
        };
        assert_eq!(
            p.line(6.0, Some(1_000)).trim_end(),
            "imported 30000 events (5000/s), 25% of the input, about 18 s left"
        );
        assert_eq!(
            p.line(6.0, None).trim_end(),
            "imported 30000 events (5000/s)"
        );
    }
}
