//! A relay cluster on NATS JetStream (docs/cluster.md), against real
//! `nats-server` processes on loopback: events published on one node are
//! served by the others and every node ends with the same events; no
//! acknowledged event is lost when a NATS server or a relay node is killed
//! with `kill -9`; without a NATS quorum writes are refused and reads
//! served; a wiped node rebuilds from the stream or from another node's
//! compacted copy. One test at a time: each runs three NATS servers and three
//! relays.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use nostrwire_event::{message::write, EventId, Filter, Kind, RelayMessage, SignedFields};
use tokio_tungstenite::tungstenite::Message;

mod cluster_support;
mod support;
use cluster_support::{connect, event, next_text, publish, query, Cluster};

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn hex(id: &EventId) -> String {
    id.to_hex()
}

/// The ids in a node's export.
fn exported_ids(lines: &[String]) -> HashSet<String> {
    lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Waits until every node in `nodes` has applied everything the stream
/// holds (as the nodes last saw it). A reader whose NATS server died makes a
/// new consumer after two missed one-second heartbeats; 30 s is room for a
/// loaded machine, and well short of the minute a reader with async-nats'
/// 15 s heartbeats would stall for.
fn converge(cluster: &Cluster, nodes: &[usize]) -> u64 {
    // The nodes refresh the stream's last sequence every second, and a
    // loaded machine may refresh late: the sequence counts once every node
    // has applied it and it held still across another refresh.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let last = cluster.stream_sequence(nodes);
        cluster.wait_applied(nodes, last, Duration::from_secs(30));
        if seen == Some(last) {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "the stream's last sequence kept moving ({seen:?}, then {last})"
        );
        seen = Some(last);
    }
}

