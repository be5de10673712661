//! The relay's page for people and its JSON counters, and the switch that
//! turns the binary transport off, over a real socket.

mod support;

use nostrwire_event::{Keys, SignedFields};
use support::{event, http_get, now, Client, TestRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_and_counters() {
    let relay = TestRelay::start_with(|c| c.info.name = "test </script> relay".into());
    let page = http_get(relay.addr(), "/", "text/html,application/xhtml+xml").await;
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(
        page.contains("test <\\/script> relay"),
        "NIP-11 facts embedded, escaped"
    );
    assert!(!page.contains("src=\"http"), "no external assets");
    // Without text/html, `/` stays the plain answer.
    let plain = http_get(relay.addr(), "/", "*/*").await;
    assert!(plain.starts_with("This is a Nostr relay."), "{plain}");

    let stats = |body: String| serde_json::from_str::<serde_json::Value>(&body).unwrap();
    let before = stats(http_get(relay.addr(), "/stats.json", "*/*").await);
    assert_eq!(before["events_stored_since_start"], 0);

    let mut c = Client::connect(&relay.url).await;
    let e = event(&Keys::derive(7, 1), now(), 1, &[], "counted");
    assert!(c.publish(&e).await.0);
    let after = stats(http_get(relay.addr(), "/stats.json", "*/*").await);
    assert_eq!(after["events_stored_since_start"], 1);
    assert_eq!(after["json_bytes_stored_since_start"], e.to_json().len());
    assert_eq!(after["db_events"], 1);
    assert!(after["disk_bytes"].as_u64().unwrap() > 0);
    assert!(after["connections"].as_u64().unwrap() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_transport_can_be_switched_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for (binary, answered) in [(true, true), (false, false)] {
        let relay = TestRelay::start_with(|c| c.websocket.binary = binary);
        let mut s = tokio::net::TcpStream::connect(relay.addr()).await.unwrap();
        let request = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                       Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
                       Sec-WebSocket-Protocol: nostrwire.v1\r\n\r\n";
        s.write_all(request.as_bytes()).await.unwrap();
        let mut head = vec![0u8; 1024];
        let n = s.read(&mut head).await.unwrap();
        let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 101"), "{head}");
        assert_eq!(
            head.contains("sec-websocket-protocol: nostrwire.v1"),
            answered,
            "{head}"
        );
    }
}
