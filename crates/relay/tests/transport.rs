//! The `nostrwire.v1` binary transport over a real socket: negotiation, the
//! same events as JSON clients for the same filters, and hostile frames.

mod support;

use nostrwire_event::{Event, Keys, Kind};
use nostrwire_wire::transport;
use support::{event, filter, now, Client, Got, TestRelay};

/// Real events from the bundled corpus that every client may read and that
/// do not delete or replace anything.
fn corpus(n: usize) -> Vec<Event> {
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
        .take(n)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_clients_that_ask_get_binary_frames() {
    let relay = TestRelay::start();
    let (_, plain) = tokio_tungstenite::connect_async(relay.url.as_str())
        .await
        .unwrap();
    assert!(plain.headers().get("Sec-WebSocket-Protocol").is_none());
    // Client::connect_binary asserts the relay echoed nostrwire.v1.
    let mut b = Client::connect_binary(&relay.url).await;
    assert_eq!(b.wait_challenge().await.len(), 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_transports_return_the_same_events() {
    let relay = TestRelay::start();
    let events = corpus(240);
    assert!(events.len() >= 200, "corpus too small: {}", events.len());
    let mut json = Client::connect(&relay.url).await;
    let mut binary = Client::connect_binary(&relay.url).await;
    // Half published through each transport.
    for (i, e) in events.iter().enumerate() {
        let c = if i % 2 == 0 { &mut json } else { &mut binary };
        let (ok, msg) = c.publish(e).await;
        assert!(ok, "{msg}");
    }
    let a = &events[0];
    let filters = [
        "{}".to_string(),
        r#"{"kinds":[1],"limit":50}"#.to_string(),
        format!(r#"{{"authors":["{}"]}}"#, a.pubkey.to_hex()),
        format!(r##"{{"#p":["{}"],"limit":20}}"##, a.pubkey.to_hex()),
        format!(
            r#"{{"since":{},"limit":30}}"#,
            events[100].created_at.as_u64()
        ),
        format!(
            r#"{{"ids":["{}","{}"]}}"#,
            events[3].id.to_hex(),
            events[4].id.to_hex()
        ),
    ];
    for (i, f) in filters.iter().enumerate() {
        let f = [filter(f)];
        let sub = format!("q{i}");
        let from_json = json.query(&sub, &f).await;
        let from_binary = binary.query(&sub, &f).await;
        assert_eq!(from_json, from_binary, "filter {i}");
    }
    // Everything stored came back byte-identical to what was published.
    let all = binary.query("all", &[filter(r#"{"limit":1000}"#)]).await;
    assert_eq!(all.len(), events.len());
    for e in &all {
        assert!(events.contains(e), "{} differs from what was sent", e.id);
    }

    // Live: each side sees what the other publishes.
    let since = now();
    let live = [filter(&format!(r#"{{"kinds":[1],"since":{since}}}"#))];
    json.req("live", &live).await;
    binary.req("live", &live).await;
    assert!(matches!(json.recv().await, Got::Eose(_)));
    assert!(matches!(binary.recv().await, Got::Eose(_)));
    let keys = Keys::derive(60, 1);
    let from_b = event(&keys, since, 1, &[&["t", "wire"]], "from the binary side");
    let from_j = event(&keys, since + 1, 1, &[], "from the JSON side");
    assert!(binary.publish(&from_b).await.0);
    assert!(matches!(json.recv().await, Got::Event(s, e) if s == "live" && e == from_b));
    assert!(json.publish(&from_j).await.0);
    let mut got = Vec::new();
    while got.len() < 2 {
        if let Got::Event(s, e) = binary.recv().await {
            assert_eq!(s, "live");
            got.push(e);
        }
    }
    assert_eq!(got, vec![from_b, from_j]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_events_are_verified_like_json_ones() {
    let relay = TestRelay::start();
    let mut b = Client::connect_binary(&relay.url).await;
    let keys = Keys::derive(61, 1);
    let good = event(&keys, now(), 1, &[], "fine");
    assert_eq!(b.publish(&good).await, (true, String::new()));
    let (ok, msg) = b.publish(&good).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");
    let mut forged = event(&keys, now() - 1, 1, &[], "forged");
    forged.sig = Keys::derive(61, 2).sign_id(&forged.id);
    let (ok, msg) = b.publish(&forged).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let mut tampered = event(&keys, now() - 2, 1, &[], "original");
    tampered.content = "changed".into();
    let (ok, msg) = b.publish(&tampered).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let future = event(&keys, now() + 86_400, Kind(1).as_u16(), &[], "later");
    let (ok, msg) = b.publish(&future).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    // AUTH over binary.
    assert!(b.auth(&keys, &relay.url).await.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_binary_frames_get_answers_and_the_relay_keeps_serving() {
    let relay = TestRelay::start();
    let keys = Keys::derive(62, 1);
    let mut b = Client::connect_binary(&relay.url).await;
    b.wait_challenge().await;
    let good = nostrwire_wire::encode_event(&event(&keys, now(), 1, &[], "good"));

    let mut frames: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x7f],
        vec![transport::EVENT],
        [&[transport::EVENT][..], &good[..40]].concat(),
        [&[transport::EVENT][..], &good[..good.len() - 1]].concat(),
        [&[transport::EVENT, 0x09][..], &good[1..]].concat(),
        vec![transport::JSON, 0xff, 0xfe],
        [&[transport::JSON][..], b"[\"REQ\""].concat(),
        vec![transport::OK; 40],
    ];
    // Deterministic garbage after each type byte.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..600 {
        let len = (i * 7) % 300;
        let mut f = vec![(i % 7) as u8];
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f.push(x as u8);
        }
        frames.push(f);
    }
    // Valid prefixes with flipped bytes: decodable ids, broken bodies.
    for i in 0..good.len() {
        let mut f = [&[transport::EVENT][..], &good[..]].concat();
        f[1 + i] ^= 0x55;
        frames.push(f);
    }
    let sent = frames.len();
    for f in frames {
        b.send_binary(f).await;
    }
    let mut answers = 0;
    while answers < sent {
        match b.recv().await {
            Got::Ok(_, false, m) | Got::Notice(m) => {
                assert!(m.starts_with("invalid:"), "{m}");
                answers += 1;
            }
            Got::Closed(_, m) => {
                assert!(m.starts_with("invalid:"), "{m}");
                answers += 1;
            }
            // Every byte of a record is covered by the id or the signature,
            // so no flipped copy of `good` may be accepted.
            other => panic!("unexpected answer {other:?}"),
        }
    }
    // 64 characters may be more than 64 bytes; the binary frame cannot carry them.
    let long_id = "é".repeat(40);
    b.req(&long_id, &[filter("{}")]).await;
    assert!(
        matches!(b.recv().await, Got::Closed(s, m) if s == long_id && m.starts_with("invalid:"))
    );
    // A text frame on a binary connection is answered, not fatal.
    b.send_text(r#"["REQ","s",{}]"#).await;
    assert!(matches!(b.recv().await, Got::Notice(m) if m.starts_with("invalid:")));
    // Still serving this connection and everyone else.
    let ev = event(&keys, now(), 1, &[], "still here");
    assert!(b.publish(&ev).await.0);
    let mut other = Client::connect(&relay.url).await;
    assert_eq!(other.query("q", &[filter("{}")]).await, vec![ev]);
}
