//! The relay against hostile clients (docs/security.md), over real sockets:
//! each test is one attack, and checks both that it is refused and that the
//! relay keeps serving.

mod support;

use nostrwire_event::Keys;
use support::{event, filter, now, Client};

/// NIP-09: a deletion by anyone but the author never weakens the author's
/// tombstone, whether the deleted event is stored or not.
#[tokio::test]
async fn deletions_by_others_never_undo_a_deletion() {
    let relay = support::TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let victim = Keys::derive(40, 1);
    let attacker = Keys::derive(40, 2);
    let t = now() - 100;

    // The event is stored, then deleted by its author, then "deleted" again
    // by someone else.
    let note = event(&victim, t, 1, &[], "deleted for good");
    assert!(c.publish(&note).await.0);
    let own = event(&victim, t + 1, 5, &[&["e", &note.id.to_hex()]], "");
    assert!(c.publish(&own).await.0);
    let other = event(&attacker, t + 2, 5, &[&["e", &note.id.to_hex()]], "");
    assert!(c.publish(&other).await.0);
    let (ok, msg) = c.publish(&note).await;
    assert!(
        !ok,
        "a deleted event came back after another author's deletion: {msg}"
    );
    assert!(msg.starts_with("blocked:"), "{msg}");
    assert!(c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await.is_empty());

    // Deletions of an event the relay has not seen yet, in either order.
    for (n, attacker_first) in [(0, true), (1, false)] {
        let later = event(&victim, t + 10 + n, 1, &[], &format!("arrives later {n}"));
        let own = event(&victim, t + 20, 5, &[&["e", &later.id.to_hex()]], "");
        let other = event(&attacker, t + 21, 5, &[&["e", &later.id.to_hex()]], "");
        let order = if attacker_first {
            [&other, &own]
        } else {
            [&own, &other]
        };
        for deletion in order {
            assert!(c.publish(deletion).await.0);
        }
        let (ok, msg) = c.publish(&later).await;
        assert!(!ok, "attacker first: {attacker_first}: {msg}");
        assert!(msg.starts_with("blocked:"), "{msg}");
    }
    // Another author's deletion alone binds nothing.
    let kept = event(&victim, t + 30, 1, &[], "not deleted");
    let other = event(&attacker, t + 31, 5, &[&["e", &kept.id.to_hex()]], "");
    assert!(c.publish(&other).await.0);
    assert!(c.publish(&kept).await.0);
    assert_eq!(
        c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await,
        vec![kept]
    );
}

/// The raw HTTP response (head and body) to `request`.
async fn http_raw(addr: std::net::SocketAddr, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out
}

/// NIP-42: an AUTH event signed for another relay is refused, so a
/// malicious relay cannot pass our challenge to its users and use their
/// answers here. Without `relay.url`, the tag must name the host and path
/// the client connected to.
#[tokio::test]
async fn auth_signed_for_another_relay_is_refused() {
    let relay = support::TestRelay::start();
    let keys = Keys::derive(41, 1);
    let mut c = Client::connect(&relay.url).await;
    let challenge = c.wait_challenge().await;
    for elsewhere in [
        "wss://evil.example/",
        "ws://127.0.0.1:1/",
        "wss://evil.example/127.0.0.1",
    ] {
        let (ok, msg) = c
            .auth_with(
                &keys,
                now(),
                &[&["relay", elsewhere], &["challenge", &challenge]],
            )
            .await;
        assert!(!ok && msg.starts_with("invalid:"), "{elsewhere}: {msg}");
    }
    // Scheme, host case and a trailing slash do not matter.
    let here = format!("wss://{}/", relay.addr())
        .to_uppercase()
        .replace("WSS", "wss");
    let (ok, msg) = c
        .auth_with(
            &keys,
            now(),
            &[&["relay", &here], &["challenge", &challenge]],
        )
        .await;
    assert!(ok, "{here}: {msg}");

    // With `relay.url`, that URL is the one to name.
    let named =
        support::TestRelay::start_with(|c| c.relay.url = "wss://relay.example/nostr".into());
    let mut c = Client::connect(&named.url).await;
    let challenge = c.wait_challenge().await;
    let (ok, msg) = c
        .auth_with(
            &keys,
            now(),
            &[&["relay", &named.url], &["challenge", &challenge]],
        )
        .await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let (ok, msg) = c
        .auth_with(
            &keys,
            now(),
            &[
                &["relay", "wss://Relay.Example:443/nostr/"],
                &["challenge", &challenge],
            ],
        )
        .await;
    assert!(ok, "{msg}");
}