#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn events_published_on_one_node_are_served_by_all_and_agree() {
    let _one = one_at_a_time();
    let cluster = Cluster::start(3);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    runtime().block_on(async {
        let mut n1 = connect(&urls[0]).await;
        let mut n2 = connect(&urls[1]).await;
        let mut n3 = connect(&urls[2]).await;

        // A live subscriber on node 3, for notes and ephemeral events.
        let mut live = connect(&urls[2]).await;
        let filter = Filter {
            kinds: Some(vec![Kind(1), Kind(20001)]),
            ..Filter::new()
        }
        .with_tag(b't', vec!["live".into()]);
        let mut req = Vec::new();
        write::req(&mut req, "live", &[filter]);
        live.send(Message::text(String::from_utf8(req).unwrap()))
            .await
            .unwrap();
        // Live from EOSE on.
        loop {
            let text = next_text(&mut live, Duration::from_secs(10))
                .await
                .expect("EOSE in time");
            if let Ok(RelayMessage::Eose(_)) = RelayMessage::parse(text.as_bytes()) {
                break;
            }
        }

        // Notes published on node 1.
        let notes: Vec<_> = (0..20)
            .map(|i| event(1, 1, &[&["t", "live"]], &format!("note {i}"), 0))
            .collect();
        for note in &notes {
            let answer = publish(&mut n1, note).await;
            assert!(answer.accepted, "{answer:?}");
            assert_eq!(answer.message, "");
        }
        // Read your own writes: node 1 has them once it said OK.
        let mut by_id = Filter::new();
        by_id.ids = Some(notes.iter().map(|e| e.id).collect());
        let mut expected: Vec<EventId> = notes.iter().map(|e| e.id).collect();
        expected.sort();
        assert_eq!(query(&mut n1, by_id.clone()).await, expected);

        // The subscriber on node 3 gets them live.
        let mut seen = HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.len() < notes.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let text = next_text(&mut live, left)
                .await
                .expect("every note live on node 3");
            if let Ok(RelayMessage::Event { event, .. }) = RelayMessage::parse(text.as_bytes()) {
                seen.insert(hex(event.id()));
            }
        }

        // An ephemeral event published on node 1 reaches node 3's
        // subscriber, and is stored nowhere.
        let ephemeral = event(1, 20001, &[&["t", "live"]], "ephemeral", 0);
        assert!(publish(&mut n1, &ephemeral).await.accepted);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let text = next_text(&mut live, left)
                .await
                .expect("the ephemeral event live on node 3");
            if let Ok(RelayMessage::Event { event, .. }) = RelayMessage::parse(text.as_bytes()) {
                if *event.id() == ephemeral.id {
                    break;
                }
            }
        }

        // The same event again, on another node: a duplicate, as on a
        // single relay, once that node has applied it (a node still behind
        // answers a second copy as one on its way:
        // a_second_copy_is_answered_truly_while_the_node_is_behind).
        let deadline = Instant::now() + Duration::from_secs(30);
        while query(&mut n2, by_id.clone()).await != expected {
            assert!(Instant::now() < deadline, "node 2 never applied the notes");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let again = publish(&mut n2, &notes[0]).await;
        assert!(again.accepted, "{again:?}");
        assert!(again.message.starts_with("duplicate:"), "{again:?}");

        // Two versions of a replaceable and of an addressable event, on two
        // nodes at once: the newer is kept everywhere, whichever the stream
        // ordered first.
        let old_profile = event(2, 0, &[], "{\"name\":\"old\"}", 20);
        let new_profile = event(2, 0, &[], "{\"name\":\"new\"}", 10);
        let old_article = event(2, 30023, &[&["d", "a"]], "old article", 20);
        let new_article = event(2, 30023, &[&["d", "a"]], "new article", 10);
        let (old_p, new_p) = tokio::join!(
            publish(&mut n2, &old_profile),
            publish(&mut n3, &new_profile)
        );
        assert!(new_p.accepted, "{new_p:?}");
        assert!(
            old_p.accepted || old_p.message.starts_with("duplicate:"),
            "{old_p:?}"
        );
        let (new_a, old_a) = tokio::join!(
            publish(&mut n2, &new_article),
            publish(&mut n3, &old_article)
        );
        assert!(new_a.accepted, "{new_a:?}");
        assert!(
            old_a.accepted || old_a.message.starts_with("duplicate:"),
            "{old_a:?}"
        );

        // A deletion on node 3 of notes published on node 1; publishing a
        // deleted note again is refused on any node.
        let deleted: Vec<String> = notes[..5].iter().map(|e| hex(&e.id)).collect();
        let tags: Vec<Vec<&str>> = deleted.iter().map(|id| vec!["e", id.as_str()]).collect();
        let tags: Vec<&[&str]> = tags.iter().map(Vec::as_slice).collect();
        let deletion = event(1, 5, &tags, "", 0);
        assert!(publish(&mut n3, &deletion).await.accepted);
        let refused = publish(&mut n1, &notes[1]).await;
        assert!(
            !refused.accepted && refused.message.starts_with("blocked:"),
            "{refused:?}"
        );
    });

    let all = [0, 1, 2];
    converge(&cluster, &all);
    let exports: Vec<Vec<String>> = cluster.nodes.iter().map(|n| n.export()).collect();
    // 15 notes, a profile, an article, a deletion.
    assert_eq!(exports[0].len(), 18, "{:#?}", exports[0]);
    assert_eq!(exports[0], exports[1], "node 1 and node 2 differ");
    assert_eq!(exports[0], exports[2], "node 1 and node 3 differ");
    let text = exports[0].join("\n");
    assert!(text.contains("new article") && !text.contains("old article"));
    assert!(text.contains("\\\"new\\\"") && !text.contains("\\\"old\\\""));
    assert!(!text.contains("\"ephemeral\""));
}

/// What a closed-loop publisher saw.
#[derive(Default)]
struct Published {
    acknowledged: Vec<String>,
    refused: Vec<String>,
}

