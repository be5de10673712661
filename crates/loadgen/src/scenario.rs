//! The scenarios. Each one opens its connections first, then starts the
//! clock, and stops issuing work at the run's deadline or when its events run
//! out, whichever comes first; answers still due get at most the timeout.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::{
    EventId, Filter, Kind, KindClass, PublicKey, RelayMessage, SignedFields, TagCondition,
};
use tokio::sync::{watch, Semaphore};
use tokio::time::timeout_at;

use crate::abuse::{AbuseParams, Attack};
use crate::client::{Anomalies, Conn, Query, QueryOutcome, Target};
use crate::stats::{message_prefix, Failure, OpStats};
use crate::workload::Prepared;
use crate::ws::{opcode, Admitted};
use crate::Error;

/// A named workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scenario {
    /// Closed loop: one EVENT in flight per connection.
    Publish,
    /// Open loop at a fixed offered rate; latency from the intended send time.
    PublishOpen,
    /// Bursts of pipelined EVENTs per connection, then a pause.
    Burst,
    /// Seeds events, then runs the nostr-bench filters plus author, tag and id lookups.
    Query,
    /// Publishes and REQs on the same connections (two writes per read).
    Mixed,
    /// Writers and readers at once on separate connections.
    Concurrent,
    /// M live subscribers; delivery latency from publish to receipt.
    Fanout,
    /// Large kind-3 follow lists (thousands of tags), published then read back.
    Large,
    /// Opens many idle connections: accept rate and the relay's memory.
    Connections,
    /// NIP-50 search queries (reported unsupported when the relay refuses or ignores them).
    Search,
    /// NIP-77 negentropy sync of a partly different set, against re-downloading it by REQ.
    Sync,
    /// Seeds events, then asks again and again for the newest 1,000 of them
    /// (`{"limit":1000}`): the large-answer case that transport encodings
    /// and compression are about.
    Dump,
    /// One attack by hostile clients while a probe keeps publishing and
    /// querying (`abuse-…`; `abuse` runs them all).
    Abuse(Attack),
}

impl Scenario {
    /// Whether the scenario can run over the `nostrwire.v1` binary transport
    /// (`binary+ws://` relays). The others pipeline or read raw JSON frames.
    pub fn supports_binary(self) -> bool {
        matches!(
            self,
            Scenario::Publish
                | Scenario::Query
                | Scenario::Dump
                | Scenario::Mixed
                | Scenario::Concurrent
                | Scenario::Large
                | Scenario::Connections
        )
    }

    /// Every scenario, in the order `all` runs them.
    pub const ALL: [Scenario; 12] = [
        Scenario::Publish,
        Scenario::PublishOpen,
        Scenario::Burst,
        Scenario::Query,
        Scenario::Mixed,
        Scenario::Concurrent,
        Scenario::Fanout,
        Scenario::Large,
        Scenario::Connections,
        Scenario::Search,
        Scenario::Sync,
        Scenario::Dump,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Publish => "publish",
            Scenario::PublishOpen => "publish-open",
            Scenario::Burst => "burst",
            Scenario::Query => "query",
            Scenario::Mixed => "mixed",
            Scenario::Concurrent => "concurrent",
            Scenario::Fanout => "fanout",
            Scenario::Large => "large",
            Scenario::Connections => "connections",
            Scenario::Search => "search",
            Scenario::Sync => "sync",
            Scenario::Dump => "dump",
            Scenario::Abuse(a) => a.name(),
        }
    }

    /// Every abuse scenario, in the order `abuse` runs them.
    pub fn abuse() -> impl Iterator<Item = Scenario> {
        Attack::ALL.into_iter().map(Scenario::Abuse)
    }

    /// The scenarios a command-line name stands for: `all` (every load
    /// scenario), `abuse` (every attack) or one scenario.
    pub fn expand(name: &str) -> Result<Vec<Scenario>, Error> {
        match name {
            "all" => Ok(Scenario::ALL.to_vec()),
            "abuse" => Ok(Scenario::abuse().collect()),
            _ => Ok(vec![name.parse()?]),
        }
    }

    /// Position in [`Scenario::ALL`], then the attacks (stable; used to
    /// derive event streams).
    pub fn index(self) -> u64 {
        match self {
            Scenario::Abuse(a) => {
                (Scenario::ALL.len() + Attack::ALL.iter().position(|x| *x == a).unwrap_or(0)) as u64
            }
            _ => Scenario::ALL.iter().position(|s| *s == self).unwrap_or(0) as u64,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = Error;
    fn from_str(s: &str) -> Result<Scenario, Error> {
        Scenario::ALL
            .iter()
            .copied()
            .chain(Scenario::abuse())
            .find(|sc| sc.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scenario::ALL
                    .iter()
                    .copied()
                    .chain(Scenario::abuse())
                    .map(|s| s.name())
                    .collect();
                Error::Usage(format!(
                    "unknown scenario `{s}` (one of: {}, all, abuse)",
                    names.join(", ")
                ))
            })
    }
}

/// How a scenario ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// It ran; failures, if any, are in the figures.
    Completed,
    /// The relay does not support what the scenario measures.
    Unsupported(String),
}

/// Scenario parameters (a view of the run settings).
#[derive(Clone, Debug)]
pub struct Params {
    /// Connections for publish/query work.
    pub connections: usize,
    /// Wall-clock bound of the measured phase.
    pub duration: Duration,
    /// Offered rate for `publish-open` (events/s, all connections) and `fanout`.
    pub rate: f64,
    /// Events per burst per connection.
    pub burst_size: usize,
    /// Quiet time between bursts.
    pub burst_gap: Duration,
    /// Subscribers in `fanout`.
    pub subscribers: usize,
    /// Idle connections in `connections`.
    pub idle_connections: usize,
    /// Queries in `query`, `search` and per reader in `concurrent` (bounded by the duration).
    pub queries: usize,
    /// Seed for connection-level randomness.
    pub seed: u64,
    /// Sizes of the abuse scenarios.
    pub abuse: AbuseParams,
}

/// Everything a scenario produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// How it ended.
    pub status: Status,
    /// Measured wall time.
    pub elapsed: Duration,
    /// Statistics per operation label.
    pub ops: BTreeMap<String, OpStats>,
    /// Unsolicited messages.
    pub anomalies: Anomalies,
    /// Extra figures (e.g. `offered_rate`, `relay_rss_kib`).
    pub metrics: BTreeMap<String, f64>,
    /// Remarks for the report.
    pub notes: Vec<String>,
    /// The verdict of an abuse scenario: `pass`, `fail: …` or `n/a: …`.
    pub verdict: Option<String>,
    /// The relay's CPU seconds (user + system) over the measured phase
    /// only (setup and seeding excluded), when it runs here as this user.
    pub relay_cpu_s: Option<f64>,
}

impl Outcome {
    pub(crate) fn new() -> Outcome {
        Outcome {
            status: Status::Completed,
            elapsed: Duration::ZERO,
            ops: BTreeMap::new(),
            anomalies: Anomalies::default(),
            metrics: BTreeMap::new(),
            notes: Vec::new(),
            verdict: None,
            relay_cpu_s: None,
        }
    }

