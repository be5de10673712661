//! Abuse scenarios: one hostile client class at a time against the relay,
//! while a probe client keeps using it.
//!
//! Every attack runs for `--attack-seconds` (the correctness attacks end
//! sooner) through real WebSocket connections. Meanwhile the probe
//! publishes marked events at `--probe-rate` and queries them back, a live
//! subscriber to the marker times each delivery, and once a second a new
//! connection is opened and timed. The relay's resident memory (and its
//! anonymous part) is sampled every 100 ms. Afterwards the tester checks
//! that the relay still accepts connections and reads back every event
//! the probe got `OK true` for: an acknowledged event that is gone is lost.
//!
//! A relay without what an attack needs (NIP-50 search, NIP-42 AUTH,
//! permessage-deflate, NIP-09 deletion) gets "n/a" for it, not a failure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::{
    EventId, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, TagCondition, Timestamp,
    UnsignedEvent,
};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::{watch, Semaphore};
use tokio::time::timeout_at;

use crate::client::{Anomalies, Conn, Query, QueryOutcome, Target};
use crate::rng::Rng;
use crate::scenario::{self, Outcome, Run, Status};
use crate::stats::{message_prefix, Failure, OpStats};
use crate::workload::random_hex32;
use crate::ws::{Admitted, WsReader, WsUrl};
use crate::Error;

/// A class of hostile client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Attack {
    /// Connections that subscribe to everything and never read their socket.
    SlowReaders,
    /// Many idle WebSocket connections and half-open upgrades from one address.
    IdleFlood,
    /// REQs with the most filters and thousands of values each; many AUTHs per connection.
    OversizedSubs,
    /// Compressed messages that inflate to about a megabyte each.
    DeflateBomb,
    /// EVENT messages with tens of thousands of unknown keys.
    QuadraticJson,
    /// Live NIP-50 searches of tens of thousands of terms.
    HostileSearch,
    /// Another author's deletion, then the deleted event sent again.
    DeletionUndo,
    /// An AUTH event that names another relay.
    AuthRelayed,
}

impl Attack {
    /// Every attack, in the order `abuse` runs them.
    pub const ALL: [Attack; 8] = [
        Attack::SlowReaders,
        Attack::IdleFlood,
        Attack::OversizedSubs,
        Attack::DeflateBomb,
        Attack::QuadraticJson,
        Attack::HostileSearch,
        Attack::DeletionUndo,
        Attack::AuthRelayed,
    ];

    /// The scenario name (`abuse-` and the attack).
    pub fn name(self) -> &'static str {
        match self {
            Attack::SlowReaders => "abuse-slow-readers",
            Attack::IdleFlood => "abuse-idle-flood",
            Attack::OversizedSubs => "abuse-oversized-subs",
            Attack::DeflateBomb => "abuse-deflate-bomb",
            Attack::QuadraticJson => "abuse-quadratic-json",
            Attack::HostileSearch => "abuse-hostile-search",
            Attack::DeletionUndo => "abuse-deletion-undo",
            Attack::AuthRelayed => "abuse-auth-relayed",
        }
    }

    /// The attack name without the `abuse-` prefix.
    pub fn short_name(self) -> &'static str {
        &self.name()["abuse-".len()..]
    }

    /// Whether the attack checks a rule (a definite yes/no) rather than load.
    pub fn is_correctness(self) -> bool {
        matches!(self, Attack::DeletionUndo | Attack::AuthRelayed)
    }

    /// Whether the attack needs stored events first (`--seed-events`).
    pub fn needs_seed(self) -> bool {
        matches!(self, Attack::SlowReaders | Attack::HostileSearch)
    }
}

impl fmt::Display for Attack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sizes of the attacks (the CLI's `--attack-*` and related flags).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbuseParams {
    /// How long each attack lasts, seconds.
    pub seconds: f64,
    /// Probe events published (and queries made) per second during an attack.
    pub probe_rate: f64,
    /// Connections that never read (`slow-readers`).
    pub slow_readers: usize,
    /// Subscriptions of everything each slow reader opens.
    pub slow_reader_reqs: usize,
    /// Idle WebSocket connections (`idle-flood`).
    pub idle_flood: usize,
    /// TCP connections left in the middle of their upgrade request (`idle-flood`).
    pub half_open: usize,
    /// Oversized REQs (`oversized-subs`).
    pub oversized_reqs: usize,
    /// Filters per oversized REQ.
    pub oversized_filters: usize,
    /// Values per filter of an oversized REQ (fewer when they would not fit `message_bytes`).
    pub oversized_values: usize,
    /// AUTH events per connection, each with a fresh key (`oversized-subs`).
    pub auths: usize,
    /// Size of one hostile message (tag lists, inflated messages, unknown-key events).
    pub message_bytes: usize,
    /// Compressed messages sent behind one slow message (`deflate-bomb`).
    pub deflate_messages: usize,
    /// Unknown-key EVENT messages sent at once, each on its own connection (`quadratic-json`).
    pub quadratic_messages: usize,
    /// Terms in one hostile search (`hostile-search`).
    pub search_terms: usize,
    /// Hostile live searches (`hostile-search`).
    pub hostile_searches: usize,
}

impl Default for AbuseParams {
    fn default() -> AbuseParams {
        AbuseParams {
            seconds: 15.0,
            probe_rate: 10.0,
            slow_readers: 20,
            slow_reader_reqs: 50,
            idle_flood: 1_000,
            half_open: 200,
            oversized_reqs: 100,
            oversized_filters: 32,
            oversized_values: 5_000,
            auths: 200,
            message_bytes: 1_000_000,
            deflate_messages: 2_000,
            quadratic_messages: 8,
            search_terms: 40_000,
            hostile_searches: 20,
        }
    }
}

impl AbuseParams {
    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds.max(0.1))
    }

    /// Probe events one attack may publish.
    pub fn probe_events(&self) -> usize {
        (self.probe_rate * self.seconds).ceil() as usize + 5
    }
}

/// A probe p99 above this counts as a failure of the attack.
pub const SLOW_P99: Duration = Duration::from_secs(1);

/// How often the relay's memory is read.
const RSS_EVERY: Duration = Duration::from_millis(100);

/// How often the probe opens a new connection.
const CONNECT_EVERY: Duration = Duration::from_secs(1);

/// Acknowledged ids read back per REQ.
const READ_BACK_CHUNK: usize = 200;

/// What an attack found, beside what the probe measured.
#[derive(Debug, Default)]
struct Found {
    /// `Some` when the relay lacks what the attack needs (reported n/a).
    unsupported: Option<String>,
    /// A rule the relay broke (correctness attacks and hard refusals).
    failed: Option<String>,
    /// What the relay did right (correctness attacks).
    passed: Option<String>,
    ops: BTreeMap<String, OpStats>,
    metrics: BTreeMap<String, f64>,
    notes: Vec<String>,
}

impl Found {
    fn op(&mut self, label: &str) -> &mut OpStats {
        self.ops.entry(label.to_string()).or_default()
    }
}

/// What an attack task gets.
#[derive(Clone)]
struct Ctx {
    run: Run,
    /// The relay as the attacker reaches it (from its own address).
    attacker: Target,
    deadline: Instant,
    stop: watch::Receiver<bool>,
    seed: u64,
}

/// Where attacks come from when the relay is on loopback: an address of
/// their own, so the relay's per-address limits tell the attacker from the
/// probe (127.0.0.1), as they would two clients on the internet.
pub const ATTACKER_ADDRESS: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 2);

/// The target as the attacker reaches it: from [`ATTACKER_ADDRESS`] when
/// the relay listens on an IPv4 loopback address.
fn attacker_target(target: &Target) -> Target {
    let mut attacker = target.clone();
    let loopback = attacker.url.host == "localhost"
        || attacker
            .url
            .host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        attacker.url.source = Some(ATTACKER_ADDRESS.into());
    }
    attacker
}

impl Ctx {
    fn target(&self) -> &Target {
        &self.attacker
    }

    fn p(&self) -> &AbuseParams {
        &self.run.params.abuse
    }

    /// Waits for the end of the attack (its deadline or the probe's stop).
    async fn hold(&mut self) {
        let until = tokio::time::Instant::from_std(self.deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {}
            _ = self.stop.wait_for(|s| *s) => {}
        }
    }

