//! `nostrwire sync`: NIP-77 (negentropy) reconciliation of the local
//! database with a relay, then the transfer of what differs: `down` stores
//! the relay's events the database lacks, `up` publishes the database's
//! events the relay lacks, `both` does both.
//!
//! The reconciliation is the load tester's NIP-77 client
//! (`nostrwire_loadgen::sync`), on the same negentropy crate as the relay's
//! side. The database is opened as `import` opens it (its writer lock: the
//! relay on it must be stopped), and downloaded events are admitted as the
//! relay admits them (parser limits, time window, write policy, id and
//! signature).
//!
//! Memory: the reconciliation holds 40 bytes per local event matching the
//! filter (its `(created_at, id)`, as the relay's side does) plus the ids
//! found to differ; events themselves are moved `--batch` at a time (one
//! REQ of that many ids, or that many EVENTs before their `OK`s), each
//! batch written in one transaction before the next is asked for.
//!
//! Resuming: nothing is kept between runs, and none is needed. A run that
//! stops (killed, connection lost) has committed whole batches; the next run
//! reconciles again and finds only what is still missing.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use nostrwire_event::{parse_event_line, EventId, Filter, PreimageFields, SignedFields};
use nostrwire_loadgen::client::{Conn, Target};
use nostrwire_loadgen::stats::message_prefix;
use nostrwire_loadgen::sync::{self as neg, SyncError, Traffic};
use nostrwire_loadgen::ws::{Counters, WsUrl};
use nostrwire_relay::ingest::check_event;
use nostrwire_relay::policy::WritePolicy;
use nostrwire_relay::Config;
use nostrwire_store::{EventStore, LmdbStore, Verdict};

use crate::status::Status;

/// Which way events move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Direction {
    /// Store the relay's events the database lacks.
    Down,
    /// Publish the database's events the relay lacks.
    Up,
    /// Both.
    Both,
}

impl Direction {
    fn down(self) -> bool {
        matches!(self, Direction::Down | Direction::Both)
    }

    fn up(self) -> bool {
        matches!(self, Direction::Up | Direction::Both)
    }
}

/// Arguments of `nostrwire sync`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The relay (`ws://host:port/path`; for `wss://`, a local TLS proxy).
    pub url: String,
    /// Only events matching this NIP-01 filter (JSON), on both sides.
    #[arg(long)]
    pub filter: Option<String>,
    /// Which way events move.
    #[arg(long, value_enum, default_value = "down")]
    pub dir: Direction,
    #[command(flatten)]
    pub database: super::relay::DatabaseArgs,
    /// Events moved per round trip: ids per REQ going down, EVENTs sent
    /// before their `OK`s going up. Bounds the events held in memory.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Seconds to wait for any answer of the relay.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

/// What became of the events of one direction, by outcome.
#[derive(Debug, Default)]
struct Moved {
    /// Outcome (`stored`, `duplicate`, `refused:<prefix>`...) → events.
    outcomes: BTreeMap<String, u64>,
}

impl Moved {
    fn add(&mut self, outcome: &str) {
        *self.outcomes.entry(outcome.to_string()).or_default() += 1;
    }

    fn total(&self) -> u64 {
        self.outcomes.values().sum()
    }

