//! permessage-deflate (RFC 7692) over a real socket: negotiation, the same
//! events with and without compression, fewer bytes, and hostile
//! compressed input. The client here is a raw TCP client framing with
//! `nostrwire-websocket`; tests/interop/node checks the relay against the
//! `ws` package's independent implementation.

mod support;

use std::time::Duration;

use nostrwire_event::message::write;
use nostrwire_event::{Event, Keys, RelayMessage};
use nostrwire_websocket::deflate::DeflateConfig;
use nostrwire_websocket::handshake::{self, check_deflate_answer};
use nostrwire_websocket::{Message, MessageReader, MessageWriter, Role};
use support::{event, now, Client, TestRelay};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A client that counts the bytes it reads from the socket.
struct RawClient {
    sock: TcpStream,
    reader: MessageReader,
    writer: MessageWriter,
    /// The relay's `Sec-WebSocket-Extensions` answer, if any.
    extensions: Option<String>,
    bytes_in: usize,
    mask: u32,
}

impl RawClient {
    async fn connect(relay: &TestRelay, offer: Option<&str>) -> RawClient {
        let mut sock = TcpStream::connect(relay.addr()).await.unwrap();
        sock.set_nodelay(true).unwrap();
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let offer = offer
            .map(|o| format!("Sec-WebSocket-Extensions: {o}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n",
            relay.addr()
        );
        sock.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                sock.read(&mut byte).await.unwrap(),
                1,
                "handshake cut short"
            );
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        assert_eq!(
            header("sec-websocket-accept").as_deref(),
            Some(handshake::accept_key(key.as_bytes()).as_str())
        );
        let extensions = header("sec-websocket-extensions");
        let config = DeflateConfig::default();
        let params = check_deflate_answer(extensions.as_deref(), &config).unwrap();
        RawClient {
            sock,
            reader: MessageReader::new(
                Role::Client,
                16 << 20,
                params.map(|p| p.decompressor(Role::Client)),
            ),
            writer: MessageWriter::new(
                Role::Client,
                params.map(|p| p.compressor(Role::Client, &config)),
            ),
            extensions,
            bytes_in: 0,
            mask: 0x1234_5678,
        }
    }

    async fn send(&mut self, text: &[u8]) {
        self.mask = self.mask.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut out = Vec::new();
        self.writer
            .text(&mut out, text, Some(self.mask.to_le_bytes()));
        self.sock.write_all(&out).await.unwrap();
    }

    /// The next text message, or `Err(close code)`.
    async fn recv(&mut self) -> Result<String, Option<u16>> {
        loop {
            match self.reader.next_message() {
                Ok(Some(Message::Text(t))) => {
                    let t = String::from_utf8(t.to_vec()).unwrap();
                    if t.starts_with("[\"AUTH\"") {
                        continue;
                    }
                    return Ok(t);
                }
                Ok(Some(Message::Close(code))) => return Err(code),
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => panic!("relay sent a bad frame: {e}"),
            }
            let n = tokio::time::timeout(
                Duration::from_secs(10),
                self.sock.read(self.reader.read_buf()),
            )
            .await
            .expect("no message from the relay within 10 s")
            .unwrap();
            if n == 0 {
                return Err(None);
            }
            self.bytes_in += n;
            self.reader.filled(n);
        }
    }

    /// The close code the relay ends with, after any NOTICE explaining it.
    async fn close_code(&mut self) -> Option<u16> {
        loop {
            match self.recv().await {
                Ok(text) => assert!(text.contains("NOTICE"), "{text}"),
                Err(code) => return code,
            }
        }
    }

