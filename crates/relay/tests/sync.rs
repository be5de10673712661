//! NIP-77 negentropy sync over a real socket: reconciliation against a
//! client-side set, two of our relays brought to the same set of ids, and
//! the limits and errors of sync sessions.

mod support;

use std::collections::BTreeSet;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostrwire_event::message::write;
use nostrwire_event::{Event, EventId, Keys};
use support::*;

/// Runs a negentropy sync of `local` against the relay for `filter_json`;
/// returns (ids only we have, ids only the relay has).
async fn reconcile(
    c: &mut Client,
    session: &str,
    filter_json: &str,
    local: &[Event],
) -> (BTreeSet<EventId>, BTreeSet<EventId>) {
    let mut storage = NegentropyStorageVector::new();
    for e in local {
        storage
            .insert(e.created_at.as_u64(), Id::from_byte_array(*e.id.as_bytes()))
            .unwrap();
    }
    storage.seal().unwrap();
    let mut neg = Negentropy::owned(storage, 4096).unwrap();
    let initial = neg.initiate().unwrap();
    let mut out = Vec::new();
    write::neg_open(&mut out, session, &filter(filter_json), &initial);
    c.send_text(String::from_utf8(out).unwrap()).await;
    let (mut have, mut need) = (Vec::new(), Vec::new());
    let mut rounds = 0;
    loop {
        let reply = match c.recv().await {
            Got::NegMsg(s, m) if s == session => m,
            other => panic!("expected NEG-MSG, got {other:?}"),
        };
        rounds += 1;
        match neg
            .reconcile_with_ids(&reply, &mut have, &mut need)
            .unwrap()
        {
            Some(next) => {
                let mut out = Vec::new();
                write::neg_msg(&mut out, session, &next);
                c.send_text(String::from_utf8(out).unwrap()).await;
            }
            None => break,
        }
        assert!(rounds < 100, "sync does not converge");
    }
    let mut out = Vec::new();
    write::neg_close(&mut out, session);
    c.send_text(String::from_utf8(out).unwrap()).await;
    let ids = |v: Vec<Id>| {
        v.into_iter()
            .map(|i| EventId::from_bytes(*i.as_bytes()))
            .collect()
    };
    (ids(have), ids(need))
}

fn notes(keys: &Keys, base: u64, n: u64, tag: &str) -> Vec<Event> {
    (0..n)
        .map(|i| event(keys, base - i, 1, &[&["t", tag]], &format!("{tag} {i}")))
        .collect()
}

