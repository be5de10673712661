//! NIP-01, 09, 11, 40 and 45 behaviour, over a real WebSocket to a relay on
//! a loopback port.

mod support;

use nostrwire_event::{Keys, SignedFields};
use support::{event, filter, now, Client, Got, TestRelay};

#[tokio::test]
async fn publish_ok_duplicate_and_invalid() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(1, 1);
    let e = event(&keys, now(), 1, &[&["t", "x"]], "hello");
    assert_eq!(c.publish(&e).await, (true, String::new()));
    let (ok, msg) = c.publish(&e).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");

    let mut forged = event(&keys, now(), 1, &[], "original");
    forged.content = "changed".into();
    let (ok, msg) = c.publish(&forged).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");

    let mut bad_sig = event(&keys, now(), 1, &[], "sig");
    let mut sig = *bad_sig.sig.as_bytes();
    sig[5] ^= 1;
    bad_sig.sig = nostrwire_event::Signature::from_bytes(sig);
    let (ok, msg) = c.publish(&bad_sig).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");

    let future = event(&keys, now() + 3600, 1, &[], "future");
    let (ok, msg) = c.publish(&future).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");

    // A malformed event with a readable id still gets an OK false.
    let json = e.to_json().replace("\"kind\":1", "\"kind\":-1");
    c.send_text(format!("[\"EVENT\",{json}]")).await;
    match c.recv().await {
        Got::Ok(id, false, msg) => {
            assert_eq!(id, e.id.to_hex());
            assert!(msg.starts_with("invalid:"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // Garbage gets a NOTICE and the connection keeps working.
    c.send_text("this is not json").await;
    assert!(matches!(c.recv().await, Got::Notice(m) if m.starts_with("invalid:")));
    c.send_binary(vec![0, 159, 146, 150]).await;
    assert!(matches!(c.recv().await, Got::Notice(_)));
    let events = c.query("s", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert_eq!(events, vec![e]);
}

#[tokio::test]
async fn req_order_limit_eose_live_and_close() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(2, 1);
    let t = now() - 100;
    let mut published = Vec::new();
    for i in 0..6u64 {
        // Two events per second: ties are broken by lowest id.
        let e = event(&keys, t + i / 2, 1, &[], &format!("n{i}"));
        assert!(c.publish(&e).await.0);
        published.push(e);
    }
    let mut expected = published.clone();
    expected.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    assert_eq!(
        c.query("all", &[filter(r#"{"kinds":[1]}"#)]).await,
        expected
    );
    assert_eq!(
        c.query("lim", &[filter(r#"{"kinds":[1],"limit":3}"#)])
            .await,
        expected[..3]
    );
    assert_eq!(
        c.query("zero", &[filter(r#"{"kinds":[1],"limit":0}"#)])
            .await,
        vec![]
    );
    let since_until = format!(r#"{{"since":{},"until":{}}}"#, t + 1, t + 1);
    assert_eq!(
        c.query("range", &[filter(&since_until)]).await,
        expected[2..4]
    );
    assert_eq!(c.query("none", &[filter(r#"{"kinds":[]}"#)]).await, vec![]);
    // Two filters are OR-ed; each keeps its own limit.
    let author = keys.public_key().to_hex();
    let two = [
        filter(&format!(r#"{{"authors":["{author}"],"limit":1}}"#)),
        filter(r#"{"kinds":[1],"limit":2}"#),
    ];
    assert_eq!(c.query("two", &two).await, expected[..2]);

    // The subscription stays open after EOSE and gets new events.
    let mut listener = Client::connect(&relay.url).await;
    listener
        .req("live", &[filter(r#"{"kinds":[1],"limit":0}"#)])
        .await;
    assert_eq!(listener.recv().await, Got::Eose("live".into()));
    let fresh = event(&keys, now(), 1, &[], "live one");
    assert!(c.publish(&fresh).await.0);
    assert_eq!(
        listener.recv().await,
        Got::Event("live".into(), fresh.clone())
    );
    // Non-matching events are not delivered.
    assert!(c.publish(&event(&keys, now(), 7, &[], "+")).await.0);
    listener.expect_silence().await;
    // CLOSE: no CLOSED reply, no more events.
    listener.close("live").await;
    listener.expect_silence().await;
    assert!(
        c.publish(&event(&keys, now(), 1, &[], "after close"))
            .await
            .0
    );
    listener.expect_silence().await;
    // Reusing a subscription id replaces it.
    listener
        .req("s", &[filter(r#"{"kinds":[7],"limit":0}"#)])
        .await;
    assert_eq!(listener.recv().await, Got::Eose("s".into()));
    listener
        .req("s", &[filter(r#"{"kinds":[1],"limit":0}"#)])
        .await;
    assert_eq!(listener.recv().await, Got::Eose("s".into()));
    assert!(c.publish(&event(&keys, now(), 7, &[], "-")).await.0);
    let one = event(&keys, now(), 1, &[], "replaced sub");
    assert!(c.publish(&one).await.0);
    assert_eq!(listener.recv().await, Got::Event("s".into(), one));
}

#[tokio::test]
async fn replaceable_addressable_and_ephemeral() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(3, 1);
    let t = now() - 50;
    let old = event(&keys, t, 0, &[], "{\"name\":\"old\"}");
    let new = event(&keys, t + 10, 0, &[], "{\"name\":\"new\"}");
    assert!(c.publish(&new).await.0);
    let (ok, msg) = c.publish(&old).await;
    assert!(!ok, "older replaceable accepted: {msg}");
    assert_eq!(
        c.query("p", &[filter(r#"{"kinds":[0]}"#)]).await,
        vec![new.clone()]
    );
    let newer = event(&keys, t + 20, 0, &[], "{\"name\":\"newer\"}");
    assert!(c.publish(&newer).await.0);
    assert_eq!(
        c.query("p", &[filter(r#"{"kinds":[0]}"#)]).await,
        vec![newer]
    );

    // Same timestamp: the lowest id stays.
    let a = event(&keys, t, 10002, &[&["r", "wss://a"]], "");
    let b = event(&keys, t, 10002, &[&["r", "wss://b"]], "");
    let (low, high) = if a.id < b.id { (a, b) } else { (b, a) };
    assert!(c.publish(&high).await.0);
    assert!(c.publish(&low).await.0);
    let third = event(&keys, t, 10002, &[&["r", "wss://c"]], "");
    // Accepted only if its id is lower still.
    assert_eq!(c.publish(&third).await.0, third.id < low.id);
    let kept = c.query("r", &[filter(r#"{"kinds":[10002]}"#)]).await;
    assert_eq!(kept, vec![if third.id < low.id { third } else { low }]);

    // Addressable: one per d tag; a missing d tag is d = "".
    let d1 = event(&keys, t, 30023, &[&["d", "one"]], "v1");
    let d1b = event(&keys, t + 1, 30023, &[&["d", "one"]], "v2");
    let d2 = event(&keys, t, 30023, &[&["d", "two"]], "other");
    let none = event(&keys, t, 30023, &[], "no d");
    let empty = event(&keys, t + 1, 30023, &[&["d", ""]], "empty d");
    for e in [&d1, &d1b, &d2, &none, &empty] {
        c.publish(e).await;
    }
    let mut got = c.query("a", &[filter(r#"{"kinds":[30023]}"#)]).await;
    got.sort_by_key(|e| e.content.clone());
    let contents: Vec<&str> = got.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(contents, ["empty d", "other", "v2"]);

    // Ephemeral: delivered live, never stored.
    let mut listener = Client::connect(&relay.url).await;
    listener
        .req("eph", &[filter(r#"{"kinds":[20001],"limit":0}"#)])
        .await;
    assert_eq!(listener.recv().await, Got::Eose("eph".into()));
    let eph = event(&keys, now(), 20001, &[], "ping");
    assert!(c.publish(&eph).await.0);
    assert_eq!(listener.recv().await, Got::Event("eph".into(), eph));
    assert_eq!(
        c.query("e", &[filter(r#"{"kinds":[20001]}"#)]).await,
        vec![]
    );
}

#[tokio::test]
async fn deletion_requests() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let alice = Keys::derive(4, 1);
    let bob = Keys::derive(4, 2);
    let t = now() - 100;
    let note = event(&alice, t, 1, &[], "to delete");
    let bobs = event(&bob, t, 1, &[], "bob's");
    let article = event(&alice, t, 30023, &[&["d", "post"]], "v1");
    for e in [&note, &bobs, &article] {
        assert!(c.publish(e).await.0);
    }
    // Alice deletes her note and, without effect, Bob's.
    let del = event(
        &alice,
        t + 5,
        5,
        &[
            &["e", &note.id.to_hex()],
            &["e", &bobs.id.to_hex()],
            &["k", "1"],
        ],
        "",
    );
    assert!(c.publish(&del).await.0);
    let notes = c.query("n", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert_eq!(notes, vec![bobs.clone()]);
    // The deletion itself is served; re-submitting the deleted note fails.
    assert_eq!(
        c.query("d", &[filter(r#"{"kinds":[5]}"#)]).await,
        vec![del.clone()]
    );
    assert!(!c.publish(&note).await.0);
    // Deleting a deletion has no effect.
    let del2 = event(&alice, t + 6, 5, &[&["e", &del.id.to_hex()]], "");
    assert!(c.publish(&del2).await.0);
    assert_eq!(c.query("d", &[filter(r#"{"kinds":[5]}"#)]).await.len(), 2);

    // Address deletion removes versions up to its time only.
    let addr = format!("30023:{}:post", alice.public_key());
    let del_a = event(&alice, t + 10, 5, &[&["a", &addr]], "");
    assert!(c.publish(&del_a).await.0);
    assert_eq!(
        c.query("a", &[filter(r#"{"kinds":[30023]}"#)]).await,
        vec![]
    );
    let older = event(&alice, t + 9, 30023, &[&["d", "post"]], "older");
    assert!(!c.publish(&older).await.0);
    let newer = event(&alice, t + 11, 30023, &[&["d", "post"]], "newer");
    assert!(c.publish(&newer).await.0);
    assert_eq!(
        c.query("a", &[filter(r#"{"kinds":[30023]}"#)]).await,
        vec![newer]
    );
    // Bob cannot delete Alice's address.
    let bob_del = event(&bob, t + 20, 5, &[&["a", &addr]], "");
    assert!(c.publish(&bob_del).await.0);
    assert_eq!(
        c.query("a", &[filter(r#"{"kinds":[30023]}"#)]).await.len(),
        1
    );
}

#[tokio::test]
async fn expiration_and_count() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(5, 1);
    let expired = event(
        &keys,
        now() - 10,
        1,
        &[&["expiration", &(now() - 1).to_string()]],
        "gone",
    );
    let (ok, msg) = c.publish(&expired).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let soon = event(
        &keys,
        now(),
        1,
        &[&["expiration", &(now() + 2).to_string()]],
        "soon gone",
    );
    assert!(c.publish(&soon).await.0);
    // One base time: `now() - i` per iteration repeats a created_at (and so
    // an id) whenever a second boundary passes between two publishes.
    let base = now();
    for i in 0..4 {
        assert!(
            c.publish(&event(&keys, base - i, 7, &[&["t", "x"]], "+"))
                .await
                .0
        );
    }
    c.send_text(r##"["COUNT","c",{"kinds":[7]},{"kinds":[7],"#t":["x"]},{"kinds":[1]}]"##)
        .await;
    assert_eq!(c.recv().await, Got::Count("c".into(), 5));
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    assert_eq!(c.query("k", &[filter(r#"{"kinds":[1]}"#)]).await, vec![]);
    c.send_text(r#"["COUNT","c2",{"kinds":[1]}]"#).await;
    assert_eq!(c.recv().await, Got::Count("c2".into(), 0));
}

#[tokio::test]
async fn limits_are_answered_with_prefixes() {
    let relay = TestRelay::start_with(|c| {
        c.limits.max_subscriptions = 2;
        c.limits.max_filters = 2;
        c.limits.max_message_bytes = 4096;
        c.limits.max_event_tags = 3;
    });
    let mut c = Client::connect(&relay.url).await;
    c.req("a", &[filter("{}")]).await;
    assert_eq!(c.recv().await, Got::Eose("a".into()));
    c.req("b", &[filter("{}")]).await;
    assert_eq!(c.recv().await, Got::Eose("b".into()));
    c.req("c", &[filter("{}")]).await;
    assert!(
        matches!(c.recv().await, Got::Closed(s, m) if s == "c" && m.starts_with("rate-limited:"))
    );
    c.close("a").await;
    c.send_text(r#"["REQ","x",{},{},{}]"#).await;
    assert!(matches!(c.recv().await, Got::Closed(s, m) if s == "x" && m.starts_with("invalid:")));
    c.send_text(r#"["REQ","bad",{"ids":["abc"]}]"#).await;
    assert!(matches!(c.recv().await, Got::Closed(s, m) if s == "bad" && m.starts_with("invalid:")));
    let keys = Keys::derive(6, 1);
    let many_tags = event(
        &keys,
        now(),
        1,
        &[&["t", "1"], &["t", "2"], &["t", "3"], &["t", "4"]],
        "",
    );
    let (ok, msg) = c.publish(&many_tags).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let protected = event(&keys, now(), 1, &[&["-"]], "mine only");
    let (ok, msg) = c.publish(&protected).await;
    assert!(!ok && msg.starts_with("auth-required:"), "{msg}");
    // An oversized message ends this connection, not the relay.
    c.send_text(format!("[\"EVENT\",\"{}\"]", "x".repeat(8000)))
        .await;
    let mut other = Client::connect(&relay.url).await;
    assert!(
        other
            .publish(&event(&keys, now(), 1, &[], "still serving"))
            .await
            .0
    );
}

#[tokio::test]
async fn nip11_and_metrics_over_http() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = TestRelay::start_with(|c| {
        c.info.icon = "https://relay.example/icon.png".into();
        c.info.relay_countries = vec!["*".into()];
    });
    let get = |path: &'static str, accept: &'static str| {
        let addr = relay.addr();
        async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        }
    };
    let info = get("/", "application/nostr+json").await;
    assert!(info.starts_with("HTTP/1.1 200"), "{info}");
    assert!(info.contains("Access-Control-Allow-Origin: *"));
    let body = info.split("\r\n\r\n").nth(1).unwrap();
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        doc["supported_nips"],
        serde_json::json!([1, 9, 11, 40, 42, 45, 50, 62, 70, 77])
    );
    assert_eq!(doc["limitation"]["max_subid_length"], 64);
    assert_eq!(doc["limitation"]["max_filters"], 32);
    // Optional fields appear when set, and only then.
    assert_eq!(doc["icon"], "https://relay.example/icon.png");
    assert_eq!(doc["relay_countries"], serde_json::json!(["*"]));
    for unset in ["banner", "contact", "pubkey", "language_tags", "tags"] {
        assert!(doc.get(unset).is_none(), "{unset}: {doc}");
    }
    let metrics = get("/metrics", "*/*").await;
    assert!(metrics.contains("nostrwire_connections_open"), "{metrics}");
    assert!(metrics.contains("nostrwire_db_events 0"), "{metrics}");
    assert!(
        metrics.contains("nostrwire_db_index_backlog_events 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("nostrwire_db_search_backlog_events 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("nostrwire_event_write_seconds_count 0"),
        "{metrics}"
    );
    // One stored event: one write latency observed.
    let mut c = Client::connect(&relay.url).await;
    let e = event(&Keys::derive(1, 2), now(), 1, &[], "timed");
    assert_eq!(c.publish(&e).await, (true, String::new()));
    let metrics = get("/metrics", "*/*").await;
    assert!(
        metrics.contains("nostrwire_event_write_seconds_count 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn slow_reader_is_cut_off_others_keep_going() {
    let relay = TestRelay::start_with(|c| {
        c.limits.max_connection_bytes = 1 << 20;
        c.limits.slow_reader_seconds = 1;
    });
    let mut writer = Client::connect(&relay.url).await;
    let keys = Keys::derive(7, 1);
    let big = "x".repeat(100_000);
    // One base time, so the 40 events have 40 distinct ids however slow the
    // machine is.
    let base = now();
    for i in 0..40 {
        assert!(
            writer
                .publish(&event(&keys, base - i, 1, &[], &big))
                .await
                .0
        );
    }
    // Ask for 4 MB of events eight times over and read nothing: once the
    // kernel buffers are full the relay's queue stays full and it cuts off.
    let mut slow = Client::connect(&relay.url).await;
    for i in 0..8 {
        slow.req(&format!("s{i}"), &[filter(r#"{"kinds":[1]}"#)])
            .await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    // It is cut off: told why when its socket has room for the NOTICE,
    // closed either way, and its connection released.
    let mut ended = false;
    for _ in 0..10_000 {
        match slow.recv_timeout(std::time::Duration::from_secs(2)).await {
            Some(Got::Notice(m)) if m.contains("slow reader") => {}
            Some(_) => continue,
            None => {
                ended = true;
                break;
            }
        }
    }
    assert!(ended, "the slow reader was not disconnected");
    let mut open = String::new();
    for _ in 0..50 {
        let metrics = support::http_get(relay.addr(), "/metrics", "*/*").await;
        open = metrics
            .lines()
            .find(|l| l.starts_with("nostrwire_connections_open "))
            .unwrap_or_default()
            .to_string();
        if open == "nostrwire_connections_open 1" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        open, "nostrwire_connections_open 1",
        "the slow reader was not released"
    );
    // A reader that keeps up gets everything, however large.
    assert_eq!(
        writer.query("w", &[filter(r#"{"kinds":[1]}"#)]).await.len(),
        40
    );
}

#[tokio::test]
async fn hostile_input_gets_answers_and_the_relay_keeps_serving() {
    let relay = TestRelay::start();
    let keys = Keys::derive(8, 1);
    let mut hostile = Client::connect(&relay.url).await;
    // Each malformed message gets exactly one answer and the connection stays.
    let malformed = [
        "",
        "[",
        "[]",
        "{}",
        "null",
        r#"["EVENT"]"#,
        r#"["EVENT",{}]"#,
        r#"["EVENT",{"id":1}]"#,
        r#"["REQ"]"#,
        r#"["REQ",1,{}]"#,
        r#"["CLOSE"]"#,
        r#"["UNKNOWN","x"]"#,
        "[\"REQ\",\"s\",{\"kinds\":[1e3]}]",
        "[\"REQ\",\"s\",{\"authors\":[\"ABCD\"]}]",
        "[\"EVENT\",{\"content\":\"\\ud800\"}]",
        "[\"REQ\",\"s\",{}] trailing",
    ];
    for text in malformed {
        hostile.send_text(text).await;
        let got = hostile.recv().await;
        assert!(
            matches!(&got,
                Got::Notice(m) | Got::Closed(_, m) | Got::Ok(_, false, m)
                    if m.starts_with("invalid:")),
            "{text:?} got {got:?}"
        );
    }
    // Deterministic binary garbage: a NOTICE each, never a disconnect.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for len in [1usize, 7, 64, 300, 4096] {
        let bytes = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        hostile.send_binary(bytes).await;
        assert!(matches!(hostile.recv().await, Got::Notice(_)));
    }
    // Thousands of subscriptions: the first `max_subscriptions` (200) are
    // served, every other one is refused with CLOSED, none is lost.
    for i in 0..3000 {
        hostile
            .send_text(format!(r#"["REQ","sub{i}",{{"kinds":[1],"limit":0}}]"#))
            .await;
    }
    let (mut eose, mut closed) = (0, 0);
    while eose + closed < 3000 {
        match hostile.recv().await {
            Got::Eose(_) => eose += 1,
            Got::Closed(_, m) if m.starts_with("rate-limited:") => closed += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((eose, closed), (200, 2800));
    // Everyone else is still served, and so is the hostile connection.
    let mut other = Client::connect(&relay.url).await;
    let e = event(&keys, now(), 1, &[], "still here");
    assert!(other.publish(&e).await.0);
    assert_eq!(
        other.query("q", &[filter(r#"{"kinds":[1]}"#)]).await,
        vec![e.clone()]
    );
    hostile.close("sub0").await;
    assert_eq!(
        hostile.query("q", &[filter(r#"{"kinds":[1]}"#)]).await,
        vec![e]
    );
}

/// A client that leaves Nagle's algorithm on (tokio-tungstenite's default,
/// and nostr-bench's) holds each message while the one before is not
/// acknowledged. The relay acknowledges at once the reads it does not
/// answer (a `CLOSE`) and lets its answer acknowledge the others (`EVENT`:
/// its `OK`; `REQ`: its results), so no round of publish, query and close
/// waits for a delayed acknowledgement (40 ms on Linux). The median round
/// is compared with that wait, which a relay that leaves a `CLOSE`
/// unacknowledged pays on every round.
#[tokio::test]
async fn a_client_with_nagle_on_never_waits_for_a_delayed_acknowledgement() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(4, 7);
    let mut rounds = Vec::new();
    for i in 0..21 {
        let started = std::time::Instant::now();
        let e = event(&keys, now(), 1, &[&["t", "nagle"]], &format!("round {i}"));
        assert_eq!(c.publish(&e).await, (true, String::new()));
        let found = c
            .query("q", &[filter(r##"{"#t":["nagle"],"limit":1}"##)])
            .await;
        assert_eq!(found.len(), 1);
        c.close("q").await;
        rounds.push(started.elapsed());
    }
    rounds.sort();
    let median = rounds[rounds.len() / 2];
    assert!(
        median < std::time::Duration::from_millis(20),
        "median round {median:?}: a delayed acknowledgement held the client (rounds {rounds:?})"
    );
}