    fn over(&self) -> bool {
        *self.stop.borrow() || Instant::now() >= self.deadline
    }

    async fn open(&self, i: u64) -> Result<Conn, Error> {
        Conn::open(self.target(), self.seed ^ (i + 1).wrapping_mul(0x9E37_79B9)).await
    }
}

/// Runs one attack with the probe alongside and returns its figures.
pub async fn run(attack: Attack, run: &Run) -> Outcome {
    let mut out = Outcome::new();
    crate::host::raise_fd_limit();
    // A relay still busy with an earlier attack would spoil this one's figures.
    let mut before = relay_state(&run.target).await;
    for _ in 0..2 {
        if before != RelayState::Unresponsive {
            break;
        }
        before = relay_state(&run.target).await;
    }
    if before != RelayState::Up {
        out.notes.push(format!(
            "relay {} before the attack (an earlier attack's doing?): figures unreliable",
            before.name()
        ));
    }
    if let Some(pid) = crate::host::listening_pid(run.target.url.port) {
        for (key, kib) in [
            ("relay_rss_before_kib", crate::host::rss_kib(pid)),
            ("relay_rss_anon_before_kib", crate::host::rss_anon_kib(pid)),
        ] {
            if let Some(k) = kib {
                out.metrics.insert(key.into(), k as f64);
            }
        }
    }
    if attack.needs_seed() && !run.seed_events.is_empty() {
        scenario::seed_events(run, &mut out).await;
    }
    let p = run.params.abuse.clone();
    let timeout = run.target.timeout;
    let marker = run
        .events
        .first()
        .and_then(|e| e.event.tags.iter().rev().find(|t| t.name() == "t"))
        .and_then(|t| t.first_value().map(str::to_string))
        .unwrap_or_else(|| format!("nostrwire-abuse-{}", run.params.seed));
    let marked = Filter {
        tags: vec![TagCondition {
            letter: b't',
            values: vec![marker],
        }],
        ..Filter::new()
    };

    // The probe's live subscriber, publisher and reader, before the attack.
    let mut part_ops: BTreeMap<String, OpStats> = BTreeMap::new();
    let sent: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::default();
    let (done_tx, done_rx) = watch::channel(None::<Arc<HashSet<EventId>>>);
    let subscriber = match Conn::open(&run.target, run.params.seed ^ 0xab05e).await {
        Ok(mut c) => match subscribe(&mut c, &marked, timeout).await {
            Ok((sub, lat)) => {
                part_ops
                    .entry("probe:subscribe".into())
                    .or_default()
                    .success(lat);
                Some(tokio::spawn(live_subscriber(
                    c,
                    sub,
                    marked.clone(),
                    sent.clone(),
                    done_rx,
                    timeout,
                )))
            }
            Err(f) => {
                part_ops
                    .entry("probe:subscribe".into())
                    .or_default()
                    .fail(f);
                None
            }
        },
        Err(_) => {
            part_ops
                .entry("probe:subscribe".into())
                .or_default()
                .fail(Failure::ConnectFailed);
            None
        }
    };
    let mut publisher = Conn::open(&run.target, run.params.seed ^ 0xab05f)
        .await
        .ok();
    let mut reader = Conn::open(&run.target, run.params.seed ^ 0xab060)
        .await
        .ok();

    // Memory of the relay, sampled until the attack is over.
    let port = run.target.url.port;
    let pid = crate::host::listening_pid(port);
    let sampling = Arc::new(AtomicBool::new(true));
    let peak_rss = Arc::new(AtomicU64::new(0));
    let peak_anon = Arc::new(AtomicU64::new(0));
    let sampler = pid.map(|pid| {
        let (sampling, peak_rss, peak_anon) =
            (sampling.clone(), peak_rss.clone(), peak_anon.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Some(r) = crate::host::rss_kib(pid) {
                    peak_rss.fetch_max(r, Ordering::Relaxed);
                }
                if let Some(a) = crate::host::rss_anon_kib(pid) {
                    peak_anon.fetch_max(a, Ordering::Relaxed);
                }
                tokio::time::sleep(RSS_EVERY).await;
            }
        })
    });

    let start = Instant::now();
    let deadline = start + p.duration();
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Ctx {
        run: run.clone(),
        attacker: attacker_target(&run.target),
        deadline,
        stop: stop_rx.clone(),
        seed: run.params.seed ^ 0x00ab_05e0 ^ attack as u64,
    };
    let attack_task = tokio::spawn(attack_body(attack, ctx));
    let connector = tokio::spawn(connect_probe(run.target.clone(), stop_rx.clone()));

    // The probe: publish one marked event, then read the newest back.
    let query = Query {
        label: "probe:eose",
        filter: Filter {
            limit: Some(5),
            ..marked.clone()
        },
        must_include: vec![],
    };
    let interval = Duration::from_secs_f64(1.0 / p.probe_rate.max(0.1));
    let mut acked: Vec<EventId> = Vec::new();
    let mut next = Instant::now();
    for (i, ev) in run.events.iter().enumerate() {
        if i > 0 && (Instant::now() >= deadline || attack_task.is_finished()) {
            break;
        }
        let ok = part_ops.entry("probe:ok".into()).or_default();
        match reopen(&mut publisher, &run.target, i as u64).await {
            None => ok.fail(Failure::ConnectFailed),
            Some(c) => {
                sent.lock()
                    .expect("sent lock")
                    .insert(ev.event.id, Instant::now());
                match c.publish(ev, timeout).await {
                    Ok(l) => {
                        ok.success(l);
                        acked.push(ev.event.id);
                    }
                    Err(f) => {
                        if f == Failure::ConnectionLost {
                            publisher = None;
                        }
                        ok.fail(f);
                    }
                }
            }
        }
        let eose = part_ops.entry("probe:eose".into()).or_default();
        match reopen(&mut reader, &run.target, i as u64 + 7).await {
            None => eose.fail(Failure::ConnectFailed),
            Some(c) => match c.query(&query, timeout).await {
                QueryOutcome::Ok { latency, .. } => eose.success(latency),
                QueryOutcome::Failed(f, _) => {
                    if f == Failure::ConnectionLost {
                        reader = None;
                    }
                    eose.fail(f);
                }
            },
        }
        run.tick();
        next += interval;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        let wake = next.min(deadline.max(now));
        tokio::time::sleep_until(wake.into()).await;
    }
    let _ = stop_tx.send(true);
    let mut found = match tokio::time::timeout(timeout + Duration::from_secs(10), attack_task).await
    {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => Found {
            notes: vec![format!("attack task failed: {e}")],
            ..Found::default()
        },
        Err(_) => Found {
            notes: vec!["the attack did not stop in time".into()],
            ..Found::default()
        },
    };
    out.elapsed = start.elapsed();
    if let Ok(connect) = connector.await {
        part_ops
            .entry("probe:connect".into())
            .or_default()
            .merge(&connect);
    }

    // After the attack: still up? Every acknowledged event still there?
    let state = relay_state(&run.target).await;
    let up = state == RelayState::Up;
    sampling.store(false, Ordering::Relaxed);
    if let Some(s) = sampler {
        let _ = s.await;
    }
    let mut anomalies = Anomalies::default();
    for c in [publisher.take(), reader.take()].into_iter().flatten() {
        anomalies.merge(&c.close().await);
    }
    let lost = if up {
        match read_back(&run.target, &acked).await {
            Ok(missing) => Some(missing),
            Err(why) => {
                found.notes.push(format!("read-back failed: {why}"));
                None
            }
        }
    } else {
        None
    };
    let accepted: HashSet<EventId> = acked.iter().copied().collect();
    let _ = done_tx.send(Some(Arc::new(accepted)));
    if let Some(s) = subscriber {
        if let Ok((stats, a)) = s.await {
            part_ops
                .entry("probe:delivery".into())
                .or_default()
                .merge(&stats);
            anomalies.merge(&a);
        }
    }
    drop(done_tx);

    for (label, stats) in part_ops.into_iter().chain(std::mem::take(&mut found.ops)) {
        out.ops.entry(label).or_default().merge(&stats);
    }
    out.anomalies.merge(&anomalies);
    out.metrics.insert("relay_state".into(), state.metric());
    let (rss, anon) = (
        peak_rss.load(Ordering::Relaxed),
        peak_anon.load(Ordering::Relaxed),
    );
    if rss > 0 {
        out.metrics.insert("relay_peak_rss_kib".into(), rss as f64);
        out.metrics
            .insert("relay_peak_rss_anon_kib".into(), anon as f64);
    } else {
        out.notes.push(
            "relay memory not read: no process of this user listens on the relay's port".into(),
        );
    }
    out.metrics.insert("acked".into(), acked.len() as f64);
    if let Some(lost) = lost {
        out.metrics.insert("acked_lost".into(), lost as f64);
    }
    out.metrics.append(&mut found.metrics);
    out.notes.append(&mut found.notes);
    // A relay that stopped answering also fails the support checks: that is
    // not a missing feature.
    if state != RelayState::Up {
        if let Some(why) = found.unsupported.take() {
            out.notes.push(format!(
                "support check failed ({why}), but the relay is {}",
                state.name()
            ));
        }
    }
    out.verdict = Some(verdict(&out, &found, state, lost));
    if let Some(why) = found.unsupported {
        out.status = Status::Unsupported(why);
    }
    out
}