/// One connection may authenticate as `auth.max_pubkeys` pubkeys, no more.
#[tokio::test]
async fn a_connection_authenticates_as_a_bounded_number_of_pubkeys() {
    let relay = support::TestRelay::start();
    let max = relay.config.auth.max_pubkeys as u64;
    let mut c = Client::connect(&relay.url).await;
    for i in 0..max {
        let (ok, msg) = c.auth(&Keys::derive(42, i), &relay.url).await;
        assert!(ok, "{i}: {msg}");
    }
    let (ok, msg) = c.auth(&Keys::derive(42, max), &relay.url).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    // One it already has is fine.
    let (ok, msg) = c.auth(&Keys::derive(42, 0), &relay.url).await;
    assert!(ok, "{msg}");
}

/// Subscriptions are charged to the connection's memory budget: a REQ that
/// would go over it gets CLOSED `rate-limited:`, closing others makes room,
/// and other connections are not affected.
#[tokio::test]
async fn subscriptions_are_held_to_the_connection_budget() {
    let relay = support::TestRelay::start_with(|c| c.limits.max_connection_bytes = 2 << 20);
    let mut c = Client::connect(&relay.url).await;
    // Three filters of 5,000 authors each: about 1 MB held per REQ.
    let authors: Vec<String> = (0..5_000u32)
        .map(|i| format!("\"{:064x}\"", u64::from(i) * 7919 + 1))
        .collect();
    let one = format!("{{\"authors\":[{}],\"kinds\":[1]}}", authors.join(","));
    let req = |id: &str| format!("[\"REQ\",\"{id}\",{one},{one},{one}]");
    let mut refused = None;
    for i in 0..5 {
        let id = format!("big{i}");
        c.send_text(req(&id)).await;
        match c.recv().await {
            support::Got::Eose(s) => assert_eq!(s, id),
            support::Got::Closed(s, m) => {
                assert_eq!(s, id);
                assert!(m.starts_with("rate-limited:"), "{m}");
                refused = Some(i);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let refused = refused.expect("the budget never refused a subscription");
    assert!(refused >= 1, "even the first subscription was refused");
    // Another connection is unaffected; closing makes room again.
    let mut other = Client::connect(&relay.url).await;
    other.req("small", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert!(matches!(other.recv().await, support::Got::Eose(_)));
    for i in 0..refused {
        c.close(&format!("big{i}")).await;
    }
    let mut reopened = false;
    for _ in 0..50 {
        c.send_text(req("again")).await;
        match c.recv().await {
            support::Got::Eose(_) => {
                reopened = true;
                break;
            }
            support::Got::Closed(..) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        reopened,
        "closed subscriptions did not give their room back"
    );
}

/// NIP-50: a search string is parsed once, when the REQ comes, and may
/// have at most `search.max_terms` terms; live delivery goes on.
#[tokio::test]
async fn hostile_searches_are_refused_when_they_arrive() {
    let relay = support::TestRelay::start();
    let max = relay.config.search.max_terms;
    let mut hostile = Client::connect(&relay.url).await;
    let terms: String = (0..40_000).map(|i| format!("w{i} ")).collect();
    let req = serde_json::json!(["REQ", "s", {"search": terms}]).to_string();
    hostile.send_text(req).await;
    match hostile.recv().await {
        support::Got::Closed(s, m) => assert!(s == "s" && m.starts_with("invalid:"), "{m}"),
        other => panic!("{other:?}"),
    }
    // At the limit it is a subscription like any other, live included.
    let words: Vec<String> = (0..max).map(|i| format!("word{i}")).collect();
    let mut sub = Client::connect(&relay.url).await;
    let req = serde_json::json!(["REQ", "ok", {"search": words.join(" ")}]).to_string();
    sub.send_text(req).await;
    assert!(matches!(sub.recv().await, support::Got::Eose(_)));
    let keys = Keys::derive(43, 1);
    let note = event(&keys, now(), 1, &[], &words.join(" "));
    let mut publisher = Client::connect(&relay.url).await;
    assert!(publisher.publish(&note).await.0);
    match sub.recv().await {
        support::Got::Event(s, e) => assert!(s == "ok" && e == note),
        other => panic!("{other:?}"),
    }
}

/// An event that fails verification never learns whether its id is
/// stored: it gets `invalid:`, not `duplicate:`.
#[tokio::test]
async fn an_invalid_event_with_a_stored_id_is_invalid_not_a_duplicate() {
    let relay = support::TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(44, 1);
    let stored = event(&keys, now(), 1, &[], "stored");
    assert!(c.publish(&stored).await.0);
    let mut forged = stored.clone();
    let mut sig = *forged.sig.as_bytes();
    sig[9] ^= 1;
    forged.sig = nostrwire_event::Signature::from_bytes(sig);
    let (ok, msg) = c.publish(&forged).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let mut changed = stored.clone();
    changed.content = "changed".into();
    let (ok, msg) = c.publish(&changed).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    let (ok, msg) = c.publish(&stored).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");
}

/// Idle connections (no subscription, nothing sent) are closed after
/// `limits.idle_seconds`; a connection with a subscription stays.
#[tokio::test]
async fn idle_connections_are_closed_and_subscribed_ones_stay() {
    let relay = support::TestRelay::start_with(|c| {
        c.limits.idle_seconds = 1;
        c.websocket.ping_seconds = 0;
    });
    let mut idle = Client::connect(&relay.url).await;
    let mut listening = Client::connect(&relay.url).await;
    listening.req("live", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert!(matches!(listening.recv().await, support::Got::Eose(_)));
    let mut closed = false;
    for _ in 0..10 {
        if idle
            .recv_timeout(std::time::Duration::from_secs(1))
            .await
            .is_none()
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "an idle connection was kept");
    let note = event(&Keys::derive(45, 1), now(), 1, &[], "still here");
    let mut publisher = Client::connect(&relay.url).await;
    assert!(publisher.publish(&note).await.0);
    assert!(matches!(listening.recv().await, support::Got::Event(_, e) if e == note));
}

/// A client that answers nothing, not even pings, is disconnected.
#[tokio::test]
async fn a_client_that_answers_no_ping_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = support::TestRelay::start_with(|c| c.websocket.ping_seconds = 1);
    let mut s = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
    let upgrade = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                   Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    s.write_all(upgrade.as_bytes()).await.unwrap();
    // Read (never answer) until the relay closes: the handshake, the AUTH
    // challenge, a ping, a close frame.
    let mut buf = vec![0u8; 4096];
    let mut seen = Vec::new();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "a silent client was kept");
    // A ping frame (0x89) was sent before it was dropped.
    assert!(seen.windows(2).any(|w| w == [0x89, 0x00]), "no ping sent");
}

/// `nostrwire_sockets_open` as a client at `source` reads it.
async fn sockets_open_seen_from(relay: std::net::SocketAddr, source: &str) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(relay).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out.lines()
        .find_map(|l| l.strip_prefix("nostrwire_sockets_open "))
        .and_then(|v| v.parse().ok())
        .expect("sockets gauge")
}

/// `rate.connections_per_ip` counts sockets from the moment they are
/// accepted, upgraded or not; other addresses are not affected.
#[tokio::test]
async fn connections_per_address_are_limited_by_default() {
    let relay = support::TestRelay::start();
    let max = relay.config.rate.connections_per_ip;
    assert!(max > 0, "no default limit");
    let mut held = Vec::new();
    for _ in 0..max / 2 {
        held.push(Client::connect(&relay.url).await);
    }
    // Half-open sockets (no request yet) count too.
    let mut raw = Vec::new();
    for _ in 0..max - max / 2 {
        raw.push(tokio::net::TcpStream::connect(relay.addr()).await.unwrap());
    }
    // Once the relay holds every one of them (asked from another address,
    // which the limit does not touch), one more is refused.
    let mut open = 0;
    for _ in 0..100 {
        open = sockets_open_seen_from(relay.addr(), "127.0.0.3").await;
        // The metrics request is a socket too.
        if open > max {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(open > max, "the relay accepted {open} sockets of {max}");
    let refused = tokio_tungstenite::connect_async(relay.url.as_str()).await;
    assert!(
        refused.is_err(),
        "one connection more than the limit was accepted"
    );
    // Another address gets in.
    let mut other = Client::connect_from(&relay.url, relay.addr(), "127.0.0.2").await;
    other.req("x", &[filter("{}")]).await;
    assert!(matches!(other.recv().await, support::Got::Eose(_)));
    drop(raw);
    let mut again = None;
    for _ in 0..50 {
        if let Ok(c) = tokio_tungstenite::connect_async(relay.url.as_str()).await {
            again = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "slots were not given back");
}

/// `/metrics` answers clients on this machine only by default, never
/// with CORS headers, and nobody when it is off; behind a proxy the
/// forwarded address decides.
#[tokio::test]
async fn metrics_are_served_to_loopback_clients_only() {
    let relay = support::TestRelay::start();
    let get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let reply = http_raw(relay.addr(), get).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(!reply.contains("Access-Control-Allow-Origin"), "{reply}");
    assert!(reply.contains("nostrwire_ingest_queue_bytes"), "{reply}");

    let off = support::TestRelay::start_with(|c| {
        c.relay.metrics = nostrwire_relay::config::MetricsAccess::Off
    });
    assert!(http_raw(off.addr(), get).await.starts_with("HTTP/1.1 404"));

    let proxied =
        support::TestRelay::start_with(|c| c.relay.real_ip_header = "X-Forwarded-For".into());
    let from_outside =
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 127.0.0.1, 203.0.113.9\r\n\r\n";
    assert!(http_raw(proxied.addr(), from_outside)
        .await
        .starts_with("HTTP/1.1 404"));
    let from_here = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 127.0.0.1\r\n\r\n";
    assert!(http_raw(proxied.addr(), from_here)
        .await
        .starts_with("HTTP/1.1 200"));
}

/// The relay's ingest queue holds, per connection, at most twice
/// `max_message_bytes`: a client that sends faster than its events are
/// handled stops being read instead of being buffered. Its events are all
/// answered in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_sender_is_held_to_its_share_of_the_ingest_queue() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.sh");
    // Accepts every event, 50 ms each.
    let plugin = "#!/bin/sh\nwhile IFS= read -r line; do\n  sleep 0.05\n  \
                  id=$(printf '%s\\n' \"$line\" | grep -o '\"id\":\"[0-9a-f]*\"' | head -n 1 | cut -d'\"' -f4)\n  \
                  printf '{\"id\":\"%s\",\"action\":\"accept\"}\\n' \"$id\"\ndone\n";
    std::fs::write(&path, plugin).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let max_message = 128 << 10;
    let relay = support::TestRelay::start_with(|c| {
        c.policy.plugin = path.clone();
        c.performance.ingest_threads = 1;
        c.limits.max_message_bytes = max_message;
    });
    let keys = Keys::derive(46, 1);
    let content = "y".repeat(50_000);
    let events: Vec<_> = (0..30)
        .map(|i| event(&keys, now() - i, 1, &[], &content))
        .collect();
    let mut c = Client::connect(&relay.url).await;
    let addr = relay.addr();
    let sampler = tokio::spawn(async move {
        let mut most = 0u64;
        for _ in 0..40 {
            let metrics = support::http_get(addr, "/metrics", "*/*").await;
            let queued: u64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix("nostrwire_ingest_queue_bytes "))
                .and_then(|v| v.parse().ok())
                .expect("gauge");
            most = most.max(queued);
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        most
    });
    for e in &events {
        c.send_event(e).await;
    }
    let mut answered = 0;
    while answered < events.len() {
        match c.recv().await {
            support::Got::Ok(_, ok, msg) => {
                assert!(ok, "{msg}");
                answered += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    let most = sampler.await.unwrap();
    let share = 2 * (max_message as u64 + 64);
    assert!(most > 0, "the gauge never saw a queued event");
    assert!(
        most <= share,
        "{most} bytes queued for one connection, share {share}"
    );
}

/// The query pool takes connections in turn: a connection with hundreds of
/// queries waiting does not hold up another connection's one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connections_queries_do_not_hold_up_anothers() {
    let relay = support::TestRelay::start_with(|c| c.performance.query_threads = 1);
    let keys = Keys::derive(47, 1);
    let mut publisher = Client::connect(&relay.url).await;
    let base = now() - 10_000;
    let events: Vec<_> = (0..1_000)
        .map(|i| event(&keys, base + i, 1, &[], "n"))
        .collect();
    for e in &events {
        publisher.send_event(e).await;
    }
    for _ in &events {
        assert!(matches!(
            publisher.recv().await,
            support::Got::Ok(_, true, _)
        ));
    }
    // 200 COUNTs of everything, one slice each: in one queue for all, the
    // probe's REQ would wait for all of them.
    let mut heavy = Client::connect(&relay.url).await;
    let total = 200;
    for i in 0..total {
        heavy
            .send_text(format!(r#"["COUNT","c{i}",{{"kinds":[1]}}]"#))
            .await;
    }
    // When each answer arrives (read as they come, on another task).
    let reader = tokio::spawn(async move {
        let mut arrivals = Vec::new();
        for _ in 0..total {
            match heavy
                .recv_timeout(std::time::Duration::from_secs(120))
                .await
            {
                Some(support::Got::Count(_, n)) => {
                    assert_eq!(n, 1_000);
                    arrivals.push(std::time::Instant::now());
                }
                other => panic!("{other:?}"),
            }
        }
        arrivals
    });
    let mut probe = Client::connect(&relay.url).await;
    let got = probe
        .query("p", &[filter(r#"{"kinds":[1],"limit":5}"#)])
        .await;
    let answered_at = std::time::Instant::now();
    assert_eq!(got.len(), 5);
    let arrivals = reader.await.unwrap();
    let before = arrivals.iter().filter(|t| **t < answered_at).count();
    assert!(
        before < total / 2,
        "the probe's REQ waited for {before} of {total} COUNTs of another connection"
    );
}

/// Ingest takes connections in turns, by bytes: connections with
/// megabyte messages queued do not hold up another connection's small one
/// for longer than about one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_of_other_connections_do_not_hold_up_a_small_one() {
    use std::sync::{Arc, Mutex};
    let relay = support::TestRelay::start_with(|c| c.performance.ingest_threads = 1);
    let big = "z".repeat(900_000);
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let heavy_connections = 6;
    let per_connection = 6;
    let mut tasks = Vec::new();
    for c in 0..heavy_connections {
        let keys = Keys::derive(48, c);
        let events: Vec<_> = (0..per_connection)
            .map(|i| event(&keys, now() - i, 1, &[], &big))
            .collect();
        let mut heavy = Client::connect(&relay.url).await;
        let arrivals = arrivals.clone();
        tasks.push(tokio::spawn(async move {
            let (mut tx, mut rx) = (Vec::new(), 0);
            for e in &events {
                tx.push(e.id);
            }
            let send = async {
                for e in &events {
                    heavy.send_event(e).await;
                }
            };
            // Sending waits for the relay to read (backpressure): answers
            // are read by the same task after.
            send.await;
            while rx < events.len() {
                match heavy
                    .recv_timeout(std::time::Duration::from_secs(120))
                    .await
                {
                    Some(support::Got::Ok(_, true, _)) => {
                        arrivals.lock().unwrap().push(std::time::Instant::now());
                        rx += 1;
                    }
                    other => panic!("{other:?}"),
                }
            }
        }));
    }
    // Give the heavy connections time to fill their shares. Too short a
    // wait can only make the check easier to pass, never fail it.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut probe = Client::connect(&relay.url).await;
    let sent_at = std::time::Instant::now();
    let (ok, msg) = probe
        .publish(&event(&Keys::derive(48, 99), now(), 1, &[], "small"))
        .await;
    let answered_at = std::time::Instant::now();
    assert!(ok, "{msg}");
    for t in tasks {
        t.await.unwrap();
    }
    let meanwhile = arrivals
        .lock()
        .unwrap()
        .iter()
        .filter(|t| **t > sent_at && **t < answered_at)
        .count();
    assert!(
        meanwhile < heavy_connections as usize,
        "the small EVENT waited for {meanwhile} large ones of other connections"
    );
}
