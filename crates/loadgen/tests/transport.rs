//! The publish and query scenarios over the binary transports
//! (`binary+ws://`, `v2+ws://`) against our relay, next to the same run
//! over JSON, and the dump scenario with and without permessage-deflate.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nostrwire_loadgen::client::Target;
use nostrwire_loadgen::runner;
use nostrwire_loadgen::scenario::{Outcome, Params, Run, Scenario, Status};
use nostrwire_loadgen::workload::Prepared;
use nostrwire_loadgen::ws::{Counters, WsUrl};

fn events(stream: u64, count: usize) -> Vec<Prepared> {
    common::mixed_events(7, stream, count)
}

async fn run(
    url: &str,
    sc: Scenario,
    own: Vec<Prepared>,
    seeds: Vec<Prepared>,
) -> (Outcome, u64, u64) {
    let counters = Arc::new(Counters::default());
    let r = Run {
        target: Target {
            url: WsUrl::parse(url).unwrap(),
            counters: counters.clone(),
            timeout: Duration::from_secs(10),
        },
        params: Params {
            connections: 2,
            duration: Duration::from_secs(60),
            rate: 1_000.0,
            burst_size: 10,
            burst_gap: Duration::from_millis(5),
            subscribers: 2,
            idle_connections: 2,
            queries: 12,
            seed: 1,
            abuse: Default::default(),
        },
        events: Arc::new(own),
        seed_events: Arc::new(seeds),
        progress: Arc::new(AtomicU64::new(0)),
    };
    let o = runner::run_scenario(sc, &r).await;
    (
        o,
        counters.bytes_out.load(Ordering::Relaxed),
        counters.bytes_in.load(Ordering::Relaxed),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_query_over_both_transports() {
    // The same events through each transport, each into a fresh relay.
    let mut publish_bytes = Vec::new();
    for prefix in ["", "binary+", "v2+"] {
        let (relay, _dir) = common::start_relay();
        let url = format!("{prefix}ws://{}", relay.local_addr());
        let (o, out, _) = run(&url, Scenario::Publish, events(1, 200), vec![]).await;
        assert_eq!(o.status, Status::Completed, "{:?}", o.notes);
        let s = &o.ops["publish"];
        assert_eq!(
            (s.successes, s.failures.len()),
            (200, 0),
            "{url}: {:?} {:?}",
            s.failures,
            o.anomalies
        );
        publish_bytes.push(out);

        let (o, _, _) = run(&url, Scenario::Query, vec![], events(3, 150)).await;
        assert_eq!(o.status, Status::Completed, "{:?}", o.notes);
        // Seeding after the publish run may find newer replaceable events
        // already stored; only the queries must be clean.
        for (label, s) in o.ops.iter().filter(|(l, _)| l.starts_with("query")) {
            assert!(
                s.failures.is_empty(),
                "{url} {label}: {:?} {:?}",
                s.failures,
                o.anomalies
            );
        }
        let returned: u64 = o.ops.values().map(|s| s.events_received).sum();
        assert!(returned > 0, "{url}: no events returned");
        relay.shutdown();
    }
    // The nwb frames are smaller than the JSON messages for the same events.
    assert!(publish_bytes[1] < publish_bytes[0], "{publish_bytes:?}");
    assert!(publish_bytes[2] < publish_bytes[0], "{publish_bytes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_returns_the_same_events_with_fewer_bytes_under_deflate() {
    let (relay, _dir) = common::start_relay();
    let addr = relay.local_addr();
    let seeds = events(5, 300);
    let mut received = Vec::new();
    for prefix in ["", "deflate+", "deflate-nct+", "binary+deflate+", "v2+"] {
        let url = format!("{prefix}ws://{addr}");
        let (o, _, bytes_in) = run(&url, Scenario::Dump, vec![], seeds.clone()).await;
        assert_eq!(o.status, Status::Completed, "{:?}", o.notes);
        let s = &o.ops["query:limit1000"];
        assert_eq!(
            (s.successes, s.failures.len()),
            (12, 0),
            "{url}: {:?} {:?}",
            s.failures,
            o.anomalies
        );
        assert!(
            s.events_received >= 12 * 200,
            "{url}: {}",
            s.events_received
        );
        received.push((url, s.events_received, bytes_in));
    }
    // Same answers; compressed ones smaller (the seeding re-publishes the
    // same events, so only the REQ answers differ).
    let (_, plain_events, plain_bytes) = received[0].clone();
    for (url, events, bytes) in &received[1..] {
        assert_eq!(*events, plain_events, "{url}");
        assert!(
            *bytes < plain_bytes * 3 / 4,
            "{url}: {bytes} vs {plain_bytes}"
        );
    }
    relay.shutdown();
}

#[test]
fn binary_relays_refuse_scenarios_that_cannot_use_the_transport() {
    let mut s = nostrwire_loadgen::runner::Settings::new("binary+ws://127.0.0.1:1");
    s.scenarios = vec![Scenario::Burst];
    let err = s.validate().unwrap_err().to_string();
    assert!(err.contains("binary transport"), "{err}");
    s.scenarios = vec![Scenario::Publish, Scenario::Query];
    s.validate().unwrap();
}