    fn line(&self) -> String {
        if self.outcomes.is_empty() {
            return "nothing".into();
        }
        let parts: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        parts.join(", ")
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.database.load()?;
    let filter = match &args.filter {
        Some(text) => Filter::from_json(text.as_bytes()).context("invalid --filter")?,
        None => Filter::new(),
    };
    let url = WsUrl::parse(&args.url).map_err(|e| anyhow::anyhow!("invalid URL: {e}"))?;
    if url.binary {
        anyhow::bail!("sync speaks NIP-01 JSON: give a plain ws:// URL");
    }
    let batch = args.batch.max(1);
    let timeout = Duration::from_secs(args.timeout.max(1));
    let store = nostrwire_relay::open_store(&config, true).context(
        "cannot open the database for writing (sync works on a stopped relay's database)",
    )?;
    if filter.search.is_some() && !store.has_search_index() {
        anyhow::bail!("this database has no search index: a `search` filter would match nothing");
    }
    let mut status = Status::stderr();
    let started = Instant::now();
    status.update("reading the database", "reading the database's ids");
    let mut local = Vec::new();
    store.export(&filter, &mut |found| {
        local.push((found.created_at, found.id));
        true
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let target = Target {
        url,
        counters: Arc::new(Counters::default()),
        timeout,
    };
    let mut conn = runtime
        .block_on(Conn::open(&target, 1))
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", args.url))?;
    status.update(
        "reconciling",
        &format!("reconciling {} local events with the relay", local.len()),
    );
    let reconciled = runtime
        .block_on(neg::reconcile(&mut conn, &filter, &local, timeout))
        .map_err(|e| sync_error(&args.url, e))?;
    let local_count = local.len();
    drop(local);
    let mut traffic = reconciled.traffic;
    status.done(&format!(
        "reconciled {local_count} local events in {} rounds: the relay has {} the database lacks, \
         the database has {} the relay lacks",
        reconciled.rounds,
        reconciled.need.len(),
        reconciled.have.len()
    ));

    let mut down = Moved::default();
    if args.dir.down() {
        let mut ids: Vec<EventId> = reconciled.need.iter().copied().collect();
        ids.sort_unstable();
        let admission = Admission::new(&config)?;
        let mut done = 0usize;
        for chunk in ids.chunks(batch) {
            let wanted = Filter {
                ids: Some(chunk.to_vec()),
                ..Filter::new()
            };
            let mut events: Vec<Vec<u8>> = Vec::with_capacity(chunk.len());
            let (_, moved) = runtime
                .block_on(neg::fetch_each(&mut conn, &wanted, timeout, &mut |event| {
                    events.push(nostrwire_event::SignedFields::to_json_bytes(event))
                }))
                .map_err(|e| sync_error(&args.url, e))?;
            add(&mut traffic, moved);
            let returned = events.len();
            admission.store(&store, &events, &mut down)?;
            for _ in returned..chunk.len() {
                down.add("not returned by the relay");
            }
            done += chunk.len();
            status.update(
                "downloading",
                &format!("downloaded {done} of {} events", ids.len()),
            );
        }
        if !ids.is_empty() {
            finish_indexing(&store)?;
        }
    }

    let mut up = Moved::default();
    if args.dir.up() {
        let mut ids: Vec<EventId> = reconciled.have.iter().copied().collect();
        ids.sort_unstable();
        let mut done = 0usize;
        for chunk in ids.chunks(batch) {
            let wanted = Filter {
                ids: Some(chunk.to_vec()),
                ..Filter::new()
            };
            let mut events = Vec::with_capacity(chunk.len());
            store.export(&wanted, &mut |found| {
                events.push((found.id, found.json.clone()));
                true
            })?;
            // Deleted or replaced since the reconciliation (by an event the
            // same sync downloaded).
            for _ in events.len()..chunk.len() {
                up.add("gone from the database");
            }
            let (answers, moved) = runtime
                .block_on(neg::publish_all(&mut conn, &events, timeout))
                .map_err(|e| sync_error(&args.url, e))?;
            add(&mut traffic, moved);
            for (accepted, message) in answers {
                let prefix = message_prefix(&message);
                match (accepted, prefix.as_str()) {
                    (true, "duplicate") => up.add("duplicate"),
                    (true, _) => up.add("accepted"),
                    (false, _) => up.add(&format!("refused ({prefix})")),
                }
            }
            done += chunk.len();
            status.update(
                "uploading",
                &format!("uploaded {done} of {} events", ids.len()),
            );
        }
    }
    let _ = runtime.block_on(conn.close());
    store.sync()?;
    status.finish();
    let (bytes_in, bytes_out) = target.counters.snapshot();
    println!(
        "sync with {} in {:.2} s: {local_count} local events, {} rounds, {bytes_out} bytes sent, \
         {bytes_in} bytes received",
        args.url,
        started.elapsed().as_secs_f64(),
        reconciled.rounds,
    );
    let _ = traffic;
    if args.dir.down() {
        println!("down: {} events: {}", down.total(), down.line());
    }
    if args.dir.up() {
        println!("up: {} events: {}", up.total(), up.line());
    }
    Ok(ExitCode::SUCCESS)
}

fn add(total: &mut Traffic, more: Traffic) {
    total.sent += more.sent;
    total.received += more.received;
}

fn sync_error(url: &str, error: SyncError) -> anyhow::Error {
    match error {
        SyncError::Unsupported(why) => anyhow::anyhow!("{url} does not do NIP-77 sync: {why}"),
        SyncError::Failed(failure) => anyhow::anyhow!("sync with {url} failed: {}", failure.key()),
    }
}

/// The relay's admission of an event, as `import` applies it.
struct Admission<'a> {
    config: &'a Config,
    policy: WritePolicy,
    limits: nostrwire_event::Limits,
}

impl<'a> Admission<'a> {
    fn new(config: &'a Config) -> anyhow::Result<Self> {
        Ok(Admission {
            config,
            policy: WritePolicy::from_config(config)?,
            limits: config.event_limits(),
        })
    }

    /// Checks and stores a batch of events (canonical JSON) in one
    /// transaction, counting each outcome in `moved`.
    fn store(
        &self,
        store: &LmdbStore,
        events: &[Vec<u8>],
        moved: &mut Moved,
    ) -> anyhow::Result<()> {
        let now = nostrwire_relay::now();
        let mut admitted = Vec::with_capacity(events.len());
        for json in events {
            let event = match parse_event_line(json, &self.limits) {
                Ok(e) => e,
                Err(err) => {
                    moved.add(&format!("refused ({})", err.kind().as_str()));
                    continue;
                }
            };
            if let Err(refusal) = check_event(self.config, &self.policy, &event, now) {
                moved.add(&format!("refused ({})", refusal.reason));
                continue;
            }
            if event.kind().is_ephemeral() {
                moved.add("refused (ephemeral)");
                continue;
            }
            let record = nostrwire_wire::encode_json_event(&event);
            admitted.push(store.admit(record, event.to_json_bytes())?);
        }
        if admitted.is_empty() {
            return Ok(());
        }
        for verdict in store.submit(&admitted, now)? {
            moved.add(match verdict {
                Verdict::Stored(_) => "stored",
                Verdict::Duplicate => "duplicate",
                Verdict::Superseded => "superseded",
                Verdict::Deleted => "deleted",
            });
        }
        Ok(())
    }
}

/// Brings the indexes the writes left behind up to date, as `import` does.
fn finish_indexing(store: &LmdbStore) -> anyhow::Result<()> {
    if store.has_search_index() {
        while store.index_search(10_000, 0)? {}
    }
    while store.index_pending(10_000)? {}
    Ok(())
}
