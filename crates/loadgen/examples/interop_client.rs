//! The interop matrix's Rust client (tests/interop/README.md): the load
//! tester's connection code ([`Conn`]: its WebSocket client, `nostrwire.v2`
//! negotiation and dictionary set), the workload's EVENT messages and
//! frames, and the wire crate's frame and record decoders.
//!
//! ```text
//! interop_client --relay ws://127.0.0.1:PORT --transport json|v2 --case CASE.json
//! ```
//!
//! Prints one JSON object on stdout, diagnostics on stderr; exits 2 when
//! `--transport v2` was asked and the relay did not negotiate it. Events
//! count only once their id and signature verify.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nostrwire_event::{Event, EventRef, Filter, RelayMessage, SignedFields};
use nostrwire_loadgen::client::{Conn, Target, MAX_MESSAGE_BYTES};
use nostrwire_loadgen::stats::message_prefix;
use nostrwire_loadgen::workload::Prepared;
use nostrwire_loadgen::ws::{opcode, Admitted, Counters, WsUrl};
use nostrwire_wire::transport::{self, RelayFrame};
use nostrwire_wire::{EventView, COMPRESSED_V1};
use serde_json::{json, Value};
use tokio::time::{timeout_at, Instant};

/// How long any one answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// Decoding limits for what relays send.
const LIMITS: nostrwire_wire::Limits = nostrwire_wire::Limits {
    max_record_bytes: MAX_MESSAGE_BYTES,
    max_string_bytes: MAX_MESSAGE_BYTES,
    ..nostrwire_wire::Limits::DEFAULT
};

/// Records received in batches, and those of them compressed (`0x81`).
static RECORDS: AtomicU64 = AtomicU64::new(0);
static COMPRESSED: AtomicU64 = AtomicU64::new(0);

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

/// What one relay message meant to the client.
enum Msg {
    /// An `OK`.
    Ok {
        id: String,
        accepted: bool,
        message: String,
    },
    /// Verified events for a subscription (one EVENT, or a v2 batch).
    Events(String, Vec<String>),
    /// `EOSE`.
    Eose(String),
    /// `CLOSED`.
    Closed(String, String),
    /// Anything else (NOTICE, AUTH challenge, the relay's dictionary set).
    Other,
}

/// Verified ids of `events`; the others are reported and dropped.
fn verified<E: SignedFields>(events: impl IntoIterator<Item = E>) -> Vec<String> {
    let mut ids = Vec::new();
    for e in events {
        match e.verify() {
            Ok(()) => ids.push(e.id().to_hex()),
            Err(err) => eprintln!("dropped {}: {err}", e.id().to_hex()),
        }
    }
    ids
}

fn from_json(text: &[u8]) -> Fallible<Msg> {
    Ok(match RelayMessage::parse(text)? {
        RelayMessage::Ok {
            event_id,
            accepted,
            message,
        } => Msg::Ok {
            id: event_id.to_hex(),
            accepted,
            message: message.to_string(),
        },
        RelayMessage::Event {
            subscription_id,
            event,
        } => Msg::Events(subscription_id.to_string(), verified([event])),
        RelayMessage::Eose(s) => Msg::Eose(s.to_string()),
        RelayMessage::Closed {
            subscription_id,
            message,
        } => Msg::Closed(subscription_id.to_string(), message.to_string()),
        _ => Msg::Other,
    })
}

/// Reads the next relay message, answering pings.
async fn next(conn: &mut Conn) -> Fallible<Msg> {
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    loop {
        let incoming = timeout_at(deadline, conn.reader.next())
            .await
            .map_err(|_| "no answer from the relay")??;
        let msg = match incoming {
            Admitted::Ping(p) => {
                let p = p.to_vec();
                conn.writer.queue_control(opcode::PONG, &p);
                conn.writer.flush().await?;
                continue;
            }
            Admitted::Close(_) => return Err("the relay closed the connection".into()),
            Admitted::Text(t) if !conn.binary => from_json(t)?,
            Admitted::Binary(b) if conn.binary => match transport::decode_relay_v2(b, &LIMITS)? {
                RelayFrame::Json(j) => from_json(j)?,
                RelayFrame::Ok {
                    id,
                    accepted,
                    message,
                } => Msg::Ok {
                    id: id.to_hex(),
                    accepted,
                    message: message.to_string(),
                },
                RelayFrame::Eose(s) => Msg::Eose(s.to_string()),
                RelayFrame::Event {
                    subscription_id,
                    event,
                } => Msg::Events(subscription_id.to_string(), verified([event])),
                RelayFrame::Batch {
                    subscription_id,
                    records,
                } => {
                    let v2 = conn.v2.as_mut().ok_or("a batch on a v1 connection")?;
                    let mut ids = Vec::new();
                    for stored in records.records() {
                        RECORDS.fetch_add(1, Ordering::Relaxed);
                        if stored.first() == Some(&COMPRESSED_V1) {
                            COMPRESSED.fetch_add(1, Ordering::Relaxed);
                        }
                        let record = v2.decompressor.record(stored, &LIMITS)?;
                        ids.extend(verified([EventView::decode_with(record, &LIMITS)?]));
                    }
                    Msg::Events(subscription_id.to_string(), ids)
                }
                _ => Msg::Other,
            },
            Admitted::Text(_) | Admitted::Binary(_) => {
                return Err("a frame of the other transport".into())
            }
            _ => continue,
        };
        return Ok(msg);
    }
}

