//! The `sync` scenario against our own relay (which speaks NIP-77) and
//! against a stub that does not.

mod common;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use nostrwire_loadgen::client::Target;
use nostrwire_loadgen::runner;
use nostrwire_loadgen::scenario::{Params, Run, Scenario, Status};
use nostrwire_loadgen::workload::Prepared;
use nostrwire_loadgen::ws::{Counters, WsUrl};

fn events(stream: u64, count: usize) -> Vec<Prepared> {
    common::mixed_events(5, stream, count)
}

fn run(url: &str, own: Vec<Prepared>, seeds: Vec<Prepared>) -> Run {
    Run {
        target: Target {
            url: WsUrl::parse(url).unwrap(),
            counters: Arc::new(Counters::default()),
            timeout: Duration::from_secs(5),
        },
        params: Params {
            connections: 2,
            duration: Duration::from_secs(30),
            rate: 1_000.0,
            burst_size: 10,
            burst_gap: Duration::from_millis(5),
            subscribers: 2,
            idle_connections: 2,
            queries: 4,
            seed: 1,
            abuse: Default::default(),
        },
        events: Arc::new(own),
        seed_events: Arc::new(seeds),
        progress: Arc::new(AtomicU64::new(0)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_finds_the_differences_on_a_nip77_relay() {
    let (relay, _dir) = common::start_relay();
    let url = format!("ws://{}", relay.local_addr());
    let o = runner::run_scenario(Scenario::Sync, &run(&url, events(2, 30), events(1, 300))).await;
    assert_eq!(o.status, Status::Completed, "{:?}", o.notes);
    for op in ["sync:negentropy", "sync:download"] {
        let s = &o.ops[op];
        assert_eq!(
            (s.successes, s.failures.len()),
            (4, 0),
            "{op}: {:?} {:?}",
            s.failures,
            o.anomalies
        );
    }
    let lacks = o.metrics["client_lacks"];
    assert!(lacks >= 20.0, "{lacks}");
    // Fetching only the differences moves fewer bytes than the whole window.
    assert!(
        o.metrics["negentropy_bytes_per_sync"] < o.metrics["download_bytes_per_sync"],
        "{:?}",
        o.metrics
    );
    relay.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_is_unsupported_without_nip77() {
    let stub = common::start(common::Behavior::Normal).await;
    let r = run(&stub.url, events(4, 5), events(3, 40));
    let o = runner::run_scenario(Scenario::Sync, &r).await;
    assert!(matches!(o.status, Status::Unsupported(_)), "{:?}", o.status);
}