/// Opens the probe connection again when it was lost.
async fn reopen<'a>(
    conn: &'a mut Option<Conn>,
    target: &Target,
    seed: u64,
) -> Option<&'a mut Conn> {
    if conn.is_none() {
        *conn = Conn::open(target, seed ^ 0x5eed).await.ok();
    }
    conn.as_mut()
}

/// The verdict: `pass`, `fail: …` or `n/a: …`.
fn verdict(out: &Outcome, found: &Found, state: RelayState, lost: Option<usize>) -> String {
    if let Some(why) = &found.unsupported {
        return format!("n/a: {why}");
    }
    let mut fails = Vec::new();
    match state {
        RelayState::Up => {}
        RelayState::Unresponsive => fails
            .push("relay unresponsive (accepts connections; no EOSE or no live delivery)".into()),
        RelayState::Down => fails.push("relay down".into()),
    }
    match lost {
        Some(0) => {}
        Some(n) => fails.push(format!("{n} acknowledged events lost")),
        None if state == RelayState::Up => fails.push("acknowledged events not read back".into()),
        None => {}
    }
    if let Some(f) = &found.failed {
        fails.push(f.clone());
    }
    for (label, what) in [
        ("probe:ok", "publish"),
        ("probe:eose", "query"),
        ("probe:delivery", "live delivery"),
        ("probe:connect", "new connection"),
    ] {
        let Some(s) = out.ops.get(label) else {
            continue;
        };
        let n = s.failure_count();
        if n > 0 {
            fails.push(format!("probe {what} failed {n}×"));
        } else if s.successes > 0 && s.percentiles().p99 > SLOW_P99.as_secs_f64() * 1000.0 {
            fails.push(format!("probe {what} p99 over {} s", SLOW_P99.as_secs()));
        }
    }
    if fails.is_empty() {
        match &found.passed {
            Some(why) => format!("pass: {why}"),
            None => "pass".into(),
        }
    } else {
        format!("fail: {}", fails.join("; "))
    }
}

/// How the relay is doing after an attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayState {
    /// It completes a handshake and answers a REQ with EOSE.
    Up,
    /// It completes a handshake but does not answer a REQ, or does not
    /// deliver a new event to a live subscription, within the timeout.
    Unresponsive,
    /// It does not complete a handshake (three tries).
    Down,
}

impl RelayState {
    /// The value of the `relay_state` metric (2 up, 1 unresponsive, 0 down).
    pub fn metric(self) -> f64 {
        match self {
            RelayState::Up => 2.0,
            RelayState::Unresponsive => 1.0,
            RelayState::Down => 0.0,
        }
    }

    /// The state a `relay_state` metric stands for.
    pub fn from_metric(v: f64) -> RelayState {
        if v >= 2.0 {
            RelayState::Up
        } else if v >= 1.0 {
            RelayState::Unresponsive
        } else {
            RelayState::Down
        }
    }

    /// `up`, `unresponsive` or `down`.
    pub fn name(self) -> &'static str {
        match self {
            RelayState::Up => "up",
            RelayState::Unresponsive => "unresponsive",
            RelayState::Down => "down",
        }
    }
}

/// Whether the relay completes a handshake, answers a lookup and
/// delivers a new event to a live subscription.
async fn relay_state(target: &Target) -> RelayState {
    for i in 0..3u64 {
        if let Ok(mut c) = Conn::open(target, 0xc0ffee + i).await {
            let filter = Filter {
                ids: Some(vec![EventId::from_bytes([0x5a; 32])]),
                ..Filter::new()
            };
            let answered = fetch_ids(&mut c, &filter, target.timeout).await.is_ok()
                && delivers_live(target, &mut c).await;
            c.close().await;
            return if answered {
                RelayState::Up
            } else {
                RelayState::Unresponsive
            };
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    RelayState::Down
}

/// Subscribes on `conn` to a tag nothing else carries, publishes one event
/// with it on another connection and waits for it to arrive live. An event
/// the relay refuses proves nothing either way and counts as delivered.
async fn delivers_live(target: &Target, conn: &mut Conn) -> bool {
    let mut rng = run_rng(0xa11e);
    let tag = format!("nostrwire-alive-{:016x}", rng.next_u64());
    let filter = Filter {
        tags: vec![TagCondition {
            letter: b't',
            values: vec![tag.clone()],
        }],
        ..Filter::new()
    };
    let Ok((sub, _)) = subscribe(conn, &filter, target.timeout).await else {
        return false;
    };
    let keys = fresh_keys(&mut rng);
    let ev = UnsignedEvent::new(
        &keys,
        Timestamp::now(),
        Kind(1),
        vec![Tag::from_strs(&["t", &tag])],
        "still delivering?",
    )
    .sign(&keys);
    let Ok(mut publisher) = Conn::open(target, rng.next_u64()).await else {
        return false;
    };
    let ok = publish_one(&mut publisher, &ev, target.timeout).await;
    publisher.close().await;
    match ok {
        Ok((true, _)) => {}
        Ok((false, _)) => return true,
        Err(_) => return false,
    }
    let deadline = tokio::time::Instant::now() + target.timeout;
    loop {
        let Ok(Some(t)) = conn.reader.next_text_before(deadline).await else {
            return false;
        };
        if let Ok(RelayMessage::Event {
            subscription_id,
            event,
        }) = RelayMessage::parse(t)
        {
            if subscription_id == sub && *event.id() == ev.id {
                return true;
            }
        }
    }
}

/// Reads back the acknowledged ids on a new connection; how many are missing.
async fn read_back(target: &Target, ids: &[EventId]) -> Result<usize, String> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut conn = Conn::open(target, 0x4eadbac)
        .await
        .map_err(|e| e.to_string())?;
    let mut missing = 0;
    for chunk in ids.chunks(READ_BACK_CHUNK) {
        let filter = Filter {
            ids: Some(chunk.to_vec()),
            ..Filter::new()
        };
        let got = fetch_ids(&mut conn, &filter, target.timeout).await?;
        missing += chunk.iter().filter(|id| !got.contains(id)).count();
    }
    conn.close().await;
    Ok(missing)
}

/// Sends one REQ and collects the ids returned before EOSE, then CLOSEs.
async fn fetch_ids(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
) -> Result<HashSet<EventId>, String> {
    let sub = conn.new_sub_id("rb");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, std::slice::from_ref(filter));
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut got = HashSet::new();
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE within the timeout".into()),
            Err(e) => return Err(e.to_string()),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub => {
                got.insert(*event.id());
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => return Err(format!("CLOSED \"{message}\"")),
            _ => {}
        }
    }
    msg.clear();
    write::close(&mut msg, &sub);
    let _ = conn.writer.send_text(&msg).await;
    Ok(got)
}

