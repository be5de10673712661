//! `nostrwire stream` between relays started from the built binary, over
//! real sockets: events mirrored live down and up (checked by ids), nothing
//! lost across `kill -9` of either relay or of the stream itself while
//! publishers keep publishing, and a config file with two upstreams, each
//! with its own filter and direction.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostrwire_event::{EventId, Filter, Keys, Kind, SignedFields, Timestamp, UnsignedEvent};
use nostrwire_loadgen::client::{Conn, Target};
use nostrwire_loadgen::sync::{fetch, publish_all};
use nostrwire_loadgen::ws::{Counters, WsUrl};

mod support;
use support::{free_port, wait_listening};

/// A process the test started, killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn spawn(args: &[&str], log: &Path) -> Proc {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Proc {
            child,
            log: log.to_path_buf(),
        }
    }

    /// SIGKILL: no chance to flush or say goodbye.
    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM: the stream writes its cursors and its last counts, and
    /// exits 0.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "{exit:?}: {}", self.log());
        self.log()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A relay on its own database and port, restartable.
struct Relay {
    db: PathBuf,
    port: u16,
    log: PathBuf,
}

impl Relay {
    fn new(dir: &Path, name: &str) -> Relay {
        Relay {
            db: dir.join(name),
            port: free_port(),
            log: dir.join(format!("{name}.log")),
        }
    }

