//! How long `nostrwire stream` takes to bring an event from an upstream
//! relay to a subscriber of the local relay.
//!
//! Starts two relays and a `nostrwire stream` between them (down), all from
//! the given binary, on loopback; publishes `--count` new signed events to
//! the upstream relay at `--rate` a second, and takes, for each, the time
//! from its `OK` on the upstream relay to its arrival at a live subscriber
//! of the local relay. The same events' arrival at a subscriber of the
//! upstream relay itself is the baseline: one hop, no stream.
//!
//! ```sh
//! cargo build --release -p nostrwire --examples
//! target/release/examples/stream_latency --bin target/release/nostrwire --count 2000 \
//!     --rate 200 --durability full
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostrwire_event::message::write;
use nostrwire_event::UnsignedEvent;
use nostrwire_event::{EventId, Filter, Keys, Kind, RelayMessage, SignedFields, Timestamp};
use nostrwire_loadgen::client::{Conn, Target};
use nostrwire_loadgen::ws::{Admitted, Counters, WsUrl};

type Times = Arc<Mutex<HashMap<EventId, Instant>>>;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().ok().unwrap_or_else(|| panic!("bad {name}")))
        .unwrap_or(default)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(bin: &PathBuf, args: &[&str], log: Stdio) -> Killed {
    Killed(
        Command::new(bin)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot run the nostrwire binary (--bin)"),
    )
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "relay did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn connect(url: &str) -> Conn {
    let target = Target {
        url: WsUrl::parse(url).unwrap(),
        counters: Arc::new(Counters::default()),
        timeout: Duration::from_secs(10),
    };
    Conn::open(&target, 7).await.expect("connect")
}