/// Subscribes to the probe's marker and waits for EOSE.
async fn subscribe(
    conn: &mut Conn,
    filter: &Filter,
    timeout: Duration,
) -> Result<(String, Duration), Failure> {
    let sub = conn.new_sub_id("live");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, std::slice::from_ref(filter));
    let t0 = Instant::now();
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|_| Failure::ConnectionLost)?;
    let deadline = tokio::time::Instant::from_std(t0 + timeout);
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err(Failure::Timeout),
            Err(e) => return Err(e.as_failure()),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Eose(s)) if s == sub => return Ok((sub, t0.elapsed())),
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => return Err(Failure::Closed(message_prefix(&message))),
            Ok(other) => conn.anomalies.unsolicited(&other),
            Err(_) => conn.anomalies.add("unparseable_message"),
        }
    }
}

/// The live subscriber: times each probe event from its EVENT write to its
/// arrival; after the attack, every acknowledged event it has not received
/// within the timeout is a missed delivery.
async fn live_subscriber(
    mut conn: Conn,
    sub: String,
    filter: Filter,
    sent: Arc<Mutex<HashMap<EventId, Instant>>>,
    mut done: watch::Receiver<Option<Arc<HashSet<EventId>>>>,
    timeout: Duration,
) -> (OpStats, Anomalies) {
    let mut stats = OpStats::new();
    let mut got: HashSet<EventId> = HashSet::new();
    let mut final_deadline: Option<tokio::time::Instant> = None;
    let mut open = true;
    while open {
        if let Some(expected) = done.borrow().clone() {
            if final_deadline.is_none() {
                final_deadline = Some(tokio::time::Instant::now() + timeout);
            }
            if expected.iter().all(|id| got.contains(id)) {
                break;
            }
        }
        let wake = final_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = timeout_at(wake, conn.reader.next()) => match r {
                Err(_) => break,
                Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => open = false,
                Ok(Ok(Admitted::Text(t))) => {
                    let now = Instant::now();
                    match RelayMessage::parse(t) {
                        Ok(RelayMessage::Event { subscription_id, event }) if subscription_id == sub => {
                            if !filter.matches(&event) {
                                stats.fail(Failure::WrongResult);
                            } else if got.insert(*event.id()) {
                                let t0 = sent.lock().expect("sent lock").get(event.id()).copied();
                                match t0 {
                                    Some(t0) => stats.success(now.duration_since(t0)),
                                    None => conn.anomalies.add("unexpected_delivery"),
                                }
                            }
                        }
                        Ok(RelayMessage::Closed { subscription_id, message }) if subscription_id == sub => {
                            conn.anomalies.sample(Failure::Closed(message_prefix(&message)).key(), &message);
                            open = false;
                        }
                        Ok(other) => conn.anomalies.unsolicited(&other),
                        Err(_) => conn.anomalies.add("unparseable_message"),
                    }
                }
                Ok(Ok(_)) => {}
            },
            r = done.changed() => if r.is_err() { break },
        }
    }
    let expected = match done.wait_for(|d| d.is_some()).await {
        Ok(d) => d.clone(),
        Err(_) => None,
    };
    if let Some(expected) = expected {
        for _ in expected.iter().filter(|id| !got.contains(id)) {
            stats.fail(Failure::MissedDelivery);
        }
    }
    let anomalies = if open {
        conn.close().await
    } else {
        conn.anomalies
    };
    (stats, anomalies)
}

/// Opens and times a new connection every second until the attack ends.
async fn connect_probe(target: Target, mut stop: watch::Receiver<bool>) -> OpStats {
    let mut stats = OpStats::new();
    let mut i = 0u64;
    tokio::select! {
        _ = tokio::time::sleep(CONNECT_EVERY / 2) => {}
        _ = stop.wait_for(|s| *s) => return stats,
    }
    loop {
        let t0 = Instant::now();
        match Conn::open(&target, 0xc0 + i).await {
            Ok(c) => {
                stats.success(t0.elapsed());
                c.close().await;
            }
            Err(Error::Handshake(m)) if m == "timed out" => stats.fail(Failure::Timeout),
            Err(_) => stats.fail(Failure::ConnectFailed),
        }
        i += 1;
        tokio::select! {
            _ = tokio::time::sleep(CONNECT_EVERY.saturating_sub(t0.elapsed())) => {}
            _ = stop.wait_for(|s| *s) => return stats,
        }
    }
}

/// What the relay answered on an attacking connection that reads.
#[derive(Debug, Default)]
struct Tally {
    counts: BTreeMap<String, u64>,
    samples: BTreeMap<String, String>,
    /// REQ → EOSE latency of the attacking subscriptions.
    eose: OpStats,
    /// The relay closed the connection.
    dropped: bool,
}

impl Tally {
    fn add(&mut self, key: String, sample: Option<&str>) {
        if let Some(s) = sample {
            self.samples
                .entry(key.clone())
                .or_insert_with(|| s.chars().take(120).collect());
        }
        *self.counts.entry(key).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        for (k, v) in other.counts {
            *self.counts.entry(k).or_default() += v;
        }
        for (k, v) in other.samples {
            self.samples.entry(k).or_insert(v);
        }
        self.eose.merge(&other.eose);
        self.dropped |= other.dropped;
    }

