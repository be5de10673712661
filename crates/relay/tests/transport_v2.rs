//! The `nostrwire.v2` transport over real sockets: negotiation, batches of
//! records as stored, dictionary sets (served over HTTP, named on connect,
//! trained while clients are connected), clients with and without the set,
//! mixed transports on one subscription, and hostile input.

mod support;

use std::time::{Duration, Instant};

use nostrwire_event::{Event, Filter};
use nostrwire_wire::transport;
use sha2::{Digest, Sha256};
use support::{filter, Client, Got, TestRelay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Real events from the bundled corpus that every client may read and that
/// do not delete or replace anything.
fn corpus() -> Vec<Event> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/real-events.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| Event::from_json(l).unwrap())
        .filter(|e| {
            let k = e.kind.as_u16();
            e.kind.class() == nostrwire_event::KindClass::Regular
                && ![4, 5, 62, 1059, 22242].contains(&k)
        })
        .collect()
}

/// Publishes `events` through `c`, all accepted.
async fn publish_all(c: &mut Client, events: &[Event]) {
    for e in events {
        let (ok, msg) = c.publish(e).await;
        assert!(ok, "{msg}");
    }
}

/// The ids a query returns, in order.
async fn ids(c: &mut Client, sub: &str, f: &[Filter]) -> Vec<String> {
    c.query(sub, f)
        .await
        .iter()
        .map(|e| e.id.to_hex())
        .collect()
}

/// A plain HTTP GET: status line, head, body bytes.
async fn http(addr: std::net::SocketAddr, path: &str) -> (String, String, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(out[..split].to_vec()).unwrap();
    let status = head.lines().next().unwrap().to_string();
    (status, head, out[split + 4..].to_vec())
}