#[tokio::test]
async fn negentropy_finds_exactly_the_differences() {
    let relay = TestRelay::start_with(|c| c.limits.sync_frame_bytes = 4096);
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(21, 1);
    let other = Keys::derive(21, 2);
    let base = now() - 1000;
    let shared_events = notes(&keys, base, 300, "both");
    let relay_only = notes(&keys, base - 400, 250, "relay");
    let local_only = notes(&keys, base - 800, 120, "local");
    // Another author's events are outside the filter on both sides.
    let outside = notes(&other, base, 40, "both");
    for e in shared_events.iter().chain(&relay_only).chain(&outside) {
        assert!(c.publish(e).await.0);
    }
    let mut local = shared_events.clone();
    local.extend(local_only.iter().cloned());
    let author_filter = format!(r#"{{"authors":["{}"]}}"#, keys.public_key().to_hex());
    let (have, need) = reconcile(&mut c, "n1", &author_filter, &local).await;
    assert_eq!(have, local_only.iter().map(|e| e.id).collect());
    assert_eq!(need, relay_only.iter().map(|e| e.id).collect());
    // Equal sets: nothing to transfer.
    let mut stored = shared_events.clone();
    stored.extend(relay_only.iter().cloned());
    let (have, need) = reconcile(&mut c, "n2", &author_filter, &stored).await;
    assert!(have.is_empty() && need.is_empty());
    // The connection still serves ordinary requests afterwards.
    let got = c
        .query("q", &[filter(r##"{"#t":["relay"],"limit":1000}"##)])
        .await;
    assert_eq!(got.len(), relay_only.len());
}

#[tokio::test]
async fn two_relays_reconcile_to_the_same_set() {
    let a = TestRelay::start();
    let b = TestRelay::start();
    let mut ca = Client::connect(&a.url).await;
    let mut cb = Client::connect(&b.url).await;
    let keys = Keys::derive(22, 1);
    let base = now() - 1000;
    let common = notes(&keys, base, 150, "common");
    let only_a = notes(&keys, base - 200, 60, "a");
    let only_b = notes(&keys, base - 300, 80, "b");
    for e in common.iter().chain(&only_a) {
        assert!(ca.publish(e).await.0);
    }
    for e in common.iter().chain(&only_b) {
        assert!(cb.publish(e).await.0);
    }
    // A's side of the sync: its own events, as its export would give them.
    let all = r#"{"kinds":[1]}"#;
    let a_events = ca
        .query("all", &[filter(r#"{"kinds":[1],"limit":5000}"#)])
        .await;
    let (have, need) = reconcile(&mut cb, "ab", all, &a_events).await;
    assert_eq!(have.len(), only_a.len());
    assert_eq!(need.len(), only_b.len());
    // Move exactly the differences, each way.
    for e in a_events.iter().filter(|e| have.contains(&e.id)) {
        assert!(cb.publish(e).await.0);
    }
    let ids: Vec<String> = need
        .iter()
        .map(|id| format!("\"{}\"", id.to_hex()))
        .collect();
    let missing = cb
        .query(
            "need",
            &[filter(&format!(r#"{{"ids":[{}]}}"#, ids.join(",")))],
        )
        .await;
    assert_eq!(missing.len(), only_b.len());
    for e in &missing {
        assert!(ca.publish(e).await.0);
    }
    let set = |events: Vec<Event>| events.into_iter().map(|e| e.id).collect::<BTreeSet<_>>();
    let in_a = set(ca
        .query("a", &[filter(r#"{"kinds":[1],"limit":5000}"#)])
        .await);
    let in_b = set(cb
        .query("b", &[filter(r#"{"kinds":[1],"limit":5000}"#)])
        .await);
    assert_eq!(in_a.len(), common.len() + only_a.len() + only_b.len());
    assert_eq!(in_a, in_b);
    // And a second sync finds nothing left to do.
    let a_events = ca
        .query("all2", &[filter(r#"{"kinds":[1],"limit":5000}"#)])
        .await;
    let (have, need) = reconcile(&mut cb, "ab2", all, &a_events).await;
    assert!(have.is_empty() && need.is_empty());
}

#[tokio::test]
async fn sync_limits_and_errors() {
    let relay = TestRelay::start_with(|c| {
        c.limits.max_sync_items = 10;
        c.limits.max_sync_sessions = 1;
    });
    let mut c = Client::connect(&relay.url).await;
    let keys = Keys::derive(23, 1);
    for e in notes(&keys, now() - 100, 11, "x") {
        assert!(c.publish(&e).await.0);
    }
    let initial = {
        let mut storage = NegentropyStorageVector::new();
        storage.seal().unwrap();
        Negentropy::owned(storage, 0).unwrap().initiate().unwrap()
    };
    let open = |id: &str, f: &str| {
        let mut out = Vec::new();
        write::neg_open(&mut out, id, &filter(f), &initial);
        String::from_utf8(out).unwrap()
    };
    // More matches than max_sync_items: refused, not truncated.
    c.send_text(open("big", r#"{"kinds":[1]}"#)).await;
    assert!(matches!(c.recv().await, Got::NegErr(s, m) if s == "big" && m.starts_with("blocked:")));
    // Within the limit it works; a second concurrent session is refused.
    c.send_text(open("small", r#"{"kinds":[1],"limit":5}"#))
        .await;
    c.send_text(open("second", r#"{"kinds":[1],"limit":5}"#))
        .await;
    let mut got = vec![c.recv().await, c.recv().await];
    got.sort_by_key(|g| format!("{g:?}"));
    assert!(
        matches!(&got[0], Got::NegErr(s, m) if s == "second" && m.starts_with("blocked:")),
        "{got:?}"
    );
    assert!(
        matches!(&got[1], Got::NegMsg(s, _) if s == "small"),
        "{got:?}"
    );
    // Unknown sessions, bad hex and garbage messages get NEG-ERR.
    c.send_text(r#"["NEG-MSG","nope","61"]"#).await;
    assert!(matches!(c.recv().await, Got::NegErr(s, m) if s == "nope" && m.starts_with("closed:")));
    c.send_text(r#"["NEG-MSG","small","6G"]"#).await;
    assert!(
        matches!(c.recv().await, Got::NegErr(s, m) if s == "small" && m.starts_with("invalid:"))
    );
    c.send_text(r#"["NEG-MSG","small","ff00ff"]"#).await;
    assert!(
        matches!(c.recv().await, Got::NegErr(s, m) if s == "small" && m.starts_with("invalid:"))
    );
    // The failed session is gone: a new one may open.
    c.send_text(r#"["NEG-CLOSE","small"]"#).await;
    c.send_text(open("third", r#"{"kinds":[1],"limit":5}"#))
        .await;
    assert!(matches!(c.recv().await, Got::NegMsg(s, _) if s == "third"));
}
