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

use crate::attack::{AbuseParams, Attack};
use crate::client::{Anomalies, Conn, Query, QueryOutcome, Target};
use crate::stats::{message_prefix, Failure, OpStats};
use crate::workload::Prepared;
use crate::ws::{opcode, Admitted};
use crate::Error;

mod live;
mod negentropy;
mod publish;
mod query;
mod search;

use live::*;
use negentropy::*;
use publish::*;
use query::*;
use search::*;

pub(crate) use query::seed_events;

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

    /// Ends a measured phase: adds each task's part (a task that panicked
    /// adds nothing), the time since `start` and the relay's CPU time since
    /// `relay_cpu` was read.
    async fn finish(
        &mut self,
        handles: Vec<tokio::task::JoinHandle<Part>>,
        start: Instant,
        relay_cpu: RelayCpu,
        run: &Run,
    ) {
        for h in handles {
            if let Ok(part) = h.await {
                self.absorb(part);
            }
        }
        self.elapsed = start.elapsed();
        relay_cpu.stop(run, self);
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

    fn merge(&mut self, other: Part) {
        for (label, stats) in other.ops {
            self.op(&label).merge(&stats);
        }
        self.anomalies.merge(&other.anomalies);
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

/// Runs one load scenario. The attacks live a floor above
/// ([`crate::abuse`]); [`crate::runner::run_scenario`] dispatches to both.
pub(crate) async fn run_load(scenario: Scenario, run: &Run) -> Outcome {
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
        Scenario::Abuse(a) => {
            let mut out = Outcome::new();
            out.status = Status::Unsupported(format!(
                "{a} is an attack: run it through runner::run_scenario"
            ));
            out
        }
    }
}

/// Splits `0..n` round-robin over `k` workers.
fn share(n: usize, k: usize, worker: usize) -> impl Iterator<Item = usize> {
    (worker..n).step_by(k.max(1))
}

/// Kinds a NIP-42 relay may withhold from unauthenticated readers.
const PRIVATE_KINDS: [u16; 2] = [4, 1059];

/// Most distinct `#p` values the query scenario cycles through.
const MAX_P_TAG_QUERIES: usize = 1000;

/// Events one `dump` REQ asks for.
pub const DUMP_LIMIT: u64 = 1_000;

/// Terms the search seed events contain, one per query in turn.
pub const SEARCH_TERMS: [&str; 5] = ["bitcoin", "nostr", "lightning", "satoshi", "zap"];

/// In `sync`, the client lacks one relay event in this many, and holds one
/// event of its own (never published) per this many relay events.
pub const SYNC_DIFF_EVERY: usize = 10;

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