impl Published {
    /// Counts `text` when it is an `OK` for `id` (for any event when
    /// `None`); whether it was.
    fn count(&mut self, load: &Load, text: &str, id: Option<&EventId>) -> bool {
        let Ok(RelayMessage::Ok {
            event_id,
            accepted,
            message,
        }) = RelayMessage::parse(text.as_bytes())
        else {
            return false;
        };
        if id.is_some_and(|id| *id != event_id) {
            return false;
        }
        if accepted {
            self.acknowledged.push(hex(&event_id));
            load.acknowledged.fetch_add(1, Ordering::Relaxed);
        } else {
            self.refused.push(message.to_string());
        }
        true
    }
}

/// Sustained ingest shared by the publishers: when to stop, and how many
/// events were acknowledged so far (so a test kills a process after a
/// number of acknowledgements, not after a time).
#[derive(Default)]
struct Load {
    stop: AtomicBool,
    acknowledged: AtomicU64,
}

impl Load {
    /// Waits until `more` events beyond those acknowledged so far are.
    fn wait_for(&self, more: u64) {
        let target = self.acknowledged.load(Ordering::Relaxed) + more;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.acknowledged.load(Ordering::Relaxed) < target {
            assert!(
                Instant::now() < deadline,
                "{more} more events not acknowledged within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Publishes notes to `url`, one at a time, until `load.stop` (or the
/// socket breaks, or 60 s pass).
async fn publish_until(url: String, author: u64, load: Arc<Load>) -> Published {
    let mut out = Published::default();
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
        return out;
    };
    let started = Instant::now();
    let mut i = 0;
    while !load.stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
        i += 1;
        let note = event(author, 1, &[&["t", "load"]], &format!("{author}/{i}"), 0);
        let mut frame = Vec::new();
        write::client_event(&mut frame, &note);
        if ws
            .send(Message::text(String::from_utf8(frame).unwrap()))
            .await
            .is_err()
        {
            return out;
        }
        loop {
            let Some(text) = next_text(&mut ws, Duration::from_secs(20)).await else {
                return out;
            };
            if out.count(&load, &text, Some(&note.id)) {
                break;
            }
        }
    }
    out
}

/// Publishes `count` notes to `url` without waiting for each `OK` (up to
/// `WINDOW` unanswered), as a bulk client does, and reads every answer
/// (until 20 s pass without one).
async fn publish_burst(url: String, author: u64, count: usize, load: Arc<Load>) -> Published {
    const WINDOW: usize = 100;
    let mut out = Published::default();
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
        return out;
    };
    let notes: Vec<_> = (0..count)
        .map(|i| event(author, 1, &[&["t", "burst"]], &format!("{author}/{i}"), 0))
        .collect();
    let (mut sent, mut answered) = (0, 0);
    while answered < count {
        while sent < count && sent - answered < WINDOW {
            let mut frame = Vec::new();
            write::client_event(&mut frame, &notes[sent]);
            if ws
                .send(Message::text(String::from_utf8(frame).unwrap()))
                .await
                .is_err()
            {
                return out;
            }
            sent += 1;
        }
        let Some(text) = next_text(&mut ws, Duration::from_secs(20)).await else {
            return out;
        };
        if out.count(&load, &text, None) {
            answered += 1;
        }
    }
    out
}

/// The NATS server that leads the stream's group.
fn stream_leader(cluster: &Cluster) -> usize {
    let status = cluster.status().expect("cluster status");
    let leader = status["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["leader"] == true)
        .and_then(|p| p["name"].as_str())
        .expect("the stream has a leader")
        .to_string();
    leader.trim_start_matches("nats").parse::<usize>().unwrap() - 1
}

fn check_refusals(published: &[Published]) {
    for p in published {
        for message in &p.refused {
            assert!(
                message.starts_with("error: cluster unavailable"),
                "unexpected refusal: {message}"
            );
        }
    }
}

/// Every acknowledged event is in the export of every node in `nodes`.
fn assert_none_lost(cluster: &Cluster, nodes: &[usize], published: &[Published]) -> usize {
    let acknowledged: Vec<&String> = published.iter().flat_map(|p| &p.acknowledged).collect();
    for &i in nodes {
        let ids = exported_ids(&cluster.nodes[i].export());
        let missing = acknowledged.iter().filter(|id| !ids.contains(**id)).count();
        assert_eq!(
            missing,
            0,
            "{} lacks {missing} of {} acknowledged events",
            cluster.nodes[i].name,
            acknowledged.len()
        );
    }
    acknowledged.len()
}

/// A node whose writer is held up (another process holds its database's
/// write lock) answers a second copy of an event it has passed to the
/// writer but not applied yet as what it is: an event the stream holds,
/// `OK true`, not the store's verdict on an event it has not stored yet.
#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn a_second_copy_is_answered_truly_while_the_node_is_behind() {
    let _one = one_at_a_time();
    let cluster = Cluster::start(1);
    let node = &cluster.nodes[0];
    let url = node.url();
    let rt = runtime();
    let (mut first, mut second) = rt.block_on(async { (connect(&url).await, connect(&url).await) });
    rt.block_on(async {
        let before = event(30, 1, &[], "before", 0);
        assert!(publish(&mut first, &before).await.accepted);
    });

    // SAFETY: a second process's use of an LMDB environment, as LMDB
    // documents it (the map is the larger of this size and the node's).
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .map_size(1 << 30)
            .open(&node.data)
    }
    .unwrap();
    let lock = env.write_txn().unwrap();
    let note = event(30, 1, &[], "held up", 0);
    let again = rt.block_on(async {
        let mut out = Vec::new();
        write::client_event(&mut out, &note);
        first
            .send(Message::text(String::from_utf8(out).unwrap()))
            .await
            .unwrap();
        // The stream's reader hands the note to the writer, which waits.
        tokio::time::sleep(Duration::from_secs(1)).await;
        publish(&mut second, &note).await
    });
    assert!(again.accepted, "{again:?}");
    assert_eq!(again.message, "", "{again:?}");