    /// Stored events for `filter_json`, in order.
    async fn query(&mut self, filter_json: &str) -> Vec<Event> {
        self.send(format!(r#"["REQ","q",{filter_json}]"#).as_bytes())
            .await;
        let mut events = Vec::new();
        loop {
            let text = self.recv().await.unwrap();
            match RelayMessage::parse(text.as_bytes()).unwrap() {
                RelayMessage::Event { event, .. } => events.push(event.to_event()),
                RelayMessage::Eose { .. } => return events,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

async fn publish_corpus(relay: &TestRelay) -> Vec<Event> {
    let mut c = Client::connect(&relay.url).await;
    let mut events = Vec::new();
    // One clock reading: distinct created_at values, so newest-first order
    // is fully determined (no ties broken by id).
    let newest = now();
    for i in 0..200u64 {
        let keys = Keys::derive(70, i % 7);
        let content = format!(
            "note {i}: {}",
            "the quick brown fox jumps over the lazy dog ".repeat((i % 9) as usize)
        );
        let e = event(&keys, newest - i, 1, &[&["t", "deflate"]], &content);
        assert!(c.publish(&e).await.0);
        events.push(e);
    }
    events
}

#[tokio::test]
async fn compressed_and_plain_connections_get_the_same_events_in_fewer_bytes() {
    let relay = TestRelay::start();
    let events = publish_corpus(&relay).await;
    let mut newest_first = events.clone();
    newest_first.sort_by_key(|e| std::cmp::Reverse(e.created_at));
    let filter = r##"{"#t":["deflate"],"limit":500}"##;
    let mut plain = RawClient::connect(&relay, None).await;
    assert_eq!(plain.extensions, None);
    let expected = plain.query(filter).await;
    assert_eq!(expected, newest_first);
    let mut reference = Client::connect(&relay.url).await;
    assert_eq!(
        reference.query("r", &[support::filter(filter)]).await,
        expected
    );

    let mut sizes = Vec::new();
    for offer in [
        "permessage-deflate; client_max_window_bits",
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
    ] {
        let mut c = RawClient::connect(&relay, Some(offer)).await;
        assert!(c
            .extensions
            .as_deref()
            .unwrap()
            .starts_with("permessage-deflate"));
        let before = c.bytes_in;
        assert_eq!(c.query(filter).await, expected, "{offer}");
        sizes.push(c.bytes_in - before);
    }
    let plain_bytes = {
        let before = plain.bytes_in;
        plain.query(filter).await;
        plain.bytes_in - before
    };
    let (takeover, reset) = (sizes[0], sizes[1]);
    assert!(
        takeover < reset && reset < plain_bytes,
        "bytes: takeover {takeover}, no takeover {reset}, plain {plain_bytes}"
    );
}

#[tokio::test]
async fn negotiation_follows_the_offer_and_the_config() {
    let relay = TestRelay::start();
    for (offer, answer) in [
        ("permessage-deflate", Some("permessage-deflate")),
        (
            "permessage-deflate; client_max_window_bits",
            Some("permessage-deflate"),
        ),
        (
            "permessage-deflate; server_no_context_takeover",
            Some("permessage-deflate; server_no_context_takeover"),
        ),
        // The relay cannot shrink its window; the offer is declined.
        ("permessage-deflate; server_max_window_bits=9", None),
        ("permessage-deflate; made_up_parameter", None),
        ("x-webkit-deflate-frame", None),
    ] {
        let c = RawClient::connect(&relay, Some(offer)).await;
        assert_eq!(c.extensions.as_deref(), answer, "offer `{offer}`");
    }

    let off = TestRelay::start_with(|c| c.websocket.deflate = false);
    let c = RawClient::connect(&off, Some("permessage-deflate")).await;
    assert_eq!(c.extensions, None);

    let stateless = TestRelay::start_with(|c| {
        c.websocket.server_context_takeover = false;
        c.websocket.client_context_takeover = false;
    });
    let mut c = RawClient::connect(&stateless, Some("permessage-deflate")).await;
    assert_eq!(
        c.extensions.as_deref(),
        Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    );
    let keys = Keys::derive(71, 0);
    let e = event(&keys, now(), 1, &[], &"stateless ".repeat(50));
    let mut msg = Vec::new();
    write::client_event(&mut msg, &e);
    c.send(&msg).await;
    assert!(c.recv().await.unwrap().contains("true"));
    assert_eq!(
        c.query(&format!(r#"{{"ids":["{}"]}}"#, e.id)).await,
        vec![e]
    );
}

#[tokio::test]
async fn compressed_bombs_and_broken_streams_close_only_their_connection() {
    let relay = TestRelay::start();
    let mut bystander = Client::connect(&relay.url).await;

    // 64 MiB of spaces compress to about 64 KiB; the relay stops inflating
    // at its 1 MiB message limit and closes with 1009 (message too big).
    let mut bomb = RawClient::connect(&relay, Some("permessage-deflate")).await;
    let mut payload = b"[\"EVENT\",".to_vec();
    payload.resize(64 << 20, b' ');
    bomb.send(&payload).await;
    assert_eq!(bomb.close_code().await, Some(1009));

    // Bytes that do not inflate: close 1007 (invalid payload data).
    let mut broken = RawClient::connect(&relay, Some("permessage-deflate")).await;
    let mut frame = Vec::new();
    nostrwire_websocket::frame::encode_header(&mut frame, true, true, 1, 6, Some([0; 4]));
    frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    broken.sock.write_all(&frame).await.unwrap();
    assert_eq!(broken.close_code().await, Some(1007));

    // RSV1 on a connection that did not negotiate compression: 1002.
    let mut plain = RawClient::connect(&relay, None).await;
    plain.sock.write_all(&frame).await.unwrap();
    assert_eq!(plain.close_code().await, Some(1002));

    let e = event(&Keys::derive(72, 0), now(), 1, &[], "still serving");
    assert!(bystander.publish(&e).await.0);
}
