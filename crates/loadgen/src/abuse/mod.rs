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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::{
    EventId, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, TagCondition, Timestamp,
    UnsignedEvent,
};
use tokio::io::AsyncWriteExt;
use tokio::sync::{watch, Semaphore};
use tokio::time::timeout_at;

pub use crate::attack::{AbuseParams, Attack};
use crate::client::{Anomalies, Conn, Query, QueryOutcome, Target};
use crate::rng::{random_hex32, Rng};
use crate::scenario::{self, Outcome, Run, Status};
use crate::stats::{message_prefix, Failure, OpStats};
use crate::ws::{Admitted, WsReader, WsUrl};
use crate::Error;

mod parsing;
mod probe;
mod protocol;
mod resources;
mod spread;

use parsing::*;
use probe::*;
use protocol::*;
use resources::*;
use spread::*;

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
    if attack.needs_seed() && !run.seed_events.is_empty() {
        scenario::seed_events(run, &mut out).await;
    }
    // The relay's memory with its stored events, before the attack.
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
    // What the relay kept once the attack was over (the allocator may
    // hold on to what the attack made it take).
    if let Some(pid) = pid {
        if p.settle_seconds > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(p.settle_seconds)).await;
        }
        if let Some(k) = crate::host::rss_anon_kib(pid) {
            out.metrics
                .insert("relay_rss_anon_after_kib".into(), k as f64);
        }
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
        Attack::SpreadSlowReaders => spread_slow_readers(ctx).await,
        Attack::SpreadOversizedSubs => spread_oversized_subs(ctx).await,
        Attack::SpreadHeavyQueries => spread_heavy_queries(ctx).await,
        Attack::SpreadIpv6_48 => spread_ipv6_48(ctx).await,
    }
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
