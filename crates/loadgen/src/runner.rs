//! A whole run: settings, event preparation, the interleaved relay loop.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use nostrwire_event::{Keys, Tag, Timestamp};

use crate::abuse::{AbuseParams, Attack};
use crate::client::{Conn, Target};
use crate::host::{self, Host};
use crate::scenario::{self, Outcome, Params, Run, Scenario};
use crate::stats::CpuTime;
use crate::workload::{self, GenSpec, KindMix, Prepared, Shapes};
use crate::ws::{Counters, WsUrl};
use crate::Error;

/// Everything that defines a run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Relays: the first is the baseline of every ratio.
    pub relays: Vec<String>,
    /// Scenarios, in order.
    pub scenarios: Vec<Scenario>,
    /// Events (or queries) per scenario and round.
    pub count: usize,
    /// Connections for publish and query work.
    pub connections: usize,
    /// Bound on each scenario's measured phase.
    pub duration: Duration,
    /// Offered rate for `publish-open` and the `fanout` publisher, events/s.
    pub rate: f64,
    /// Events to replay instead of generating.
    pub replay: Option<PathBuf>,
    /// Seed of every random choice.
    pub seed: u64,
    /// How long any single answer may take before it is a timeout.
    pub timeout: Duration,
    /// Rounds per relay (interleaved A B A B).
    pub rounds: usize,
    /// Distinct authors of generated events.
    pub authors: usize,
    /// Kind mix table.
    pub kind_mix: PathBuf,
    /// Corpus that provides tags and contents.
    pub corpus: PathBuf,
    /// Idle connections opened by `connections`.
    pub idle_connections: usize,
    /// Subscribers in `fanout`.
    pub subscribers: usize,
    /// Events per burst per connection in `burst`.
    pub burst_size: usize,
    /// Quiet time between bursts.
    pub burst_gap: Duration,
    /// Events in `large` (kind-3 lists of 1,000+ tags each).
    pub large_events: usize,
    /// Seed events stored before `query` and `search`.
    pub seed_events: usize,
    /// `created_at` of the newest generated event (default: now).
    pub newest: Option<Timestamp>,
    /// Client worker threads (default: all cores).
    pub threads: Option<usize>,
    /// Draw a progress bar on standard error (when it is a terminal).
    pub progress: bool,
    /// Sizes of the abuse scenarios.
    pub abuse: AbuseParams,
}

impl Settings {
    /// Defaults for one relay (see the CLI help for each value's meaning).
    pub fn new(relay: impl Into<String>) -> Settings {
        Settings {
            relays: vec![relay.into()],
            scenarios: vec![Scenario::Publish],
            count: 10_000,
            connections: 8,
            duration: Duration::from_secs(60),
            rate: 1_000.0,
            replay: None,
            seed: 1,
            timeout: Duration::from_secs(5),
            rounds: 1,
            authors: 100,
            kind_mix: PathBuf::from("testdata/kind-mix.tsv"),
            corpus: PathBuf::from("testdata/real-events.jsonl"),
            idle_connections: 1_000,
            subscribers: 50,
            burst_size: 100,
            burst_gap: Duration::from_millis(200),
            large_events: 200,
            seed_events: 1_000,
            newest: None,
            threads: None,
            progress: true,
            abuse: AbuseParams::default(),
        }
    }

    /// Checks values that would make a run meaningless.
    pub fn validate(&self) -> Result<(), Error> {
        if self.relays.is_empty() {
            return Err(Error::Usage("no relay given".into()));
        }
        for r in &self.relays {
            if WsUrl::parse(r)?.binary {
                if let Some(sc) = self.scenarios.iter().find(|s| !s.supports_binary()) {
                    return Err(Error::Usage(format!(
                        "scenario {} does not run over the binary transport; give {r} only with publish, query, mixed, concurrent, large or connections",
                        sc.name()
                    )));
                }
            }
        }
        let positive = [
            ("--count", self.count),
            ("--connections", self.connections),
            ("--rounds", self.rounds),
            ("--authors", self.authors),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(Error::Usage(format!("{name} must be at least 1")));
            }
        }
        if self.duration.is_zero() || self.timeout.is_zero() {
            return Err(Error::Usage(
                "--duration and --timeout must be positive".into(),
            ));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(Error::Usage("--rate must be a positive number".into()));
        }
        let a = &self.abuse;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(a.seconds) || !positive(a.probe_rate) {
            return Err(Error::Usage(
                "--attack-seconds and --probe-rate must be positive".into(),
            ));
        }
        if self.scenarios.is_empty() {
            return Err(Error::Usage("no scenario given".into()));
        }
        Ok(())
    }

    fn params(&self) -> Params {
        Params {
            connections: self.connections,
            duration: self.duration,
            rate: self.rate,
            burst_size: self.burst_size,
            burst_gap: self.burst_gap,
            subscribers: self.subscribers,
            idle_connections: self.idle_connections,
            queries: self.count,
            seed: self.seed,
            abuse: self.abuse.clone(),
        }
    }
}

