//! Measures a relay cluster (docs/cluster.md) from one process; driven by
//! `scripts/bench-cluster.sh`. Every figure is printed as one JSON line.
//!
//! ```text
//! cluster_bench publish URL[,URL…] EVENTS CONNECTIONS WINDOW PID[,PID…]
//!     EVENTS signed notes over CONNECTIONS spread over the URLs, WINDOW
//!     unanswered EVENTs per connection; events/s and, for each PID (relays,
//!     NATS servers), the CPU seconds it used during the run.
//! cluster_bench latency FROM_URL TO_URL RATE SECONDS
//!     A subscriber on TO_URL, a publisher on FROM_URL at RATE events/s:
//!     the time from sending each EVENT to receiving it live.
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use nostrwire_event::message::write;
use nostrwire_event::{
    Event, EventId, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, Timestamp, UnsignedEvent,
};
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match args.first().map(String::as_str) {
        Some("publish") if args.len() == 6 => runtime.block_on(publish(
            args[1].split(',').map(str::to_string).collect(),
            args[2].parse().expect("EVENTS"),
            args[3].parse().expect("CONNECTIONS"),
            args[4].parse().expect("WINDOW"),
            args[5]
                .split(',')
                .map(|p| p.parse().expect("PID"))
                .collect(),
        )),
        Some("latency") if args.len() == 5 => runtime.block_on(latency(
            &args[1],
            &args[2],
            args[3].parse().expect("RATE"),
            args[4].parse().expect("SECONDS"),
        )),
        _ => {
            eprintln!("usage: see the module documentation of examples/cluster_bench.rs");
            std::process::exit(2);
        }
    }
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    nostrwire_relay::now()
}

fn note(author: u64, i: usize, tag: &str) -> Event {
    let keys = Keys::derive(99, author);
    UnsignedEvent::new(
        &keys,
        Timestamp::new(now()).expect("time"),
        Kind(1),
        vec![Tag::from_strs(&["t", tag])],
        format!(
            "cluster bench {author}/{i}: {}",
            "lorem ipsum dolor sit amet ".repeat(1 + i % 8)
        ),
    )
    .sign(&keys)
}

fn frame(event: &Event) -> Message {
    let mut out = Vec::new();
    write::client_event(&mut out, event);
    Message::text(String::from_utf8(out).expect("ASCII JSON"))
}

/// utime + stime of a process, in seconds (`/proc/PID/stat`).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat; 12 and 13 after the name and state.
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// CPU seconds of each thread role of a process (`/proc/PID/task`), by
/// thread name without its number (`ingest-0` and `ingest-1` → `ingest`).
fn thread_seconds(pid: u32) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close]
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .trim_end_matches('-')
            .to_string();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        *out.entry(name).or_default() += (ticks(11) + ticks(12)) / hz;
    }
    out
}

async fn publish(
    urls: Vec<String>,
    events: usize,
    connections: usize,
    window: usize,
    pids: Vec<u32>,
) {
    let per = events / connections;
    let signed: Vec<Vec<Event>> = (0..connections)
        .map(|c| {
            (0..per)
                .map(|i| note(1000 + c as u64, i, "bench"))
                .collect()
        })
        .collect();
    let cpu_before: Vec<f64> = pids.iter().map(|&p| cpu_seconds(p)).collect();
    let threads_before: Vec<HashMap<String, f64>> =
        pids.iter().map(|&p| thread_seconds(p)).collect();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, batch) in signed.into_iter().enumerate() {
        let url = urls[c % urls.len()].clone();
        tasks.push(tokio::spawn(async move {
            let (ws, _) = tokio_tungstenite::connect_async(&url)
                .await
                .expect("connect");
            let (mut tx, mut rx) = ws.split();
            let total = batch.len();
            let (mut sent, mut answered, mut accepted) = (0, 0, 0);
            while answered < total {
                while sent < total && sent - answered < window {
                    tx.send(frame(&batch[sent])).await.expect("send");
                    sent += 1;
                }
                let msg = tokio::time::timeout(Duration::from_secs(30), rx.next())
                    .await
                    .expect("an answer in time")
                    .expect("open")
                    .expect("frame");
                let Message::Text(text) = msg else { continue };
                if let Ok(RelayMessage::Ok { accepted: ok, .. }) =
                    RelayMessage::parse(text.as_bytes())
                {
                    answered += 1;
                    accepted += usize::from(ok);
                }
            }
            accepted
        }));
    }
    let mut accepted = 0;
    for t in tasks {
        accepted += t.await.expect("publisher");
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu: Vec<String> = pids
        .iter()
        .zip(&cpu_before)
        .map(|(&p, before)| format!("\"{p}\":{:.3}", cpu_seconds(p) - before))
        .collect();
    let threads: Vec<String> = pids
        .iter()
        .zip(&threads_before)
        .map(|(&p, before)| {
            let mut roles: Vec<String> = thread_seconds(p)
                .into_iter()
                .map(|(name, after)| {
                    (
                        name.clone(),
                        after - before.get(&name).copied().unwrap_or(0.0),
                    )
                })
                .filter(|(_, used)| *used > 0.0)
                .map(|(name, used)| format!("\"{name}\":{used:.3}"))
                .collect();
            roles.sort();
            format!("\"{p}\":{{{}}}", roles.join(","))
        })
        .collect();
    println!(
        "{{\"events\":{},\"accepted\":{accepted},\"seconds\":{seconds:.3},\"events_per_second\":{:.0},\"cpu_seconds\":{{{}}},\"thread_seconds\":{{{}}}}}",
        per * connections,
        accepted as f64 / seconds,
        cpu.join(","),
        threads.join(",")
    );
}