    fn describe(&self) -> String {
        if self.counts.is_empty() {
            return "nothing".into();
        }
        self.counts
            .iter()
            .map(|(k, v)| match self.samples.get(k) {
                Some(s) => format!("{k} {v} (\"{s}\")"),
                None => format!("{k} {v}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Sent subscription ids and when, for EOSE latencies.
type SentSubs = Arc<Mutex<HashMap<String, Instant>>>;

/// Reads and counts the relay's answers until the attack ends or the relay
/// closes the connection.
async fn drain(mut reader: WsReader, sent: SentSubs, mut stop: watch::Receiver<bool>) -> Tally {
    let mut t = Tally::default();
    loop {
        if *stop.borrow() {
            break;
        }
        let incoming = tokio::select! {
            r = reader.next() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let text = match incoming {
            Err(_) | Ok(Admitted::Close(_)) => {
                t.dropped = true;
                break;
            }
            Ok(Admitted::Text(x)) => x,
            Ok(_) => continue,
        };
        match RelayMessage::parse(text) {
            Ok(RelayMessage::Eose(s)) => {
                if let Some(t0) = sent.lock().expect("sent lock").get(s.as_ref()) {
                    t.eose.success(t0.elapsed());
                }
                t.add("eose".into(), None);
            }
            Ok(RelayMessage::Closed { message, .. }) => t.add(
                format!("closed:{}", message_prefix(&message)),
                Some(&message),
            ),
            Ok(RelayMessage::Notice(m)) => t.add("notice".into(), Some(&m)),
            Ok(RelayMessage::Ok {
                accepted, message, ..
            }) => {
                if accepted {
                    t.add("ok_true".into(), None);
                } else {
                    t.add(
                        format!("ok_false:{}", message_prefix(&message)),
                        Some(&message),
                    );
                }
            }
            Ok(RelayMessage::Auth(_)) => t.add("auth_challenge".into(), None),
            Ok(RelayMessage::Event { .. }) => t.add("event".into(), None),
            Ok(_) => t.add("other".into(), None),
            Err(_) => t.add("unparseable".into(), None),
        }
    }
    t
}

async fn attack_body(attack: Attack, ctx: Ctx) -> Found {
    match attack {
        Attack::SlowReaders => slow_readers(ctx).await,
        Attack::IdleFlood => idle_flood(ctx).await,
        Attack::OversizedSubs => oversized_subs(ctx).await,
        Attack::DeflateBomb => deflate_bomb(ctx).await,
        Attack::QuadraticJson => quadratic_json(ctx).await,
        Attack::HostileSearch => hostile_search(ctx).await,
        Attack::DeletionUndo => deletion_undo(ctx).await,
        Attack::AuthRelayed => auth_relayed(ctx).await,
    }
}

/// Connections that subscribe to everything stored and live, many times
/// over, and never read: the relay's queues for them can only grow.
async fn slow_readers(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let n = ctx.p().slow_readers;
    let reqs = ctx.p().slow_reader_reqs.max(1);
    let mut held = Vec::new();
    let mut failed = 0;
    for i in 0..n {
        if ctx.over() {
            break;
        }
        let mut conn = match ctx.open(i as u64).await {
            Ok(c) => c,
            Err(_) => {
                failed += 1;
                continue;
            }
        };
        let mut msg = Vec::new();
        for r in 0..reqs {
            msg.clear();
            let all = Filter {
                limit: Some(5_000),
                ..Filter::new()
            };
            write::req(&mut msg, &format!("all{r}"), &[all]);
            conn.writer.queue_text(&msg);
        }
        if conn.writer.flush().await.is_err() {
            failed += 1;
        }
        held.push(conn);
    }
    f.metrics.insert("slow_readers".into(), held.len() as f64);
    f.notes.push(format!(
        "{} connections × {reqs} subscriptions of everything (limit 5000), never read; {failed} failed to open or send",
        held.len()
    ));
    ctx.hold().await;
    // Dropped unread: the relay sees a reset, as from a client that vanished.
    drop(held);
    f
}

/// Many idle connections and half-open upgrades from one address.
async fn idle_flood(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let n = ctx.p().idle_flood;
    let half = ctx.p().half_open;
    let url: WsUrl = ctx.target().url.clone();
    // Half-open upgrades: TCP connected, the request head never finished.
    let mut stalled = Vec::new();
    let mut half_failed = 0;
    for _ in 0..half {
        if ctx.over() {
            break;
        }
        match crate::ws::tcp_connect(&url).await {
            Ok(mut s) => {
                let head = format!(
                    "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
                    url.path, url.host, url.port
                );
                if s.write_all(head.as_bytes()).await.is_ok() {
                    stalled.push(s);
                } else {
                    half_failed += 1;
                }
            }
            Err(_) => half_failed += 1,
        }
    }
    let sem = Arc::new(Semaphore::new(64));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let sem = sem.clone();
        let target = ctx.target().clone();
        let seed = ctx.seed ^ i as u64;
        let deadline = ctx.deadline;
        handles.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore never closed");
            if Instant::now() >= deadline {
                return None;
            }
            let t0 = Instant::now();
            Some(Conn::open(&target, seed).await.map(|c| (c, t0.elapsed())))
        }));
    }
    let mut conns = Vec::new();
    let (mut refused, mut timed_out, mut skipped) = (0u64, 0u64, 0u64);
    for h in handles {
        match h.await {
            Ok(Some(Ok((c, lat)))) => {
                f.op("attack:connect").success(lat);
                conns.push(c);
            }
            Ok(Some(Err(Error::Handshake(m)))) if m == "timed out" => {
                timed_out += 1;
                f.op("attack:connect").fail(Failure::Timeout);
            }
            Ok(Some(Err(_))) => {
                refused += 1;
                f.op("attack:connect").fail(Failure::ConnectFailed);
            }
            _ => skipped += 1,
        }
    }
    ctx.hold().await;
    // How many of them the relay has closed meanwhile.
    let mut closed_ws = 0u64;
    for c in &mut conns {
        let r = tokio::time::timeout(Duration::from_millis(1), c.reader.next()).await;
        if matches!(r, Ok(Err(_)) | Ok(Ok(Admitted::Close(_)))) {
            closed_ws += 1;
        }
    }
    let mut closed_half = 0u64;
    for s in &stalled {
        let mut b = [0u8; 256];
        if s.try_read(&mut b).is_ok() {
            // Data (an error response) or 0 (closed): the relay gave up on it.
            closed_half += 1;
        }
    }
    f.metrics.insert("idle_accepted".into(), conns.len() as f64);
    f.metrics
        .insert("idle_refused".into(), (refused + timed_out) as f64);
    f.metrics
        .insert("idle_closed_by_relay".into(), closed_ws as f64);
    f.metrics.insert("half_open".into(), stalled.len() as f64);
    f.metrics
        .insert("half_open_closed_by_relay".into(), closed_half as f64);
    f.notes.push(format!(
        "{n} idle connections: {} accepted, {refused} refused, {timed_out} timed out, {skipped} not tried before the end; {closed_ws} of the accepted closed by the relay by the end; {} half-open upgrades ({half_failed} failed to connect), {closed_half} answered or closed by the relay",
        conns.len(),
        stalled.len()
    ));
    drop(stalled);
    for c in conns {
        drop(c);
    }
    f
}

/// Random lowercase letters.
fn letters(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect()
}

/// A REQ of `filters` filters, each a list of values under `key` (an
/// array key such as `authors` or `#t`), built as text: the point is its size.
fn list_req(
    sub: &str,
    filters: usize,
    key: &str,
    values: &mut dyn FnMut() -> String,
    per: usize,
) -> Vec<u8> {
    let mut s = String::with_capacity(filters * per * 8 + 64);
    s.push_str("[\"REQ\",\"");
    s.push_str(sub);
    s.push('"');
    for _ in 0..filters {
        s.push_str(",{\"");
        s.push_str(key);
        s.push_str("\":[");
        for v in 0..per {
            if v > 0 {
                s.push(',');
            }
            s.push('"');
            s.push_str(&values());
            s.push('"');
        }
        s.push_str("]}");
    }
    s.push(']');
    s.into_bytes()
}

/// Oversized live subscriptions, then AUTH after AUTH and many small REQs.
async fn oversized_subs(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let filters = p.oversized_filters.max(1);
    let budget = p.message_bytes.max(1_000);
    let mut rng = Rng::new(ctx.seed);
    let sent: SentSubs = Arc::default();
    let mut drains = Vec::new();
    let mut writers = Vec::new();
    const CONNS: usize = 4;
    for i in 0..CONNS {
        match ctx.open(i as u64).await {
            Ok(c) => {
                let Conn { reader, writer, .. } = c;
                drains.push(tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone())));
                writers.push(writer);
            }
            Err(_) => f.op("attack:connect").fail(Failure::ConnectFailed),
        }
    }
    if writers.is_empty() {
        f.failed = Some("no attacking connection opened".into());
        return f;
    }
    // Three shapes in turn: authors (as many as fit), short `#t` values,
    // and one filter whose `#t` list fills the message.
    let authors_per = p.oversized_values.min(budget / filters / 67).max(1);
    let short_len = (budget / filters / p.oversized_values.max(1))
        .saturating_sub(3)
        .clamp(1, 16);
    let one_list = (budget / 11).max(1);
    let mut sent_reqs = 0;
    let mut bytes = 0usize;
    for r in 0..p.oversized_reqs {
        if ctx.over() {
            break;
        }
        let sub = format!("big{r}");
        let msg = match r % 3 {
            0 => list_req(
                &sub,
                filters,
                "authors",
                &mut || random_hex32(&mut rng),
                authors_per,
            ),
            1 => list_req(
                &sub,
                filters,
                "#t",
                &mut || letters(&mut rng, short_len),
                p.oversized_values,
            ),
            _ => list_req(&sub, 1, "#t", &mut || letters(&mut rng, 8), one_list),
        };
        bytes += msg.len();
        let k = writers.len();
        let w = &mut writers[r % k];
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        if w.send_text(&msg).await.is_err() {
            break;
        }
        sent_reqs += 1;
    }
    f.notes.push(format!(
        "{sent_reqs} oversized live REQs ({} MiB): {filters} filters × {authors_per} authors, {filters} filters × {} `#t` values of {short_len} letters, 1 filter × {one_list} `#t` values",
        bytes >> 20,
        p.oversized_values
    ));
    // AUTH with a fresh key each time, on a connection of its own, then small REQs.
    let auth_part = auth_flood(&ctx, &p, &mut rng, &sent).await;
    f.notes.push(auth_part);
    ctx.hold().await;
    let mut tally = Tally::default();
    for w in &mut writers {
        let _ = w.close().await;
    }
    for d in drains {
        if let Ok(t) = d.await {
            tally.merge(t);
        }
    }
    f.op("attack:eose").merge(&tally.eose);
    f.notes.push(format!(
        "relay answered the oversized REQs with: {}",
        tally.describe()
    ));
    f
}