    // Let go: the first copy is stored and answered.
    drop(lock);
    drop(env);
    rt.block_on(async {
        loop {
            let text = next_text(&mut first, Duration::from_secs(20))
                .await
                .expect("the first copy's OK");
            if let Ok(RelayMessage::Ok {
                event_id,
                accepted,
                message,
            }) = RelayMessage::parse(text.as_bytes())
            {
                assert_eq!(event_id, note.id);
                assert!(accepted && message.is_empty(), "{message}");
                break;
            }
        }
        let mut by_id = Filter::new();
        by_id.ids = Some(vec![note.id]);
        assert_eq!(query(&mut second, by_id).await, vec![note.id]);
    });
}

/// With NATS not reading (every server stopped with SIGSTOP), a flood of
/// ephemeral events fills their own bounded queue and the excess is
/// dropped and counted in `/metrics`; a stored event sent after them is
/// still answered by its deadline, counted from when the relay read it.
#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn ephemeral_events_never_hold_up_a_stored_event() {
    let _one = one_at_a_time();
    let cluster = Cluster::start(1);
    let node = &cluster.nodes[0];
    let url = node.url();
    let rt = runtime();
    let mut stored = rt.block_on(connect(&url));
    rt.block_on(async {
        let before = event(31, 1, &[], "before", 0);
        assert!(publish(&mut stored, &before).await.accepted);
    });
    for nats in &cluster.nats {
        nats.pause();
    }
    // More than NATS's socket and the client's buffers hold: 4,000 events
    // of 16 KiB, their OKs read as they come.
    let filler = "x".repeat(16 << 10);
    let flood: Vec<String> = (0..4000)
        .map(|i| {
            let mut out = Vec::new();
            write::client_event(&mut out, &event(32, 20001, &[], &format!("{i}{filler}"), 0));
            String::from_utf8(out).unwrap()
        })
        .collect();
    let (answer, took) = rt.block_on(async {
        let (mut tx, mut rx) = futures_util::StreamExt::split(connect(&url).await);
        let reader = tokio::spawn(async move {
            let mut oks = 0;
            while let Ok(Some(Ok(_))) = tokio::time::timeout(
                Duration::from_secs(10),
                futures_util::StreamExt::next(&mut rx),
            )
            .await
            {
                oks += 1;
            }
            oks
        });
        for message in flood {
            tx.send(Message::text(message)).await.unwrap();
        }
        let note = event(31, 1, &[], "behind the ephemeral events", 0);
        let started = Instant::now();
        let answer = publish(&mut stored, &note).await;
        let took = started.elapsed();
        drop(tx);
        reader.abort();
        (answer, took)
    });
    // NATS takes nothing: refused, by the deadline (3 s) and not later.
    assert!(!answer.accepted, "{answer:?}");
    assert!(
        answer.message.starts_with("error: cluster unavailable"),
        "{answer:?}"
    );
    assert!(took < Duration::from_secs(6), "answered after {took:?}");
    let dropped = node
        .gauge("ephemeral_send_dropped_total")
        .expect("the counter of dropped ephemeral events");
    assert!(dropped > 0, "no ephemeral event dropped");
    for nats in &cluster.nats {
        nats.resume();
    }
}