async fn latency(from: &str, to: &str, rate: u64, seconds: u64) {
    let count = (rate * seconds) as usize;
    // A tag of this run only: the subscription sees nothing stored before.
    let tag = format!("latency-{}", std::process::id());
    let events: Vec<Event> = (0..count).map(|i| note(7, i, &tag)).collect();
    let sent: Arc<Mutex<HashMap<EventId, Instant>>> = Arc::default();

    let (subscriber, _) = tokio_tungstenite::connect_async(to).await.expect("connect");
    let (mut sub_tx, mut sub_rx) = subscriber.split();
    let filter = Filter::new().with_tag(b't', vec![tag.clone()]);
    let mut req = Vec::new();
    write::req(&mut req, "latency", &[filter]);
    sub_tx
        .send(Message::text(String::from_utf8(req).expect("ASCII")))
        .await
        .expect("REQ");
    // Live from its EOSE on (the tag is new: nothing stored comes first).
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), sub_rx.next())
            .await
            .expect("EOSE within 10 s")
            .expect("subscriber open")
            .expect("subscriber frame");
        let Message::Text(text) = msg else { continue };
        if let Ok(RelayMessage::Eose(_)) = RelayMessage::parse(text.as_bytes()) {
            break;
        }
    }
    let sent_at = sent.clone();
    let receiver = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(count);
        while latencies.len() < count {
            let Ok(Some(Ok(msg))) =
                tokio::time::timeout(Duration::from_secs(10), sub_rx.next()).await
            else {
                break;
            };
            let received = Instant::now();
            let Message::Text(text) = msg else { continue };
            if let Ok(RelayMessage::Event { event, .. }) = RelayMessage::parse(text.as_bytes()) {
                if let Some(at) = sent_at.lock().await.get(event.id()) {
                    latencies.push(received.duration_since(*at).as_secs_f64() * 1e3);
                }
            }
        }
        latencies
    });

    let (publisher, _) = tokio_tungstenite::connect_async(from)
        .await
        .expect("connect");
    let (mut pub_tx, mut pub_rx) = publisher.split();
    // Drain the OKs.
    let oks = tokio::spawn(async move {
        let mut ok = 0usize;
        while let Ok(Some(Ok(msg))) =
            tokio::time::timeout(Duration::from_secs(10), pub_rx.next()).await
        {
            if let Message::Text(text) = msg {
                if let Ok(RelayMessage::Ok { accepted: true, .. }) =
                    RelayMessage::parse(text.as_bytes())
                {
                    ok += 1;
                }
            }
        }
        ok
    });
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let started = tokio::time::Instant::now();
    for (i, event) in events.iter().enumerate() {
        tokio::time::sleep_until(started + interval * i as u32).await;
        sent.lock().await.insert(event.id, Instant::now());
        pub_tx.send(frame(event)).await.expect("send");
    }
    let mut latencies = receiver.await.expect("subscriber");
    let _ = pub_tx.close().await;
    let acknowledged = oks.await.unwrap_or(0);
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        latencies[((latencies.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "{{\"sent\":{count},\"acknowledged\":{acknowledged},\"received\":{},\"rate\":{rate},\"p50_ms\":{:.2},\"p90_ms\":{:.2},\"p99_ms\":{:.2},\"max_ms\":{:.2}}}",
        latencies.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
}