/// One scenario against one relay in one round.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// Which scenario.
    pub scenario: Scenario,
    /// Which relay (URL).
    pub relay: String,
    /// Round, from 0; `None` for a sum over rounds.
    pub round: Option<usize>,
    /// Figures.
    pub outcome: Outcome,
    /// Bytes received from the relay (all connections, handshakes included).
    pub bytes_in: u64,
    /// Bytes sent to the relay.
    pub bytes_out: u64,
    /// This process's CPU time during the scenario (connection setup included).
    pub client_cpu: CpuTime,
    /// Wall time of the whole scenario, setup and seeding included.
    pub wall: Duration,
    /// The relay process's CPU seconds during the scenario, when it runs as this user here.
    pub relay_cpu_s: Option<f64>,
    /// The relay's resident memory after the scenario, KiB.
    pub relay_rss_kib: Option<u64>,
    /// The anonymous part of that resident memory, KiB (without mapped files).
    pub relay_rss_anon_kib: Option<u64>,
    /// Rounds summed into this result (1 for a single round).
    pub rounds_merged: usize,
}

impl ScenarioResult {
    /// Client CPU time over wall time (1.0 = one core busy).
    pub fn client_cpu_share(&self) -> f64 {
        let cpu = (self.client_cpu.user + self.client_cpu.system).as_secs_f64();
        cpu / self.wall.as_secs_f64().max(1e-9)
    }

    /// Adds another round of the same scenario and relay.
    pub fn merge(&mut self, other: &ScenarioResult) {
        for (label, stats) in &other.outcome.ops {
            self.outcome
                .ops
                .entry(label.clone())
                .or_default()
                .merge(stats);
        }
        self.outcome.anomalies.merge(&other.outcome.anomalies);
        self.outcome.elapsed += other.outcome.elapsed;
        for (k, v) in &other.outcome.metrics {
            // Metrics are levels, not counts: keep the mean over rounds.
            let n = self.rounds_merged as f64;
            let e = self.outcome.metrics.entry(k.clone()).or_insert(0.0);
            *e = (*e * n + v) / (n + 1.0);
        }
        for note in &other.outcome.notes {
            if !self.outcome.notes.contains(note) {
                self.outcome.notes.push(note.clone());
            }
        }
        if let scenario::Status::Unsupported(r) = &other.outcome.status {
            self.outcome.status = scenario::Status::Unsupported(r.clone());
        }
        // The worst verdict of the rounds stands.
        if let Some(v) = &other.outcome.verdict {
            let worse = self
                .outcome
                .verdict
                .as_ref()
                .is_none_or(|mine| !mine.starts_with("fail") && v.starts_with("fail"));
            if worse {
                self.outcome.verdict = Some(v.clone());
            }
        }
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.client_cpu.user += other.client_cpu.user;
        self.client_cpu.system += other.client_cpu.system;
        self.wall += other.wall;
        self.relay_cpu_s = match (self.relay_cpu_s, other.relay_cpu_s) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.outcome.relay_cpu_s = match (self.outcome.relay_cpu_s, other.outcome.relay_cpu_s) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.relay_rss_kib = other.relay_rss_kib.or(self.relay_rss_kib);
        self.relay_rss_anon_kib = other.relay_rss_anon_kib.or(self.relay_rss_anon_kib);
        self.round = None;
        self.rounds_merged += 1;
    }
}

