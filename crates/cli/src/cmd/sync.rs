//! `nostrwire sync`: NIP-77 (negentropy) reconciliation of the local
//! database with a relay, then the transfer of what differs: `down` stores
//! the relay's events the database lacks, `up` publishes the database's
//! events the relay lacks, `both` does both.
//!
//! The reconciliation is the load tester's NIP-77 client
//! (`nostrwire_loadgen::sync`), on the same negentropy crate as the relay's
//! side. The database's side is read as the relay reads it for a NEG-OPEN:
//! `(created_at, id)` of each match, no event rendered.
//!
//! Where downloaded events go:
//! - no relay holds the database (it is stopped): this command takes the
//!   writer lock, as `import` does, and admits each event as the relay
//!   would (parser limits, time window, write policy, id and signature);
//! - a relay holds it (`--local`, or found running): the database is only
//!   read (LMDB readers never wait on the writer), and downloaded events are
//!   published to that relay, so its one writer stores them and its
//!   subscribers see them; its `OK` for each is counted by prefix.
//!
//! Slices and memory: the database's side is read newest first in slices
//! of `--slice` events (100,000), each cut between two distinct
//! `created_at` values, and each slice is one NIP-77 session whose filter
//! is narrowed to the slice's time range, so the relay's side is cut the
//! same way. The next slice is read while one is reconciled and its
//! differences moved: the ids held are two or three slices' (40 bytes an
//! event, on the relay's side too) whatever the database's size, and the
//! reading overlaps the relay's work. Events are moved `--batch` at a time (one
//! REQ of that many ids, or that many EVENTs before their `OK`s), each
//! batch written (or acknowledged) before the next is asked for. A filter
//! with a `limit` is reconciled in one piece.
//!
//! Resuming: nothing is kept between runs, and none is needed. A run that
//! stops (killed, connection lost) has committed whole batches; the next run
//! reconciles again and finds only what is still missing.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use nostrwire_event::{parse_event_line, EventId, Filter, PreimageFields, SignedFields, Timestamp};
use nostrwire_loadgen::client::{Conn, Target};
use nostrwire_loadgen::stats::message_prefix;
use nostrwire_loadgen::sync::{self as neg, SyncError};
use nostrwire_loadgen::ws::{Counters, WsUrl};
use nostrwire_relay::ingest::check_event;
use nostrwire_relay::policy::WritePolicy;
use nostrwire_relay::Config;
use nostrwire_store::{EventStore, LmdbStore, Verdict};
use nostrwire_websocket::deflate::DeflateConfig;

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
    /// The running relay that holds the database (`ws://127.0.0.1:PORT`):
    /// the database is only read, and downloaded events are published to
    /// this relay, whose writer stores them. Without it, a running relay is
    /// found by the database's writer lock and reached at `relay.listen`.
    #[arg(long)]
    pub local: Option<String>,
    /// Local events per reconciliation (one NIP-77 session each, over a
    /// range of `created_at`): bounds the ids held on both sides (40 bytes
    /// an event) whatever the database's size; the next slice is read
    /// while one is moved. Each session costs the relay its own rounds
    /// (strfry's relay answers each in tenths of a second): smaller slices
    /// bound memory tighter at that price.
    #[arg(long, default_value_t = 100_000)]
    pub slice: usize,
    /// Do not offer permessage-deflate to the relay. It is offered by
    /// default (the relay may decline): events and negentropy messages then
    /// cross compressed, as `strfry sync` sends them.
    #[arg(long)]
    pub no_deflate: bool,
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
    let mut url = plain_url(&args.url)?;
    if !args.no_deflate && url.deflate.is_none() {
        url.deflate = Some(DeflateConfig::default());
    }
    let batch = args.batch.max(1);
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut status = Status::stderr();
    let started = Instant::now();
    let (store, local_relay) = open(&config, args.local.as_deref())?;
    if filter.search.is_some() && !store.has_search_index() {
        anyhow::bail!("this database has no search index: a `search` filter would match nothing");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let target = Target {
        url,
        counters: Arc::new(Counters::default()),
        timeout,
    };
    let mut sink = match &local_relay {
        None => Sink::Database(Admission::new(&config)?),
        Some(local) => {
            let target = Target {
                url: plain_url(local)?,
                counters: Arc::new(Counters::default()),
                timeout,
            };
            let conn = runtime
                .block_on(Conn::open(&target, 2))
                .map_err(|e| anyhow::anyhow!("cannot connect to the local relay {local}: {e}"))?;
            Sink::Relay {
                url: local.clone(),
                target,
                conn: Box::new(conn),
            }
        }
    };
    // Events whose EVENT message the relay would not take (strfry drops
    // the connection on one) are left out of an upload and counted.
    let upload_limit = match args.dir.up() {
        true => message_limit(&target.url, timeout),
        false => None,
    };
    let mut conn = runtime
        .block_on(Conn::open(&target, 1))
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", args.url))?;
    let compressed = if conn.writer.compresses() {
        ", permessage-deflate"
    } else {
        ""
    };
    // A filter's `limit` picks the newest matches on each side as a whole:
    // it cannot be cut into time slices.
    let slice_size = match filter.limit {
        Some(_) => usize::MAX,
        None => args.slice.max(1),
    };
    let mut totals = Totals::default();
    let mut down = Moved::default();
    let mut up = Moved::default();
    status.update("reading the database", "reading the database's ids");
    std::thread::scope(|scope| -> anyhow::Result<()> {
        // The next slice is read while this one is reconciled and moved.
        let (slices, next) = std::sync::mpsc::sync_channel(1);
        let (store, filter) = (&store, &filter);
        scope.spawn(move || read_slices(store, filter, slice_size, &slices));
        for slice in next {
            let Slice { filter, items } = slice?;
            status.update(
                "reconciling",
                &format!(
                    "reconciling {} local events with the relay ({} so far)",
                    items.len(),
                    totals.local
                ),
            );
            let reconciled = runtime
                .block_on(neg::reconcile(&mut conn, &filter, &items, timeout))
                .map_err(|e| sync_error(&args.url, e))?;
            totals.local += items.len();
            totals.slices += 1;
            totals.rounds += reconciled.rounds;
            totals.need += reconciled.need.len();
            totals.have += reconciled.have.len();
            drop(items);
            if args.dir.down() && !reconciled.need.is_empty() {
                let mut ids: Vec<EventId> = reconciled.need.iter().copied().collect();
                ids.sort_unstable();
                for chunk in ids.chunks(batch) {
                    let wanted = Filter {
                        ids: Some(chunk.to_vec()),
                        ..Filter::new()
                    };
                    let mut events: Vec<(EventId, Vec<u8>)> = Vec::with_capacity(chunk.len());
                    runtime
                        .block_on(neg::fetch_each(&mut conn, &wanted, timeout, &mut |event| {
                            events.push((*event.id(), SignedFields::to_json_bytes(event)))
                        }))
                        .map_err(|e| sync_error(&args.url, e))?;
                    let returned = events.len();
                    match &mut sink {
                        Sink::Database(admission) => admission.store(store, &events, &mut down)?,
                        Sink::Relay { url, conn, .. } => {
                            let (answers, _) = runtime
                                .block_on(neg::publish_all(conn, &events, timeout))
                                .map_err(|e| sync_error(url, e))?;
                            count_answers(answers, &mut down);
                        }
                    }
                    for _ in returned..chunk.len() {
                        down.add("not returned by the relay");
                    }
                    status.update(
                        "downloading",
                        &format!("downloaded {} of {} events", down.total(), totals.need),
                    );
                }
            }
            if args.dir.up() && !reconciled.have.is_empty() {
                let mut ids: Vec<EventId> = reconciled.have.iter().copied().collect();
                ids.sort_unstable();
                for chunk in ids.chunks(batch) {
                    let mut events = read_events(store, chunk)?;
                    // Deleted or replaced since the reconciliation (by an
                    // event the same sync downloaded).
                    for _ in events.len()..chunk.len() {
                        up.add("gone from the database");
                    }
                    if let Some(limit) = upload_limit {
                        events.retain(|(_, json)| {
                            let fits = json.len() + EVENT_MESSAGE_OVERHEAD <= limit;
                            if !fits {
                                up.add("too large for the relay");
                            }
                            fits
                        });
                    }
                    let (answers, _) = runtime
                        .block_on(neg::publish_all(&mut conn, &events, timeout))
                        .map_err(|e| sync_error(&args.url, e))?;
                    count_answers(answers, &mut up);
                    status.update(
                        "uploading",
                        &format!("uploaded {} of {} events", up.total(), totals.have),
                    );
                }
            }
        }
        Ok(())
    })?;
    status.done(&format!(
        "reconciled {} local events in {} rounds ({} slices): the relay had {} the database \
         lacked, the database had {} the relay lacked",
        totals.local, totals.rounds, totals.slices, totals.need, totals.have
    ));
    if args.dir.down() && totals.need > 0 && matches!(sink, Sink::Database(_)) {
        finish_indexing(&store)?;
    }
    let _ = runtime.block_on(conn.close());
    let through = match sink {
        Sink::Database(_) => {
            store.sync()?;
            String::new()
        }
        Sink::Relay {
            url, target, conn, ..
        } => {
            let _ = runtime.block_on(conn.close());
            let (bytes_in, bytes_out) = target.counters.snapshot();
            format!(
                "\nlocal relay {url}: {bytes_out} bytes sent, {bytes_in} bytes received \
                 (the database was only read)"
            )
        }
    };
    status.finish();
    let (bytes_in, bytes_out) = target.counters.snapshot();
    println!(
        "sync with {} in {:.2} s: {} local events in {} slices, {} rounds, {bytes_out} bytes \
         sent, {bytes_in} bytes received{compressed}{through}",
        args.url,
        started.elapsed().as_secs_f64(),
        totals.local,
        totals.slices,
        totals.rounds,
    );
    if args.dir.down() {
        println!("down: {} events: {}", down.total(), down.line());
    }
    if args.dir.up() {
        println!("up: {} events: {}", up.total(), up.line());
    }
    Ok(ExitCode::SUCCESS)
}