    fn op(&mut self, label: &str) -> &mut OpStats {
        self.ops.entry(label.to_string()).or_default()
    }

    fn absorb(&mut self, part: Part) {
        for (label, stats) in part.ops {
            self.op(&label).merge(&stats);
        }
        self.anomalies.merge(&part.anomalies);
    }
}

/// The per-task share of an [`Outcome`].
#[derive(Debug, Default)]
struct Part {
    ops: BTreeMap<String, OpStats>,
    anomalies: Anomalies,
}

impl Part {
    fn op(&mut self, label: &str) -> &mut OpStats {
        self.ops.entry(label.to_string()).or_default()
    }
}

/// The relay process's CPU time at the start of a measured phase: read
/// from `/proc` (utime + stime of the process listening on the relay's
/// port) when the phase starts and again when it ends.
struct RelayCpu(Option<f64>);

impl RelayCpu {
    fn start(run: &Run) -> RelayCpu {
        RelayCpu(run.relay_cpu_seconds())
    }

    fn stop(self, run: &Run, out: &mut Outcome) {
        out.relay_cpu_s = match (self.0, run.relay_cpu_seconds()) {
            (Some(a), Some(b)) => Some((b - a).max(0.0)),
            _ => None,
        };
    }
}

/// Shared progress counter (operations done), read by the progress bar.
pub type Progress = Arc<AtomicU64>;

/// The inputs of one scenario run.
#[derive(Clone, Debug)]
pub struct Run {
    /// The relay and shared counters.
    pub target: Target,
    /// Parameters.
    pub params: Params,
    /// Pre-signed events for this scenario (already generated and signed).
    pub events: Arc<Vec<Prepared>>,
    /// Pre-signed seed events, for scenarios that read (query, search, large read-back).
    pub seed_events: Arc<Vec<Prepared>>,
    /// Operations done so far.
    pub progress: Progress,
}

impl Run {
    pub(crate) fn tick(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// The relay's CPU seconds so far, when it runs on this host as this
    /// user (the process listening on the relay's port).
    fn relay_cpu_seconds(&self) -> Option<f64> {
        crate::host::listening_pid(self.target.url.port).and_then(crate::host::cpu_seconds)
    }
}

/// Opens `n` connections in parallel; failures are returned as such.
async fn open_all(target: &Target, n: usize, seed: u64) -> Vec<Result<Conn, Error>> {
    let sem = Arc::new(Semaphore::new(64));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let target = target.clone();
        let sem = sem.clone();
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            Conn::open(&target, seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9)).await
        }));
    }
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(
            h.await
                .unwrap_or_else(|e| Err(Error::Protocol(format!("task failed: {e}")))),
        );
    }
    out
}

/// Opens connections; each one that fails is a `connect_failed` in `label`.
async fn open_conns(run: &Run, n: usize, out: &mut Outcome, label: &str) -> Vec<Conn> {
    let mut conns = Vec::new();
    for r in open_all(&run.target, n, run.params.seed).await {
        match r {
            Ok(c) => conns.push(c),
            Err(_) => out.op(label).fail(Failure::ConnectFailed),
        }
    }
    conns
}

/// Runs one scenario.
pub async fn run(scenario: Scenario, run: &Run) -> Outcome {
    match scenario {
        Scenario::Publish => publish(run).await,
        Scenario::PublishOpen => publish_open(run).await,
        Scenario::Burst => burst(run).await,
        Scenario::Query => query(run).await,
        Scenario::Dump => dump(run).await,
        Scenario::Mixed => mixed(run).await,
        Scenario::Concurrent => concurrent(run).await,
        Scenario::Fanout => fanout(run).await,
        Scenario::Large => large(run).await,
        Scenario::Connections => connections(run).await,
        Scenario::Search => search(run).await,
        Scenario::Sync => sync(run).await,
        Scenario::Abuse(a) => crate::abuse::run(a, run).await,
    }
}

/// Splits `0..n` round-robin over `k` workers.
fn share(n: usize, k: usize, worker: usize) -> impl Iterator<Item = usize> {
    (worker..n).step_by(k.max(1))
}

/// What must leave one connection in order: the versions of one
/// replaceable or addressable event (author, kind and, for addressable
/// events, the `d` tag). A relay rightly refuses an older version that
/// arrives second, so two connections must never race them.
fn ordered_key(p: &Prepared) -> Option<(PublicKey, u16, &str)> {
    let e = &p.event;
    match e.kind.class() {
        KindClass::Replaceable => Some((e.pubkey, e.kind.as_u16(), "")),
        KindClass::Addressable => {
            let d = e
                .tags
                .iter()
                .find(|t| t.name() == "d")
                .and_then(|t| t.as_slice().get(1))
                .map_or("", |v| v.as_str());
            Some((e.pubkey, e.kind.as_u16(), d))
        }
        _ => None,
    }
}

/// The indices of `events` that each of `k` workers sends, in order.
///
/// Each event goes to the worker with the fewest so far, except the later
/// versions of a replaceable or addressable event, which follow the first
/// to its worker ([`ordered_key`]). So every connection gets about as many
/// events: keyed by author alone, 100 authors put all replaceable events
/// (16% of the kind mix) on at most 100 of 1,000 connections, which went
/// on alone for the last fifth of a 500,000-event run.
///
/// One pass over the events, before any clock starts: a scan per worker
/// costs `k` passes, which with 1,000 connections and 500,000 events kept
/// both cores busy for the first seconds of the measured phase.
fn share_events(events: &[Prepared], k: usize) -> Vec<Vec<usize>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    let k = k.max(1);
    let mut shares: Vec<Vec<usize>> = (0..k)
        .map(|_| Vec::with_capacity(events.len() / k + 1))
        .collect();
    // (events so far, worker), smallest first; an entry is stale when its
    // worker has taken a keyed event since, and is then put back updated.
    let mut least: BinaryHeap<Reverse<(usize, usize)>> = (0..k).map(|w| Reverse((0, w))).collect();
    let mut owners: HashMap<(PublicKey, u16, &str), usize> = HashMap::new();
    let mut least_loaded = |shares: &[Vec<usize>]| loop {
        let Reverse((n, w)) = least.pop().expect("one entry per worker");
        if n == shares[w].len() {
            least.push(Reverse((n + 1, w)));
            return w;
        }
        least.push(Reverse((shares[w].len(), w)));
    };
    for (i, p) in events.iter().enumerate() {
        let w = match ordered_key(p) {
            Some(key) => match owners.get(&key) {
                Some(&w) => w,
                None => {
                    let w = least_loaded(&shares);
                    owners.insert(key, w);
                    w
                }
            },
            None => least_loaded(&shares),
        };
        shares[w].push(i);
    }
    shares
}

