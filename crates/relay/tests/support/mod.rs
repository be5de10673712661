//! A relay on a loopback port with a fresh database, and a real WebSocket
//! client (tokio-tungstenite) that speaks to it.
#![allow(dead_code)]

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostrwire_event::{
    message::write, Event, Filter, Keys, Kind, RelayMessage, SignedFields, Tag, Timestamp,
    UnsignedEvent,
};
use nostrwire_relay::{Config, Relay};
use nostrwire_wire::compress::{DictSet, RecordDecompressor};
use nostrwire_wire::transport::{self, RelayFrame, SetHash};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub struct TestRelay {
    pub relay: Option<Relay>,
    pub dir: tempfile::TempDir,
    pub url: String,
    /// The configuration it started with.
    pub config: Config,
}

impl TestRelay {
    pub fn start() -> TestRelay {
        Self::start_with(|_| {})
    }

    pub fn start_with(adjust: impl FnOnce(&mut Config)) -> TestRelay {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.relay.listen = "127.0.0.1:0".into();
        config.relay.data = dir.path().to_path_buf();
        config.storage.durability = nostrwire_store::Durability::None;
        config.storage.map_size_gib = 1;
        config.performance.ingest_threads = 2;
        config.performance.query_threads = 2;
        adjust(&mut config);
        let relay = nostrwire_relay::start(config.clone()).unwrap();
        let url = format!("ws://{}", relay.local_addr());
        TestRelay {
            relay: Some(relay),
            dir,
            url,
            config,
        }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.relay.as_ref().unwrap().local_addr()
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown();
        }
    }
}

pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The last NIP-42 challenge the relay sent (AUTH messages are taken
    /// here, never returned by `recv`).
    pub challenge: Option<String>,
    /// Speaks `nostrwire.v1` binary frames (spec/transport.md).
    pub binary: bool,
    /// Speaks `nostrwire.v2` (then `binary` is set too).
    pub v2: Option<V2State>,
    /// The limits it reads the relay's messages with (JSON and records).
    pub limits: nostrwire_event::Limits,
}

/// What a `nostrwire.v2` test client knows and has counted.
#[derive(Default)]
pub struct V2State {
    /// The set the relay named last (`0x07`), once it named one.
    pub relay_set: Option<Option<SetHash>>,
    /// The set it holds and told the relay of.
    pub held: Option<DictSet>,
    /// Events of a batch not yet returned by `recv`.
    pending: std::collections::VecDeque<Got>,
    /// Batch frames received.
    pub batches: usize,
    /// Records received uncompressed.
    pub raw: usize,
    /// Records received compressed without a dictionary.
    pub plain: usize,
    /// Records received compressed with a dictionary.
    pub with_dictionary: usize,
}

/// A relay message, owned, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub enum Got {
    Event(String, Event),
    Ok(String, bool, String),
    Eose(String),
    Closed(String, String),
    Notice(String),
    Count(String, u64),
    NegMsg(String, Vec<u8>),
    NegErr(String, String),
    Other(String),
}

