//! The tester against a stub relay over real sockets on 127.0.0.1.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use common::Behavior;
use nostrwire_event::{Tag, Timestamp};
use nostrwire_loadgen::client::Target;
use nostrwire_loadgen::runner;
use nostrwire_loadgen::scenario::{Outcome, Params, Run, Scenario, Status};
use nostrwire_loadgen::workload::{self, GenSpec, KindMix, Prepared, Shapes};
use nostrwire_loadgen::ws::{Counters, WsUrl};
use nostrwire_loadgen::{testdata, Error, Settings};

fn events(stream: u64, count: usize, extra_tag: Option<Tag>) -> Vec<Prepared> {
    let keys = workload::authors(9, 10);
    let mix = KindMix::load(&testdata("kind-mix.tsv")).unwrap();
    let shapes = Shapes::load(&testdata("real-events.jsonl")).unwrap();
    let spec = GenSpec {
        seed: 9,
        stream,
        count,
        newest: Timestamp::now(),
        extra_tag,
    };
    workload::mixed_events(&spec, &keys, &mix, &shapes)
}

fn params() -> Params {
    Params {
        connections: 3,
        duration: Duration::from_secs(20),
        rate: 2_000.0,
        burst_size: 25,
        burst_gap: Duration::from_millis(5),
        subscribers: 4,
        idle_connections: 40,
        queries: 60,
        seed: 1,
        abuse: Default::default(),
    }
}

fn run_with(
    url: &str,
    timeout: Duration,
    params: Params,
    ev: Vec<Prepared>,
    seeds: Vec<Prepared>,
) -> Run {
    Run {
        target: Target {
            url: WsUrl::parse(url).unwrap(),
            counters: Arc::new(Counters::default()),
            timeout,
        },
        params,
        events: Arc::new(ev),
        seed_events: Arc::new(seeds),
        progress: Arc::new(AtomicU64::new(0)),
    }
}