/// Closed-loop publishing of `events` over `conns`; returns accepted ids.
async fn publish_closed(
    run: &Run,
    conns: Vec<Conn>,
    events: Arc<Vec<Prepared>>,
    label: &'static str,
    deadline: Instant,
) -> (Part, Vec<EventId>) {
    let shares = share_events(&events, conns.len());
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let events = events.clone();
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let mut accepted = Vec::new();
            for i in mine {
                if Instant::now() >= deadline {
                    break;
                }
                let p = &events[i];
                match conn.publish(p, run.target.timeout).await {
                    Ok(lat) => {
                        part.op(label).success(lat);
                        accepted.push(p.event.id);
                    }
                    Err(f) => {
                        let lost = f == Failure::ConnectionLost;
                        part.op(label).fail(f);
                        if lost {
                            break;
                        }
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            (part, accepted)
        }));
    }
    let mut total = Part::default();
    let mut ids = Vec::new();
    for h in handles {
        if let Ok((p, a)) = h.await {
            for (l, s) in p.ops {
                total.op(&l).merge(&s);
            }
            total.anomalies.merge(&p.anomalies);
            ids.extend(a);
        }
    }
    (total, ids)
}

async fn publish(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let (part, _) = publish_closed(
        run,
        conns,
        run.events.clone(),
        "publish",
        start + run.params.duration,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out
}

/// Open loop: every event has an intended send time on a fixed schedule;
/// latency runs from that time, so a slow relay cannot slow the offered load
/// down and hide its own queueing (no coordinated omission).
async fn publish_open(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let label = "publish";
    let conns = open_conns(run, run.params.connections, &mut out, label).await;
    let shares = share_events(&run.events, conns.len());
    let rate = run.params.rate.max(1.0);
    out.metrics.insert("offered_rate".into(), rate);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let timeout = run.target.timeout;
    let mut handles = Vec::new();
    for (conn, indices) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let Conn {
                mut reader,
                mut writer,
                mut anomalies,
                ..
            } = conn;
            let pending: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
            let (done_tx, mut done_rx) = watch::channel(false);
            let events = run.events.clone();
            let writer_pending = pending.clone();
            let send_task = tokio::spawn(async move {
                let mut sent = 0u64;
                let mut next = 0;
                while next < indices.len() {
                    let intended = start + Duration::from_secs_f64(indices[next] as f64 / rate);
                    if intended >= deadline {
                        break;
                    }
                    tokio::time::sleep_until(intended.into()).await;
                    // Everything already due goes out in one write.
                    let now = Instant::now();
                    {
                        let mut guard = writer_pending.lock().expect("pending lock");
                        while next < indices.len() {
                            let i = indices[next];
                            let t = start + Duration::from_secs_f64(i as f64 / rate);
                            if t > now || t >= deadline {
                                break;
                            }
                            guard.insert(events[i].event.id, t);
                            writer.queue_text(&events[i].message);
                            next += 1;
                            sent += 1;
                        }
                    }
                    if writer.flush().await.is_err() {
                        break;
                    }
                }
                let _ = done_tx.send(true);
                (writer, sent)
            });
            let mut part = Part::default();
            let mut timed_out: HashSet<EventId> = HashSet::new();
            let mut writer_done = false;
            let mut last_sweep = Instant::now();
            let mut lost = false;
            loop {
                if writer_done && pending.lock().expect("pending lock").is_empty() {
                    break;
                }
                let wake = tokio::time::Instant::now() + Duration::from_millis(50);
                tokio::select! {
                    r = timeout_at(wake, reader.next()) => {
                        match r {
                            Err(_) => {}
                            Ok(Err(_)) => { lost = true; break; }
                            Ok(Ok(Admitted::Text(t))) => match RelayMessage::parse(t) {
                                Ok(RelayMessage::Ok { event_id, accepted, message }) => {
                                    let sent_at = pending.lock().expect("pending lock").remove(&event_id);
                                    match sent_at {
                                        Some(t0) => {
                                            if accepted {
                                                part.op(label).success(t0.elapsed());
                                            } else {
                                                let f = Failure::Rejected(message_prefix(&message));
                                                anomalies.sample(f.key(), &message);
                                                part.op(label).fail(f);
                                            }
                                            run.tick();
                                        }
                                        None if timed_out.remove(&event_id) => anomalies.add("late_ok"),
                                        None => anomalies.add("unmatched_ok"),
                                    }
                                }
                                Ok(other) => anomalies.unsolicited(&other),
                                Err(_) => anomalies.add("unparseable_message"),
                            },
                            Ok(Ok(Admitted::Close(_))) => { lost = true; break; }
                            Ok(Ok(_)) => {}
                        }
                    }
                    _ = done_rx.changed(), if !writer_done => { writer_done = *done_rx.borrow(); }
                }
                if last_sweep.elapsed() >= Duration::from_millis(50) {
                    last_sweep = Instant::now();
                    let now = Instant::now();
                    let mut guard = pending.lock().expect("pending lock");
                    let expired: Vec<EventId> = guard
                        .iter()
                        .filter(|(_, t)| now.duration_since(**t) >= timeout)
                        .map(|(id, _)| *id)
                        .collect();
                    for id in expired {
                        guard.remove(&id);
                        timed_out.insert(id);
                        part.op(label).fail(Failure::Timeout);
                        run.tick();
                    }
                }
            }
            if lost {
                send_task.abort();
                let n = pending.lock().expect("pending lock").len();
                for _ in 0..n {
                    part.op(label).fail(Failure::ConnectionLost);
                }
            } else if let Ok((mut writer, _)) = send_task.await {
                let _ = writer.close().await;
            }
            part.anomalies = anomalies;
            part
        }));
    }
    for h in handles {
        if let Ok(p) = h.await {
            out.absorb(p);
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out
}

/// Sends `batch` pipelined in one write, then collects every OK by id.
async fn publish_batch(
    conn: &mut Conn,
    batch: &[&Prepared],
    timeout: Duration,
    part: &mut Part,
    label: &str,
) -> bool {
    let start = Instant::now();
    let mut waiting: HashSet<EventId> = HashSet::with_capacity(batch.len());
    for p in batch {
        conn.writer.queue_text(&p.message);
        waiting.insert(p.event.id);
    }
    if conn.writer.flush().await.is_err() {
        for _ in batch {
            part.op(label).fail(Failure::ConnectionLost);
        }
        return false;
    }
    let deadline = tokio::time::Instant::from_std(start + timeout);
    while !waiting.is_empty() {
        let incoming = match timeout_at(deadline, conn.reader.next()).await {
            Err(_) => {
                for _ in 0..waiting.len() {
                    part.op(label).fail(Failure::Timeout);
                }
                return true;
            }
            Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                for _ in 0..waiting.len() {
                    part.op(label).fail(Failure::ConnectionLost);
                }
                return false;
            }
            Ok(Ok(i)) => i,
        };
        match incoming {
            Admitted::Text(t) => match RelayMessage::parse(t) {
                Ok(RelayMessage::Ok {
                    event_id,
                    accepted,
                    message,
                }) if waiting.remove(&event_id) => {
                    if accepted {
                        part.op(label).success(start.elapsed());
                    } else {
                        part.op(label)
                            .fail(Failure::Rejected(message_prefix(&message)));
                        conn.anomalies
                            .sample(Failure::Rejected(message_prefix(&message)).key(), &message);
                    }
                }
                Ok(other) => conn.anomalies.unsolicited(&other),
                Err(_) => conn.anomalies.add("unparseable_message"),
            },
            Admitted::Ping(p) => {
                conn.writer.queue_control(opcode::PONG, p);
                let _ = conn.writer.flush().await;
            }
            _ => {}
        }
    }
    true
}