async fn connect(relay: &str, v2: bool) -> Fallible<Conn> {
    let url = WsUrl::parse(&format!("{}{relay}", if v2 { "v2+" } else { "" }))?;
    let target = Target {
        url,
        counters: Arc::new(Counters::default()),
        timeout: ANSWER_TIMEOUT,
    };
    match Conn::open(&target, 44).await {
        Ok(conn) => Ok(conn),
        Err(e) if v2 => {
            eprintln!("the relay did not negotiate nostrwire.v2: {e}");
            std::process::exit(2)
        }
        Err(e) => Err(e.into()),
    }
}

/// Publishes one event (an nwb record over v2, JSON otherwise) and waits for its `OK`.
async fn publish(conn: &mut Conn, event: &Value) -> Fallible<Value> {
    let p = Prepared::new(Event::from_json(event.to_string())?);
    let id = p.event.id.to_hex();
    if conn.binary {
        conn.writer.send_binary(&p.frame).await?;
    } else {
        conn.writer.send_text(&p.message).await?;
    }
    loop {
        if let Msg::Ok {
            id: answered,
            accepted,
            message,
        } = next(conn).await?
        {
            if answered == id {
                let prefix = match message_prefix(&message).as_str() {
                    "no-reason" | "other" => String::new(),
                    p => p.to_string(),
                };
                return Ok(json!({"id": id, "accepted": accepted, "prefix": prefix}));
            }
        }
    }
}

/// Sends a REQ and collects its events up to `EOSE`.
async fn query(conn: &mut Conn, sub: &str, filter: &Value) -> Fallible<Vec<String>> {
    conn.send_message(json!(["REQ", sub, filter]).to_string().as_bytes())
        .await?;
    let mut ids = Vec::new();
    loop {
        match next(conn).await? {
            Msg::Events(s, got) if s == sub => ids.extend(got),
            Msg::Eose(s) if s == sub => return Ok(ids),
            Msg::Closed(s, why) if s == sub => return Err(format!("{sub} closed: {why}").into()),
            _ => {}
        }
    }
}

async fn run(relay: &str, v2: bool, case: &Value) -> Fallible<Value> {
    let mut conn = connect(relay, v2).await?;
    let negotiated = if v2 { "nostrwire.v2" } else { "json" };
    let list = |key: &str| case[key].as_array().cloned().unwrap_or_default();

    let mut ok = Vec::new();
    for event in list("publish").iter().chain(&list("invalid")) {
        ok.push(publish(&mut conn, event).await?);
    }

    let mut queries = serde_json::Map::new();
    for (i, q) in list("queries").iter().enumerate() {
        let sub = format!("q{i}");
        let mut ids = query(&mut conn, &sub, &q["filter"]).await?;
        conn.send_message(json!(["CLOSE", sub]).to_string().as_bytes())
            .await?;
        ids.sort();
        queries.insert(q["name"].as_str().unwrap_or_default().into(), json!(ids));
    }

    let live_filter = &case["live"]["filter"];
    let stored = query(&mut conn, "live", live_filter).await?;
    if !stored.is_empty() {
        eprintln!("live filter matched {} stored events", stored.len());
    }
    let mut publisher = connect(relay, v2).await?;
    let filter = Filter::from_json(live_filter.to_string().as_bytes())?;
    let mut wanted = BTreeSet::new();
    for event in case["live"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let text = event.to_string();
        if filter.matches(&EventRef::parse(text.as_bytes())?) {
            wanted.insert(event["id"].as_str().unwrap_or_default().to_string());
        }
        let verdict = publish(&mut publisher, &event).await?;
        if verdict["accepted"] != json!(true) {
            eprintln!("live event refused: {verdict}");
        }
    }
    let wait = Duration::from_millis(case["live"]["wait_ms"].as_u64().unwrap_or(5000));
    let deadline = Instant::now() + wait;
    let mut live = BTreeSet::new();
    while !wanted.is_subset(&live) {
        match timeout_at(deadline, next(&mut conn)).await {
            Err(_) => break,
            Ok(msg) => {
                if let Msg::Events(s, got) = msg? {
                    if s == "live" {
                        live.extend(got);
                    }
                }
            }
        }
    }
    let _ = publisher.close().await;
    let _ = conn.close().await;

    let refused: Vec<Value> = list("hostile_records")
        .iter()
        .map(|r| {
            let bytes = hex_bytes(r["hex"].as_str().unwrap_or_default());
            let (refused, kind) = match bytes.as_deref().map(EventView::decode) {
                Some(Ok(_)) => (false, ""),
                Some(Err(e)) => (true, e.as_str()),
                None => (true, "bad hex in the case"),
            };
            json!({"case": r["name"], "refused": refused, "kind": kind})
        })
        .collect();

    Ok(json!({
        "client": "rust",
        "negotiated": negotiated,
        "ok": ok,
        "queries": queries,
        "live": live,
        "refused": refused,
        "records": {
            "batched": RECORDS.load(Ordering::Relaxed),
            "compressed": COMPRESSED.load(Ordering::Relaxed),
        },
    }))
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(relay), Some(transport), Some(case)) =
        (arg("--relay"), arg("--transport"), arg("--case"))
    else {
        eprintln!("usage: interop_client --relay URL --transport json|v2 --case CASE.json");
        return ExitCode::from(64);
    };
    if transport != "json" && transport != "v2" {
        eprintln!("--transport is json or v2, not {transport}");
        return ExitCode::from(64);
    }
    let result = (|| -> Fallible<Value> {
        let case: Value = serde_json::from_slice(&std::fs::read(&case)?)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(run(&relay, transport == "v2", &case))
    })();
    match result {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("interop_client: {e}");
            ExitCode::FAILURE
        }
    }
}