/// Where downloaded events go.
enum Sink<'a> {
    /// This command's own writer on the database (no relay holds it).
    Database(Admission<'a>),
    /// The running relay that holds the database: each event is published
    /// to it and its `OK` counted.
    Relay {
        url: String,
        target: Target,
        conn: Box<Conn>,
    },
}

/// A `ws://` URL (the sync speaks NIP-01 JSON); permessage-deflate only
/// when it is written `deflate+ws://`.
fn plain_url(text: &str) -> anyhow::Result<WsUrl> {
    let url = WsUrl::parse(text).map_err(|e| anyhow::anyhow!("invalid URL {text}: {e}"))?;
    if url.binary {
        anyhow::bail!("sync speaks NIP-01 JSON: give a plain ws:// URL, not {text}");
    }
    Ok(url)
}

/// The database, and the URL of the relay that holds it, if one does:
/// `local` when given (the database is then only read); else the database
/// with this command's writer lock, or, when a running relay holds that
/// lock, read only beside the relay at `relay.listen`.
fn open(config: &Config, local: Option<&str>) -> anyhow::Result<(LmdbStore, Option<String>)> {
    let reading = || -> anyhow::Result<LmdbStore> {
        anyhow::ensure!(
            config.relay.data.join("data.mdb").exists(),
            "no database in {}",
            config.relay.data.display()
        );
        nostrwire_relay::open_store(config, false)
    };
    if let Some(local) = local {
        return Ok((reading()?, Some(local.to_string())));
    }
    match nostrwire_relay::open_store(config, true) {
        Ok(store) => Ok((store, None)),
        Err(e) if super::delete::is_busy(&e) => {
            let url = listen_url(&config.relay.listen);
            eprintln!(
                "a running relay holds the database: events downloaded are published to it at \
                 {url} (--local names another URL)"
            );
            Ok((reading()?, Some(url)))
        }
        Err(e) => Err(e.context(
            "cannot open the database for writing (sync works on a stopped relay's database, or \
             through a running one with --local)",
        )),
    }
}

