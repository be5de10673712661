//! `kill -9` during sustained ingest: after a restart every event that got
//! `OK true` is there, the database opens, and no partial event is visible.
//! Also: SIGTERM stops the relay cleanly with exit status 0.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostrwire_event::{
    message::write, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, Timestamp, UnsignedEvent,
};
use tokio_tungstenite::tungstenite::Message;

mod support;
use support::{free_port, http_get, wait_listening};

fn start(dir: &std::path::Path, port: u16) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--listen", &format!("127.0.0.1:{port}"), "--data"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    child
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends one REQ and collects the ids of the stored events it returns,
/// each checked to be complete and validly signed.
async fn query(ws: &mut Socket, filter: Filter) -> Vec<nostrwire_event::EventId> {
    let mut out = Vec::new();
    write::req(&mut out, "check", &[filter]);
    ws.send(Message::text(String::from_utf8(out).unwrap()))
        .await
        .unwrap();
    let mut found = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Message::Text(text) = msg else { continue };
        match RelayMessage::parse(text.as_bytes()).unwrap() {
            RelayMessage::Event { event, .. } => {
                event
                    .verify()
                    .expect("a stored event is complete and valid");
                found.push(*event.id());
            }
            RelayMessage::Eose(_) => break,
            RelayMessage::Auth(_) => {} // the NIP-42 challenge sent on connect
            other => panic!("{other:?}"),
        }
    }
    found
}

fn events(n: usize) -> Vec<String> {
    let now = nostrwire_relay::now();
    (0..n)
        .map(|i| {
            let keys = Keys::derive(42, (i % 16) as u64);
            let e = UnsignedEvent::new(
                &keys,
                Timestamp::new(now - (i as u64 % 600)).unwrap(),
                Kind(1),
                vec![Tag::from_strs(&["t", "crash"])],
                format!("event {i} {}", "x".repeat(i % 300)),
            )
            .sign(&keys);
            let mut out = Vec::new();
            write::client_event(&mut out, &e);
            String::from_utf8(out).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut relay = start(dir.path(), port);
    let url = format!("ws://127.0.0.1:{port}");
    let frames = events(3000);
    let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let (mut tx, mut rx) = ws.split();
    // Keep sending without waiting; collect OKs; kill the relay mid-stream.
    let sender = tokio::spawn(async move {
        for f in frames {
            if tx.send(Message::text(f)).await.is_err() {
                return;
            }
        }
    });
    let mut acknowledged = Vec::new();
    while let Ok(Some(Ok(Message::Text(text)))) =
        tokio::time::timeout(Duration::from_secs(10), rx.next()).await
    {
        if let Ok(RelayMessage::Ok {
            event_id,
            accepted: true,
            ..
        }) = RelayMessage::parse(text.as_bytes())
        {
            acknowledged.push(event_id);
            if acknowledged.len() == 400 {
                relay.kill().unwrap(); // SIGKILL
                break;
            }
        }
    }
    relay.wait().unwrap();
    sender.abort();
    assert_eq!(
        acknowledged.len(),
        400,
        "relay acknowledged too few events before the kill"
    );

    // Restart on the same data and look for every acknowledged id.
    let port = free_port();
    let mut relay = start(dir.path(), port);
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}"))
        .await
        .unwrap();
    let mut by_id = Filter::new();
    by_id.ids = Some({
        let mut ids = acknowledged.clone();
        ids.sort();
        ids
    });
    by_id.limit = Some(5000);
    let mut found = query(&mut ws, by_id).await;
    found.sort();
    let mut expected = acknowledged;
    expected.sort();
    assert_eq!(found, expected, "acknowledged events lost after kill -9");
    // The indexes written after the `OK` (by tag, by kind) were brought up
    // to date on open: they lead to every acknowledged event too.
    let by_tag = Filter::new().with_tag(b't', vec!["crash".into()]);
    let by_kind = Filter {
        kinds: Some(vec![Kind(1)]),
        ..Filter::new()
    };
    // The search index (its own environment, written by its own thread,
    // killed with the relay) opens and catches up: nothing waits for it,
    // and a search finds every acknowledged event.
    let metrics = http_get(port, "/metrics", "");
    assert!(
        metrics.contains("nostrwire_db_search_backlog_events 0\n"),
        "{metrics}"
    );
    let by_search = Filter {
        search: Some("event".into()),
        ..Filter::new()
    };
    for mut filter in [by_tag, by_kind, by_search] {
        filter.limit = Some(5000);
        let found: std::collections::HashSet<_> =
            query(&mut ws, filter.clone()).await.into_iter().collect();
        let missing = expected.iter().filter(|id| !found.contains(id)).count();
        assert_eq!(
            missing,
            0,
            "{}: {missing} acknowledged events not found",
            filter.to_json()
        );
    }

    // SIGTERM: clean stop, exit status 0.
    let status = Command::new("kill")
        .arg(relay.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let code = relay.wait().unwrap();
    assert!(code.success(), "relay exit status {code:?}");
}