/// Gets the relay's AUTH challenge (NIP-42) on a new connection. A relay
/// may send it on connect or only together with its first `auth-required:`
/// answer, so a REQ for the kinds NIP-42 relays withhold from anonymous
/// readers (4, 1059) is sent at once to draw it out; that subscription is
/// closed again (unless the relay closed it) before the challenge is used.
async fn challenge(conn: &mut Conn, wait: Duration) -> Option<String> {
    let sub = conn.new_sub_id("auth-probe");
    let mut msg = Vec::new();
    let filter = Filter {
        kinds: Some(vec![Kind(4), Kind(1059)]),
        limit: Some(1),
        ..Filter::new()
    };
    write::req(&mut msg, &sub, &[filter]);
    conn.send_message(&msg).await.ok()?;
    let deadline = tokio::time::Instant::now() + wait;
    let mut found = None;
    // `Some(true)`: the relay closed the probe itself; `Some(false)`: EOSE.
    let mut answered: Option<bool> = None;
    while found.is_none() || answered.is_none() {
        let Ok(Some(t)) = conn.reader.next_text_before(deadline).await else {
            break;
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Auth(c)) => found = Some(c.into_owned()),
            Ok(RelayMessage::Eose(s)) if s == sub => answered = Some(false),
            Ok(RelayMessage::Closed {
                subscription_id, ..
            }) if subscription_id == sub => answered = Some(true),
            _ => {}
        }
    }
    if answered != Some(true) {
        msg.clear();
        write::close(&mut msg, &sub);
        let _ = conn.send_message(&msg).await;
    }
    found
}

/// Fresh keys for attackers and victims, different on every run.
fn fresh_keys(rng: &mut Rng) -> Keys {
    loop {
        let mut secret = [0u8; 32];
        for chunk in secret.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        if let Some(k) = Keys::from_secret_bytes(secret) {
            return k;
        }
    }
}

/// A random generator that differs between runs (new keys and events each time).
fn run_rng(seed: u64) -> Rng {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Rng::new(seed ^ nanos)
}

fn auth_event(keys: &Keys, challenge: &str, relay: &str) -> nostrwire_event::Event {
    UnsignedEvent::new(
        keys,
        Timestamp::now(),
        Kind(22242),
        vec![
            Tag::from_strs(&["relay", relay]),
            Tag::from_strs(&["challenge", challenge]),
        ],
        "",
    )
    .sign(keys)
}

/// The URL an AUTH event should name for this relay.
fn own_url(url: &WsUrl) -> String {
    format!("ws://{}:{}{}", url.host, url.port, url.path)
}

/// `auths` AUTH events with fresh keys on one connection, then as many
/// small REQs for restricted kinds; returns a note.
async fn auth_flood(ctx: &Ctx, p: &AbuseParams, rng: &mut Rng, sent: &SentSubs) -> String {
    let Ok(mut conn) = ctx.open(99).await else {
        return "AUTH part: connection failed".into();
    };
    let wait = ctx.target().timeout.min(Duration::from_secs(2));
    let Some(ch) = challenge(&mut conn, wait).await else {
        conn.close().await;
        return "AUTH part n/a: no AUTH challenge".into();
    };
    let url = own_url(&ctx.target().url);
    let mut rng = Rng::new(rng.next_u64() ^ run_rng(0).next_u64());
    let mut msg = Vec::new();
    for _ in 0..p.auths {
        let keys = fresh_keys(&mut rng);
        msg.clear();
        write::client_auth(&mut msg, &auth_event(&keys, &ch, &url));
        conn.writer.queue_text(&msg);
    }
    for r in 0..p.auths {
        msg.clear();
        let sub = format!("small{r}");
        let filter = Filter {
            kinds: Some(vec![Kind(4), Kind(1059)]),
            limit: Some(1),
            ..Filter::new()
        };
        write::req(&mut msg, &sub, &[filter]);
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        conn.writer.queue_text(&msg);
    }
    let queued = conn.writer.queued();
    let _ = conn.writer.flush().await;
    let Conn {
        reader, mut writer, ..
    } = conn;
    let t = drain(reader, sent.clone(), ctx.stop.clone()).await;
    let _ = writer.close().await;
    format!(
        "{} AUTHs with fresh keys then {} small REQs for kinds 4/1059 ({} KiB) on one connection; answers: {}",
        p.auths,
        p.auths,
        queued >> 10,
        t.describe()
    )
}

/// One slow message, then many compressed messages that each inflate to
/// `message_bytes`.
async fn deflate_bomb(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let mut target = ctx.target().clone();
    target.url.deflate = Some(nostrwire_websocket::deflate::DeflateConfig {
        level: 9,
        server_context_takeover: false,
        client_context_takeover: false,
        min_size: 0,
    });
    let conn = match Conn::open(&target, ctx.seed).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("attacking connection failed: {e}"));
            return f;
        }
    };
    if !conn.writer.compresses() {
        f.unsupported = Some("relay declined permessage-deflate".into());
        conn.close().await;
        return f;
    }
    let Conn {
        reader, mut writer, ..
    } = conn;
    let sent: SentSubs = Arc::default();
    let drainer = tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone()));
    let mut rng = Rng::new(ctx.seed);
    // The slow message in front: a search of many terms.
    let slow = hostile_search_req("slow", p.search_terms.min(p.message_bytes / 8), &mut rng);
    sent.lock()
        .expect("sent lock")
        .insert("slow".into(), Instant::now());
    writer.queue_text(&slow);
    let _ = writer.flush().await;
    // One REQ whose single `#t` value fills the message, compressed once
    // (no context takeover: each message stands alone) and repeated.
    let head = br##"["REQ","bomb",{"#t":[""##;
    let tail = br##""]}]"##;
    let mut bomb = Vec::with_capacity(p.message_bytes);
    bomb.extend_from_slice(head);
    bomb.resize(
        p.message_bytes.saturating_sub(tail.len()).max(head.len()),
        b'a',
    );
    bomb.extend_from_slice(tail);
    writer.queue_text(&bomb);
    let frame = writer.take_queued();
    let mut sent_n = 0;
    for i in 0..p.deflate_messages {
        if ctx.over() {
            break;
        }
        writer.queue_raw(&frame);
        if (i + 1) % 100 == 0 || i + 1 == p.deflate_messages {
            if writer.flush().await.is_err() {
                break;
            }
            sent_n = i + 1;
        }
    }
    f.metrics.insert("deflate_sent".into(), sent_n as f64);
    f.notes.push(format!(
        "one search of {} terms, then {sent_n} messages of {} bytes each inflated from a {} byte frame ({} MiB inflated in all)",
        p.search_terms.min(p.message_bytes / 8),
        bomb.len(),
        frame.len(),
        (sent_n * bomb.len()) >> 20
    ));
    ctx.hold().await;
    let _ = writer.close().await;
    if let Ok(t) = drainer.await {
        f.op("attack:eose").merge(&t.eose);
        f.notes.push(format!(
            "relay answered: {}{}",
            t.describe(),
            if t.dropped {
                "; it closed the connection"
            } else {
                ""
            }
        ));
    }
    f
}

/// An EVENT message whose event object carries `keys` unknown keys besides
/// a valid signed event's fields; `escaped` writes each key with a `\u`
/// escape.
fn unknown_keys_event(event: &nostrwire_event::Event, keys: usize, escaped: bool) -> Vec<u8> {
    let mut json = Vec::new();
    event.write_json(&mut json);
    let mut out = Vec::with_capacity(keys * 17 + json.len() + 16);
    out.extend_from_slice(b"[\"EVENT\",");
    out.extend_from_slice(&json[..json.len() - 1]); // without the closing brace
    for k in 0..keys {
        if escaped {
            out.extend_from_slice(format!(",\"\\u0078{k:05}\":0").as_bytes());
        } else {
            out.extend_from_slice(format!(",\"k{k:06}\":0").as_bytes());
        }
    }
    out.extend_from_slice(b"}]");
    out
}