async fn burst(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let label = "publish";
    let conns = open_conns(run, run.params.connections, &mut out, label).await;
    let shares = share_events(&run.events, conns.len());
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            for chunk in mine.chunks(run.params.burst_size.max(1)) {
                if Instant::now() >= deadline {
                    break;
                }
                let batch: Vec<&Prepared> = chunk.iter().map(|i| &run.events[*i]).collect();
                let alive =
                    publish_batch(&mut conn, &batch, run.target.timeout, &mut part, label).await;
                run.progress
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                if !alive {
                    break;
                }
                tokio::time::sleep(run.params.burst_gap).await;
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    for h in handles {
        if let Ok(p) = h.await {
            out.absorb(p);
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(format!(
        "bursts of {} events per connection, {} ms apart; latency from the burst's write to each OK",
        run.params.burst_size,
        run.params.burst_gap.as_millis()
    ));
    out
}

/// What the seed phase stored, for building checked queries.
#[derive(Debug, Default)]
struct Seeded {
    /// Accepted regular (non-replaceable) events: id lookups must find them.
    regular_ids: Vec<EventId>,
    authors: Vec<PublicKey>,
    p_tags: Vec<String>,
}

/// Kinds a NIP-42 relay may withhold from unauthenticated readers.
const PRIVATE_KINDS: [u16; 2] = [4, 1059];

/// Stores the run's seed events (closed loop, timed as `seed`).
pub(crate) async fn seed_events(run: &Run, out: &mut Outcome) {
    seed(run, out).await;
}

async fn seed(run: &Run, out: &mut Outcome) -> Seeded {
    let conns = open_conns(run, run.params.connections, out, "seed").await;
    let deadline = Instant::now() + run.params.duration;
    let (part, accepted) =
        publish_closed(run, conns, run.seed_events.clone(), "seed", deadline).await;
    out.absorb(part);
    let accepted: HashSet<EventId> = accepted.into_iter().collect();
    let mut s = Seeded::default();
    let mut authors = HashSet::new();
    for p in run
        .seed_events
        .iter()
        .filter(|p| accepted.contains(&p.event.id))
    {
        // Relays that implement NIP-42 serve direct messages (4) and gift
        // wraps (1059) only to authenticated participants, and the tester
        // does not authenticate: id lookups that must find their event
        // target other kinds.
        if p.event.kind.class() == KindClass::Regular
            && !PRIVATE_KINDS.contains(&p.event.kind.as_u16())
        {
            s.regular_ids.push(p.event.id);
        }
        if authors.insert(p.event.pubkey) {
            s.authors.push(p.event.pubkey);
        }
        if s.p_tags.len() < MAX_P_TAG_QUERIES {
            s.p_tags.extend(first_p_tag(&p.event));
        }
    }
    s
}

/// Most distinct `#p` values the query scenario cycles through.
const MAX_P_TAG_QUERIES: usize = 1000;

/// The first `p` tag's key of an event, if it is one. `#p` queries take one
/// per seeded event, so they ask for pubkeys as often as events mention
/// them; taking every `p` tag in order let the first follow lists, with
/// hundreds each, supply all of them.
fn first_p_tag(event: &nostrwire_event::Event) -> Option<String> {
    event
        .tags
        .iter()
        .filter(|t| t.name() == "p")
        .filter_map(|t| t.first_value())
        .find(|v| nostrwire_event::hex::decode_array::<32>(v.as_bytes()).is_ok())
        .map(str::to_string)
}

/// The query mix: the three nostr-bench filters, then author, tag and id lookups.
fn query_for(i: usize, seeded: &Seeded) -> Query {
    let pick = |n: usize| i / 6 % n.max(1);
    let kinds = |k: &[u16]| Some(k.iter().map(|k| Kind(*k)).collect());
    match i % 6 {
        0 => Query {
            label: "query:kind1-limit100",
            filter: Filter {
                kinds: kinds(&[1]),
                limit: Some(100),
                ..Filter::new()
            },
            must_include: vec![],
        },
        1 => Query {
            label: "query:kind1,6-limit50",
            filter: Filter {
                kinds: kinds(&[1, 6]),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        },
        2 => Query {
            label: "query:limit10",
            filter: Filter {
                limit: Some(10),
                ..Filter::new()
            },
            must_include: vec![],
        },
        3 if !seeded.authors.is_empty() => Query {
            label: "query:author",
            filter: Filter {
                authors: Some(vec![seeded.authors[pick(seeded.authors.len())]]),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        },
        4 if !seeded.p_tags.is_empty() => Query {
            label: "query:p-tag",
            filter: Filter {
                tags: vec![TagCondition {
                    letter: b'p',
                    values: vec![seeded.p_tags[pick(seeded.p_tags.len())].clone()],
                }],
                limit: Some(20),
                ..Filter::new()
            },
            must_include: vec![],
        },
        5 if !seeded.regular_ids.is_empty() => {
            let id = seeded.regular_ids[pick(seeded.regular_ids.len())];
            Query {
                label: "query:id",
                filter: Filter {
                    ids: Some(vec![id]),
                    ..Filter::new()
                },
                must_include: vec![id],
            }
        }
        _ => Query {
            label: "query:limit10",
            filter: Filter {
                limit: Some(10),
                ..Filter::new()
            },
            must_include: vec![],
        },
    }
}

async fn run_queries(
    run: &Run,
    conns: Vec<Conn>,
    make: Arc<dyn Fn(usize) -> Query + Send + Sync>,
    total: usize,
    deadline: Instant,
    stop: Option<watch::Receiver<bool>>,
) -> Part {
    let k = conns.len();
    let mut handles = Vec::new();
    for (w, mut conn) in conns.into_iter().enumerate() {
        let run = run.clone();
        let make = make.clone();
        let stop = stop.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            for i in share(total, k, w) {
                if Instant::now() >= deadline || stop.as_ref().is_some_and(|s| *s.borrow()) {
                    break;
                }
                let q = make(i);
                match conn.query(&q, run.target.timeout).await {
                    QueryOutcome::Ok { latency, received } => {
                        let op = part.op(q.label);
                        op.success(latency);
                        op.events_received += received.events;
                        op.bytes_received += received.bytes;
                        op.bytes_unescaped += received.unescaped;
                    }
                    QueryOutcome::Failed(f, received) => {
                        let lost = f == Failure::ConnectionLost;
                        let op = part.op(q.label);
                        op.fail(f);
                        op.events_received += received.events;
                        op.bytes_received += received.bytes;
                        op.bytes_unescaped += received.unescaped;
                        if lost {
                            break;
                        }
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    let mut total_part = Part::default();
    for h in handles {
        if let Ok(p) = h.await {
            for (l, s) in p.ops {
                total_part.op(&l).merge(&s);
            }
            total_part.anomalies.merge(&p.anomalies);
        }
    }
    total_part
}

/// Seeds the relay, then runs `run.params.queries` queries built by `make`
/// (given the seeded set) on fresh connections, timed from the first query.
async fn seeded_queries(
    run: &Run,
    conns_label: &str,
    make: impl Fn(Arc<Seeded>) -> Arc<dyn Fn(usize) -> Query + Send + Sync>,
) -> Outcome {
    let mut out = Outcome::new();
    let seeded = Arc::new(seed(run, &mut out).await);
    let conns = open_conns(run, run.params.connections, &mut out, conns_label).await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let part = run_queries(
        run,
        conns,
        make(seeded.clone()),
        run.params.queries,
        start + run.params.duration,
        None,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out.metrics.insert(
        "seeded_regular_events".into(),
        seeded.regular_ids.len() as f64,
    );
    out
}

async fn query(run: &Run) -> Outcome {
    let mut out = seeded_queries(run, "query", |seeded| {
        Arc::new(move |i| query_for(i, &seeded))
    })
    .await;
    out.notes.push(format!(
        "seed events stored first (not timed into the query figures); one returned event in {} is checked against its filter (all for id lookups), one checked event in {} also for id and signature",
        crate::client::CHECK_EVERY,
        crate::client::VERIFY_EVERY
    ));
    out
}

/// Events one `dump` REQ asks for.
pub const DUMP_LIMIT: u64 = 1_000;

async fn dump(run: &Run) -> Outcome {
    let mut out = seeded_queries(run, "dump", |_| {
        Arc::new(|_| Query {
            label: "query:limit1000",
            filter: Filter {
                limit: Some(DUMP_LIMIT),
                ..Filter::new()
            },
            must_include: vec![],
        })
    })
    .await;
    out.notes.push(format!(
        "seed events stored first (not timed); every REQ asks for the newest {DUMP_LIMIT} stored events of any kind"
    ));
    out
}

async fn mixed(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let shares = share_events(&run.events, conns.len());
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut handles = Vec::new();
    for (mut conn, mine) in conns.into_iter().zip(shares) {
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let q = Query {
                label: "query",
                filter: Filter {
                    kinds: Some(vec![Kind(1)]),
                    limit: Some(10),
                    ..Filter::new()
                },
                must_include: vec![],
            };
            for (n, i) in mine.into_iter().enumerate() {
                if Instant::now() >= deadline {
                    break;
                }
                if n % 3 == 2 {
                    match conn.query(&q, run.target.timeout).await {
                        QueryOutcome::Ok { latency, received } => {
                            let op = part.op("query");
                            op.success(latency);
                            op.events_received += received.events;
                            op.bytes_received += received.bytes;
                            op.bytes_unescaped += received.unescaped;
                        }
                        QueryOutcome::Failed(f, _) => part.op("query").fail(f),
                    }
                } else {
                    let p = &run.events[i];
                    match conn.publish(p, run.target.timeout).await {
                        Ok(l) => part.op("publish").success(l),
                        Err(f) => part.op("publish").fail(f),
                    }
                }
                run.tick();
            }
            part.anomalies.merge(&conn.close().await);
            part
        }));
    }
    for h in handles {
        if let Ok(p) = h.await {
            out.absorb(p);
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(
        "each connection: two EVENTs (OK by id), then a REQ {kinds:[1],limit:10} to EOSE and CLOSE"
            .into(),
    );
    out
}

async fn concurrent(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let n = run.params.connections.max(2);
    let writers = n / 2;
    let wconns = open_conns(run, writers, &mut out, "publish").await;
    let rconns = open_conns(run, n - writers, &mut out, "query").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let (stop_tx, stop_rx) = watch::channel(false);
    let seeded = Arc::new(Seeded {
        authors: crate::workload::unique_authors(&run.events),
        ..Seeded::default()
    });
    let s = seeded.clone();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> =
        Arc::new(move |i| query_for(i / 4 * 6 + i % 4, &s));
    let r = run.clone();
    let readers = tokio::spawn(async move {
        run_queries(&r, rconns, make, usize::MAX, deadline, Some(stop_rx)).await
    });
    let (wpart, _) = publish_closed(run, wconns, run.events.clone(), "publish", deadline).await;
    let _ = stop_tx.send(true);
    out.absorb(wpart);
    if let Ok(p) = readers.await {
        out.absorb(p);
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(format!(
        "{writers} writer and {} reader connections; readers rotate the nostr-bench filters and author lookups until the writers finish",
        n - writers
    ));
    out
}

/// Publishes at a steady rate to M live subscribers and times each delivery.
async fn fanout(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let marker = match run.events.first().and_then(|p| {
        p.event
            .tags
            .iter()
            .rev()
            .find(|t| t.name() == "t")
            .and_then(|t| t.first_value().map(str::to_string))
    }) {
        Some(m) => m,
        None => {
            out.status = Status::Unsupported("fanout events carry no marker tag".into());
            return out;
        }
    };
    let filter = Filter {
        tags: vec![TagCondition {
            letter: b't',
            values: vec![marker],
        }],
        ..Filter::new()
    };
    let mut subs = open_conns(run, run.params.subscribers, &mut out, "delivery").await;
    let mut pubs = open_conns(run, 1, &mut out, "publish").await;
    let Some(mut publisher) = pubs.pop() else {
        return out;
    };
    // Subscribe everyone and wait for every EOSE before publishing.
    let mut ready = Vec::new();
    for mut c in subs.drain(..) {
        let sub = c.new_sub_id("f");
        let mut msg = Vec::new();
        nostrwire_event::message::write::req(&mut msg, &sub, std::slice::from_ref(&filter));
        let t_req = Instant::now();
        if c.writer.send_text(&msg).await.is_err() {
            out.op("subscribe").fail(Failure::ConnectionLost);
            continue;
        }
        ready.push((c, sub, t_req));
    }
    let sent: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let (done_tx, done_rx) = watch::channel(None::<Arc<HashSet<EventId>>>);
    let timeout = run.target.timeout;
    let (eose_tx, mut eose_rx) = tokio::sync::mpsc::channel::<bool>(ready.len().max(1));
    let n_subs = ready.len();
    let mut handles = Vec::new();
    for (mut conn, sub, t_req) in ready {
        let sent = sent.clone();
        let mut done_rx = done_rx.clone();
        let filter = filter.clone();
        let eose_tx = eose_tx.clone();
        let run = run.clone();
        handles.push(tokio::spawn(async move {
            let mut part = Part::default();
            let mut got: HashSet<EventId> = HashSet::new();
            let mut eose_seen = false;
            let sub_deadline = tokio::time::Instant::now() + timeout;
            let mut final_deadline: Option<tokio::time::Instant> = None;
            loop {
                if let Some(expected) = done_rx.borrow().clone() {
                    if final_deadline.is_none() {
                        final_deadline = Some(tokio::time::Instant::now() + timeout);
                    }
                    if expected.iter().all(|id| got.contains(id)) {
                        break;
                    }
                }
                let wake = final_deadline.unwrap_or_else(|| {
                    if eose_seen {
                        tokio::time::Instant::now() + Duration::from_secs(3600)
                    } else {
                        sub_deadline
                    }
                });
                tokio::select! {
                    r = timeout_at(wake, conn.reader.next()) => match r {
                        Err(_) if !eose_seen => {
                            part.op("subscribe").fail(Failure::Timeout);
                            let _ = eose_tx.send(false).await;
                            return (part, got, false);
                        }
                        Err(_) => break,
                        Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                            if !eose_seen { let _ = eose_tx.send(false).await; }
                            break;
                        }
                        Ok(Ok(Admitted::Text(t))) => {
                            let now = Instant::now();
                            match RelayMessage::parse(t) {
                                Ok(RelayMessage::Event { subscription_id, event }) if subscription_id == sub => {
                                    if !filter.matches(&event) {
                                        part.op("delivery").fail(Failure::WrongResult);
                                    } else if got.insert(*event.id()) {
                                        let t0 = sent.lock().expect("sent lock").get(event.id()).copied();
                                        match t0 {
                                            Some(t0) => { part.op("delivery").success(now.duration_since(t0)); run.tick(); }
                                            None => conn.anomalies.add("unexpected_delivery"),
                                        }
                                    }
                                }
                                Ok(RelayMessage::Eose(s)) if s == sub => {
                                    eose_seen = true;
                                    part.op("subscribe").success(t_req.elapsed());
                                    let _ = eose_tx.send(true).await;
                                }
                                Ok(RelayMessage::Closed { subscription_id, message }) if subscription_id == sub => {
                                    let f = Failure::Closed(message_prefix(&message));
                                    conn.anomalies.sample(f.key(), &message);
                                    part.op("subscribe").fail(f);
                                    if !eose_seen { let _ = eose_tx.send(false).await; }
                                    return (part, got, false);
                                }
                                Ok(other) => conn.anomalies.unsolicited(&other),
                                Err(_) => conn.anomalies.add("unparseable_message"),
                            }
                        }
                        Ok(Ok(Admitted::Ping(p))) => {
                            conn.writer.queue_control(opcode::PONG, p);
                            let _ = conn.writer.flush().await;
                        }
                        Ok(Ok(_)) => {}
                    },
                    _ = done_rx.changed() => {}
                }
            }
            part.anomalies.merge(&conn.close().await);
            (part, got, true)
        }));
    }
    drop(eose_tx);
    let mut subscribed = 0;
    for _ in 0..n_subs {
        match eose_rx.recv().await {
            Some(ok) => subscribed += usize::from(ok),
            None => break,
        }
    }
    out.metrics.insert("subscribers".into(), subscribed as f64);
    let rate = run.params.rate.max(1.0);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let mut accepted = HashSet::new();
    let mut part = Part::default();
    for (i, p) in run.events.iter().enumerate() {
        let intended = start + Duration::from_secs_f64(i as f64 / rate);
        if intended >= deadline {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        sent.lock()
            .expect("sent lock")
            .insert(p.event.id, Instant::now());
        match publisher.publish(p, timeout).await {
            Ok(l) => {
                part.op("publish").success(l);
                accepted.insert(p.event.id);
            }
            Err(f) => part.op("publish").fail(f),
        }
        run.tick();
    }
    part.anomalies.merge(&publisher.close().await);
    out.absorb(part);
    let accepted = Arc::new(accepted);
    let _ = done_tx.send(Some(accepted.clone()));
    for h in handles {
        if let Ok((p, got, subscribed)) = h.await {
            out.absorb(p);
            if subscribed {
                let missed = accepted.iter().filter(|id| !got.contains(id)).count();
                for _ in 0..missed {
                    out.op("delivery").fail(Failure::MissedDelivery);
                }
            }
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.notes.push(format!(
        "{subscribed} of {n_subs} subscribers live; one publisher at {rate}/s; delivery latency from the EVENT write to receipt"
    ));
    out
}

async fn large(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let conns = open_conns(run, run.params.connections, &mut out, "publish").await;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let (part, accepted) =
        publish_closed(run, conns, run.events.clone(), "publish", deadline).await;
    out.absorb(part);
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    // Read back the newest accepted follow list of each author.
    let accepted: HashSet<EventId> = accepted.into_iter().collect();
    let mut newest: HashMap<PublicKey, &Prepared> = HashMap::new();
    for p in run.events.iter().filter(|p| accepted.contains(&p.event.id)) {
        let e = newest.entry(p.event.pubkey).or_insert(p);
        if p.event.created_at >= e.event.created_at {
            *e = p;
        }
    }
    let queries: Arc<Vec<Query>> = Arc::new(
        newest
            .values()
            .map(|p| Query {
                label: "read-back",
                filter: Filter {
                    authors: Some(vec![p.event.pubkey]),
                    kinds: Some(vec![Kind(3)]),
                    ..Filter::new()
                },
                must_include: vec![p.event.id],
            })
            .collect(),
    );
    let n = queries.len();
    let conns = open_conns(
        run,
        run.params.connections.min(n.max(1)),
        &mut out,
        "read-back",
    )
    .await;
    let q = queries.clone();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> = Arc::new(move |i| q[i].clone());
    let read_start = Instant::now();
    let read_deadline = read_start + run.params.duration;
    let part = run_queries(run, conns, make, n, read_deadline, None).await;
    out.absorb(part);
    out.metrics
        .insert("read_back_s".into(), read_start.elapsed().as_secs_f64());
    out.notes
        .push("throughput is over the publish phase; read-back latencies are per query".into());
    let bytes: usize = run.events.iter().map(|p| p.message.len()).sum();
    let tags: usize = run.events.iter().map(|p| p.event.tags.len()).sum();
    if !run.events.is_empty() {
        out.metrics.insert(
            "mean_event_bytes".into(),
            bytes as f64 / run.events.len() as f64,
        );
        out.metrics
            .insert("mean_tags".into(), tags as f64 / run.events.len() as f64);
    }
    out
}

/// Finds the process listening on `port` (Linux, same user) and its resident memory in KiB.
pub fn relay_rss_kib(port: u16) -> Option<u64> {
    let pid = crate::host::listening_pid(port)?;
    crate::host::rss_kib(pid)
}

async fn connections(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    crate::host::raise_fd_limit();
    let port = run.target.url.port;
    let before = relay_rss_kib(port);
    let n = run.params.idle_connections;
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    let sem = Arc::new(Semaphore::new(64));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let sem = sem.clone();
        let target = run.target.clone();
        let seed = run.params.seed ^ i as u64;
        let progress = run.progress.clone();
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            if Instant::now() >= deadline {
                return None;
            }
            let t0 = Instant::now();
            let r = Conn::open(&target, seed).await;
            progress.fetch_add(1, Ordering::Relaxed);
            Some(r.map(|c| (c, t0.elapsed())))
        }));
    }
    let mut conns = Vec::new();
    for h in handles {
        match h.await {
            Ok(Some(Ok((c, lat)))) => {
                out.op("connect").success(lat);
                conns.push(c);
            }
            Ok(Some(Err(e))) => out.op("connect").fail(match e {
                Error::Handshake(ref m) if m == "timed out" => Failure::Timeout,
                _ => Failure::ConnectFailed,
            }),
            _ => {}
        }
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    // Let the relay settle, then read its memory with every connection open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = relay_rss_kib(port);
    let open = conns.len();
    for c in conns {
        out.anomalies.merge(&c.close().await);
    }
    out.metrics.insert("open_connections".into(), open as f64);
    match (before, during) {
        (Some(b), Some(d)) => {
            out.metrics.insert("relay_rss_before_kib".into(), b as f64);
            out.metrics.insert("relay_rss_open_kib".into(), d as f64);
            if open > 0 {
                out.metrics.insert(
                    "relay_kib_per_connection".into(),
                    (d as f64 - b as f64) / open as f64,
                );
            }
        }
        _ => out.notes.push(
            "relay memory not read: no process of this user listens on the relay's port".into(),
        ),
    }
    out
}

/// Terms the search seed events contain, one per query in turn.
pub const SEARCH_TERMS: [&str; 5] = ["bitcoin", "nostr", "lightning", "satoshi", "zap"];

async fn search(run: &Run) -> Outcome {
    let mut out = Outcome::new();
    let seeded = seed(run, &mut out).await;
    if seeded.regular_ids.is_empty() {
        out.status = Status::Unsupported("no search seed event was accepted".into());
        return out;
    }
    let mut conns = open_conns(run, run.params.connections, &mut out, "search").await;
    let Some(probe_conn) = conns.first_mut() else {
        return out;
    };
    let make_query = |i: usize| {
        let term = SEARCH_TERMS[i % SEARCH_TERMS.len()];
        Query {
            label: "search",
            filter: Filter {
                kinds: Some(vec![Kind(1)]),
                search: Some(term.to_string()),
                limit: Some(50),
                ..Filter::new()
            },
            must_include: vec![],
        }
    };
    // Probe: a relay without NIP-50 refuses the key (CLOSED/NOTICE, no EOSE)
    // or ignores it and answers the rest of the filter.
    let probe = make_query(0);
    let term = probe.filter.search.clone().unwrap_or_default();
    let sub = probe_conn.new_sub_id("s");
    let mut msg = Vec::new();
    nostrwire_event::message::write::req(&mut msg, &sub, std::slice::from_ref(&probe.filter));
    let verdict = probe_search(probe_conn, &msg, &sub, &term, run.target.timeout).await;
    if let Err(reason) = verdict {
        out.status = Status::Unsupported(reason);
        for c in conns {
            out.anomalies.merge(&c.close().await);
        }
        return out;
    }
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let make: Arc<dyn Fn(usize) -> Query + Send + Sync> = Arc::new(make_query);
    let part = run_queries(
        run,
        conns,
        make,
        run.params.queries,
        start + run.params.duration,
        None,
    )
    .await;
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    out.absorb(part);
    out.notes
        .push("every returned event must match the kind filter and contain the search term".into());
    out
}

/// Sends one search REQ; `Err(reason)` when the relay does not do NIP-50.
async fn probe_search(
    conn: &mut Conn,
    req: &[u8],
    sub: &str,
    term: &str,
    timeout: Duration,
) -> Result<(), String> {
    conn.writer
        .send_text(req)
        .await
        .map_err(|e| format!("connection failed: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut events = 0;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE for a search query within the timeout".into()),
            Err(e) => return Err(format!("connection failed: {e}")),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub => {
                events += 1;
                let content = event.content().value().to_lowercase();
                if !content.contains(term) {
                    return Err(
                        "relay ignores `search`: it returned events without the term".into(),
                    );
                }
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(format!("relay refused: CLOSED \"{message}\""))
            }
            Ok(RelayMessage::Notice(m)) => return Err(format!("relay refused: NOTICE \"{m}\"")),
            _ => {}
        }
    }
    let mut close = Vec::new();
    nostrwire_event::message::write::close(&mut close, sub);
    let _ = conn.writer.send_text(&close).await;
    if events == 0 {
        return Err("search for a seeded term returned nothing".into());
    }
    Ok(())
}

/// In `sync`, the client lacks one relay event in this many, and holds one
/// event of its own (never published) per this many relay events.
pub const SYNC_DIFF_EVERY: usize = 10;

/// NIP-77 against re-downloading: the relay holds the seed events; the client
/// holds all but every tenth of them plus events of its own. Each iteration
/// runs a negentropy sync (then fetches the missing events by id) and a full
/// REQ re-download of the same window, on one connection, and checks that
/// both find exactly the known differences.
async fn sync(run: &Run) -> Outcome {
    use crate::sync::{fetch, fetch_ids, reconcile, SyncError};
    let mut out = Outcome::new();
    seed(run, &mut out).await;
    let window = run.seed_events.iter().chain(run.events.iter());
    let (Some(since), Some(until)) = (
        window.clone().map(|p| p.event.created_at).min(),
        window.map(|p| p.event.created_at).max(),
    ) else {
        out.status = Status::Unsupported("no seed events to sync".into());
        return out;
    };
    let sync_filter = Filter {
        since: Some(since),
        until: Some(until),
        ..Filter::new()
    };
    let download_filter = Filter {
        limit: Some((run.seed_events.len() + run.events.len()) as u64),
        ..sync_filter.clone()
    };
    let mut conns = open_conns(run, 1, &mut out, "sync:negentropy").await;
    let Some(conn) = conns.first_mut() else {
        return out;
    };
    let timeout = run.target.timeout;
    // What the relay holds in the window (replaceable seeds may have been
    // superseded), read once, untimed.
    let stored = match fetch(conn, &download_filter, timeout).await {
        Ok(f) => f.items,
        Err(e) => {
            out.op("sync:download").fail(match e {
                SyncError::Failed(f) => f,
                SyncError::Unsupported(_) => Failure::Protocol,
            });
            return out;
        }
    };
    let lacking: HashSet<EventId> = stored
        .iter()
        .step_by(SYNC_DIFF_EVERY)
        .map(|(_, id)| *id)
        .collect();
    let own: HashSet<EventId> = run.events.iter().map(|p| p.event.id).collect();
    let mut local: Vec<(u64, EventId)> = stored
        .iter()
        .filter(|(_, id)| !lacking.contains(id))
        .copied()
        .collect();
    local.extend(
        run.events
            .iter()
            .map(|p| (p.event.created_at.as_u64(), p.event.id)),
    );
    let local_ids: HashSet<EventId> = local.iter().map(|(_, id)| *id).collect();
    let (mut neg_bytes, mut dl_bytes, mut rounds) = (0u64, 0u64, 0u64);
    let relay_cpu = RelayCpu::start(run);
    let start = Instant::now();
    let deadline = start + run.params.duration;
    for i in 0..run.params.queries.max(1) {
        if Instant::now() >= deadline {
            break;
        }
        match reconcile(conn, &sync_filter, &local, timeout).await {
            Err(SyncError::Unsupported(reason)) if i == 0 => {
                out.status = Status::Unsupported(reason);
                break;
            }
            Err(SyncError::Unsupported(_)) => out.op("sync:negentropy").fail(Failure::Protocol),
            Err(SyncError::Failed(f)) => out.op("sync:negentropy").fail(f),
            Ok(r) if r.have != own || r.need != lacking => {
                out.anomalies.sample(
                    Failure::WrongResult.key(),
                    &format!(
                        "negentropy found {} to send and {} to fetch; expected {} and {}",
                        r.have.len(),
                        r.need.len(),
                        own.len(),
                        lacking.len()
                    ),
                );
                out.op("sync:negentropy").fail(Failure::WrongResult);
            }
            Ok(r) => {
                let need: Vec<EventId> = r.need.iter().copied().collect();
                match fetch_ids(conn, &need, timeout).await {
                    Ok(f) if f.items.len() == need.len() => {
                        let op = out.op("sync:negentropy");
                        op.success(r.latency + f.latency);
                        op.events_received += f.items.len() as u64;
                        neg_bytes += r.traffic.sent
                            + r.traffic.received
                            + f.traffic.sent
                            + f.traffic.received;
                        rounds += u64::from(r.rounds);
                    }
                    Ok(_) => out.op("sync:negentropy").fail(Failure::MissingResult),
                    Err(SyncError::Failed(f)) => out.op("sync:negentropy").fail(f),
                    Err(SyncError::Unsupported(_)) => {
                        out.op("sync:negentropy").fail(Failure::Protocol)
                    }
                }
            }
        }
        match fetch(conn, &download_filter, timeout).await {
            Ok(f) => {
                let missing: HashSet<EventId> = f
                    .items
                    .iter()
                    .map(|(_, id)| *id)
                    .filter(|id| !local_ids.contains(id))
                    .collect();
                if missing == lacking {
                    let op = out.op("sync:download");
                    op.success(f.latency);
                    op.events_received += f.items.len() as u64;
                    dl_bytes += f.traffic.sent + f.traffic.received;
                } else {
                    out.op("sync:download").fail(Failure::WrongResult);
                }
            }
            Err(SyncError::Failed(f)) => out.op("sync:download").fail(f),
            Err(SyncError::Unsupported(_)) => out.op("sync:download").fail(Failure::Protocol),
        }
        run.tick();
    }
    out.elapsed = start.elapsed();
    relay_cpu.stop(run, &mut out);
    for c in conns {
        out.anomalies.merge(&c.close().await);
    }
    let per = |bytes: u64, label: &str, out: &Outcome| {
        let n = out.ops.get(label).map_or(0, |s| s.successes);
        (n > 0).then(|| bytes as f64 / n as f64)
    };
    if let Some(b) = per(neg_bytes, "sync:negentropy", &out) {
        out.metrics.insert("negentropy_bytes_per_sync".into(), b);
        out.metrics.insert(
            "negentropy_rounds_per_sync".into(),
            rounds as f64 / out.ops["sync:negentropy"].successes as f64,
        );
    }
    if let Some(b) = per(dl_bytes, "sync:download", &out) {
        out.metrics.insert("download_bytes_per_sync".into(), b);
    }
    out.metrics
        .insert("relay_events".into(), stored.len() as f64);
    out.metrics
        .insert("client_lacks".into(), lacking.len() as f64);
    out.metrics.insert("client_only".into(), own.len() as f64);
    out.notes.push(format!(
        "client lacks 1 in {SYNC_DIFF_EVERY} relay events and holds as many of its own; \
         negentropy latency includes fetching the missing events by id; \
         download = one REQ for the whole window"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{authors, mixed_events, GenSpec, KindMix, Shapes};
    use nostrwire_event::{Tag, Timestamp};

    #[test]
    fn p_tag_queries_take_one_key_per_event() {
        let keys = authors(4, 1);
        let key = |i: u8| nostrwire_event::hex::encode(&[i; 32]);
        let follows: Vec<Tag> = (1..=200).map(|i| Tag::from_strs(&["p", &key(i)])).collect();
        let event = |kind: u16, tags: Vec<Tag>| {
            nostrwire_event::UnsignedEvent::new(
                &keys[0],
                Timestamp::new(1_700_000_000).unwrap(),
                Kind(kind),
                tags,
                "hi",
            )
            .sign(&keys[0])
        };
        assert_eq!(first_p_tag(&event(3, follows)), Some(key(1)));
        let reply = event(
            1,
            vec![
                Tag::from_strs(&["p", "not-a-key"]),
                Tag::from_strs(&["e", &key(9)]),
                Tag::from_strs(&["p", &key(7)]),
            ],
        );
        assert_eq!(first_p_tag(&reply), Some(key(7)));
        let none = event(1, vec![]);
        assert_eq!(first_p_tag(&none), None);
    }

    #[test]
    fn shares_cover_every_event_once_keep_versions_together_and_balance() {
        let shapes = Shapes::load(&crate::testdata("real-events.jsonl")).unwrap();
        let mix = KindMix::load(&crate::testdata("kind-mix.tsv")).unwrap();
        let spec = GenSpec {
            seed: 9,
            stream: 1,
            count: 3_000,
            newest: Timestamp::new(1_800_000_000).unwrap(),
            extra_tag: Some(Tag::from_strs(&["t", "run"])),
        };
        let events = mixed_events(&spec, &authors(9, 12), &mix, &shapes);
        let mut per_key: HashMap<_, usize> = HashMap::new();
        for p in &events {
            if let Some(key) = ordered_key(p) {
                *per_key.entry(key).or_default() += 1;
            }
        }
        let largest_key = per_key.values().copied().max().unwrap_or(0);
        assert!(largest_key > 1, "the mix has versions to keep together");
        for k in [1, 3, 7, 100, 1_000] {
            let shares = share_events(&events, k);
            assert_eq!(shares.len(), k);
            let mut seen = vec![0u8; events.len()];
            let mut owner = HashMap::new();
            for (w, mine) in shares.iter().enumerate() {
                assert!(mine.windows(2).all(|p| p[0] < p[1]), "send order kept");
                for &i in mine {
                    seen[i] += 1;
                    if let Some(key) = ordered_key(&events[i]) {
                        assert_eq!(*owner.entry(key).or_insert(w), w, "k = {k}");
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "k = {k}");
            // The fewest-first choice keeps every worker within one key's
            // versions of an even share.
            let even = events.len().div_ceil(k);
            let most = shares.iter().map(Vec::len).max().unwrap();
            assert!(
                most <= even + largest_key,
                "k = {k}: {most} > {even} + {largest_key}"
            );
            if k <= 100 {
                let fewest = shares.iter().map(Vec::len).min().unwrap();
                assert!(
                    fewest + largest_key >= events.len() / k,
                    "k = {k}: {fewest}"
                );
            }
        }
        assert_eq!(share_events(&events, 0).len(), 1);
    }
}
