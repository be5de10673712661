//! Signatures checked in batches give the verdicts of single checks: events
//! sent without waiting for their `OK`s (so that they wait together in an
//! ingest worker), valid ones among forged ones, over JSON and nwb records.

mod support;

use std::collections::{HashMap, HashSet};

use nostrwire_event::{Event, EventId, Keys, PreimageFields, Signature};
use support::{event, filter, http_get, now, Client, Got, TestRelay};

/// What a relay answers each event, by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Stored,
    BadSignature,
    BadId,
}

/// `count` events by a few authors; every `bad_every`-th signature is
/// spoiled (and, offset, an id now and then), so that most batches hold
/// one bad signature and some hold none.
fn events(count: usize, bad_every: usize, seed: u64) -> Vec<(Event, Expect)> {
    let authors: Vec<Keys> = (0..5).map(|i| Keys::derive(seed, i)).collect();
    let t = now() - 1_000;
    (0..count)
        .map(|i| {
            let mut e = event(
                &authors[i % authors.len()],
                t + i as u64,
                1,
                &[],
                &format!("{seed} {i}"),
            );
            let expect = if bad_every > 0 && i % bad_every == bad_every - 1 {
                let mut sig = *e.sig.as_bytes();
                sig[40] ^= 0x10;
                e.sig = Signature::from_bytes(sig);
                Expect::BadSignature
            } else if i % 97 == 50 {
                e.content.push('!');
                Expect::BadId
            } else {
                Expect::Stored
            };
            (e, expect)
        })
        .collect()
}

async fn publish_all(
    c: &mut Client,
    events: &[(Event, Expect)],
) -> HashMap<String, (bool, String)> {
    for (e, _) in events {
        c.send_event(e).await;
    }
    let mut answers = HashMap::new();
    while answers.len() < events.len() {
        match c.recv().await {
            Got::Ok(id, ok, message) => {
                assert!(answers.insert(id, (ok, message)).is_none(), "two OKs");
            }
            other => panic!("{other:?}"),
        }
    }
    answers
}

fn check_answers(events: &[(Event, Expect)], answers: &HashMap<String, (bool, String)>) {
    for (e, expect) in events {
        let (ok, message) = &answers[&e.id.to_hex()];
        match expect {
            Expect::Stored => assert!(*ok && message.is_empty(), "{message}"),
            Expect::BadSignature => {
                assert_eq!((*ok, message.as_str()), (false, "invalid: bad signature"))
            }
            Expect::BadId => assert_eq!(
                (*ok, message.as_str()),
                (false, "invalid: event id does not match its content")
            ),
        }
    }
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[tokio::test]
async fn batched_verdicts_are_those_of_single_checks() {
    let relay = TestRelay::start();
    let mut json = Client::connect(&relay.url).await;
    let mut v2 = Client::connect_v2(&relay.url).await;
    // Clean batches first (only ids spoiled, refused before any batch),
    // then a bad signature in every 40, then in every 3: the batch size
    // falls and comes back, and every verdict is a single check's.
    let mut all = Vec::new();
    for (client, seed) in [(&mut json, 10), (&mut v2, 20)] {
        for (n, bad_every) in [(600, 0), (600, 40), (300, 3)] {
            let batch = events(n, bad_every, seed + bad_every as u64);
            let answers = publish_all(client, &batch).await;
            check_answers(&batch, &answers);
            all.extend(batch);
        }
    }
    let metrics = http_get(relay.addr(), "/metrics", "text/plain").await;
    // Events that waited together were checked as batches: some passed,
    // and those holding a bad signature failed.
    let batched = metric(&metrics, "nostrwire_signatures_batched_total");
    let batches = metric(&metrics, "nostrwire_signature_batches_total");
    assert!(
        batches > 0 && batched >= 2 * batches,
        "{batched} in {batches}"
    );
    assert!(metric(&metrics, "nostrwire_signature_batches_failed_total") > 0);

    let stored: HashSet<EventId> = json
        .query("all", &[filter(r#"{"kinds":[1],"limit":5000}"#)])
        .await
        .into_iter()
        .map(|e| {
            assert_eq!(e.compute_id(), e.id);
            e.id
        })
        .collect();
    let expected: HashSet<EventId> = all
        .iter()
        .filter(|(_, x)| *x == Expect::Stored)
        .map(|(e, _)| e.id)
        .collect();
    assert_eq!(stored, expected);
}
