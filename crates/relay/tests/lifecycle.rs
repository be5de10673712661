//! How a relay rests and stops: an idle relay's threads sleep until there is
//! work (none wakes up to look for any), and stopping it answers what was
//! published and leaves every acknowledged event in the database.
//!
//! Wakeups are read from Linux's per-thread count of voluntary context
//! switches (`/proc/self/task/*/status`), so the tests in this file run one
//! at a time: the relay's threads are told apart from others by name only.

mod support;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use nostrwire_event::Keys;
use support::{event, filter, now, Client, TestRelay};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Thread names (as `comm` holds them: 15 bytes at most) of the relay's
/// roles: query and ingest workers, writer, fan-out, the sockets' runtime.
fn relay_thread(name: &str) -> bool {
    [
        "query-",
        "ingest-",
        "writer",
        "fanout",
        "sockets",
        "tokio-runtime-w",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// Each of the relay's threads: (its name, how often it has gone to sleep
/// and been woken so far).
fn wakeups() -> HashMap<u64, (String, u64)> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let path = entry.path();
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        let name = name.trim().to_string();
        if !relay_thread(&name) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        out.insert(tid, (name, switches));
    }
    out
}

#[test]
fn an_idle_relay_does_not_wake_up_to_poll() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let relay = TestRelay::start();
    // Some work first, then the client leaves and the relay rests.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut c = Client::connect(&relay.url).await;
        let keys = Keys::derive(70, 1);
        assert!(
            c.publish(&event(&keys, now(), 1, &[], "before the rest"))
                .await
                .0
        );
        assert_eq!(c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await.len(), 1);
    });
    drop(runtime);
    // Long enough for the writer to bring its trailing indexes up to date.
    std::thread::sleep(Duration::from_millis(500));
    let before = wakeups();
    assert!(
        before.values().any(|(name, _)| name.starts_with("query-")),
        "the relay's threads are visible: {before:?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let after = wakeups();
    let woke: Vec<(String, u64)> = before
        .iter()
        .filter_map(|(tid, (name, n))| {
            let later = after.get(tid)?.1;
            (later > *n).then(|| (name.clone(), later - n))
        })
        .collect();
    // Nothing happens in these two seconds: no thread has a reason to run.
    assert!(
        woke.is_empty(),
        "threads of an idle relay woke up: {woke:?}"
    );
}

#[test]
fn stopping_keeps_every_acknowledged_event_and_waits_for_no_request() {
    use nostrwire_relay::store::{EventStore, Presence};
    use std::io::Write;

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut relay = TestRelay::start();
    // A socket whose request never ends: stopping does not wait for it.
    let mut half_open = std::net::TcpStream::connect(relay.addr()).unwrap();
    half_open
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let keys = Keys::derive(71, 1);
    let events: Vec<_> = (0..500)
        .map(|i| event(&keys, now() - 1000 + i, 1, &[], &format!("n{i}")))
        .collect();
    let mut c = runtime.block_on(Client::connect(&relay.url));
    // A hundred answered, the rest on their way when the relay stops.
    let mut answers = runtime.block_on(async {
        for e in &events {
            c.send_event(e).await;
        }
        let mut answers = Vec::new();
        while answers.len() < 100 {
            answers.push(c.recv().await);
        }
        answers
    });
    let handle = relay.relay.take().unwrap();
    let started = std::time::Instant::now();
    let stopper = std::thread::spawn(move || handle.shutdown());
    // Every answer until the relay closes the connection.
    runtime.block_on(async {
        while let Some(got) = c.recv_timeout(Duration::from_secs(10)).await {
            answers.push(got);
        }
    });
    stopper.join().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "stopping took {took:?}");

    let store = nostrwire_relay::open_store(&relay.config, false).unwrap();
    let mut acknowledged = 0;
    for got in answers {
        let support::Got::Ok(id, ok, message) = got else {
            continue;
        };
        assert!(ok, "{id}: {message}");
        let id = events.iter().find(|e| e.id.to_hex() == id).unwrap().id;
        assert_eq!(store.presence(&id).unwrap(), Presence::Stored, "{id:?}");
        acknowledged += 1;
    }
    assert!(acknowledged >= 100);
}
