//! How fast the tester itself is: publish against a relay that only sends OK.
//!
//! The stub runs in a child process (this test binary, re-invoked), so the
//! client CPU time measured here is the tester's alone. Run with
//! `cargo test --release -p nostrwire-loadgen --test throughput -- --ignored --nocapture`.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Behavior;
use nostrwire_loadgen::{testdata, Scenario, Settings};

const ADDR_FILE: &str = "NOSTRWIRE_STUB_ADDR_FILE";

/// The child side: serve an OK-only stub for a bounded time, then exit.
#[test]
#[ignore = "the stub's own process, started by publish_throughput_against_ok_only_stub"]
fn ok_only_stub_process() {
    let Ok(path) = std::env::var(ADDR_FILE) else {
        return;
    };
    let secs: u64 = std::env::var("NOSTRWIRE_STUB_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stub = common::start(Behavior::OkOnly).await;
        std::fs::write(&path, &stub.url).unwrap();
        tokio::time::sleep(Duration::from_secs(secs)).await;
    });
}

#[test]
#[ignore = "a measurement, not a check: --release -- --ignored --nocapture"]
fn publish_throughput_against_ok_only_stub() {
    let dir = std::env::temp_dir().join(format!("nostrwire-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let addr_file: PathBuf = dir.join("addr");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "ok_only_stub_process",
            "--nocapture",
        ])
        .env(ADDR_FILE, &addr_file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let url = loop {
        if let Ok(u) = std::fs::read_to_string(&addr_file) {
            if !u.is_empty() {
                break u;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "stub did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let count: usize = std::env::var("NOSTRWIRE_THROUGHPUT_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let mut s = Settings::new(url);
    s.scenarios = vec![Scenario::Publish, Scenario::Burst, Scenario::PublishOpen];
    s.count = count;
    s.connections = 32;
    s.burst_size = 200;
    s.burst_gap = Duration::ZERO;
    s.rate = 1e9; // open loop as fast as the schedule allows: every event is due at once
    s.duration = Duration::from_secs(60);
    s.kind_mix = testdata("kind-mix.tsv");
    s.corpus = testdata("real-events.jsonl");
    s.progress = false;
    let r = nostrwire_loadgen::run(&s);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let r = r.unwrap();
    println!("{}", r.host.line());
    for t in &r.totals {
        let op = &t.outcome.ops["publish"];
        let secs = t.outcome.elapsed.as_secs_f64();
        let cpu = (t.client_cpu.user + t.client_cpu.system).as_secs_f64();
        println!(
            "{:<13} {:>7} ok {:>3} failed in {:>6.2} s = {:>8.0} events/s; client CPU {:.2} s ({:.2} cores) = {:>8.0} events per client CPU-second; p50 {:.2} ms p99 {:.2} ms",
            t.scenario.name(),
            op.successes,
            op.failure_count(),
            secs,
            op.successes as f64 / secs,
            cpu,
            t.client_cpu_share(),
            op.successes as f64 / cpu.max(1e-9),
            op.percentiles().p50,
            op.percentiles().p99,
        );
        assert_eq!(op.failure_count(), 0, "{:?}", op.failures);
    }
}