/// Rounds of [`kill_9_of_a_nats_server_leaves_no_node_short`]: enough to
/// catch a failure that happens in one round of three (six rounds miss it
/// with a chance of (2/3)^6, under 9 %); `CLUSTER_KILL_ROUNDS` asks for
/// more.
const KILL_ROUNDS: usize = 6;

/// What one round of the kill test found wrong, if anything.
struct Round {
    killed: usize,
    leader: usize,
    acknowledged: usize,
    refused: usize,
    /// Per node: how many acknowledged events it does not serve.
    missing: Vec<usize>,
    /// The stream sequence every node was waited for, and how far each
    /// got, when one stopped short.
    stalled: Option<String>,
    exports_differ: bool,
}

impl Round {
    fn failed(&self) -> bool {
        self.missing.iter().any(|&m| m > 0) || self.stalled.is_some() || self.exports_differ
    }
}

/// One round: a fresh cluster, closed-loop publishers on every node (two
/// on node 2), `kill -9` of NATS server `killed` after 150
/// acknowledgements, 300 more acknowledgements, then every node must
/// apply the whole stream and serve every acknowledged event.
fn kill_round(killed: usize, author: u64) -> Round {
    let mut cluster = Cluster::start(3);
    let leader = stream_leader(&cluster);
    let load = Arc::new(Load::default());
    let rt = runtime();
    let mut publishers: Vec<_> = [0, 2]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let url = cluster.nodes[n].url();
            rt.spawn(publish_until(url, author + i as u64, load.clone()))
        })
        .collect();
    // Bulk clients on node 2.
    for i in 0..3 {
        let url = cluster.nodes[1].url();
        publishers.push(rt.spawn(publish_burst(url, author + 5 + i, 400, load.clone())));
    }
    load.wait_for(200);
    cluster.nats[killed].kill();
    // Writes resume once the two others have (if need be) elected a leader.
    load.wait_for(400);
    load.stop.store(true, Ordering::Relaxed);
    let published: Vec<Published> = publishers
        .into_iter()
        .map(|p| rt.block_on(p).unwrap())
        .collect();
    check_refusals(&published);
    let all = [0, 1, 2];
    // The nodes refresh the stream's last sequence every second.
    std::thread::sleep(Duration::from_millis(1500));
    let last = cluster.stream_sequence(&all);
    let stalled = cluster
        .try_wait_applied(&all, last, Duration::from_secs(30))
        .err();
    let acknowledged: Vec<&String> = published.iter().flat_map(|p| &p.acknowledged).collect();
    let exports: Vec<Vec<String>> = cluster.nodes.iter().map(|n| n.export()).collect();
    let missing = exports
        .iter()
        .map(|export| {
            let ids = exported_ids(export);
            acknowledged.iter().filter(|id| !ids.contains(**id)).count()
        })
        .collect();
    let round = Round {
        killed,
        leader,
        acknowledged: acknowledged.len(),
        refused: published.iter().map(|p| p.refused.len()).sum(),
        missing,
        stalled,
        exports_differ: exports[0] != exports[1] || exports[0] != exports[2],
    };
    if round.failed() {
        for node in &cluster.nodes {
            for line in node.log_lines("cluster stream") {
                eprintln!("  {}: {line}", node.name);
            }
        }
    }
    round
}

