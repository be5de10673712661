//! Live delivery while subscriptions come and go by the hundred: every
//! event committed after a REQ's stored results reaches it live, and every
//! match reaches it exactly once, stored or live.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostrwire_event::{Event, EventId, Keys};
use support::{event, filter, now, Client, Got, TestRelay};

fn relay() -> TestRelay {
    TestRelay::start_with(|c| c.rate.connections_per_ip = 0)
}

/// Each subscriber REQs a filter nothing stored matches, waits for EOSE,
/// then has an event published that matches it: the event must come
/// live. Many subscribers at once, each REQ new, so subscriptions are
/// registered while other subscribers' events are committed and fanned out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_committed_after_eose_reaches_every_new_subscription() {
    const SUBSCRIBERS: usize = 12;
    const ROUNDS: usize = 25;
    let relay = relay();
    let mut tasks = Vec::new();
    for task in 0..SUBSCRIBERS {
        let url = relay.url.clone();
        tasks.push(tokio::spawn(async move {
            let mut sub = Client::connect(&url).await;
            let mut publisher = Client::connect(&url).await;
            let keys = Keys::derive(40, task as u64);
            for round in 0..ROUNDS {
                let tag = format!("t{task}-{round}");
                let id = format!("s{round}");
                let f = filter(&format!(r##"{{"#t":["{tag}"],"limit":10}}"##));
                sub.req(&id, &[f]).await;
                assert_eq!(sub.recv().await, Got::Eose(id.clone()));
                let e = event(&keys, now(), 1, &[&["t", &tag]], &tag);
                assert!(publisher.publish(&e).await.0);
                match sub.recv_timeout(Duration::from_secs(10)).await {
                    Some(Got::Event(s, got)) if s == id => assert_eq!(got, e),
                    other => panic!("subscriber {task}, round {round}: {other:?}"),
                }
                sub.close(&id).await;
                if round + 1 == ROUNDS {
                    // Closed: a match published now is not sent. A query
                    // on the same connection answers after its CLOSE is
                    // handled (one connection's frames are handled in
                    // order); the publisher's event comes on another
                    // connection, which NIP-01 does not order against it.
                    let probe = filter(r##"{"kinds":[7],"#t":["never"],"limit":1}"##);
                    assert!(sub.query("probe", &[probe]).await.is_empty());
                    let after = event(&keys, now(), 1, &[&["t", &tag]], "after close");
                    assert!(publisher.publish(&after).await.0);
                    sub.expect_silence().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// A publisher publishes a stream of matching events while subscribers
/// open subscriptions to them at different points of the stream and keep
/// them open: each subscription must get every event exactly once, the
/// ones committed before its query as stored results, the rest live. A
/// subscription with `limit` 0 has no stored results: it must get, once,
/// every event published after its EOSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_match_comes_exactly_once_stored_or_live() {
    const EVENTS: usize = 240;
    const SUBSCRIBERS: usize = 8;
    const SUBS_EACH: usize = 6;
    // Subscription j has limit 0 when this holds.
    let live_only = |j: usize| j % 3 == 2;
    let relay = relay();
    let published = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..SUBSCRIBERS {
        let url = relay.url.clone();
        let (published, done) = (published.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&url).await;
            let mut got: Vec<HashMap<EventId, usize>> = vec![HashMap::new(); SUBS_EACH];
            // Events published when each subscription's EOSE came: every
            // one published after that is live.
            let mut eose_at = vec![None; SUBS_EACH];
            let mut opened = 0;
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                // Subscription j opens once the stream has reached its
                // share (staggered per subscriber).
                let due = |j: usize| (j * EVENTS / SUBS_EACH + task * 7) % EVENTS;
                while opened < SUBS_EACH
                    && (published.load(Ordering::SeqCst) >= due(opened)
                        || done.load(Ordering::SeqCst))
                {
                    let limit = if live_only(opened) {
                        r#","limit":0"#
                    } else {
                        ""
                    };
                    let f = filter(&format!(r##"{{"#t":["stream"]{limit}}}"##));
                    c.req(&format!("s{opened}"), &[f]).await;
                    opened += 1;
                }
                let complete = opened == SUBS_EACH
                    && done.load(Ordering::SeqCst)
                    && got.iter().zip(&eose_at).enumerate().all(|(j, (seen, at))| {
                        let want = match (live_only(j), at) {
                            (false, _) => EVENTS,
                            (true, Some(at)) => EVENTS.saturating_sub(at + 1),
                            (true, None) => usize::MAX,
                        };
                        seen.len() >= want
                    });
                if complete {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "subscriber {task}: {:?} of {} after 30 s",
                    got.iter().map(HashMap::len).collect::<Vec<_>>(),
                    published.load(Ordering::SeqCst)
                );
                match c.recv_timeout(Duration::from_millis(20)).await {
                    Some(Got::Event(s, e)) => {
                        let j: usize = s[1..].parse().unwrap();
                        *got[j].entry(e.id).or_default() += 1;
                    }
                    Some(Got::Eose(s)) => {
                        let j: usize = s[1..].parse().unwrap();
                        eose_at[j] = Some(published.load(Ordering::SeqCst));
                    }
                    None => {}
                    Some(other) => panic!("subscriber {task}: {other:?}"),
                }
            }
            // Anything sent twice would be on its way by now.
            while let Some(g) = c.recv_timeout(Duration::from_millis(300)).await {
                if let Got::Event(s, e) = g {
                    let j: usize = s[1..].parse().unwrap();
                    *got[j].entry(e.id).or_default() += 1;
                }
            }
            (got, eose_at)
        }));
    }
    let mut publisher = Client::connect(&relay.url).await;
    let keys = Keys::derive(41, 1);
    let mut all: Vec<Event> = Vec::new();
    for i in 0..EVENTS {
        let e = event(&keys, now(), 1, &[&["t", "stream"]], &format!("n{i}"));
        assert!(publisher.publish(&e).await.0);
        all.push(e);
        published.fetch_add(1, Ordering::SeqCst);
    }
    done.store(true, Ordering::SeqCst);
    for (task, t) in tasks.into_iter().enumerate() {
        let (got, eose_at) = t.await.unwrap();
        for (j, seen) in got.iter().enumerate() {
            let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
            assert!(twice.is_empty(), "subscriber {task} s{j} twice: {twice:?}");
            // With limit 0, the event published at EOSE may have been
            // committed before the query: the ones after it must come.
            let from = if live_only(j) {
                eose_at[j].unwrap() + 1
            } else {
                0
            };
            for e in &all[from.min(EVENTS)..] {
                assert!(
                    seen.contains_key(&e.id),
                    "subscriber {task} s{j} missed {} (of {}, from {from})",
                    e.content,
                    seen.len()
                );
            }
        }
    }
}