/// Preparation cost, reported so that it is visibly outside the measurements.
#[derive(Clone, Debug, Default)]
pub struct Preparation {
    /// Events signed or loaded.
    pub events: usize,
    /// Wall time spent preparing them.
    pub elapsed: Duration,
}

/// The outcome of [`run`].
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The settings used.
    pub settings: Settings,
    /// The machine the load came from.
    pub host: Host,
    /// Start time, seconds since the epoch.
    pub started_unix: u64,
    /// Every scenario × relay × round, in execution order.
    pub rounds: Vec<ScenarioResult>,
    /// Every scenario × relay summed over rounds, in settings order.
    pub totals: Vec<ScenarioResult>,
    /// Event preparation (before any clock).
    pub preparation: Preparation,
}

/// Inputs shared by all event generation of a run.
struct Sources {
    keys: Vec<Keys>,
    mix: KindMix,
    shapes: Shapes,
    replay: Option<Vec<Prepared>>,
    replay_cursor: usize,
    newest: Timestamp,
    /// `created_at` of the next generated event: each scenario and round gets
    /// a window after the previous one's, so replaceable events of a later
    /// round always supersede those of an earlier one.
    next_created_at: u64,
}

/// Events generated for one round of `sc`.
fn planned(s: &Settings, sc: Scenario) -> usize {
    match sc {
        Scenario::Publish
        | Scenario::PublishOpen
        | Scenario::Burst
        | Scenario::Mixed
        | Scenario::Concurrent => s.count,
        Scenario::Query | Scenario::Search | Scenario::Dump => s.seed_events.min(s.count),
        Scenario::Sync => {
            let n = s.seed_events.min(s.count);
            n + n / scenario::SYNC_DIFF_EVERY
        }
        Scenario::Fanout => s
            .count
            .min((s.rate * s.duration.as_secs_f64()).ceil() as usize)
            .max(1),
        Scenario::Large => s.large_events.min(s.count),
        Scenario::Connections => 0,
        Scenario::Abuse(a) => {
            let seeds = if a.needs_seed() {
                s.seed_events.min(s.count)
            } else {
                0
            };
            s.abuse.probe_events() + seeds
        }
    }
}

impl Sources {
    fn load(s: &Settings) -> Result<Sources, Error> {
        let replay = match &s.replay {
            Some(p) => Some(workload::load_replay(p, usize::MAX)?),
            None => None,
        };
        let newest = s.newest.unwrap_or_else(Timestamp::now);
        let total: usize = s.scenarios.iter().map(|sc| planned(s, *sc)).sum::<usize>() * s.rounds;
        Ok(Sources {
            next_created_at: newest.as_u64().saturating_sub(total as u64) + 1,
            keys: workload::authors(s.seed, s.authors),
            mix: KindMix::load(&s.kind_mix)?,
            shapes: Shapes::load(&s.corpus)?,
            replay,
            replay_cursor: 0,
            newest,
        })
    }

    fn spec(&mut self, s: &Settings, stream: u64, count: usize, extra_tag: Option<Tag>) -> GenSpec {
        let last = self.next_created_at + count.max(1) as u64 - 1;
        self.next_created_at = last + 1;
        GenSpec {
            seed: s.seed,
            stream,
            count,
            newest: Timestamp::new(last).unwrap_or(Timestamp::MAX),
            extra_tag,
        }
    }

    /// Kind-1 events with a `t` tag unique to the run, attack and round
    /// (the abuse probe's events).
    fn marked(
        &mut self,
        s: &Settings,
        stream: u64,
        count: usize,
        attack: Attack,
        round: usize,
    ) -> Vec<Prepared> {
        let marker = Tag::from_strs(&[
            "t",
            &format!(
                "nostrwire-{}-{}-{}-{round}",
                attack.name(),
                s.seed,
                self.newest
            ),
        ]);
        let spec = self.spec(s, stream, count, Some(marker));
        let shapes = &self.shapes;
        workload::generate(&spec, &self.keys, |rng| {
            let sh = shapes.sample(1, rng);
            (1, sh.tags.clone(), sh.content.clone())
        })
    }