/// A live subscription to kind 1 from now on; each event's arrival time.
async fn subscribe(url: &str, times: Times) -> tokio::task::JoinHandle<()> {
    let mut conn = connect(url).await;
    let filter = Filter {
        kinds: Some(vec![Kind::from(1)]),
        since: Some(Timestamp::now()),
        ..Filter::new()
    };
    let mut out = Vec::new();
    write::req(&mut out, "s", &[filter]);
    conn.send_message(&out).await.unwrap();
    tokio::spawn(async move {
        // The whole connection moves here: dropping its writing half would
        // shut the socket's sending side, and the relay would hang up.
        let mut conn = conn;
        while let Ok(msg) = conn.reader.next().await {
            let Admitted::Text(text) = msg else { continue };
            if let Ok(RelayMessage::Event { event, .. }) = RelayMessage::parse(text) {
                times.lock().unwrap().insert(*event.id(), Instant::now());
            }
        }
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Milliseconds from each OK to the arrival, sorted; and how many never came.
fn latencies(
    oks: &HashMap<EventId, Instant>,
    arrived: &HashMap<EventId, Instant>,
) -> (Vec<f64>, usize) {
    let mut out = Vec::new();
    let mut missing = 0;
    for (id, ok) in oks {
        match arrived.get(id) {
            Some(t) if *t >= *ok => out.push(t.duration_since(*ok).as_secs_f64() * 1e3),
            Some(t) => out.push(-(ok.duration_since(*t).as_secs_f64() * 1e3)),
            None => missing += 1,
        }
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (out, missing)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin: PathBuf = arg(&args, "--bin", PathBuf::from("target/release/nostrwire"));
    let count: usize = arg(&args, "--count", 2000);
    let rate: f64 = arg(&args, "--rate", 200.0);
    // Both relays' `storage.durability`: `full` (the default, an fsync per
    // commit) or `none`.
    let durability: String = arg(&args, "--durability", "full".to_string());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    std::fs::write(
        &config,
        format!("[storage]\ndurability = \"{durability}\"\n"),
    )
    .unwrap();
    let (up_port, local_port) = (free_port(), free_port());
    let relay = |port: u16, name: &str| {
        let db = dir.path().join(name);
        let listen = format!("127.0.0.1:{port}");
        let proc = spawn(
            &bin,
            &[
                "relay",
                "-c",
                config.to_str().unwrap(),
                "--listen",
                &listen,
                "--data",
                db.to_str().unwrap(),
            ],
            Stdio::null(),
        );
        wait_listening(port);
        proc
    };
    let _up = relay(up_port, "up");
    let _local = relay(local_port, "local");
    let up_url = format!("ws://127.0.0.1:{up_port}");
    let local_url = format!("ws://127.0.0.1:{local_port}");
    let state = dir.path().join("state.json");
    let _stream = spawn(
        &bin,
        &[
            "stream",
            &up_url,
            "--local",
            &local_url,
            "--state",
            state.to_str().unwrap(),
            "--progress",
            "0",
        ],
        // Its connection lines and refusals, if any.
        Stdio::inherit(),
    );

    let keys = Keys::from_secret_bytes([9; 32]).unwrap();
    let sign = |n: usize| {
        let event = UnsignedEvent::new(
            &keys,
            Timestamp::now(),
            Kind::from(1),
            vec![],
            format!("stream latency {n}"),
        )
        .sign(&keys);
        (*event.id(), event.to_json_bytes())
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let at_local: Times = Arc::default();
        let at_up: Times = Arc::default();
        let _l = subscribe(&local_url, at_local.clone()).await;
        let _u = subscribe(&up_url, at_up.clone()).await;
        let mut publisher = connect(&up_url).await;
        // Warm-up: until the stream is connected and one event went through.
        let mut n = 0;
        let warm_up = Instant::now();
        loop {
            assert!(
                warm_up.elapsed() < Duration::from_secs(30),
                "no event came through the stream in 30 s"
            );
            let (id, json) = sign(usize::MAX - n);
            n += 1;
            let mut out = Vec::new();
            out.extend_from_slice(b"[\"EVENT\",");
            out.extend_from_slice(&json);
            out.push(b']');
            publisher.writer.send_text(&out).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            if at_local.lock().unwrap().contains_key(&id) {
                break;
            }
        }
        let events: Vec<(EventId, Vec<u8>)> = (0..count).map(sign).collect();
        let oks: Times = Arc::default();
        let Conn {
            mut reader,
            mut writer,
            ..
        } = publisher;
        let ok_times = oks.clone();
        let mut wanted: std::collections::HashSet<EventId> =
            events.iter().map(|(id, _)| *id).collect();
        let answers = tokio::spawn(async move {
            while !wanted.is_empty() {
                let text = match reader.next().await {
                    Ok(Admitted::Text(text)) => text,
                    Ok(_) => continue,
                    Err(_) => break,
                };
                if let Ok(RelayMessage::Ok { event_id, .. }) = RelayMessage::parse(text) {
                    if wanted.remove(&event_id) {
                        ok_times.lock().unwrap().insert(event_id, Instant::now());
                    }
                }
            }
        });
        let gap = Duration::from_secs_f64(1.0 / rate);
        let start = Instant::now();
        for (i, (_, json)) in events.iter().enumerate() {
            let due = start + gap * i as u32;
            tokio::time::sleep_until(due.into()).await;
            let mut out = Vec::with_capacity(json.len() + 12);
            out.extend_from_slice(b"[\"EVENT\",");
            out.extend_from_slice(json);
            out.push(b']');
            writer.send_text(&out).await.unwrap();
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), answers).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let all_in = {
                let local = at_local.lock().unwrap();
                events.iter().all(|(id, _)| local.contains_key(id))
            };
            if all_in {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let oks = oks.lock().unwrap();
        let oks: HashMap<EventId, Instant> = events
            .iter()
            .filter_map(|(id, _)| oks.get(id).map(|t| (*id, *t)))
            .collect();
        println!(
            "{} events published at {rate}/s, {} OK'd upstream, durability {durability}",
            events.len(),
            oks.len()
        );
        println!("| path | events | p50 ms | p90 ms | p99 ms | max ms | never arrived |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for (name, arrived) in [
            (
                "upstream OK → subscriber of the local relay (through the stream)",
                &at_local,
            ),
            (
                "upstream OK → subscriber of the upstream relay (baseline)",
                &at_up,
            ),
        ] {
            let (sorted, missing) = latencies(&oks, &arrived.lock().unwrap());
            if sorted.is_empty() {
                println!("| {name} | 0 | | | | | {missing} |");
                continue;
            }
            println!(
                "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {missing} |",
                sorted.len(),
                percentile(&sorted, 0.50),
                percentile(&sorted, 0.90),
                percentile(&sorted, 0.99),
                sorted[sorted.len() - 1],
            );
        }
    });
}