/// The `Sec-WebSocket-Protocol` a relay answers an upgrade offering
/// `offer` with (status line checked: 101).
async fn answered(addr: std::net::SocketAddr, offer: &str) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: {offer}\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    head.lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Protocol: "))
        .map(str::to_string)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negotiation_picks_the_highest_version_offered() {
    let relay = TestRelay::start();
    for (offer, want) in [
        ("nostrwire.v2, nostrwire.v1", Some("nostrwire.v2")),
        ("nostrwire.v1, nostrwire.v2", Some("nostrwire.v2")),
        ("foo,nostrwire.v2", Some("nostrwire.v2")),
        ("nostrwire.v1", Some("nostrwire.v1")),
        ("nostrwire.v9, foo", None),
    ] {
        assert_eq!(
            answered(relay.addr(), offer).await.as_deref(),
            want,
            "{offer}"
        );
    }
    let c = Client::connect_offering(&relay.url, "nostrwire.v1, nostrwire.v2").await;
    assert!(c.binary && c.v2.is_some());
    // A relay with the binary transport off answers JSON to everyone.
    let off = TestRelay::start_with(|c| c.websocket.binary = false);
    assert_eq!(
        answered(off.addr(), "nostrwire.v2, nostrwire.v1").await,
        None
    );
    let doc = support::http_get(off.addr(), "/", "application/nostr+json").await;
    assert!(!doc.contains("nostrwire.v2"), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_without_dictionaries_sends_records_as_stored_in_batches() {
    let relay = TestRelay::start_with(|c| c.storage.auto_dictionaries = 0);
    let events = corpus();
    let events = &events[..events.len().min(600)];
    let mut json = Client::connect(&relay.url).await;
    publish_all(&mut json, events).await;
    // Events that share a created_at: ordered by id, ties at the limit too.
    let keys = nostrwire_event::Keys::derive(38, 1);
    let newest = events.iter().map(|e| e.created_at.as_u64()).max().unwrap() + 10;
    let tied: Vec<Event> = (0..6)
        .map(|i| support::event(&keys, newest, 1, &[], &format!("tie {i}")))
        .collect();
    publish_all(&mut json, &tied).await;
    let mut v2 = Client::connect_v2(&relay.url).await;
    assert_eq!(v2.relay_set().await, None);
    let doc = support::http_get(relay.addr(), "/", "application/nostr+json").await;
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["nostrwire"]["transports"][0], "nostrwire.v2");
    assert_eq!(doc["nostrwire"]["dictionaries"], serde_json::json!([]));
    let author = events[0].pubkey.to_hex();
    let by_author = format!(r#"{{"authors":["{author}"]}}"#);
    let by_author_kind = format!(r#"{{"authors":["{author}"],"kinds":[1,7]}}"#);
    let since = format!(
        r#"{{"since":{},"kinds":[1,6,7]}}"#,
        events[300].created_at.as_u64()
    );
    let filters = [
        "{}",
        r#"{"kinds":[1],"limit":100}"#,
        r#"{"limit":7}"#,
        r#"{"kinds":[1],"limit":3}"#,
        &by_author,
        &by_author_kind,
        &since,
        r##"{"kinds":[1],"#t":["nostr"]}"##,
    ];
    for (i, f) in filters.iter().enumerate() {
        let sub = format!("q{i}");
        let want = ids(&mut json, &sub, &[filter(f)]).await;
        assert!(!want.is_empty() || f.contains("#t"), "{f}: no events");
        let before = v2.v2().batches;
        let got = ids(&mut v2, &sub, &[filter(f)]).await;
        assert_eq!(got, want, "{f}");
        let batches = v2.v2().batches - before;
        assert!(
            batches < got.len().max(2),
            "{f}: {batches} batches for {} events",
            got.len()
        );
        // With another filter: results merged, every one decoded.
        let two = [filter(f), filter(r#"{"kinds":[6],"limit":5}"#)];
        let want = ids(&mut json, "two", &two).await;
        assert_eq!(ids(&mut v2, "two", &two).await, want, "{f} and another");
    }
    // The tied events, newest first: ordered by id as over JSON.
    let limit3 = ids(&mut v2, "ties", &[filter(r#"{"kinds":[1],"limit":3}"#)]).await;
    let mut tied_ids: Vec<String> = tied.iter().map(|e| e.id.to_hex()).collect();
    tied_ids.sort();
    assert_eq!(limit3, tied_ids[..3]);
    let state = v2.v2();
    assert_eq!(state.with_dictionary, 0);
    // Large records are stored compressed (without a dictionary) and sent so.
    assert!(
        state.plain > 0 && state.raw > 0,
        "{} plain, {} raw",
        state.plain,
        state.raw
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_trained_while_clients_are_connected_is_announced_served_and_used() {
    let relay = TestRelay::start_with(|c| c.storage.auto_dictionaries = 200);
    let events = corpus();
    assert!(events.len() >= 400, "corpus too small: {}", events.len());
    let mut json = Client::connect(&relay.url).await;
    // Connected before the relay has a set.
    let mut early = Client::connect_v2(&relay.url).await;
    assert_eq!(early.relay_set().await, None);
    publish_all(&mut json, &events[..250]).await;
    // Training runs on a thread of the store's; the relay takes the set up
    // within a second and tells every v2 connection.
    early.v2().relay_set = None;
    let hash = early
        .relay_set()
        .await
        .expect("the relay announced its trained set");
    publish_all(&mut json, &events[250..380]).await;

    // Served over HTTP: immutable, CORS, its SHA-256 is its name.
    let (status, head, file) = http(relay.addr(), &format!("/dictionaries/{}", hex(&hash))).await;
    assert!(status.contains("200"), "{status}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("cache-control: public, max-age=31536000, immutable"),
        "{head}"
    );
    assert!(head.contains("access-control-allow-origin: *"), "{head}");
    assert_eq!(<[u8; 32]>::from(Sha256::digest(&file)), hash);
    let doc = support::http_get(relay.addr(), "/", "application/nostr+json").await;
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(
        doc["nostrwire"]["dictionaries"],
        serde_json::json!([hex(&hash)])
    );
    for path in [
        format!("/dictionaries/{}", hex(&[7; 32])),
        "/dictionaries/zz".to_string(),
        format!("/dictionaries/{}", "a".repeat(5000)),
    ] {
        let (status, head, _) = http(relay.addr(), &path).await;
        assert!(status.contains("404"), "{path}: {status}");
        assert!(head
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: *"));
    }

    let all = [filter("{}")];
    let want = ids(&mut json, "all", &all).await;
    assert_eq!(want.len(), 380);

    // Without the set: every record it gets is readable (no dictionary).
    assert_eq!(ids(&mut early, "all", &all).await, want);
    assert_eq!(early.v2().with_dictionary, 0);

    // Holding an older set (one the relay does not serve): the same.
    let mut stale = Client::connect_v2(&relay.url).await;
    assert_eq!(stale.relay_set().await, Some(hash));
    let mut frame = Vec::new();
    transport::write_hold(&mut frame, &[[7; 32]]);
    stale.send_binary(frame).await;
    assert_eq!(ids(&mut stale, "all", &all).await, want);
    assert_eq!(stale.v2().with_dictionary, 0);

    // Holding the set: records go out exactly as stored, and decompress.
    let mut holder = Client::connect_v2(&relay.url).await;
    assert_eq!(holder.relay_set().await, Some(hash));
    holder.hold(&file).await;
    assert_eq!(ids(&mut holder, "all", &all).await, want);
    for f in [
        format!(r#"{{"authors":["{}"]}}"#, events[0].pubkey.to_hex()),
        r#"{"kinds":[1,7],"limit":40}"#.to_string(),
    ] {
        let json_ids = ids(&mut json, "f", &[filter(&f)]).await;
        assert_eq!(ids(&mut holder, "f", &[filter(&f)]).await, json_ids, "{f}");
    }
    let s = holder.v2();
    assert!(
        s.with_dictionary >= 30,
        "{} records with the set",
        s.with_dictionary
    );
    assert!(s.batches < 20, "{} batches for 380 events", s.batches);

    // The client connected before training takes the set up too.
    early.hold(&file).await;
    assert_eq!(ids(&mut early, "again", &all).await, want);
    assert!(early.v2().with_dictionary >= 30);

    // Live events: compressed once when admitted, sent as stored.
    holder.req("live", &[filter(r#"{"limit":0}"#)]).await;
    assert!(matches!(holder.recv().await, Got::Eose(s) if s == "live"));
    let before = holder.v2().with_dictionary;
    let fresh = &events[380..400];
    publish_all(&mut json, fresh).await;
    let mut live = Vec::new();
    while live.len() < fresh.len() {
        match holder.recv().await {
            Got::Event(s, e) if s == "live" => live.push(e.id),
            other => panic!("{other:?}"),
        }
    }
    let want_live: Vec<_> = fresh.iter().map(|e| e.id).collect();
    assert_eq!(live, want_live);
    assert!(holder.v2().with_dictionary > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_v1_and_v2_clients_see_the_same_live_events() {
    let relay = TestRelay::start_with(|c| c.storage.auto_dictionaries = 0);
    let events = corpus();
    let events = &events[..200];
    let mut clients = [
        Client::connect(&relay.url).await,
        Client::connect_binary(&relay.url).await,
        Client::connect_v2(&relay.url).await,
    ];
    for c in clients.iter_mut() {
        c.req("live", &[filter(r#"{"since":0,"limit":0}"#)]).await;
        loop {
            if let Got::Eose(s) = c.recv().await {
                assert_eq!(s, "live");
                break;
            }
        }
    }
    // Published without waiting, so the writer commits them in batches
    // and v2 gets several per frame.
    let mut publisher = Client::connect(&relay.url).await;
    for e in events {
        publisher.send_event(e).await;
    }
    for _ in events {
        assert!(matches!(publisher.recv().await, Got::Ok(_, true, _)));
    }
    let want: Vec<_> = events.iter().map(|e| e.id).collect();
    for c in clients.iter_mut() {
        let mut got = Vec::new();
        while got.len() < want.len() {
            match c.recv().await {
                Got::Event(s, e) if s == "live" => got.push(e.id),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, want);
        c.expect_silence().await;
    }
    let v2 = clients[2].v2();
    assert!(v2.batches <= events.len(), "{} batches", v2.batches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_v2_frames_get_answers_and_the_relay_keeps_serving() {
    let relay = TestRelay::start_with(|c| c.storage.auto_dictionaries = 0);
    let events = corpus();
    let mut v2 = Client::connect_v2(&relay.url).await;
    publish_all(&mut v2, &events[..20]).await;
    let mut bomb = vec![0x81, 0x00];
    nostrwire_wire::varint::push(&mut bomb, 1 << 40);
    bomb.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
    let mut huge_batch = vec![transport::BATCH, 1, b's'];
    nostrwire_wire::varint::push(&mut huge_batch, u64::MAX >> 2);
    let hostile: Vec<Vec<u8>> = vec![
        vec![transport::HOLD, 1, 2, 3],
        [&[transport::HOLD][..], &[0; 32 * 9]].concat(),
        huge_batch,
        vec![transport::DICTIONARY_SET],
        [&[transport::EVENT][..], &bomb].concat(),
        [&[transport::AUTH][..], &bomb].concat(),
        vec![0x7f],
    ];
    for frame in hostile {
        v2.send_binary(frame.clone()).await;
        match v2.recv().await {
            Got::Notice(m) | Got::Ok(_, false, m) => {
                assert!(m.starts_with("invalid:"), "{frame:?}: {m}")
            }
            other => panic!("{frame:?}: {other:?}"),
        }
    }
    // Still serving, on the same connection.
    let got = ids(&mut v2, "after", &[filter("{}")]).await;
    assert_eq!(got.len(), 20);
    let started = Instant::now();
    let (status, _, _) = http(relay.addr(), "/dictionaries/").await;
    assert!(status.contains("404"));
    assert!(started.elapsed() < Duration::from_secs(5));
}
