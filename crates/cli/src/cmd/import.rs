//! `nostrwire import`: bulk-load JSON Lines into the relay database. Events
//! are admitted as the relay admits them (its parser limits and
//! `ingest::check_event`: time window, write policy, proof of work,
//! expiration, id and signature; not the plugin, and not the checks that
//! need a connection's AUTH), in parallel, then written in large batches,
//! one transaction each, by the store's writer (`Writer`, the relay's
//! too); the next batch is verified while the previous one is written, and
//! the store's search thread indexes what is written. A database the import creates is written
//! without a sync per commit and synced once at the end: nothing was in it
//! to lose, and rewriting the same pages once per commit cost a sixth of
//! the import's time (300,000 events: 22,014 → 25,942 events/s).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use nostrwire_event::{parse_event_line, PreimageFields, SignedFields};
use nostrwire_relay::ingest::check_event;
use nostrwire_relay::policy::WritePolicy;
use nostrwire_store::search::SearchIndexer;
use nostrwire_store::{
    writer_inbox, Admitted, Committed, EventStore, LmdbStore, StoreError, Submission, Verdict,
    Write, Writer, WriterOptions,
};

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
    // (this thread) verifies on all cores while the store's writer commits
    // (one transaction per batch) and its search thread indexes what was
    // stored, as in the relay.
    let store = Arc::new(store);
    let tally = Arc::new(Mutex::new(Tally {
        verdicts: BTreeMap::new(),
        status: Status::stderr(),
        started,
        input_bytes,
        error: None,
    }));
    // The writer's and the search thread's errors (the import stops on a
    // failed write; a failed training or search batch is retried).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOSTRWIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let search = match store.has_search_index() {
        true => Some(Arc::new(SearchIndexer::spawn(
            store.clone(),
            config.search.index_lag,
        )?)),
        false => None,
    };
    let options = WriterOptions {
        max_batch: args.batch.max(1),
        linger: std::time::Duration::ZERO,
    };
    // One batch waits while the writer commits the one before.
    let (to_writer, inbox) = writer_inbox(1);
    let writer = Writer::spawn(
        store.clone(),
        options,
        inbox,
        search.clone(),
        Answers(tally.clone()),
    )?;
    let mut seen = 0u64;
    let mut batch = Vec::with_capacity(args.batch.max(1));
    let mut done = false;
    while !done && lock(&tally).error.is_none() {
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
        let mut submissions = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            match o {
                Outcome::Ready(event) => submissions.push(Submission {
                    event: *event,
                    publisher: 0,
                    position: None,
                    ticket: None,
                }),
                Outcome::Rejected(reason) => *counts.entry(reason).or_default() += 1,
            }
        }
        seen += batch.len() as u64;
        // The batch's last event carries how far the reader got.
        if let Some(last) = submissions.last_mut() {
            last.ticket = Some(Progress {
                events: seen,
                bytes: lines.bytes_read(),
            });
        }
        if !submissions.is_empty() && to_writer.send(Write::Batch(submissions)).is_err() {
            break;
        }
    }
    let _ = to_writer.send(Write::Shutdown);
    writer.join();
    if let Some(search) = search {
        search.stop();
    }
    let mut tally = Arc::try_unwrap(tally)
        .map_err(|_| anyhow::anyhow!("the import's writer is still running"))?
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    tally.status.finish();
    if let Some(error) = tally.error {
        anyhow::bail!("writing the events failed: {error}");
    }
    for (name, n) in tally.verdicts {
        *counts.entry(name).or_default() += n;
    }
    let store = Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("the store is still in use after the import"))?;
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

/// The import's side of the store's writer: counts what became of each
/// event and shows how far the import got.
struct Answers(Arc<Mutex<Tally>>);

struct Tally {
    verdicts: BTreeMap<&'static str, u64>,
    status: Status<std::io::Stderr>,
    started: Instant,
    input_bytes: Option<u64>,
    /// Why a batch could not be written; the import stops.
    error: Option<String>,
}

fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(|e| e.into_inner())
}

impl Committed<Option<Progress>> for Answers {
    fn committed(&mut self, batch: Vec<(Admitted, Option<Progress>, Verdict)>) {
        let mut tally = lock(&self.0);
        let mut reached = None;
        for (_, progress, verdict) in batch {
            let name = match verdict {
                Verdict::Stored(_) => "accepted",
                Verdict::Duplicate => "duplicate",
                Verdict::Superseded => "superseded",
                Verdict::Deleted => "deleted",
            };
            *tally.verdicts.entry(name).or_default() += 1;
            reached = progress.or(reached);
        }
        if let Some(progress) = reached {
            let line = progress.line(tally.started.elapsed().as_secs_f64(), tally.input_bytes);
            tally.status.update("importing", &line);
        }
    }

    fn failed(&mut self, _batch: Vec<(Admitted, Option<Progress>)>, error: &StoreError) {
        lock(&self.0).error.get_or_insert_with(|| error.to_string());
    }
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