/// EVENT messages with tens of thousands of unknown keys, several at once,
/// again and again until the attack ends; each answer is timed.
async fn quadratic_json(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let mut rng = run_rng(ctx.seed);
    let keys = fresh_keys(&mut rng);
    // About 58,000 escaped keys (16 bytes each) or 80,000 plain ones
    // (12 bytes each) per million bytes of `message_bytes`.
    let escaped_n = (p.message_bytes / 17).max(1);
    let plain_n = (p.message_bytes * 2 / 25).max(1);
    let mut msgs = Vec::new();
    for i in 0..p.quadratic_messages.max(1) {
        let ev = UnsignedEvent::new(
            &keys,
            Timestamp::now(),
            Kind(1),
            vec![],
            format!("unknown keys {i} {}", rng.next_u64()),
        )
        .sign(&keys);
        let escaped = i % 2 == 0;
        msgs.push(Arc::new(unknown_keys_event(
            &ev,
            if escaped { escaped_n } else { plain_n },
            escaped,
        )));
    }
    f.notes.push(format!(
        "{} EVENT messages at once per round (half with {escaped_n} `\\u`-escaped unknown keys, {} bytes; half with {plain_n} plain unknown keys, {} bytes), each on its own connection, again until the end",
        msgs.len(),
        msgs[0].len(),
        msgs.get(1).map_or(0, |m| m.len())
    ));
    let timeout = ctx.target().timeout;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut handles = Vec::new();
    for (i, msg) in msgs.into_iter().enumerate() {
        let ctx = ctx.clone();
        let tally = tally.clone();
        handles.push(tokio::spawn(async move {
            let mut stats = OpStats::new();
            let mut conn: Option<Conn> = None;
            let mut round = 0u64;
            while !ctx.over() {
                round += 1;
                if conn.is_none() {
                    conn = ctx.open(i as u64 * 1_000 + round).await.ok();
                }
                let Some(c) = conn.as_mut() else {
                    stats.fail(Failure::ConnectFailed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let t0 = Instant::now();
                if c.writer.send_text(&msg).await.is_err() {
                    stats.fail(Failure::ConnectionLost);
                    conn = None;
                    continue;
                }
                let deadline = tokio::time::Instant::from_std(t0 + timeout);
                let answer = loop {
                    match timeout_at(deadline, c.reader.next()).await {
                        Err(_) => break Err(Failure::Timeout),
                        Ok(Err(_)) | Ok(Ok(Admitted::Close(_))) => {
                            break Err(Failure::ConnectionLost)
                        }
                        Ok(Ok(Admitted::Text(t))) => match RelayMessage::parse(t) {
                            Ok(RelayMessage::Auth(_)) => continue,
                            Ok(RelayMessage::Ok {
                                accepted, message, ..
                            }) => {
                                break Ok(if accepted {
                                    ("ok_true".to_string(), message.into_owned())
                                } else {
                                    (
                                        format!("ok_false:{}", message_prefix(&message)),
                                        message.into_owned(),
                                    )
                                })
                            }
                            Ok(RelayMessage::Notice(m)) => {
                                break Ok(("notice".into(), m.into_owned()))
                            }
                            Ok(_) => break Ok(("other".into(), String::new())),
                            Err(_) => break Ok(("unparseable".into(), String::new())),
                        },
                        Ok(Ok(_)) => continue,
                    }
                };
                match answer {
                    Ok((key, m)) => {
                        stats.success(t0.elapsed());
                        tally
                            .lock()
                            .expect("tally lock")
                            .add(key, (!m.is_empty()).then_some(m.as_str()));
                    }
                    Err(fail) => {
                        tally.lock().expect("tally lock").add(fail.key(), None);
                        stats.fail(fail);
                        conn = None;
                    }
                }
            }
            if let Some(c) = conn {
                c.close().await;
            }
            stats
        }));
    }
    for h in handles {
        if let Ok(s) = h.await {
            f.op("attack:answer").merge(&s);
        }
    }
    let t = tally.lock().expect("tally lock");
    if t.counts.contains_key("ok_true") {
        f.notes
            .push("the relay accepted events with unknown keys (allowed by NIP-01)".into());
    }
    f.notes.push(format!("relay answered: {}", t.describe()));
    f
}

/// A REQ for live kind-1 events with a NIP-50 search of `terms` words.
fn hostile_search_req(sub: &str, terms: usize, rng: &mut Rng) -> Vec<u8> {
    let mut search = String::with_capacity(terms * 7);
    for i in 0..terms {
        if i > 0 {
            search.push(' ');
        }
        let len = 3 + rng.below(6) as usize;
        search.push_str(&letters(rng, len));
    }
    let filter = Filter {
        kinds: Some(vec![Kind(1)]),
        search: Some(search),
        ..Filter::new()
    };
    let mut msg = Vec::with_capacity(terms * 7 + 64);
    write::req(&mut msg, sub, &[filter]);
    msg
}

/// Whether the relay answers a search for a word no event contains with
/// EOSE and nothing else; `Err(reason)` when it does not do NIP-50.
async fn search_supported(conn: &mut Conn, timeout: Duration) -> Result<(), String> {
    let term = "qxzvjkwpfbqz";
    let filter = Filter {
        kinds: Some(vec![Kind(1)]),
        search: Some(term.into()),
        limit: Some(5),
        ..Filter::new()
    };
    let sub = conn.new_sub_id("s");
    let mut msg = Vec::new();
    write::req(&mut msg, &sub, &[filter]);
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| format!("connection failed: {e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no EOSE for a one-word search".into()),
            Err(e) => return Err(format!("connection failed: {e}")),
        };
        match RelayMessage::parse(t) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if subscription_id == sub
                && !event.content().value().to_lowercase().contains(term) =>
            {
                return Err("relay ignores `search` (a word no event has matched)".into());
            }
            Ok(RelayMessage::Eose(s)) if s == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id,
                message,
            }) if subscription_id == sub => {
                return Err(format!("no NIP-50 search (CLOSED \"{message}\")"))
            }
            Ok(RelayMessage::Notice(m)) => {
                return Err(format!("no NIP-50 search (NOTICE \"{m}\")"))
            }
            _ => {}
        }
    }
    msg.clear();
    write::close(&mut msg, &sub);
    let _ = conn.writer.send_text(&msg).await;
    Ok(())
}

/// Live searches of tens of thousands of terms, left open.
async fn hostile_search(mut ctx: Ctx) -> Found {
    let mut f = Found::default();
    let p = ctx.p().clone();
    let timeout = ctx.target().timeout;
    let mut first = match ctx.open(0).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("attacking connection failed: {e}"));
            return f;
        }
    };
    if let Err(why) = search_supported(&mut first, timeout).await {
        f.unsupported = Some(why);
        first.close().await;
        return f;
    }
    let sent: SentSubs = Arc::default();
    let mut writers = Vec::new();
    let mut drains = Vec::new();
    const CONNS: usize = 4;
    let mut conns = vec![first];
    for i in 1..CONNS {
        if let Ok(c) = ctx.open(i as u64).await {
            conns.push(c);
        }
    }
    for c in conns {
        let Conn { reader, writer, .. } = c;
        drains.push(tokio::spawn(drain(reader, sent.clone(), ctx.stop.clone())));
        writers.push(writer);
    }
    let mut rng = Rng::new(ctx.seed);
    let mut bytes = 0;
    let mut n = 0;
    for i in 0..p.hostile_searches {
        if ctx.over() {
            break;
        }
        let sub = format!("hs{i}");
        let msg = hostile_search_req(&sub, p.search_terms, &mut rng);
        bytes += msg.len();
        sent.lock().expect("sent lock").insert(sub, Instant::now());
        let k = writers.len();
        if writers[i % k].send_text(&msg).await.is_err() {
            break;
        }
        n += 1;
    }
    f.notes.push(format!(
        "{n} live searches of {} terms ({} KiB each) over {} connections",
        p.search_terms,
        bytes / n.max(1) / 1024,
        writers.len()
    ));
    ctx.hold().await;
    for w in &mut writers {
        let _ = w.close().await;
    }
    let mut tally = Tally::default();
    for d in drains {
        if let Ok(t) = d.await {
            tally.merge(t);
        }
    }
    f.op("attack:eose").merge(&tally.eose);
    f.notes.push(format!(
        "relay answered the searches with: {}",
        tally.describe()
    ));
    f
}

/// Publishes one event and waits for its `OK`: `(accepted, message)`.
async fn publish_one(
    conn: &mut Conn,
    event: &nostrwire_event::Event,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let mut msg = Vec::new();
    write::client_event(&mut msg, event);
    conn.writer
        .send_text(&msg)
        .await
        .map_err(|e| e.to_string())?;
    wait_ok(conn, event.id(), timeout).await
}