/// `kill -9` of one of the three NATS servers (each in turn: the stream's
/// leader, the server a node's reader or publisher uses) under load, round
/// after round on a fresh cluster: every node applies the whole stream and
/// serves every event any node acknowledged, and all end identical.
#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn kill_9_of_a_nats_server_leaves_no_node_short() {
    let _one = one_at_a_time();
    let rounds = std::env::var("CLUSTER_KILL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(KILL_ROUNDS);
    let started = Instant::now();
    let mut failed = Vec::new();
    for r in 0..rounds {
        let round = kill_round(r % 3, 100 + 10 * r as u64);
        let line = format!(
            "round {}: killed nats{} (leader nats{}): {} acknowledged, {} refused; \
             missing per node {:?}{}{}",
            r + 1,
            round.killed + 1,
            round.leader + 1,
            round.acknowledged,
            round.refused,
            round.missing,
            round
                .stalled
                .as_deref()
                .map(|s| format!("; {s}"))
                .unwrap_or_default(),
            if round.exports_differ {
                "; exports differ"
            } else {
                ""
            },
        );
        eprintln!("{line}");
        assert!(round.acknowledged > 300, "{line}");
        if round.failed() {
            failed.push(line);
        }
    }
    eprintln!("{rounds} rounds in {:?}", started.elapsed());
    assert!(
        failed.is_empty(),
        "{} of {rounds} rounds left a node short of the stream:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn kill_9_of_a_relay_node_loses_nothing_and_it_catches_up() {
    let _one = one_at_a_time();
    let mut cluster = Cluster::start(3);
    let load = Arc::new(Load::default());
    let rt = runtime();
    let mut publishers: Vec<_> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| rt.spawn(publish_until(n.url(), 20 + i as u64, load.clone())))
        .collect();
    load.wait_for(50);
    // Node 2 dies; its publisher's socket breaks; the others go on.
    cluster.nodes[1].kill();
    load.wait_for(50);
    cluster.nodes[1].restart();
    publishers.push(rt.spawn(publish_until(cluster.nodes[1].url(), 30, load.clone())));
    load.wait_for(50);
    load.stop.store(true, Ordering::Relaxed);
    let published: Vec<Published> = publishers
        .into_iter()
        .map(|p| rt.block_on(p).unwrap())
        .collect();
    check_refusals(&published);
    cluster.wait_connected(&cluster.nodes[1]);
    let all = [0, 1, 2];
    converge(&cluster, &all);
    let acknowledged = assert_none_lost(&cluster, &all, &published);
    assert!(acknowledged > 30, "only {acknowledged} events acknowledged");
    let exports: Vec<Vec<String>> = cluster.nodes.iter().map(|n| n.export()).collect();
    assert_eq!(exports[0], exports[1], "the restarted node differs");
    assert_eq!(exports[0], exports[2]);
}