    /// Next `count` events: replayed (each used once per run) or generated.
    fn publishable(&mut self, s: &Settings, stream: u64, count: usize) -> Vec<Prepared> {
        if let Some(r) = &self.replay {
            let end = (self.replay_cursor + count).min(r.len());
            let out = r[self.replay_cursor..end].to_vec();
            self.replay_cursor = end;
            return out;
        }
        let spec = self.spec(s, stream, count, None);
        workload::mixed_events(&spec, &self.keys, &self.mix, &self.shapes)
    }

    /// Events for one scenario and round: `(events, seed_events)`.
    fn prepare(
        &mut self,
        s: &Settings,
        sc: Scenario,
        round: usize,
    ) -> (Vec<Prepared>, Vec<Prepared>) {
        let stream = sc.index() * 1_000_003 + round as u64;
        let n = planned(s, sc);
        match sc {
            Scenario::Publish
            | Scenario::PublishOpen
            | Scenario::Burst
            | Scenario::Mixed
            | Scenario::Concurrent => (self.publishable(s, stream, n), Vec::new()),
            Scenario::Query | Scenario::Dump => (Vec::new(), self.publishable(s, stream, n)),
            Scenario::Fanout => {
                let marker = Tag::from_strs(&[
                    "t",
                    &format!("nostrwire-fanout-{}-{}-{round}", s.seed, self.newest),
                ]);
                let spec = self.spec(s, stream, n, Some(marker));
                let shapes = &self.shapes;
                let ev = workload::generate(&spec, &self.keys, |rng| {
                    let sh = shapes.sample(1, rng);
                    (1, sh.tags.clone(), sh.content.clone())
                });
                (ev, Vec::new())
            }
            Scenario::Large => {
                let spec = self.spec(s, stream, n, None);
                let big = self.shapes.with_min_tags(3, 1000);
                let shapes = &self.shapes;
                let ev = workload::generate(&spec, &self.keys, |rng| {
                    let sh = if big.is_empty() {
                        shapes.sample(3, rng)
                    } else {
                        big[rng.below(big.len() as u64) as usize]
                    };
                    (3, sh.tags.clone(), sh.content.clone())
                });
                (ev, Vec::new())
            }
            Scenario::Connections => (Vec::new(), Vec::new()),
            Scenario::Sync => {
                let seeds = s.seed_events.min(s.count);
                let relay = self.publishable(s, stream, seeds);
                let own = self.publishable(s, stream + 500_001, seeds / scenario::SYNC_DIFF_EVERY);
                (own, relay)
            }
            Scenario::Abuse(a) => {
                let seeds = if a.needs_seed() {
                    self.publishable(s, stream + 500_001, s.seed_events.min(s.count))
                } else {
                    Vec::new()
                };
                (
                    self.marked(s, stream, s.abuse.probe_events(), a, round),
                    seeds,
                )
            }
            Scenario::Search => {
                let spec = self.spec(s, stream, n, None);
                let shapes = &self.shapes;
                let mut i = 0usize;
                let ev = workload::generate(&spec, &self.keys, |rng| {
                    let sh = shapes.sample(1, rng);
                    let term = scenario::SEARCH_TERMS[i % scenario::SEARCH_TERMS.len()];
                    i += 1;
                    (1, sh.tags.clone(), format!("{} {term}", sh.content))
                });
                (Vec::new(), ev)
            }
        }
    }
}

fn expected_ops(s: &Settings, sc: Scenario, events: usize) -> u64 {
    match sc {
        Scenario::Query | Scenario::Search | Scenario::Dump => s.count as u64,
        Scenario::Sync => s.count as u64,
        Scenario::Connections => s.idle_connections as u64,
        Scenario::Fanout => (events * (s.subscribers + 1)) as u64,
        Scenario::Concurrent | Scenario::Abuse(_) => 0,
        _ => events as u64,
    }
}

/// Checks that the relay answers a WebSocket handshake.
async fn probe(url: &WsUrl, timeout: Duration) -> Result<(), Error> {
    let target = Target {
        url: url.clone(),
        counters: Arc::new(Counters::default()),
        timeout,
    };
    let conn = Conn::open(&target, 0).await?;
    conn.close().await;
    Ok(())
}