async fn wait_ok(
    conn: &mut Conn,
    id: &EventId,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let t = match conn.reader.next_text_before(deadline).await {
            Ok(Some(t)) => t,
            Ok(None) => return Err("no OK within the timeout".into()),
            Err(e) => return Err(e.to_string()),
        };
        if let Ok(RelayMessage::Ok {
            event_id,
            accepted,
            message,
        }) = RelayMessage::parse(t)
        {
            if event_id == *id {
                return Ok((accepted, message.into_owned()));
            }
        }
    }
}

/// Whether a lookup by id returns the event.
async fn served(target: &Target, id: EventId) -> Result<bool, String> {
    let mut conn = Conn::open(target, 0x5e4fed)
        .await
        .map_err(|e| e.to_string())?;
    let filter = Filter {
        ids: Some(vec![id]),
        ..Filter::new()
    };
    let got = fetch_ids(&mut conn, &filter, target.timeout).await?;
    conn.close().await;
    Ok(got.contains(&id))
}

fn fmt_ok(r: &(bool, String)) -> String {
    format!("OK {} \"{}\"", r.0, r.1)
}

/// Victim publishes E and deletes it; an attacker publishes its own
/// deletion of E (and of the victim's deletion); then E is sent again.
/// E must not be served again.
async fn deletion_undo(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let target = ctx.target().clone();
    let timeout = target.timeout;
    let mut rng = run_rng(ctx.seed);
    let victim = fresh_keys(&mut rng);
    let attacker = fresh_keys(&mut rng);
    let now = Timestamp::now().as_u64();
    let at = |s: u64| Timestamp::new(now - s).unwrap_or_else(|_| Timestamp::now());
    let e = UnsignedEvent::new(
        &victim,
        at(3),
        Kind(1),
        vec![],
        format!("deletion-undo victim {}", rng.next_u64()),
    )
    .sign(&victim);
    let e_hex = e.id.to_hex();
    let deletion = |keys: &Keys, s: u64, id: &str| {
        UnsignedEvent::new(
            keys,
            at(s),
            Kind(5),
            vec![Tag::from_strs(&["e", id]), Tag::from_strs(&["k", "1"])],
            "",
        )
        .sign(keys)
    };
    let d_victim = deletion(&victim, 2, &e_hex);
    let d_attacker = deletion(&attacker, 1, &e_hex);
    let undo = deletion(&attacker, 1, &d_victim.id.to_hex());
    let steps = async {
        let mut conn = Conn::open(&target, ctx.seed)
            .await
            .map_err(|e| e.to_string())?;
        let r = publish_one(&mut conn, &e, timeout).await?;
        if !r.0 {
            return Ok::<_, String>(Err(format!(
                "relay refused the victim's event ({})",
                fmt_ok(&r)
            )));
        }
        if !served(&target, e.id).await? {
            return Ok(Err("the victim's event was not served after OK true".into()));
        }
        let r = publish_one(&mut conn, &d_victim, timeout).await?;
        if !r.0 || served(&target, e.id).await? {
            return Ok(Err(format!(
                "relay does not honour NIP-09 deletion (victim's kind 5: {}; E still served)",
                fmt_ok(&r)
            )));
        }
        let mut attacker_conn = Conn::open(&target, ctx.seed ^ 1)
            .await
            .map_err(|e| e.to_string())?;
        let a1 = publish_one(&mut attacker_conn, &d_attacker, timeout).await?;
        let a2 = publish_one(&mut attacker_conn, &undo, timeout).await?;
        attacker_conn.close().await;
        let mut again = Conn::open(&target, ctx.seed ^ 2)
            .await
            .map_err(|e| e.to_string())?;
        let rebroadcast = publish_one(&mut again, &e, timeout).await?;
        again.close().await;
        conn.close().await;
        let back = served(&target, e.id).await?;
        Ok(Ok((a1, a2, rebroadcast, back)))
    };
    match steps.await {
        Err(why) => f.failed = Some(format!("could not complete: {why}")),
        Ok(Err(why)) => f.unsupported = Some(why),
        Ok(Ok((a1, a2, rebroadcast, back))) => {
            f.metrics.insert(
                "deleted_event_served_again".into(),
                f64::from(u8::from(back)),
            );
            f.notes.push(format!(
                "attacker's kind 5 of E: {}; attacker's kind 5 of the victim's deletion: {}; E sent again: {}",
                fmt_ok(&a1),
                fmt_ok(&a2),
                fmt_ok(&rebroadcast)
            ));
            if back {
                f.failed = Some("deleted event served again".into());
            } else {
                f.passed = Some("deleted event not served again".into());
            }
        }
    }
    f
}

/// An AUTH event that names another relay, answered to our challenge.
async fn auth_relayed(ctx: Ctx) -> Found {
    let mut f = Found::default();
    let target = ctx.target().clone();
    let timeout = target.timeout;
    let mut rng = run_rng(ctx.seed);
    let mut conn = match Conn::open(&target, ctx.seed).await {
        Ok(c) => c,
        Err(e) => {
            f.failed = Some(format!("connection failed: {e}"));
            return f;
        }
    };
    let Some(ch) = challenge(&mut conn, timeout.min(Duration::from_secs(3))).await else {
        f.unsupported = Some("no AUTH challenge (NIP-42)".into());
        conn.close().await;
        return f;
    };
    let keys = fresh_keys(&mut rng);
    let evil = auth_event(&keys, &ch, "wss://evil.example/");
    let mut msg = Vec::new();
    write::client_auth(&mut msg, &evil);
    let answer = match conn.writer.send_text(&msg).await {
        Ok(()) => wait_ok(&mut conn, &evil.id, timeout).await,
        Err(e) => Err(e.to_string()),
    };
    conn.close().await;
    // The control: the same AUTH naming this relay, on another connection.
    let control = async {
        let mut c = Conn::open(&target, ctx.seed ^ 1)
            .await
            .map_err(|e| e.to_string())?;
        let ch = challenge(&mut c, timeout.min(Duration::from_secs(3)))
            .await
            .ok_or("no challenge")?;
        let ev = auth_event(&fresh_keys(&mut rng), &ch, &own_url(&target.url));
        let mut msg = Vec::new();
        write::client_auth(&mut msg, &ev);
        c.writer.send_text(&msg).await.map_err(|e| e.to_string())?;
        let r = wait_ok(&mut c, &ev.id, timeout).await;
        c.close().await;
        r
    }
    .await;
    f.notes.push(format!(
        "control AUTH naming {}: {}",
        own_url(&target.url),
        match &control {
            Ok(r) => fmt_ok(r),
            Err(e) => e.clone(),
        }
    ));
    match answer {
        Ok(r) if r.0 => {
            f.metrics.insert("auth_relayed_accepted".into(), 1.0);
            f.failed = Some(format!(
                "AUTH naming wss://evil.example/ accepted ({})",
                fmt_ok(&r)
            ));
        }
        Ok(r) => {
            f.metrics.insert("auth_relayed_accepted".into(), 0.0);
            f.passed = Some(format!("refused ({})", fmt_ok(&r)));
        }
        Err(why) => f.failed = Some(format!("no answer to AUTH: {why}")),
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_prefixed() {
        for a in Attack::ALL {
            assert!(a.name().starts_with("abuse-"));
            assert_eq!(format!("abuse-{}", a.short_name()), a.name());
        }
    }

    #[test]
    fn hostile_messages_have_their_sizes() {
        let keys = Keys::derive(1, 1);
        let ev = UnsignedEvent::new(&keys, Timestamp::now(), Kind(1), vec![], "x").sign(&keys);
        let esc = unknown_keys_event(&ev, 58_000, true);
        assert!(esc.len() > 900_000 && esc.len() < 1 << 20, "{}", esc.len());
        let plain = unknown_keys_event(&ev, 80_000, false);
        assert!(
            plain.len() > 900_000 && plain.len() < 1 << 20,
            "{}",
            plain.len()
        );
        let mut rng = Rng::new(1);
        let req = hostile_search_req("s", 40_000, &mut rng);
        assert!(req.len() > 200_000);
        let big = list_req("b", 32, "#t", &mut || letters(&mut rng, 3), 5_000);
        assert!(big.len() > 900_000 && big.len() < 1 << 20, "{}", big.len());
        assert!(serde_json::from_slice::<serde_json::Value>(&big).is_ok());
        assert!(serde_json::from_slice::<serde_json::Value>(&esc).is_ok());
    }
}