impl Client {
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Client {
            ws,
            challenge: None,
            limits: nostrwire_event::Limits::DEFAULT,
            binary: false,
            v2: None,
        }
    }

    /// Connects offering `protocols` (`Sec-WebSocket-Protocol`); returns
    /// the client set up for what the relay answered.
    pub async fn connect_offering(url: &str, protocols: &str) -> Client {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", protocols.parse().unwrap());
        let (ws, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        let answer = response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .map(|v| v.to_str().unwrap().to_string());
        Client {
            ws,
            challenge: None,
            limits: nostrwire_event::Limits::DEFAULT,
            binary: answer.is_some(),
            v2: (answer.as_deref() == Some(transport::SUBPROTOCOL_V2)).then(V2State::default),
        }
    }

    /// Connects asking for `nostrwire.v2` (and v1); panics unless the relay
    /// agrees to v2.
    pub async fn connect_v2(url: &str) -> Client {
        let c = Self::connect_offering(url, "nostrwire.v2, nostrwire.v1").await;
        assert!(c.v2.is_some(), "the relay did not answer nostrwire.v2");
        c
    }

    /// The `nostrwire.v2` state; panics on other transports.
    pub fn v2(&mut self) -> &mut V2State {
        self.v2.as_mut().expect("a nostrwire.v2 connection")
    }

    /// Waits for the relay's `0x07` (the first frame of a v2 connection,
    /// and again when the relay's set changes) and returns the set it names.
    /// Messages that arrive meanwhile are kept for `recv`.
    pub async fn relay_set(&mut self) -> Option<SetHash> {
        let mut kept = std::mem::take(&mut self.v2().pending);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.v2().relay_set.is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "no dictionary set frame within 10 s"
            );
            if let Some(got) = self.recv_timeout(Duration::from_millis(100)).await {
                kept.push_back(got);
                kept.extend(self.v2().pending.drain(..));
            }
        }
        self.v2().pending = kept;
        self.v2().relay_set.unwrap()
    }

    /// Tells the relay it holds `set` (its file's bytes), and decompresses
    /// with it from then on.
    pub async fn hold(&mut self, file: &[u8]) {
        use sha2::Digest;
        let hash: SetHash = sha2::Sha256::digest(file).into();
        self.v2().held = Some(DictSet::from_bytes(file).unwrap());
        let mut frame = Vec::new();
        transport::write_hold(&mut frame, &[hash]);
        self.send_binary(frame).await;
    }

    /// Connects asking for the binary transport; panics unless the relay
    /// agrees.
    pub async fn connect_binary(url: &str) -> Client {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            transport::SUBPROTOCOL.parse().unwrap(),
        );
        let (ws, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        assert_eq!(
            response.headers()["Sec-WebSocket-Protocol"],
            transport::SUBPROTOCOL
        );
        Client {
            ws,
            challenge: None,
            limits: nostrwire_event::Limits::DEFAULT,
            binary: true,
            v2: None,
        }
    }

    /// Sends a NIP-01 message given as JSON: a text frame, or a `0x00`
    /// frame on the binary transport.
    pub async fn send_json(&mut self, json: Vec<u8>) {
        if self.binary {
            let mut frame = Vec::new();
            transport::write_json(&mut frame, &json);
            self.send_binary(frame).await;
        } else {
            self.send_text(String::from_utf8(json).unwrap()).await;
        }
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws.send(Message::text(text.into())).await.unwrap();
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.ws.send(Message::binary(bytes)).await.unwrap();
    }

    pub async fn publish(&mut self, event: &Event) -> (bool, String) {
        self.send_event(event).await;
        loop {
            match self.recv().await {
                Got::Ok(id, accepted, message) => {
                    assert_eq!(id, event.id.to_hex(), "OK for another event");
                    return (accepted, message);
                }
                Got::Event(..) => continue,
                other => panic!("expected OK, got {other:?}"),
            }
        }
    }

    /// Connects from a chosen loopback source address (e.g. 127.0.0.2), so
    /// tests can be several clients by IP.
    pub async fn connect_from(url: &str, relay: std::net::SocketAddr, source: &str) -> Client {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        let stream = socket.connect(relay).await.unwrap();
        let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
            .await
            .unwrap();
        Client {
            ws,
            challenge: None,
            limits: nostrwire_event::Limits::DEFAULT,
            binary: false,
            v2: None,
        }
    }

    /// The connection's NIP-42 challenge (the first thing the relay sends).
    pub async fn wait_challenge(&mut self) -> String {
        while self.challenge.is_none() {
            let frame = tokio::time::timeout(Duration::from_secs(10), self.ws.next())
                .await
                .expect("no AUTH challenge within 10 s")
                .expect("connection closed")
                .unwrap();
            let text = match frame {
                Message::Text(text) => text.as_bytes().to_vec(),
                Message::Binary(b) => match transport::decode_relay_v2(&b, &Default::default()) {
                    Ok(RelayFrame::Json(json)) => json.to_vec(),
                    Ok(RelayFrame::DictionarySet(set)) if self.v2.is_some() => {
                        self.v2().relay_set = Some(set);
                        continue;
                    }
                    other => panic!("expected the AUTH challenge first, got {other:?}"),
                },
                _ => continue,
            };
            {
                let text = String::from_utf8(text).unwrap();
                match RelayMessage::parse(text.as_bytes()).unwrap() {
                    RelayMessage::Auth(c) => self.challenge = Some(c.into_owned()),
                    _ => panic!("expected the AUTH challenge first, got {text}"),
                }
            }
        }
        self.challenge.clone().unwrap()
    }

    /// Sends an AUTH event with these tags and returns the relay's `OK`.
    pub async fn auth_with(
        &mut self,
        keys: &Keys,
        created_at: u64,
        tags: &[&[&str]],
    ) -> (bool, String) {
        let auth = event(keys, created_at, 22242, tags, "");
        if self.binary {
            let mut frame = Vec::new();
            transport::write_auth(&mut frame, &nostrwire_wire::encode_event(&auth));
            self.send_binary(frame).await;
        } else {
            let mut out = Vec::new();
            write::client_auth(&mut out, &auth);
            self.send_text(String::from_utf8(out).unwrap()).await;
        }
        match self.recv().await {
            Got::Ok(id, accepted, message) if id == auth.id.to_hex() => (accepted, message),
            other => panic!("expected OK for AUTH, got {other:?}"),
        }
    }

    /// Authenticates as `keys` with a valid AUTH event (NIP-42).
    pub async fn auth(&mut self, keys: &Keys, relay_url: &str) -> (bool, String) {
        let challenge = self.wait_challenge().await;
        self.auth_with(
            keys,
            now(),
            &[&["relay", relay_url], &["challenge", &challenge]],
        )
        .await
    }

    /// Sends an EVENT without waiting for the OK (an nwb record on the
    /// binary transport).
    pub async fn send_event(&mut self, event: &Event) {
        if self.binary {
            let mut frame = Vec::new();
            transport::write_event(&mut frame, &nostrwire_wire::encode_event(event));
            self.send_binary(frame).await;
        } else {
            let mut out = Vec::new();
            write::client_event(&mut out, event);
            self.send_text(String::from_utf8(out).unwrap()).await;
        }
    }

    pub async fn req(&mut self, sub: &str, filters: &[Filter]) {
        let mut out = Vec::new();
        write::req(&mut out, sub, filters);
        self.send_json(out).await;
    }

    /// Sends a REQ, collects events until EOSE, then CLOSEs it. Live events
    /// of other subscriptions arriving meanwhile are skipped.
    pub async fn query(&mut self, sub: &str, filters: &[Filter]) -> Vec<Event> {
        self.req(sub, filters).await;
        let mut events = Vec::new();
        loop {
            match self.recv().await {
                Got::Event(s, e) if s == sub => events.push(e),
                Got::Eose(s) if s == sub => break,
                Got::Event(..) => {}
                other => panic!("while querying {sub}: {other:?}"),
            }
        }
        self.close(sub).await;
        events
    }

    pub async fn close(&mut self, sub: &str) {
        let mut out = Vec::new();
        write::close(&mut out, sub);
        self.send_json(out).await;
    }

    pub async fn recv(&mut self) -> Got {
        self.recv_timeout(Duration::from_secs(10))
            .await
            .expect("no message from the relay within 10 s")
    }

    pub async fn recv_timeout(&mut self, timeout: Duration) -> Option<Got> {
        if let Some(got) = self.v2.as_mut().and_then(|v2| v2.pending.pop_front()) {
            return Some(got);
        }
        loop {
            let frame = tokio::time::timeout(timeout, self.ws.next()).await.ok()??;
            // A connection the relay closed without a close frame (one it
            // cut off while its socket was full) ends like a closed one.
            let Ok(frame) = frame else { return None };
            let text = match frame {
                Message::Text(t) => {
                    assert!(!self.binary, "text frame on a nostrwire.v1 connection: {t}");
                    t.to_string()
                }
                Message::Binary(b) if self.v2.is_some() => match self.v2_frame(&b) {
                    Some(got) => return Some(got),
                    None => continue,
                },
                Message::Binary(b) => {
                    assert!(self.binary, "binary frame on a JSON connection");
                    match transport::decode_relay(&b, &self.wire_limits())
                        .unwrap_or_else(|e| panic!("relay sent a bad frame {b:?}: {e}"))
                    {
                        RelayFrame::Json(json) => String::from_utf8(json.to_vec()).unwrap(),
                        RelayFrame::Event {
                            subscription_id,
                            event,
                        } => {
                            event.verify().expect("relay served an invalid event");
                            return Some(Got::Event(subscription_id.into(), event.to_event()));
                        }
                        RelayFrame::Ok {
                            id,
                            accepted,
                            message,
                        } => return Some(Got::Ok(id.to_hex(), accepted, message.into())),
                        RelayFrame::Eose(s) => return Some(Got::Eose(s.into())),
                        other => panic!("not a nostrwire.v1 frame: {other:?}"),
                    }
                }
                Message::Close(_) => return None,
                _ => continue,
            };
            let parsed = RelayMessage::parse_with(text.as_bytes(), &self.limits)
                .unwrap_or_else(|e| panic!("relay sent unparseable {text}: {e}"));
            if let RelayMessage::Auth(challenge) = &parsed {
                self.challenge = Some(challenge.to_string());
                continue;
            }
            return Some(match parsed {
                RelayMessage::Event {
                    subscription_id,
                    event,
                } => {
                    event.verify().expect("relay served an invalid event");
                    Got::Event(subscription_id.into_owned(), event.to_event())
                }
                RelayMessage::Ok {
                    event_id,
                    accepted,
                    message,
                } => Got::Ok(event_id.to_hex(), accepted, message.into_owned()),
                RelayMessage::Eose(s) => Got::Eose(s.into_owned()),
                RelayMessage::Closed {
                    subscription_id,
                    message,
                } => Got::Closed(subscription_id.into_owned(), message.into_owned()),
                RelayMessage::Notice(m) => Got::Notice(m.into_owned()),
                RelayMessage::Count {
                    subscription_id,
                    count,
                } => Got::Count(subscription_id.into_owned(), count),
                RelayMessage::NegMsg {
                    subscription_id,
                    message,
                } => Got::NegMsg(subscription_id.into_owned(), message),
                RelayMessage::NegErr {
                    subscription_id,
                    message,
                } => Got::NegErr(subscription_id.into_owned(), message.into_owned()),
                _ => Got::Other(text),
            });
        }
    }

    /// A `nostrwire.v2` frame: a batch's events (the first returned, the
    /// rest kept for `recv`), or `None` for a frame `recv` does not return
    /// (the relay's set) or a JSON message (then queued as text).
    fn v2_frame(&mut self, b: &[u8]) -> Option<Got> {
        let limits = self.wire_limits();
        let frame = transport::decode_relay_v2(b, &limits)
            .unwrap_or_else(|e| panic!("relay sent a bad v2 frame: {e}"));
        let v2 = self.v2.as_mut().unwrap();
        match frame {
            RelayFrame::DictionarySet(set) => {
                v2.relay_set = Some(set);
                None
            }
            RelayFrame::Batch {
                subscription_id,
                records,
            } => {
                v2.batches += 1;
                let mut decompressor = RecordDecompressor::new(v2.held.as_ref()).unwrap();
                for stored in records.records() {
                    match transport::record_dictionary(stored) {
                        None => v2.raw += 1,
                        Some(0) => v2.plain += 1,
                        Some(_) => v2.with_dictionary += 1,
                    }
                    let record = decompressor.record(stored, &limits).unwrap_or_else(|e| {
                        panic!("relay sent a record this client cannot read: {e}")
                    });
                    let view = nostrwire_wire::EventView::decode_with(record, &limits).unwrap();
                    view.verify().expect("relay served an invalid event");
                    v2.pending
                        .push_back(Got::Event(subscription_id.into(), view.to_event()));
                }
                v2.pending.pop_front()
            }
            RelayFrame::Json(json) => {
                let text = String::from_utf8(json.to_vec()).unwrap();
                let parsed = RelayMessage::parse_with(text.as_bytes(), &self.limits).unwrap();
                match parsed {
                    RelayMessage::Auth(c) => {
                        self.challenge = Some(c.to_string());
                        None
                    }
                    RelayMessage::Closed {
                        subscription_id,
                        message,
                    } => Some(Got::Closed(
                        subscription_id.into_owned(),
                        message.into_owned(),
                    )),
                    RelayMessage::Notice(m) => Some(Got::Notice(m.into_owned())),
                    RelayMessage::Count {
                        subscription_id,
                        count,
                    } => Some(Got::Count(subscription_id.into_owned(), count)),
                    _ => Some(Got::Other(text)),
                }
            }
            RelayFrame::Ok {
                id,
                accepted,
                message,
            } => Some(Got::Ok(id.to_hex(), accepted, message.into())),
            RelayFrame::Eose(s) => Some(Got::Eose(s.into())),
            other => panic!("not a nostrwire.v2 relay frame: {other:?}"),
        }
    }

    /// Asserts nothing arrives for a short while.
    /// The record limits matching [`Client::limits`].
    fn wire_limits(&self) -> nostrwire_wire::Limits {
        nostrwire_wire::Limits::from_json(&self.limits)
    }

    pub async fn expect_silence(&mut self) {
        if let Some(got) = self.recv_timeout(Duration::from_millis(300)).await {
            panic!("expected silence, got {got:?}");
        }
    }
}

pub fn now() -> u64 {
    nostrwire_relay::now()
}

pub fn event(keys: &Keys, created_at: u64, kind: u16, tags: &[&[&str]], content: &str) -> Event {
    UnsignedEvent::new(
        keys,
        Timestamp::new(created_at).unwrap(),
        Kind(kind),
        tags.iter().map(|t| Tag::from_strs(t)).collect(),
        content,
    )
    .sign(keys)
}

pub fn filter(json: &str) -> Filter {
    Filter::from_json(json.as_bytes()).unwrap()
}

/// The body of a plain HTTP GET to the relay, with this `Accept` header.
pub async fn http_get(addr: std::net::SocketAddr, path: &str, accept: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_string())
}