/// Runs every scenario against every relay, interleaved: for each scenario,
/// for each round, each relay in turn (A B A B …), with the same pre-signed
/// events for every relay of a round.
pub fn run(settings: &Settings) -> Result<RunReport, Error> {
    settings.validate()?;
    let urls: Vec<WsUrl> = settings
        .relays
        .iter()
        .map(|r| WsUrl::parse(r))
        .collect::<Result<_, _>>()?;
    let mut sources = Sources::load(settings)?;
    host::raise_fd_limit();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(t) = settings.threads {
        builder.worker_threads(t.max(1));
    }
    let rt = builder.build()?;
    rt.block_on(async {
        for (url, raw) in urls.iter().zip(&settings.relays) {
            probe(url, settings.timeout)
                .await
                .map_err(|e| Error::Unreachable {
                    url: raw.clone(),
                    reason: e.to_string(),
                })?;
        }
        Ok::<(), Error>(())
    })?;
    let started_unix = Timestamp::now().as_u64();
    let mut report = RunReport {
        settings: settings.clone(),
        host: Host::detect(),
        started_unix,
        rounds: Vec::new(),
        totals: Vec::new(),
        preparation: Preparation::default(),
    };
    for &sc in &settings.scenarios {
        for round in 0..settings.rounds {
            let t0 = Instant::now();
            let (events, seeds) = sources.prepare(settings, sc, round);
            report.preparation.events += events.len() + seeds.len();
            report.preparation.elapsed += t0.elapsed();
            let events = Arc::new(events);
            let seeds = Arc::new(seeds);
            for (url, raw) in urls.iter().zip(&settings.relays) {
                let result = rt.block_on(run_one(
                    settings,
                    sc,
                    round,
                    url,
                    raw,
                    events.clone(),
                    seeds.clone(),
                ));
                report.rounds.push(result);
            }
        }
    }
    for &sc in &settings.scenarios {
        for raw in &settings.relays {
            let mut total: Option<ScenarioResult> = None;
            for r in report
                .rounds
                .iter()
                .filter(|r| r.scenario == sc && &r.relay == raw)
            {
                match &mut total {
                    None => {
                        let mut first = r.clone();
                        first.round = None;
                        total = Some(first);
                    }
                    Some(t) => t.merge(r),
                }
            }
            report.totals.extend(total);
        }
    }
    Ok(report)
}

