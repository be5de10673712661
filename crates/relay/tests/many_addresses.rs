//! Attackers with many addresses, over real sockets: the relay-wide limits
//! (sockets, the memory budget) hold where per-address ones cannot, and a
//! client that reads keeps being served.

mod support;

use std::time::Duration;

use support::{event, filter, now, Client, Got};
use tokio::io::AsyncReadExt;

/// Loopback address `k` of the attackers: 127.0.0.2 and up.
fn attacker(k: usize) -> String {
    format!("127.0.0.{}", 2 + k % 200)
}

/// A burst of connections, faster than connection tasks start, never
/// holds more sockets than `limits.max_connections`: each slot is taken
/// at `accept`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connections_never_holds_more_than_the_limit() {
    const LIMIT: usize = 4;
    let relay = support::TestRelay::start_with(|c| c.limits.max_connections = LIMIT);
    let mut sockets = Vec::new();
    for k in 0..60 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(format!("{}:0", attacker(k)).parse().unwrap())
            .unwrap();
        sockets.push(socket.connect(relay.addr()).await.unwrap());
    }
    // A socket the relay took waits for its request head (10 s); one it
    // refused is closed at once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut held = 0;
    for s in &mut sockets {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(20), s.read(&mut byte)).await {
            Err(_) => held += 1,
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(_)) => panic!("the relay sent bytes before a request"),
        }
    }
    assert!(held >= 1, "the relay took no connection at all");
    assert!(
        held <= LIMIT,
        "the relay held {held} sockets with limits.max_connections = {LIMIT}"
    );
    drop(sockets);
    // The slots come back.
    let mut back = false;
    for _ in 0..50 {
        if tokio_tungstenite::connect_async(relay.url.as_str())
            .await
            .is_ok()
        {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "slots were not given back");
}