    fn start(&self) -> Proc {
        let proc = Proc::spawn(
            &[
                "relay",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--data",
                self.db.to_str().unwrap(),
            ],
            &self.log,
        );
        wait_listening(self.port);
        proc
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
}

fn stream(args: &[&str], log: &Path) -> Proc {
    let mut all = vec!["stream", "--progress", "1"];
    all.extend_from_slice(args);
    Proc::spawn(&all, log)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn connect(url: &str) -> Option<Conn> {
    let target = Target {
        url: WsUrl::parse(url).unwrap(),
        counters: Arc::new(Counters::default()),
        timeout: Duration::from_secs(5),
    };
    Conn::open(&target, 7).await.ok()
}

/// A new event signed now by the key `author`.
fn event(author: u8, kind: u16, content: String) -> (EventId, Vec<u8>) {
    event_aged(author, kind, content, 0)
}

/// The same, with a `created_at` `age` seconds ago.
fn event_aged(author: u8, kind: u16, content: String, age: u64) -> (EventId, Vec<u8>) {
    let keys = Keys::from_secret_bytes([author; 32]).unwrap();
    let created_at = Timestamp::new(Timestamp::now().as_u64() - age).unwrap();
    let event =
        UnsignedEvent::new(&keys, created_at, Kind::from(kind), vec![], content).sign(&keys);
    (*event.id(), event.to_json_bytes())
}

/// Publishes events to `url` until `stop`, one at a time; an event the
/// relay does not answer (killed) is signed again, so each event's
/// `created_at` is within a second of when the relay stored it. Returns the
/// ids the relay accepted, whether it was killed in between or not.
fn publisher(
    url: String,
    author: u8,
    kind: u16,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<EventId>> {
    std::thread::spawn(move || {
        runtime().block_on(async move {
            let mut accepted = Vec::new();
            let mut conn = None;
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let Some(c) = conn.as_mut() else {
                    conn = connect(&url).await;
                    if conn.is_none() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                };
                let one = event(author, kind, format!("stream test {author} {n}"));
                match publish_all(c, std::slice::from_ref(&one), Duration::from_secs(5)).await {
                    Ok((answers, _)) => {
                        assert!(answers[0].0, "refused: {}", answers[0].1);
                        accepted.push(one.0);
                    }
                    Err(_) => conn = None,
                }
                tokio::time::sleep(Duration::from_millis(8)).await;
            }
            accepted
        })
    })
}

/// Publishes `count` events and returns their ids.
fn publish(url: &str, author: u8, kind: u16, count: usize) -> Vec<EventId> {
    publish_aged(url, author, kind, count, |_| 0)
}

/// Publishes `count` events, the `n`th created `age(n)` seconds ago.
fn publish_aged(
    url: &str,
    author: u8,
    kind: u16,
    count: usize,
    age: impl Fn(usize) -> u64,
) -> Vec<EventId> {
    runtime().block_on(async {
        let mut conn = connect(url).await.expect("the relay is up");
        let events: Vec<_> = (0..count)
            .map(|n| {
                event_aged(
                    author,
                    kind,
                    format!("published {author} {kind} {n}"),
                    age(n),
                )
            })
            .collect();
        let (answers, _) = publish_all(&mut conn, &events, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(answers.iter().all(|a| a.0), "{answers:?}");
        events.into_iter().map(|e| e.0).collect()
    })
}

/// The ids of the events a relay holds (of `kind`, or every kind).
fn ids(url: &str, kind: Option<u16>) -> BTreeSet<EventId> {
    runtime().block_on(async {
        let mut conn = connect(url).await.expect("the relay is up");
        let filter = Filter {
            kinds: kind.map(|k| vec![Kind::from(k)]),
            limit: Some(5000),
            ..Filter::new()
        };
        let got = fetch(&mut conn, &filter, Duration::from_secs(10))
            .await
            .unwrap();
        got.items.into_iter().map(|(_, id)| id).collect()
    })
}

/// Waits until `url` holds every id of `wanted`; the ids it lacks at the
/// deadline.
fn wait_for(url: &str, wanted: &BTreeSet<EventId>, seconds: u64) -> Vec<EventId> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let held = ids(url, None);
        let missing: Vec<EventId> = wanted.difference(&held).copied().collect();
        if missing.is_empty() || Instant::now() > deadline {
            return missing;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `url` holds every id of `wanted`; fails with the stream's log.
fn arrive(url: &str, wanted: &BTreeSet<EventId>, stream: &Proc) {
    let missing = wait_for(url, wanted, 20);
    assert!(
        missing.is_empty(),
        "{} of {} missing: {}",
        missing.len(),
        wanted.len(),
        stream.log()
    );
}

fn set(ids: &[EventId]) -> BTreeSet<EventId> {
    ids.iter().copied().collect()
}

#[test]
fn events_are_mirrored_live_down_and_up() {
    let dir = tempfile::tempdir().unwrap();
    let (up, local) = (
        Relay::new(dir.path(), "up"),
        Relay::new(dir.path(), "local"),
    );
    let (_up, _local) = (up.start(), local.start());
    let state = dir.path().join("state.json");
    let log = dir.path().join("stream.log");
    let common = ["--local", &local.url(), "--state", state.to_str().unwrap()];
    let mut args = vec![up.url()];
    args.extend(["--filter", r#"{"kinds":[1]}"#].map(String::from));
    args.extend(common.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Stored before the stream starts, within its overlap (two or three a
    // second): more than one REQ returns, so they come in pages.
    let before = set(&publish_aged(&up.url(), 8, 1, 1100, |n| {
        60 + n as u64 % 400
    }));
    let down = stream(&args, &log);
    arrive(&local.url(), &before, &down);

    let notes = set(&publish(&up.url(), 1, 1, 60));
    let reactions = set(&publish(&up.url(), 1, 7, 20));
    arrive(&local.url(), &notes, &down);
    assert!(
        ids(&local.url(), Some(7)).is_disjoint(&reactions),
        "the filter let kind 7 through"
    );
    // Created before the stream's REQ, published after it: they come live.
    let late = set(&publish_aged(&up.url(), 1, 1, 5, |_| 30));
    arrive(&local.url(), &late, &down);
    down.kill9();

    let mut args = vec![up.url(), "--dir".into(), "up".into()];
    args.extend(common.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let upward = stream(&args, &log);
    let local_notes = set(&publish(&local.url(), 2, 1, 40));
    arrive(&up.url(), &local_notes, &upward);
    assert!(upward.log().contains("up ws://"), "{}", upward.log());
}

#[test]
fn nothing_is_lost_across_kill_9_of_either_relay_or_of_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (up, local) = (
        Relay::new(dir.path(), "up"),
        Relay::new(dir.path(), "local"),
    );
    let (mut up_proc, mut local_proc) = (up.start(), local.start());
    let state = dir.path().join("state.json");
    let log = dir.path().join("stream.log");
    let up_url = up.url();
    let local_url = local.url();
    let args = [
        up_url.as_str(),
        "--dir",
        "both",
        "--local",
        local_url.as_str(),
        "--state",
        state.to_str().unwrap(),
        // Shorter than the stream's downtime below: what it misses then
        // comes back only from the cursor it saved.
        "--overlap",
        "2",
    ];
    let mut streamer = stream(&args, &log);
    let stop = Arc::new(AtomicBool::new(false));
    let upstream_pub = publisher(up.url(), 3, 1, stop.clone());
    let local_pub = publisher(local.url(), 4, 1, stop.clone());
    let pause = || std::thread::sleep(Duration::from_millis(1200));

    pause();
    up_proc.kill9();
    std::thread::sleep(Duration::from_millis(500));
    up_proc = up.start();
    pause();
    local_proc.kill9();
    std::thread::sleep(Duration::from_millis(500));
    local_proc = local.start();
    pause();
    streamer.kill9();
    std::thread::sleep(Duration::from_millis(3500));
    streamer = stream(&args, &log);
    pause();
    stop.store(true, Ordering::Relaxed);
    let from_up = set(&upstream_pub.join().unwrap());
    let from_local = set(&local_pub.join().unwrap());
    assert!(
        from_up.len() > 20 && from_local.len() > 20,
        "{} and {} published",
        from_up.len(),
        from_local.len()
    );

    let all: BTreeSet<EventId> = from_up.union(&from_local).copied().collect();
    let missing_local = wait_for(&local.url(), &all, 20);
    let missing_up = wait_for(&up.url(), &all, 10);
    let log = streamer.log();
    assert!(
        missing_local.is_empty() && missing_up.is_empty(),
        "{} of {} missing on the local relay, {} of {} upstream: {log}",
        missing_local.len(),
        all.len(),
        missing_up.len(),
        all.len()
    );
    assert!(log.contains("reconnecting"), "{log}");
    drop((up_proc, local_proc));
}

#[test]
fn a_config_streams_two_upstreams_each_with_its_filter() {
    let dir = tempfile::tempdir().unwrap();
    let a = Relay::new(dir.path(), "a");
    let b = Relay::new(dir.path(), "b");
    let local = Relay::new(dir.path(), "local");
    let _procs = (a.start(), b.start(), local.start());
    let config = dir.path().join("streams.toml");
    std::fs::write(
        &config,
        format!(
            r#"
local = "{}"
state = "cursors.json"

[streams.notes]
dir = "down"
urls = ["{}"]
filter = {{ kinds = [1] }}

[streams.reactions]
dir = "both"
urls = ["{}"]
filter = {{ kinds = [7] }}
"#,
            local.url(),
            a.url(),
            b.url()
        ),
    )
    .unwrap();
    let log = dir.path().join("stream.log");
    let router = stream(&["--config", config.to_str().unwrap()], &log);

    let a_notes = set(&publish(&a.url(), 5, 1, 20));
    let a_reactions = set(&publish(&a.url(), 5, 7, 10));
    let b_notes = set(&publish(&b.url(), 6, 1, 10));
    let b_reactions = set(&publish(&b.url(), 6, 7, 20));
    let local_reactions = set(&publish(&local.url(), 7, 7, 10));

    let wanted: BTreeSet<EventId> = a_notes.union(&b_reactions).copied().collect();
    arrive(&local.url(), &wanted, &router);
    arrive(&b.url(), &local_reactions, &router);
    // Nothing outside each upstream's filter moved, and nothing went to an
    // upstream without `up`.
    let on_local = ids(&local.url(), None);
    assert!(on_local.is_disjoint(&a_reactions) && on_local.is_disjoint(&b_notes));
    assert!(ids(&b.url(), None).is_disjoint(&a_notes));
    assert!(ids(&a.url(), None).is_disjoint(&local_reactions));
    assert!(dir.path().join("cursors.json").exists(), "{}", router.log());
    // Events that came down from b were not sent back up to it (they would
    // be answered `duplicate`), nor the local relay's back down.
    let log = router.stop();
    let last = |label: &str| {
        log.lines()
            .rev()
            .find(|l| l.contains(label) && l.contains(" moved"))
            .unwrap_or_else(|| panic!("no {label} line: {log}"))
            .to_string()
    };
    let up_line = last("reactions/up ");
    assert!(
        up_line.contains(" 10 moved, 0 duplicate, 20 skipped"),
        "{up_line}"
    );
    let down_line = last("reactions/down ");
    assert!(
        down_line.contains(" 20 moved, 0 duplicate, 10 skipped"),
        "{down_line}"
    );
}

#[test]
fn a_burst_beyond_the_in_flight_cap_waits_and_all_of_it_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let (up, local) = (
        Relay::new(dir.path(), "up"),
        Relay::new(dir.path(), "local"),
    );
    let (_up, _local) = (up.start(), local.start());
    let state = dir.path().join("state.json");
    let (up_url, local_url) = (up.url(), local.url());
    let args = [
        up_url.as_str(),
        "--local",
        local_url.as_str(),
        "--state",
        state.to_str().unwrap(),
        "--in-flight",
        "3",
    ];
    let streamer = stream(&args, &dir.path().join("stream.log"));
    let burst = set(&publish(&up.url(), 9, 1, 400));
    arrive(&local.url(), &burst, &streamer);
    let log = streamer.stop();
    assert!(log.contains(" 400 moved"), "{log}");
}

#[test]
fn a_silent_upstream_is_pinged_then_left_and_a_live_one_is_kept() {
    // Completes the WebSocket handshake, then never reads or writes: a peer
    // gone without closing its connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("ws://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        runtime().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                if let Ok(ws) = tokio_tungstenite::accept_async(socket).await {
                    held.push(ws);
                }
            }
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let local = Relay::new(dir.path(), "local");
    let _local = local.start();
    let state = dir.path().join("state.json");
    let local_url = local.url();
    let args = [
        silent.as_str(),
        "--local",
        local_url.as_str(),
        "--state",
        state.to_str().unwrap(),
        "--timeout",
        "1",
    ];
    let streamer = stream(&args, &dir.path().join("stream.log"));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !streamer.log().contains("nothing from the source") {
        assert!(Instant::now() < deadline, "{}", streamer.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    // The local relay, as quiet, answered the stream's pings.
    let log = streamer.stop();
    assert!(!log.contains("nothing from the destination"), "{log}");
}

#[test]
fn bad_urls_filters_and_configs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.json");
    let bad_config = dir.path().join("bad.toml");
    std::fs::write(
        &bad_config,
        "[streams.x]\ndir = \"down\"\nurl = \"ws://a\"\n",
    )
    .unwrap();
    let local = ["--local", "ws://127.0.0.1:2"];
    let cases: [(Vec<&str>, &str); 7] = [
        (vec!["http://127.0.0.1:1"], "invalid upstream URL"),
        (
            vec!["ws://127.0.0.1:1", "--local", "nope"],
            "invalid local relay URL",
        ),
        (vec!["ws://127.0.0.1:2"], "is the local relay"),
        (
            vec!["ws://127.0.0.1:1", "--filter", "{\"kinds\":\"1\"}"],
            "invalid filter",
        ),
        (
            vec!["ws://127.0.0.1:1", "--filter", "{\"limit\":5}"],
            "limit",
        ),
        (
            vec!["--config", bad_config.to_str().unwrap()],
            "unknown key \"url\"",
        ),
        (vec!["--config", "/nonexistent/streams.toml"], "cannot read"),
    ];
    for (mut args, expected) in cases {
        if !args.contains(&"--local") {
            args.extend(local);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .arg("stream")
            .args(&args)
            .args(["--state", state.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