fn only_failure(o: &Outcome, op: &str) -> (String, u64) {
    let s = &o.ops[op];
    assert_eq!(s.failures.len(), 1, "{:?}", s.failures);
    let (k, v) = s.failures.iter().next().unwrap();
    (k.clone(), *v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_counts_every_ok_by_id() {
    let stub = common::start(Behavior::Normal).await;
    let ev = events(1, 200, None);
    let sent_bytes: usize = ev.iter().map(|p| p.message.len()).sum();
    let run = run_with(&stub.url, Duration::from_secs(5), params(), ev, vec![]);
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    let s = &o.ops["publish"];
    assert_eq!(s.successes, 200);
    assert_eq!(s.failure_count(), 0);
    assert_eq!(stub.stored(), 200);
    assert_eq!(s.latency_us.len(), 200);
    let (bytes_in, bytes_out) = run.target.counters.snapshot();
    assert!(
        bytes_out as usize > sent_bytes,
        "frames and handshakes add to the payload"
    );
    assert!(bytes_in > 200 * 70, "each OK is at least 70 bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_is_a_timeout_not_a_success() {
    let stub = common::start(Behavior::Silent).await;
    let mut p = params();
    p.connections = 2;
    let run = run_with(
        &stub.url,
        Duration::from_millis(150),
        p,
        events(2, 4, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    assert_eq!(o.ops["publish"].successes, 0);
    assert_eq!(only_failure(&o, "publish"), ("timeout".into(), 4));
    assert!(o.ops["publish"].latency_us.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_is_never_an_ok() {
    let stub = common::start(Behavior::Closed).await;
    let mut p = params();
    p.connections = 1;
    let run = run_with(
        &stub.url,
        Duration::from_millis(150),
        p,
        events(3, 3, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    assert_eq!(o.ops["publish"].successes, 0);
    assert_eq!(only_failure(&o, "publish"), ("timeout".into(), 3));
    assert_eq!(o.anomalies.counts["unmatched_closed"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ok_for_another_id_does_not_count() {
    let stub = common::start(Behavior::WrongId).await;
    let mut p = params();
    p.connections = 1;
    let run = run_with(
        &stub.url,
        Duration::from_millis(150),
        p,
        events(4, 3, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    assert_eq!(o.ops["publish"].successes, 0);
    assert_eq!(only_failure(&o, "publish"), ("timeout".into(), 3));
    assert_eq!(o.anomalies.counts["unmatched_ok"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_are_counted_by_reason() {
    let stub = common::start(Behavior::Reject).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(2),
        params(),
        events(5, 9, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    assert_eq!(only_failure(&o, "publish"), ("rejected:blocked".into(), 9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_are_kept_apart() {
    let stub = common::start(Behavior::Noisy).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(2),
        params(),
        events(6, 12, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Publish, &run).await;
    assert_eq!(o.ops["publish"].successes, 12);
    assert_eq!(o.anomalies.counts["notice"], 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_bursts_survive_coalesced_and_split_frames() {
    for behavior in [Behavior::Normal, Behavior::Dribble] {
        let stub = common::start(behavior).await;
        let run = run_with(
            &stub.url,
            Duration::from_secs(5),
            params(),
            events(7, 300, None),
            vec![],
        );
        let o = runner::run_scenario(Scenario::Burst, &run).await;
        let s = &o.ops["publish"];
        assert_eq!(
            (s.successes, s.failure_count()),
            (300, 0),
            "{behavior:?}: {:?}",
            s.failures
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_measures_every_event() {
    let stub = common::start(Behavior::Normal).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        events(8, 400, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::PublishOpen, &run).await;
    let s = &o.ops["publish"];
    assert_eq!(
        (s.successes, s.failure_count()),
        (400, 0),
        "{:?}",
        s.failures
    );
    // 400 events at 2,000/s take at least 0.2 s of schedule.
    assert!(o.elapsed >= Duration::from_millis(195), "{:?}", o.elapsed);
    assert_eq!(o.metrics["offered_rate"], 2_000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_counts_silence_as_timeouts() {
    let stub = common::start(Behavior::Silent).await;
    let run = run_with(
        &stub.url,
        Duration::from_millis(200),
        params(),
        events(9, 30, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::PublishOpen, &run).await;
    assert_eq!(only_failure(&o, "publish"), ("timeout".into(), 30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_are_checked_against_their_filters() {
    let stub = common::start(Behavior::Normal).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        vec![],
        events(10, 150, None),
    );
    let o = runner::run_scenario(Scenario::Query, &run).await;
    assert_eq!(o.ops["seed"].successes, 150);
    let mut total = 0;
    for (label, s) in &o.ops {
        assert_eq!(s.failure_count(), 0, "{label}: {:?}", s.failures);
        if label.starts_with("query:") {
            total += s.successes;
        }
    }
    assert_eq!(total, 60);
    for label in [
        "query:kind1-limit100",
        "query:author",
        "query:id",
        "query:limit10",
    ] {
        let s = &o.ops[label];
        assert!(s.successes > 0, "{label}");
        assert!(s.events_received > 0, "{label}");
        // Every returned event message is counted in bytes, at least the
        // id, pubkey and signature in hex.
        assert!(s.bytes_received >= s.events_received * 256, "{label}");
    }
    assert_eq!(o.ops["seed"].bytes_received, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_results_are_failures() {
    let stub = common::start(Behavior::WrongResults).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        vec![],
        events(11, 60, None),
    );
    let o = runner::run_scenario(Scenario::Query, &run).await;
    let author = &o.ops["query:author"];
    assert_eq!(author.successes, 0);
    assert!(author.failures["wrong_result"] > 0);
    assert!(o.anomalies.samples["wrong_result"].contains("returned for {"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_subscriptions_are_failures() {
    let stub = common::start(Behavior::Closed).await;
    let mut p = params();
    p.queries = 6;
    p.connections = 1;
    let mut o = Outcome::clone(
        &runner::run_scenario(
            Scenario::Mixed,
            &run_with(
                &stub.url,
                Duration::from_millis(100),
                p,
                events(12, 6, None),
                vec![],
            ),
        )
        .await,
    );
    let q = o.ops.remove("query").unwrap();
    assert_eq!(q.successes, 0);
    assert_eq!(q.failures["closed:unsupported"], 2);
    assert_eq!(o.ops["publish"].successes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_and_concurrent_run_clean() {
    let stub = common::start(Behavior::Normal).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        events(13, 90, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Mixed, &run).await;
    // Every third operation of a connection is a query; replaceable events
    // go by author, so connections get slightly different shares.
    let (p, q) = (o.ops["publish"].successes, o.ops["query"].successes);
    assert_eq!(p + q, 90);
    assert!((27..=31).contains(&q), "{q} queries");
    assert_eq!(
        o.ops["publish"].failure_count() + o.ops["query"].failure_count(),
        0
    );
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        events(14, 200, None),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Concurrent, &run).await;
    assert_eq!(o.ops["publish"].successes, 200);
    let reads: u64 = o
        .ops
        .iter()
        .filter(|(l, _)| l.starts_with("query"))
        .map(|(_, s)| s.successes)
        .sum();
    assert!(reads > 0);
    for s in o.ops.values() {
        assert_eq!(s.failure_count(), 0, "{:?}", s.failures);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_times_every_delivery() {
    let stub = common::start(Behavior::Normal).await;
    let marker = Tag::from_strs(&["t", "fanout-test"]);
    let ev: Vec<Prepared> = events(15, 40, Some(marker));
    let run = run_with(&stub.url, Duration::from_secs(5), params(), ev, vec![]);
    let o = runner::run_scenario(Scenario::Fanout, &run).await;
    assert_eq!(o.ops["publish"].successes, 40);
    let d = &o.ops["delivery"];
    assert_eq!(
        (d.successes, d.failure_count()),
        (40 * 4, 0),
        "{:?}",
        d.failures
    );
    assert_eq!(o.metrics["subscribers"], 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_counts_missed_deliveries() {
    // The stub delivers nothing live when it answers REQs with CLOSED, so use
    // a relay that stores but whose subscribers are never fed: Silent never
    // sends EOSE either, which makes every subscription fail instead.
    let stub = common::start(Behavior::Silent).await;
    let marker = Tag::from_strs(&["t", "fanout-silent"]);
    let mut p = params();
    p.subscribers = 2;
    let run = run_with(
        &stub.url,
        Duration::from_millis(150),
        p,
        events(16, 5, Some(marker)),
        vec![],
    );
    let o = runner::run_scenario(Scenario::Fanout, &run).await;
    assert_eq!(o.ops["subscribe"].failures["timeout"], 2);
    assert_eq!(o.ops["publish"].failures["timeout"], 5);
    assert_eq!(o.ops.get("delivery").map_or(0, |d| d.successes), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_lists_are_published_and_read_back() {
    let stub = common::start(Behavior::Normal).await;
    let keys = workload::authors(3, 3);
    let shapes = Shapes::load(&testdata("real-events.jsonl")).unwrap();
    let big = shapes.with_min_tags(3, 1000);
    let spec = GenSpec {
        seed: 3,
        stream: 0,
        count: 6,
        newest: Timestamp::now(),
        extra_tag: None,
    };
    let ev = workload::generate(&spec, &keys, |rng| {
        let s = big[rng.below(big.len() as u64) as usize];
        (3, s.tags.clone(), s.content.clone())
    });
    assert!(ev.iter().all(|p| p.event.tags.len() >= 1000));
    let run = run_with(&stub.url, Duration::from_secs(5), params(), ev, vec![]);
    let o = runner::run_scenario(Scenario::Large, &run).await;
    assert_eq!(o.ops["publish"].successes, 6);
    let r = &o.ops["read-back"];
    assert!(
        r.successes >= 1 && r.failure_count() == 0,
        "{:?}",
        r.failures
    );
    assert!(o.metrics["mean_tags"] >= 1000.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_relay_memory() {
    let stub = common::start(Behavior::Normal).await;
    let run = run_with(&stub.url, Duration::from_secs(5), params(), vec![], vec![]);
    let o = runner::run_scenario(Scenario::Connections, &run).await;
    assert_eq!(o.ops["connect"].successes, 40);
    assert_eq!(o.metrics["open_connections"], 40.0);
    // The stub listens in this process, so its memory is found.
    assert!(
        o.metrics.contains_key("relay_rss_open_kib"),
        "{:?}",
        o.notes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_is_unsupported_when_refused() {
    let stub = common::start(Behavior::NoSearch).await;
    let seeds: Vec<Prepared> = events(17, 20, None);
    let run = run_with(&stub.url, Duration::from_secs(2), params(), vec![], seeds);
    let o = runner::run_scenario(Scenario::Search, &run).await;
    match &o.status {
        Status::Unsupported(why) => assert!(why.contains("CLOSED"), "{why}"),
        other => panic!("expected unsupported, got {other:?}"),
    }
    // A relay that ignores `search` returns events without the term.
    let stub = common::start(Behavior::Normal).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(2),
        params(),
        vec![],
        events(18, 20, None),
    );
    let o = runner::run_scenario(Scenario::Search, &run).await;
    assert!(matches!(o.status, Status::Unsupported(_)), "{:?}", o.status);
}

#[test]
fn whole_run_with_comparison_and_reports() {
    let a = common::start_in_thread(Behavior::Normal);
    let b = common::start_in_thread(Behavior::Normal);
    let mut s = Settings::new(a.url.clone());
    s.relays.push(b.url.clone());
    s.scenarios = vec![Scenario::Publish, Scenario::Query];
    s.count = 120;
    s.seed_events = 50;
    s.rounds = 2;
    s.connections = 2;
    s.kind_mix = testdata("kind-mix.tsv");
    s.corpus = testdata("real-events.jsonl");
    s.progress = false;
    let r = nostrwire_loadgen::run(&s).unwrap();
    assert_eq!(r.rounds.len(), 2 * 2 * 2);
    // Interleaved: A B A B for each scenario.
    let order: Vec<&str> = r.rounds.iter().map(|x| x.relay.as_str()).collect();
    assert_eq!(
        &order[..4],
        &[
            a.url.as_str(),
            b.url.as_str(),
            a.url.as_str(),
            b.url.as_str()
        ]
    );
    assert_eq!(r.totals.len(), 4);
    let publish_a = &r.totals[0];
    assert_eq!(publish_a.outcome.ops["publish"].successes, 240);
    assert_eq!(publish_a.rounds_merged, 2);
    // Each relay got each round's events once: 2 × (120 publish + 50 seed).
    assert_eq!(a.stored(), 340);
    assert_eq!(b.stored(), 340);
    let ratios = nostrwire_loadgen::report::ratios(&r);
    let pr: Vec<_> = ratios.iter().filter(|x| x.scenario == "publish").collect();
    assert_eq!(pr.len(), 2);
    assert_eq!(pr[0].throughput, Some(1.0));
    assert!(pr[1].throughput.unwrap() > 0.0);
    assert_eq!(pr[1].round_throughputs.len(), 2);
    let json = serde_json::to_value(nostrwire_loadgen::report::json(&r)).unwrap();
    assert_eq!(json["settings"]["count"], 120);
    assert!(json["host"]["cpus"].as_u64().unwrap() >= 1);
    assert!(
        json["totals"][0]["ops"]["publish"]["latency_ms"]["p99"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let table = nostrwire_loadgen::report::table(&r);
    assert!(table.contains("ratios to"), "{table}");
    let md = nostrwire_loadgen::report::markdown(&r, Some("chart.svg"));
    assert!(md.contains("| publish |") && md.contains("chart.svg"));
    let svg = nostrwire_loadgen::report::svg(&r);
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

#[test]
fn unreachable_relay_is_an_error_before_any_work() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut s = Settings::new(format!("ws://127.0.0.1:{port}"));
    s.kind_mix = testdata("kind-mix.tsv");
    s.corpus = testdata("real-events.jsonl");
    s.timeout = Duration::from_millis(500);
    s.progress = false;
    assert!(matches!(
        nostrwire_loadgen::run(&s),
        Err(Error::Unreachable { .. })
    ));
    s.relays = vec!["http://127.0.0.1:1".into()];
    assert!(matches!(nostrwire_loadgen::run(&s), Err(Error::Usage(_))));
}

#[test]
fn replay_sends_the_file_once() {
    let stub = common::start_in_thread(Behavior::Normal);
    let mut s = Settings::new(stub.url.clone());
    s.replay = Some(testdata("real-events.jsonl"));
    s.scenarios = vec![Scenario::Publish, Scenario::Burst];
    s.count = 600;
    s.kind_mix = testdata("kind-mix.tsv");
    s.corpus = testdata("real-events.jsonl");
    s.progress = false;
    let r = nostrwire_loadgen::run(&s).unwrap();
    assert_eq!(r.totals[0].outcome.ops["publish"].successes, 600);
    // The file has 1,001 events: the second scenario gets the remaining 401.
    assert_eq!(r.totals[1].outcome.ops["publish"].successes, 401);
    assert_eq!(stub.stored(), 1001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_beyond_the_limit_are_reported_not_failed() {
    let stub = common::start(Behavior::IgnoreLimit).await;
    let run = run_with(
        &stub.url,
        Duration::from_secs(5),
        params(),
        vec![],
        events(19, 120, None),
    );
    let o = runner::run_scenario(Scenario::Query, &run).await;
    let s = &o.ops["query:limit10"];
    assert_eq!(s.failure_count(), 0, "{:?}", s.failures);
    assert!(
        s.events_received > 10 * s.successes,
        "every answer holds all 120 events"
    );
    assert!(o.anomalies.counts["over_limit"] >= s.successes);
}