/// A gauge's or counter's value on a `/metrics` page.
fn gauge(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

/// Opens `n` connections from 20 addresses, each asking for every note
/// twice and never reading.
async fn slow_readers(relay: &support::TestRelay, n: usize) -> Vec<Client> {
    let mut readers = Vec::new();
    for k in 0..n {
        let mut c = Client::connect_from(&relay.url, relay.addr(), &attacker(k % 20)).await;
        for r in 0..2 {
            c.req(
                &format!("all{r}"),
                &[filter(r#"{"kinds":[1],"limit":5000}"#)],
            )
            .await;
        }
        readers.push(c);
    }
    readers
}

/// Sets up stored notes of about 2 KB each for the queries below.
async fn store_notes(url: &str, n: u64) {
    let mut c = Client::connect(url).await;
    let keys = nostrwire_event::Keys::derive(77, 1);
    let text = "x".repeat(2_000);
    for i in 0..n {
        let e = event(&keys, now() - 10_000 + i, 1, &[], &format!("{i} {text}"));
        assert!(c.publish(&e).await.0);
    }
}

/// Many addresses' slow readers spend the relay's memory budget: those
/// holding more than their share give way (their queries wait and end
/// with `CLOSED rate-limited:`, or they are cut off for not reading),
/// while a client that reads is served in full, and the budget is given
/// back when they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_from_many_addresses_give_way_to_a_reader() {
    let relay = support::TestRelay::start_with(|c| {
        c.limits.relay_memory_bytes = 4 << 20;
        c.limits.slow_reader_seconds = 2;
    });
    store_notes(&relay.url, 600).await;
    // 40 connections from 20 addresses (2 each: within every per-address
    // limit), each asking for every note twice and never reading.
    let readers = slow_readers(&relay, 40).await;
    let metrics = || support::http_get(relay.addr(), "/metrics", "text/plain");
    // The slow readers' queued results reach the budget as the relay
    // answers their REQs.
    let mut held = 0;
    for _ in 0..200 {
        held = gauge(&metrics().await, "nostrwire_relay_memory_bytes");
        if held > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held > 0, "the slow readers hold nothing");
    // The reader, from its own address, gets every note it asks for.
    let mut reader = Client::connect(&relay.url).await;
    let got = reader
        .query("mine", &[filter(r#"{"kinds":[1],"limit":600}"#)])
        .await;
    assert_eq!(got.len(), 600, "a reading client was not served in full");
    // The slow readers gave way: refused, waited out, or cut off.
    let mut gave_way = 0;
    for _ in 0..100 {
        let page = metrics().await;
        gave_way = gauge(&page, "nostrwire_relay_memory_refusals_total")
            + gauge(&page, "nostrwire_relay_memory_cut_offs_total");
        if gave_way > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gave_way > 0, "nobody gave way to the budget");
    let page = metrics().await;
    let used = gauge(&page, "nostrwire_relay_memory_bytes");
    let cap = gauge(&page, "nostrwire_relay_memory_cap_bytes");
    // At most every connection's share beyond the cap.
    assert!(used <= 2 * cap, "{used} bytes held of a {cap}-byte budget");
    // Every connection holds something (its read buffer, at least): once
    // all have gone, nothing is held.
    drop(readers);
    drop(reader);
    let mut left = 0;
    for _ in 0..200 {
        left = gauge(&metrics().await, "nostrwire_relay_memory_bytes");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "bytes still held after every client left");
    // Still serving.
    let mut after = Client::connect(&relay.url).await;
    after
        .req("after", &[filter(r#"{"kinds":[1],"limit":1}"#)])
        .await;
    assert!(matches!(after.recv().await, Got::Event(..)));
}

/// With the budget spent, a new subscription from a connection holding
/// more than its share gets `CLOSED rate-limited:`; one within its share
/// is opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_refuses_requests_over_the_share_only() {
    let relay = support::TestRelay::start_with(|c| c.limits.relay_memory_bytes = 6 << 20);
    // Oversized subscriptions (about 1 MB of authors each) from two addresses.
    let authors: Vec<String> = (0..5_000u32)
        .map(|i| format!("\"{:064x}\"", u64::from(i) * 7919 + 1))
        .collect();
    let one = format!("{{\"authors\":[{}],\"kinds\":[1]}}", authors.join(","));
    let mut refused = None;
    let mut attackers = Vec::new();
    for k in 0..2 {
        let mut c = Client::connect_from(&relay.url, relay.addr(), &attacker(k)).await;
        for i in 0..6 {
            let id = format!("big{i}");
            c.send_text(format!("[\"REQ\",\"{id}\",{one},{one}]")).await;
            match c.recv().await {
                Got::Eose(_) => {}
                Got::Closed(s, m) => {
                    assert_eq!(s, id);
                    if m.contains("short of memory") {
                        refused = Some(m);
                    }
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        attackers.push(c);
    }
    let m = refused.expect("the relay's budget never refused a subscription");
    assert!(m.starts_with("rate-limited:"), "{m}");
    // A small subscription within its share is still opened.
    let mut small = Client::connect(&relay.url).await;
    small.req("small", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert!(matches!(small.recv().await, Got::Eose(_)));
}

/// The relay's anonymous memory, in KiB (the relay runs in this process).
fn anonymous_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("RssAnon in /proc/self/status")
}

/// Large messages that never finish arriving, from many addresses: what
/// the relay holds of them counts in its budget, and once that is spent
/// their sockets are not read, so they cannot fill the relay's memory
/// (they once could: a megabyte each, unaccounted); a client that reads is
/// still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_large_messages_are_held_to_the_budget() {
    use tokio::io::AsyncWriteExt;
    let relay = support::TestRelay::start_with(|c| c.limits.relay_memory_bytes = 1 << 20);
    let before = anonymous_kib();
    let mut held = Vec::new();
    let chunk = vec![b' '; 64 << 10];
    for k in 0..60 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(format!("{}:0", attacker(k)).parse().unwrap())
            .unwrap();
        let mut s = socket.connect(relay.addr()).await.unwrap();
        s.write_all(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .unwrap();
        let mut head = [0u8; 1024];
        let n = s.read(&mut head).await.unwrap();
        assert!(head[..n].starts_with(b"HTTP/1.1 101"), "no upgrade");
        // A text frame announcing 1,000,000 bytes (masked with a zero key),
        // of which 640 KiB arrive; the rest never does.
        let mut frame = vec![0x81, 0xFF];
        // RFC 6455 lengths are big-endian.
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 0x0f, 0x42, 0x40]);
        frame.extend_from_slice(&[0, 0, 0, 0]);
        s.write_all(&frame).await.unwrap();
        for _ in 0..10 {
            // A socket the relay stopped reading fills up: give up on it.
            if tokio::time::timeout(Duration::from_millis(200), s.write_all(&chunk))
                .await
                .is_err()
            {
                break;
            }
        }
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grown_mib = anonymous_kib().saturating_sub(before) / 1024;
    // 60 unfinished messages of 640 KiB would be 38 MiB; the budget is 1 MiB.
    assert!(
        grown_mib < 20,
        "unfinished messages grew the relay by {grown_mib} MiB"
    );
    let mut reader = Client::connect(&relay.url).await;
    reader.req("r", &[filter(r#"{"kinds":[1]}"#)]).await;
    assert!(matches!(reader.recv().await, Got::Eose(_)));
    drop(held);
}

/// With the relay's budget spent by many addresses' slow readers, a client
/// that reads everything it is sent and opens eight large REQs is told,
/// not cut off: every REQ ends with `EOSE` or a `CLOSED` with a NIP-01
/// prefix, and the connection stays open and usable. (It was once sent
/// "too much unread data (slow reader)" and disconnected: its first REQ
/// reserved a quarter of its budget before scanning, and the answers that
/// then did not fit the spent budget cut it off.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reading_client_is_answered_and_kept_under_a_spent_budget() {
    let relay = support::TestRelay::start_with(|c| {
        c.limits.relay_memory_bytes = 4 << 20;
        c.limits.slow_reader_seconds = 2;
    });
    store_notes(&relay.url, 600).await;
    let metrics = || support::http_get(relay.addr(), "/metrics", "text/plain");
    // 100 connections from 20 addresses, each asking for every note
    // twice and never reading.
    let slow = slow_readers(&relay, 100).await;
    let mut spent = false;
    for _ in 0..200 {
        let page = metrics().await;
        let used = gauge(&page, "nostrwire_relay_memory_bytes");
        if used >= gauge(&page, "nostrwire_relay_memory_cap_bytes") {
            spent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(spent, "the slow readers never spent the budget");
    // The reader opens eight large REQs at once and reads everything.
    let mut reader = Client::connect(&relay.url).await;
    let ids: Vec<String> = (0..8).map(|i| format!("big{i}")).collect();
    for id in &ids {
        reader
            .req(id, &[filter(r#"{"kinds":[1],"limit":5000}"#)])
            .await;
    }
    let mut ended = std::collections::HashMap::new();
    let mut events = 0usize;
    while ended.len() < ids.len() {
        let got = reader.recv_timeout(Duration::from_secs(30)).await;
        match got {
            Some(Got::Event(..)) => events += 1,
            Some(Got::Eose(s)) => {
                ended.insert(s, "EOSE".to_string());
            }
            Some(Got::Closed(s, m)) => {
                let prefix = m.split(':').next().unwrap_or_default();
                assert!(
                    ["rate-limited", "error", "blocked", "restricted", "invalid"]
                        .contains(&prefix)
                        && m.contains(':'),
                    "CLOSED without a NIP-01 prefix: {m}"
                );
                ended.insert(s, m);
            }
            Some(other) => panic!(
                "the reading client got {other:?} after {events} events, with {} of 8 REQs answered",
                ended.len()
            ),
            None => panic!(
                "the reading client was disconnected after {events} events, with {} of 8 REQs answered",
                ended.len()
            ),
        }
    }
    for id in &ids {
        assert!(ended.contains_key(id), "{id} never ended");
    }
    // Still open and usable: an EVENT is accepted, a REQ answered.
    let keys = nostrwire_event::Keys::derive(78, 1);
    let e = event(&keys, now(), 1, &[], "after the crowd");
    let (ok, message) = reader.publish(&e).await;
    assert!(ok, "{message}");
    reader
        .req(
            "after",
            &[filter(&format!(r#"{{"ids":["{}"]}}"#, e.id.to_hex()))],
        )
        .await;
    loop {
        match reader.recv().await {
            Got::Event(s, got) if s == "after" => {
                assert_eq!(got.id, e.id);
                break;
            }
            Got::Event(..) | Got::Eose(_) | Got::Closed(..) => {}
            other => panic!("{other:?}"),
        }
    }
    drop(slow);
}

/// Many clients fetch a multi-megabyte dictionary set and never read the
/// reply: the set is held once and shared, each fetch holds at most a
/// chunk of it in flight, counted in `limits.dictionary_fetch_bytes`
/// (`nostrwire_dictionary_fetch_bytes`), and the relay does not grow by a
/// copy per fetcher (it once copied the whole set for each, and held the
/// copy for as long as the client did not read: up to 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetchers_of_a_dictionary_set_that_do_not_read_share_it() {
    use tokio::io::AsyncWriteExt;
    // A 4 MiB set: one raw-content dictionary of pseudo-random bytes.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let content: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let set = nostrwire_wire::compress::DictSet::new(3, vec![(1, None, content)]).unwrap();
    let file = set.to_bytes();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("set.nwd");
    std::fs::write(&path, &file).unwrap();
    let relay = support::TestRelay::start_with(|c| c.storage.dictionaries = path.clone());
    let doc = support::http_get(relay.addr(), "/", "application/nostr+json").await;
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let name = doc["nostrwire"]["dictionaries"][0]
        .as_str()
        .expect("the set is served")
        .to_string();
    let metrics = || support::http_get(relay.addr(), "/metrics", "text/plain");
    let before = anonymous_kib();
    const FETCHERS: usize = 40;
    let mut fetchers = Vec::new();
    for k in 0..FETCHERS {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        // The client's receive buffer is kept small: it takes little.
        socket.set_recv_buffer_size(16 << 10).unwrap();
        socket
            .bind(format!("{}:0", attacker(k)).parse().unwrap())
            .unwrap();
        let mut s = socket.connect(relay.addr()).await.unwrap();
        s.write_all(format!("GET /dictionaries/{name} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        fetchers.push(s);
    }
    // Every fetch stalls with a chunk in flight.
    let cap = gauge(&metrics().await, "nostrwire_dictionary_fetch_cap_bytes");
    let mut held = 0;
    for _ in 0..200 {
        held = gauge(&metrics().await, "nostrwire_dictionary_fetch_bytes");
        if held > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(held > 0, "the stalled fetches hold nothing in the budget");
    assert!(held <= cap, "{held} bytes held of a {cap}-byte budget");
    let chunk = 64 << 10;
    assert!(
        held <= (FETCHERS * chunk) as u64,
        "{held} bytes held by {FETCHERS} fetches: more than a chunk each"
    );
    // No copy per fetcher: 40 copies of the set would be 160 MiB.
    let grown_mib = anonymous_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 40,
        "{FETCHERS} stalled fetches grew the relay by {grown_mib} MiB"
    );
    // A fetch that reads gets the whole set, unchanged.
    let (status, body) = {
        use tokio::io::AsyncReadExt;
        let mut s = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
        s.write_all(format!("GET /dictionaries/{name} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut all))
            .await
            .expect("the reading fetch finished")
            .unwrap();
        let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        (
            String::from_utf8_lossy(&all[..12]).to_string(),
            all[end..].to_vec(),
        )
    };
    assert!(status.contains("200"), "{status}");
    assert!(
        body == file,
        "the set came back changed ({} bytes)",
        body.len()
    );
    // Once the fetchers are gone, nothing is held.
    drop(fetchers);
    let mut left = held;
    for _ in 0..200 {
        left = gauge(&metrics().await, "nostrwire_dictionary_fetch_bytes");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "bytes still held after the fetchers left");
}