#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn without_a_nats_quorum_writes_are_refused_and_reads_served() {
    let _one = one_at_a_time();
    let mut cluster = Cluster::start(3);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let rt = runtime();
    let before = event(40, 1, &[], "before", 0);
    rt.block_on(async {
        let mut n1 = connect(&urls[0]).await;
        assert!(publish(&mut n1, &before).await.accepted);
    });
    // Its OK means the stream holds it; every node applies it before
    // the quorum goes, so each can serve it from its own store.
    converge(&cluster, &[0, 1, 2]);
    // Two of three NATS servers gone: no majority for any write.
    cluster.nats[0].kill();
    cluster.nats[1].kill();
    rt.block_on(async {
        let mut n1 = connect(&urls[0]).await;
        let during = event(40, 1, &[], "during", 0);
        let started = Instant::now();
        let answer = publish(&mut n1, &during).await;
        assert!(!answer.accepted, "{answer:?}");
        assert!(
            answer.message.starts_with("error: cluster unavailable ("),
            "{answer:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(15));
        // Reads are served from the local store.
        let mut by_id = Filter::new();
        by_id.ids = Some(vec![before.id]);
        for url in &urls {
            let mut ws = connect(url).await;
            assert_eq!(query(&mut ws, by_id.clone()).await, vec![before.id]);
        }
    });
    // Quorum back: writes are taken again.
    cluster.nats[0].restart();
    cluster.nats[1].restart();
    let after = rt.block_on(async {
        let mut n1 = connect(&urls[0]).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut i = 0;
        loop {
            i += 1;
            let attempt = event(40, 1, &[], &format!("after {i}"), 0);
            let answer = publish(&mut n1, &attempt).await;
            if answer.accepted {
                return attempt;
            }
            assert!(
                answer.message.starts_with("error: cluster unavailable"),
                "{answer:?}"
            );
            assert!(Instant::now() < deadline, "writes not back: {answer:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let all = [0, 1, 2];
    converge(&cluster, &all);
    for node in &cluster.nodes {
        let ids = exported_ids(&node.export());
        assert!(ids.contains(&hex(&before.id)) && ids.contains(&hex(&after.id)));
    }
}

#[test]
#[cfg_attr(
    not(nats_server),
    ignore = "nats-server not found when the tests were built (see README: Tests)"
)]
fn a_wiped_node_rebuilds_from_the_stream_or_from_a_compacted_copy() {
    let _one = one_at_a_time();
    let mut cluster = Cluster::start(3);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let rt = runtime();
    let publish_notes = |url: String, from: usize, to: usize| {
        rt.block_on(async move {
            let mut ws = connect(&url).await;
            for i in from..to {
                let note = event(50, 1, &[], &format!("rebuild {i}"), 0);
                assert!(publish(&mut ws, &note).await.accepted);
            }
        })
    };
    publish_notes(urls[0].clone(), 0, 100);
    let all = [0, 1, 2];
    converge(&cluster, &all);

    // Wiped: node 3 starts from nothing and reads the whole stream.
    cluster.nodes[2].stop();
    std::fs::remove_dir_all(&cluster.nodes[2].data).unwrap();
    cluster.nodes[2].restart();
    cluster.wait_connected(&cluster.nodes[2]);
    converge(&cluster, &all);
    assert_eq!(cluster.nodes[2].export(), cluster.nodes[0].export());

    // From a compacted copy of node 1: the copy carries node 1's applied
    // sequence, and node 3 reads only what came after it.
    cluster.nodes[2].stop();
    std::fs::remove_dir_all(&cluster.nodes[2].data).unwrap();
    let copied = cluster.nodes[0].gauge("applied_sequence").unwrap();
    support::nostrwire(&[
        "compact",
        "--data",
        cluster.nodes[0].data.to_str().unwrap(),
        "--output",
        cluster.nodes[2].data.to_str().unwrap(),
    ]);
    publish_notes(urls[1].clone(), 100, 150);
    cluster.nodes[2].restart();
    let resumed = cluster.nodes[2].gauge("applied_sequence").unwrap();
    assert!(
        resumed >= copied,
        "started at {resumed}, the copy holds {copied}"
    );
    cluster.wait_connected(&cluster.nodes[2]);
    converge(&cluster, &all);
    let exports: Vec<Vec<String>> = cluster.nodes.iter().map(|n| n.export()).collect();
    assert_eq!(exports[0].len(), 150);
    assert_eq!(exports[2], exports[0]);
    assert_eq!(exports[1], exports[0]);
}