/// `ws://` and the relay's listening address, an unspecified host (all
/// interfaces) taken as loopback (also `stream`'s default `--local`).
pub(crate) fn listen_url(listen: &str) -> String {
    let (host, port) = listen.rsplit_once(':').unwrap_or((listen, "7777"));
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    format!("ws://{host}:{port}")
}

/// What the reconciliations of one run found, summed over its slices.
#[derive(Debug, Default)]
struct Totals {
    /// Local events reconciled.
    local: usize,
    /// Slices (NIP-77 sessions).
    slices: usize,
    /// NEG-MSG rounds.
    rounds: u32,
    /// Ids only the relay had.
    need: usize,
    /// Ids only the database had.
    have: usize,
}

/// One time slice of the reconciliation: the filter narrowed to a range of
/// `created_at` (the same on both sides), and the local events in it.
struct Slice {
    filter: Filter,
    /// `(created_at, id)` of each, as the relay collects them for a
    /// NEG-OPEN (no event rendered).
    items: Vec<(u64, EventId)>,
}

/// Reads the local events `filter` matches, newest first, as slices of
/// about `size` events each, into `out` (until it is dropped). A slice
/// ends between two distinct `created_at` values, so every event of a
/// second is in one slice; slices cover the filter's whole time range
/// (the first has no upper bound but the filter's, the last no lower one).
/// A second holding more than `size` events is one slice of its own.
fn read_slices(
    store: &LmdbStore,
    filter: &Filter,
    size: usize,
    out: &std::sync::mpsc::SyncSender<anyhow::Result<Slice>>,
) {
    let now = nostrwire_relay::now();
    let since = filter.since.map_or(0, Timestamp::as_u64);
    let at = |secs: u64| Timestamp::new(secs).unwrap_or(Timestamp::MAX);
    let items = |found: Vec<nostrwire_store::Found>| -> Vec<(u64, EventId)> {
        found.into_iter().map(|f| (f.created_at, f.id)).collect()
    };
    let mut until = filter.until;
    loop {
        let mut query = filter.clone();
        query.until = until;
        if size != usize::MAX {
            query.limit = Some(size as u64);
        }
        let found = match nostrwire_relay::admin::matching(store, &query, now) {
            Ok(found) => found,
            Err(e) => {
                let _ = out.send(Err(e.into()));
                return;
            }
        };
        let mut slice = filter.clone();
        slice.until = until;
        let (Some(newest), Some(oldest)) = (found.first(), found.last()) else {
            let _ = out.send(Ok(Slice {
                filter: slice,
                items: Vec::new(),
            }));
            return;
        };
        let (newest, oldest) = (newest.created_at, oldest.created_at);
        if found.len() < size {
            let _ = out.send(Ok(Slice {
                filter: slice,
                items: items(found),
            }));
            return;
        }
        let (lower, kept) = if oldest < newest {
            // The oldest second may go on past the page: it starts the next.
            let kept = found.into_iter().filter(|f| f.created_at > oldest);
            (oldest + 1, kept.collect())
        } else {
            let mut second = filter.clone();
            (second.since, second.until) = (Some(at(oldest)), Some(at(oldest)));
            match nostrwire_relay::admin::matching(store, &second, now) {
                Ok(found) => (oldest, found),
                Err(e) => {
                    let _ = out.send(Err(e.into()));
                    return;
                }
            }
        };
        slice.since = Some(at(lower));
        let sent = out.send(Ok(Slice {
            filter: slice,
            items: items(kept),
        }));
        if sent.is_err() || lower == 0 || lower <= since {
            return;
        }
        until = Some(at(lower - 1));
    }
}

