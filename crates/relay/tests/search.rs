//! NIP-50 search over a real WebSocket: AND of terms, relevance order,
//! `limit` after ranking, extensions ignored, the rest of the filter applied,
//! removals leaving the index, COUNT, live delivery, encrypted contents left
//! out, searches refused while the index is built, and search turned off.

mod support;

use nostrwire_event::{Event, Keys};
use nostrwire_store::search::{tokenize, Query};
use support::{event, filter, now, Client, Got, TestRelay};

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.to_hex()).collect()
}

async fn count(c: &mut Client, sub: &str, filter_json: &str) -> u64 {
    c.send_text(format!(r#"["COUNT","{sub}",{filter_json}]"#))
        .await;
    match c.recv().await {
        Got::Count(s, n) if s == sub => n,
        other => panic!("expected COUNT, got {other:?}"),
    }
}

#[test]
fn tokenizer_is_unicode_aware_and_skips_short_words() {
    let mut terms = Vec::new();
    tokenize("Café, CAFÉ! a I x2 über-cool", |t| {
        terms.push(t.to_owned())
    });
    assert_eq!(terms, ["café", "café", "x2", "über", "cool"]);
    assert_eq!(Query::parse("Café language:en").terms, ["café"]);
}

#[tokio::test]
async fn results_hold_every_term_ranked_with_limit_after_ranking() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let (a, b) = (Keys::derive(50, 1), Keys::derive(50, 2));
    let t = now() - 1000;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod \
                  tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam \
                  quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo";
    let best = event(&a, t + 1, 1, &[], "Nostr nostr NOSTR relay");
    let long = event(&a, t + 5, 1, &[], &format!("nostr relay {filler}"));
    let article = event(
        &b,
        t + 3,
        30023,
        &[&["d", "x"], &["title", "A nostr relay, designed"]],
        "long-form text",
    );
    let one_term = event(&b, t + 4, 1, &[], "a relay without the other word");
    let dm = event(&a, t + 2, 4, &[], "nostr relay secret");
    let cafe = event(&b, t + 2, 1, &[&["t", "Drinks"]], "Café au lait");
    for e in [&best, &long, &article, &one_term, &dm, &cafe] {
        assert!(c.publish(e).await.0);
    }

    let all = c.query("s", &[filter(r#"{"search":"nostr relay"}"#)]).await;
    let mut got = ids(&all);
    assert_eq!(
        got[0],
        best.id.to_hex(),
        "three mentions in a short note rank first"
    );
    let pos = |e: &Event| got.iter().position(|x| *x == e.id.to_hex());
    assert!(pos(&best) < pos(&long));
    got.sort();
    let mut want = ids(&[best.clone(), long.clone(), article.clone()]);
    want.sort();
    assert_eq!(
        got, want,
        "only events with every term; kind 4 is not indexed"
    );

    // The limit keeps the best, not the newest.
    let top = c
        .query("l", &[filter(r#"{"search":"relay nostr","limit":1}"#)])
        .await;
    assert_eq!(top, vec![best.clone()]);
    // Extensions and case are ignored.
    let ext = c
        .query(
            "x",
            &[filter(
                r#"{"search":"include:spam NOSTR language:en Relay domain:example.com"}"#,
            )],
        )
        .await;
    assert_eq!(ids(&ext), ids(&all));
    // The rest of the filter applies.
    let notes = c
        .query("k", &[filter(r#"{"search":"nostr relay","kinds":[1]}"#)])
        .await;
    assert_eq!(notes, vec![best.clone(), long.clone()]);
    let by_b = format!(
        r#"{{"search":"nostr relay","authors":["{}"]}}"#,
        b.public_key().to_hex()
    );
    assert_eq!(c.query("a", &[filter(&by_b)]).await, vec![article.clone()]);
    let since = format!(r#"{{"search":"nostr relay","since":{}}}"#, t + 2);
    assert_eq!(c.query("t", &[filter(&since)]).await.len(), 2);
    let tagged = r##"{"search":"café","#t":["Drinks"]}"##;
    assert_eq!(c.query("g", &[filter(tagged)]).await, vec![cafe.clone()]);
    // Unicode case folding, tags indexed, nothing for unknown or short terms.
    assert_eq!(
        c.query("u", &[filter(r#"{"search":"CAFÉ drinks"}"#)]).await,
        vec![cafe]
    );
    for none in ["nostr zebra", "a", "include:spam", "secret"] {
        let json = format!(r#"{{"search":"{none}"}}"#);
        assert_eq!(c.query("n", &[filter(&json)]).await, vec![], "{none}");
    }

    assert_eq!(count(&mut c, "c1", r#"{"search":"nostr relay"}"#).await, 3);
    assert_eq!(
        count(&mut c, "c2", r#"{"search":"nostr relay","kinds":[1]}"#).await,
        2
    );
    assert_eq!(count(&mut c, "c3", r#"{"search":"relay"}"#).await, 4);
}

#[tokio::test]
async fn removed_events_leave_the_index() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(51, 1);
    let t = now() - 100;
    let search = |q: &str| filter(&format!(r#"{{"search":"{q}"}}"#));

    // NIP-09 deletion.
    let note = event(&keys, t, 1, &[], "a zebra crossing");
    assert!(c.publish(&note).await.0);
    assert_eq!(c.query("z", &[search("zebra")]).await, vec![note.clone()]);
    let deletion = event(&keys, t + 1, 5, &[&["e", &note.id.to_hex()]], "");
    assert!(c.publish(&deletion).await.0);
    assert_eq!(c.query("z", &[search("zebra")]).await, vec![]);
    assert_eq!(count(&mut c, "cz", r#"{"search":"zebra"}"#).await, 0);

    // A replaced profile is no longer found by its old name.
    let alice = event(
        &keys,
        t,
        0,
        &[],
        r#"{"name":"Alice Wonder","about":"rabbit holes","picture":"https://x/alice.png"}"#,
    );
    assert!(c.publish(&alice).await.0);
    assert_eq!(c.query("p", &[search("alice")]).await, vec![alice.clone()]);
    assert_eq!(
        c.query("p", &[search("png")]).await,
        vec![],
        "not a name field"
    );
    let bob = event(
        &keys,
        t + 1,
        0,
        &[],
        r#"{"name":"Bob","display_name":"Bobby"}"#,
    );
    assert!(c.publish(&bob).await.0);
    assert_eq!(c.query("p", &[search("alice")]).await, vec![]);
    assert_eq!(c.query("p", &[search("bobby")]).await, vec![bob]);

    // Expired events are not served.
    let brief = format!("{}", now() + 2);
    let walrus = event(&keys, now(), 1, &[&["expiration", &brief]], "walrus");
    assert!(c.publish(&walrus).await.0);
    assert_eq!(c.query("w", &[search("walrus")]).await, vec![walrus]);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    assert_eq!(c.query("w", &[search("walrus")]).await, vec![]);
}

#[tokio::test]
async fn live_events_are_delivered_only_with_every_term() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let mut listener = Client::connect(&relay.url).await;
    let keys = Keys::derive(52, 1);
    let old = event(&keys, now() - 10, 1, &[], "Bitcoin conference recap");
    assert!(c.publish(&old).await.0);
    listener
        .req(
            "live",
            &[filter(r#"{"search":"bitcoin conference","kinds":[1]}"#)],
        )
        .await;
    assert_eq!(listener.recv().await, Got::Event("live".into(), old));
    assert_eq!(listener.recv().await, Got::Eose("live".into()));

    let hit = event(&keys, now(), 1, &[], "the CONFERENCE about bitcoin");
    assert!(c.publish(&hit).await.0);
    assert_eq!(listener.recv().await, Got::Event("live".into(), hit));
    for miss in [
        event(&keys, now(), 1, &[], "bitcoin only"),
        event(&keys, now(), 4, &[], "bitcoin conference"),
        event(
            &keys,
            now(),
            30023,
            &[&["title", "bitcoin conference"]],
            "wrong kind",
        ),
    ] {
        assert!(c.publish(&miss).await.0);
    }
    listener.expect_silence().await;
}

#[tokio::test]
async fn encrypted_contents_are_not_indexed_but_their_text_tags_are() {
    let relay = TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(54, 1);
    let t = now() - 100;
    // NIP-04 shape: base64 `?iv=` base64, its fragments split by `/` and `+`.
    let payload = "q8ZkLm3P/xY7wRt2N+vB4cD9eF1g/H5jK6lM0nO+pQ2rS4tU==?iv=A1b2C3d4E5f6G7h8I9j0Kw==";
    let private_list = event(&keys, t, 10000, &[], payload);
    let app_data = event(
        &keys,
        t + 1,
        30078,
        &[&["d", "settings"], &["title", "Lighthouse settings"]],
        payload,
    );
    // The same fragment in text is a term like any other.
    let note = event(
        &keys,
        t + 2,
        1,
        &[],
        "q8ZkLm3P is what the payload began with",
    );
    for e in [&private_list, &app_data, &note] {
        assert!(c.publish(e).await.0);
    }
    let found = c.query("s", &[filter(r#"{"search":"q8zklm3p"}"#)]).await;
    assert_eq!(ids(&found), ids(std::slice::from_ref(&note)));
    let found = c.query("t", &[filter(r#"{"search":"lighthouse"}"#)]).await;
    assert_eq!(ids(&found), ids(&[app_data]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_wait_for_an_index_being_built_and_the_rest_is_served() {
    use nostrwire_store::{Admitted, Durability, EventStore};
    use nostrwire_store::{LmdbStore, OpenOptions};
    // 20,000 notes stored with search off, straight into the store: the
    // relay below starts with an index to build, which takes it far longer
    // than a first query.
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::derive(55, 1);
    let base = now() - 10_000;
    {
        let off = OpenOptions {
            search: false,
            durability: Durability::None,
            ..OpenOptions::default()
        };
        let store = LmdbStore::open(dir.path(), &off).unwrap();
        let batch: Vec<Admitted> = (0..20_000u64)
            .map(|i| {
                let note = event(
                    &keys,
                    base + i,
                    1,
                    &[],
                    &format!("lighthouse keeper log {i}"),
                );
                Admitted::from_record(nostrwire_wire::encode_event(&note)).unwrap()
            })
            .collect();
        store.submit(&batch, 0).unwrap();
        while store.index_pending(10_000).unwrap() {}
    }
    let data = dir.path().to_path_buf();
    let relay = TestRelay::start_with(|c| {
        c.relay.data = data;
        c.search.max_unindexed = 100;
    });
    let mut c = Client::connect(&relay.url).await;
    c.send_text(r#"["REQ","s",{"search":"lighthouse","limit":3}]"#)
        .await;
    match c.recv().await {
        Got::Closed(sub, message) => {
            assert_eq!(sub, "s");
            assert!(
                message.starts_with("error: the search index is being built"),
                "{message}"
            );
        }
        other => panic!("expected CLOSED, got {other:?}"),
    }
    // Everything else is served meanwhile.
    let newest = c.query("k", &[filter(r#"{"kinds":[1],"limit":2}"#)]).await;
    assert_eq!(newest.len(), 2);
    // Once built, the same search is answered.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let found = loop {
        c.send_text(r#"["REQ","s",{"search":"lighthouse","limit":3}]"#)
            .await;
        let mut events = Vec::new();
        match loop {
            match c.recv().await {
                Got::Event(_, e) => events.push(e),
                other => break other,
            }
        } {
            Got::Eose(_) => break events,
            Got::Closed(_, m) if m.starts_with("error: the search index is being built") => {
                assert!(std::time::Instant::now() < deadline, "never built");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            other => panic!("expected EOSE or CLOSED, got {other:?}"),
        }
    };
    assert_eq!(found.len(), 3);
    let metrics = support::http_get(relay.addr(), "/metrics", "*/*").await;
    assert!(
        metrics.contains("nostrwire_queries_failed_total{reason=\"search_behind\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn search_off_refuses_and_the_index_is_built_when_turned_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut relay = TestRelay::start_with(|c| c.search.enabled = false);
    let mut c = Client::connect(&relay.url).await;
    c.send_text(r#"["REQ","s",{"search":"nostr"}]"#).await;
    assert!(matches!(c.recv().await, Got::Closed(s, m) if s == "s" && m.starts_with("invalid:")));
    c.send_text(r#"["COUNT","c",{"search":"nostr"}]"#).await;
    assert!(matches!(c.recv().await, Got::Closed(s, m) if s == "c" && m.starts_with("invalid:")));
    let mut http = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
    http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nAccept: application/nostr+json\r\n\r\n")
        .await
        .unwrap();
    let mut info = String::new();
    http.read_to_string(&mut info).await.unwrap();
    assert!(
        info.contains(r#""supported_nips":[1,9,11,40,42,45,62,70,77]"#),
        "{info}"
    );

    let keys = Keys::derive(53, 1);
    let note = event(&keys, now(), 1, &[], "indexed after the fact");
    assert!(c.publish(&note).await.0);
    drop(c);
    relay.relay.take().unwrap().shutdown();

    // Reopened with search on: the index is built on open.
    let mut config = nostrwire_relay::Config::default();
    config.relay.listen = "127.0.0.1:0".into();
    config.relay.data = relay.dir.path().to_path_buf();
    config.storage.map_size_gib = 1;
    relay.relay = Some(nostrwire_relay::start(config).unwrap());
    let url = format!("ws://{}", relay.addr());
    let mut c = Client::connect(&url).await;
    let found = c.query("s", &[filter(r#"{"search":"fact"}"#)]).await;
    assert_eq!(found, vec![note]);
}