async fn run_one(
    settings: &Settings,
    sc: Scenario,
    round: usize,
    url: &WsUrl,
    raw: &str,
    events: Arc<Vec<Prepared>>,
    seeds: Arc<Vec<Prepared>>,
) -> ScenarioResult {
    let counters = Arc::new(Counters::default());
    let progress = Arc::new(AtomicU64::new(0));
    let run = Run {
        target: Target {
            url: url.clone(),
            counters: counters.clone(),
            timeout: settings.timeout,
        },
        params: settings.params(),
        events: events.clone(),
        seed_events: seeds,
        progress: progress.clone(),
    };
    let bar = if settings.progress {
        let total = expected_ops(settings, sc, events.len());
        let bar = if total > 0 {
            ProgressBar::new(total)
        } else {
            ProgressBar::new_spinner()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(format!("{sc} r{} {raw}", round + 1));
        Some(bar)
    } else {
        None
    };
    let ticker = bar.clone().map(|bar| {
        let progress = progress.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(progress.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    let relay_pid = host::listening_pid(url.port);
    let relay_cpu_before = relay_pid.and_then(host::cpu_seconds);
    let cpu0 = CpuTime::now();
    let wall0 = Instant::now();
    let outcome = run_scenario(sc, &run).await;
    let wall = wall0.elapsed();
    let client_cpu = CpuTime::now().since(cpu0);
    let relay_cpu_s = match (relay_cpu_before, relay_pid.and_then(host::cpu_seconds)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    if let Some(t) = ticker {
        t.abort();
    }
    if let Some(bar) = bar {
        bar.set_position(progress.load(Ordering::Relaxed));
        bar.finish_and_clear();
    }
    let (bytes_in, bytes_out) = counters.snapshot();
    ScenarioResult {
        scenario: sc,
        relay: raw.to_string(),
        round: Some(round),
        outcome,
        bytes_in,
        bytes_out,
        client_cpu,
        wall,
        relay_cpu_s,
        relay_rss_kib: relay_pid.and_then(host::rss_kib),
        relay_rss_anon_kib: relay_pid.and_then(host::rss_anon_kib),
        rounds_merged: 1,
    }
}

/// Runs one scenario: the load scenarios ([`crate::scenario`]) or an
/// attack ([`crate::abuse`]), which both stand on the same floor.
pub async fn run_scenario(sc: Scenario, run: &Run) -> Outcome {
    match sc {
        Scenario::Abuse(attack) => crate::abuse::run(attack, run).await,
        load => scenario::run_load(load, run).await,
    }
}

/// Per-relay figures of one operation, for ratio tables.
pub fn throughput(r: &ScenarioResult, label: &str) -> Option<f64> {
    let s = r.outcome.ops.get(label)?;
    let secs = r.outcome.elapsed.as_secs_f64();
    (secs > 0.0).then(|| s.successes as f64 / secs)
}

/// The main operation of each scenario (the one its ratios compare).
pub fn main_op(r: &ScenarioResult) -> Option<String> {
    let preferred = match r.scenario {
        Scenario::Fanout => "delivery",
        Scenario::Connections => "connect",
        Scenario::Large => "publish",
        Scenario::Search => "search",
        Scenario::Sync => "sync:negentropy",
        Scenario::Abuse(_) => "probe:ok",
        _ => "publish",
    };
    if r.outcome.ops.contains_key(preferred) {
        return Some(preferred.to_string());
    }
    r.outcome
        .ops
        .iter()
        .filter(|(l, _)| l.as_str() != "seed")
        .max_by_key(|(_, s)| s.successes)
        .map(|(l, _)| l.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        let mut s = Settings::new("ws://127.0.0.1:1");
        s.kind_mix = crate::testdata("kind-mix.tsv");
        s.corpus = crate::testdata("real-events.jsonl");
        s.scenarios = vec![Scenario::Publish, Scenario::Query];
        s.count = 30;
        s.seed_events = 10;
        s.rounds = 2;
        s.newest = Some(Timestamp::new(1_800_000_000).unwrap());
        s
    }

    #[test]
    fn rounds_get_later_created_at_windows_ending_at_newest() {
        let s = settings();
        let mut src = Sources::load(&s).unwrap();
        let mut windows = Vec::new();
        for &sc in &s.scenarios {
            for round in 0..s.rounds {
                let (ev, seeds) = src.prepare(&s, sc, round);
                let all: Vec<u64> = ev
                    .iter()
                    .chain(&seeds)
                    .map(|p| p.event.created_at.as_u64())
                    .collect();
                assert_eq!(all.len(), planned(&s, sc));
                windows.push((*all.iter().min().unwrap(), *all.iter().max().unwrap()));
            }
        }
        assert!(windows.windows(2).all(|w| w[0].1 < w[1].0), "{windows:?}");
        assert_eq!(windows.last().unwrap().1, 1_800_000_000);
    }

    #[test]
    fn the_same_settings_give_the_same_events() {
        let s = settings();
        let a = Sources::load(&s)
            .unwrap()
            .prepare(&s, Scenario::Publish, 0)
            .0;
        let b = Sources::load(&s)
            .unwrap()
            .prepare(&s, Scenario::Publish, 0)
            .0;
        assert!(a.iter().zip(&b).all(|(x, y)| x.message == y.message));
        let mut other = settings();
        other.seed = 2;
        let c = Sources::load(&other)
            .unwrap()
            .prepare(&other, Scenario::Publish, 0)
            .0;
        assert!(a.iter().zip(&c).any(|(x, y)| x.message != y.message));
    }

    #[test]
    fn validation_refuses_meaningless_settings() {
        let mut s = settings();
        assert!(s.validate().is_ok());
        s.count = 0;
        assert!(matches!(s.validate(), Err(Error::Usage(_))));
        let mut s = settings();
        s.rate = f64::NAN;
        assert!(s.validate().is_err());
        let mut s = settings();
        s.relays = vec!["wss://example".into()];
        assert!(s.validate().is_err());
    }
}