/// The stored events with these ids, as `(id, canonical JSON)`; those gone
/// since the reconciliation are left out.
fn read_events(store: &LmdbStore, ids: &[EventId]) -> anyhow::Result<Vec<(EventId, Vec<u8>)>> {
    let wanted = Filter {
        ids: Some(ids.to_vec()),
        ..Filter::new()
    };
    let found = nostrwire_relay::admin::matching(store, &wanted, nostrwire_relay::now())?;
    let mut events = Vec::with_capacity(found.len());
    for f in found {
        if let Some(rendered) = store.render(f.serial, false)? {
            events.push((f.id, rendered.json));
        }
    }
    Ok(events)
}

/// Counts a relay's `OK`s: accepted (or a duplicate), superseded (refused
/// as `duplicate:`, a newer version being stored), or refused by the
/// prefix of its message (`blocked`, `invalid`, `auth-required`...).
fn count_answers(answers: Vec<(bool, String)>, moved: &mut Moved) {
    for (accepted, message) in answers {
        let prefix = message_prefix(&message);
        match (accepted, prefix.as_str()) {
            (true, "duplicate") => moved.add("duplicate"),
            (true, _) => moved.add("accepted"),
            (false, "duplicate") => moved.add("superseded"),
            (false, _) => moved.add(&format!("refused ({prefix})")),
        }
    }
}

/// Bytes an `["EVENT",…]` message adds to its event's JSON.
const EVENT_MESSAGE_OVERHEAD: usize = r#"["EVENT",]"#.len();

/// The relay's `limitation.max_message_length` from its NIP-11 document,
/// if it gives one (a plain HTTP/1.1 GET with `Accept:
/// application/nostr+json`; any failure means no known limit).
fn message_limit(url: &WsUrl, timeout: Duration) -> Option<usize> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let address = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .ok()?
        .next()?;
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let host = match url.host.contains(':') {
        true => format!("[{}]:{}", url.host, url.port),
        false => format!("{}:{}", url.host, url.port),
    };
    write!(
        stream,
        "GET {} HTTP/1.1\r\nHost: {host}\r\nAccept: application/nostr+json\r\n\
         Connection: close\r\n\r\n",
        url.path
    )
    .ok()?;
    // A NIP-11 document is small; a relay that sends more is not read on.
    let mut reply = Vec::new();
    stream.take(1 << 20).read_to_end(&mut reply).ok()?;
    let reply = String::from_utf8_lossy(&reply);
    let (_, body) = reply.split_once("\r\n\r\n")?;
    let document: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    let limit = document["limitation"]["max_message_length"].as_u64()?;
    usize::try_from(limit).ok().filter(|&l| l > 0)
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

    /// Checks and stores a batch of events (id, canonical JSON) in one
    /// transaction, counting each outcome in `moved`.
    fn store(
        &self,
        store: &LmdbStore,
        events: &[(EventId, Vec<u8>)],
        moved: &mut Moved,
    ) -> anyhow::Result<()> {
        let now = nostrwire_relay::now();
        let mut admitted = Vec::with_capacity(events.len());
        for (_, json) in events {
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
