//! A small relay for the load tester's own tests, on 127.0.0.1.
//!
//! It speaks just enough NIP-01 to exercise the tester: it answers EVENTs
//! (in the way a [`Behavior`] says), serves stored events to REQs with
//! EOSE, delivers new events to live subscriptions, and writes all answers to
//! one read's worth of frames in a single write, so frames arrive back to
//! back. Its WebSocket framing is written independently of the tester's.

#![allow(dead_code)]
// RFC 6455 lengths are big-endian.
#![allow(clippy::big_endian_bytes)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostrwire_event::message::write;
use nostrwire_event::{ClientMessage, Event, EventId, Filter, SignedFields};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the stub answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// OK true to every EVENT; REQs answered from storage.
    Normal,
    /// Never answers anything.
    Silent,
    /// Answers every EVENT with a CLOSED (not an OK) and every REQ with CLOSED.
    Closed,
    /// Answers every EVENT with an OK for a different id.
    WrongId,
    /// OK false with a `blocked:` reason.
    Reject,
    /// Answers REQs with every stored event, ignoring the filter.
    WrongResults,
    /// Like `Normal`, but writes its answers a few bytes at a time.
    Dribble,
    /// Like `Normal`, but refuses REQs that carry `search` with CLOSED.
    NoSearch,
    /// Sends a NOTICE before every answer.
    Noisy,
    /// OK true to every EVENT and nothing else: no storage, no fan-out.
    OkOnly,
    /// Like `Normal`, but ignores `limit` in REQs.
    IgnoreLimit,
}

type Sub = (u64, String, Vec<Filter>, mpsc::UnboundedSender<Vec<u8>>);

#[derive(Default)]
struct State {
    events: Mutex<Vec<(Event, Vec<u8>)>>,
    subs: Mutex<Vec<Sub>>,
    next_conn: AtomicU64,
}

/// A running stub relay; it stops when the test's runtime ends.
pub struct Stub {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// Bound address.
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Stub {
    /// Events stored so far.
    pub fn stored(&self) -> usize {
        self.state.events.lock().unwrap().len()
    }
}

/// Starts a stub relay on a fresh port of 127.0.0.1, on the current runtime.
pub async fn start(behavior: Behavior) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State::default());
    let st = state.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let _ = sock.set_nodelay(true);
            let st = st.clone();
            tokio::spawn(async move {
                let _ = serve(sock, st, behavior).await;
            });
        }
    });
    Stub {
        url: format!("ws://{addr}"),
        addr,
        state,
    }
}

/// Starts a stub on its own runtime thread (for tests that call the
/// blocking `nostrwire_loadgen::run`).
pub fn start_in_thread(behavior: Behavior) -> Stub {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let stub = start(behavior).await;
            tx.send(stub).unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv().unwrap()
}

pub fn server_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    out.push(0x80 | opcode);
    let n = payload.len();
    if n < 126 {
        out.push(n as u8);
    } else if n < 65536 {
        out.push(126);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
}

/// Parses one masked client frame: `(fin, opcode, payload, consumed)`.
fn client_frame(buf: &[u8]) -> Option<(bool, u8, Vec<u8>, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0F;
    assert!(buf[1] & 0x80 != 0, "client frames must be masked");
    let (len, mut pos) = match buf[1] & 0x7F {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (
            u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    if buf.len() < pos + 4 + len {
        return None;
    }
    let key = [buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]];
    pos += 4;
    let payload = buf[pos..pos + len]
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ key[i % 4])
        .collect();
    Some((fin, opcode, payload, pos + len))
}

pub async fn handshake(sock: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let key = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("sec-websocket-key")
                .then(|| v.trim().to_string())
        })
        .expect("client sent a key");
    // RFC 6455 §4.2.2; checked against the RFC's example in nostrwire-websocket.
    let accept = nostrwire_websocket::handshake::accept_key(key.as_bytes());
    let resp = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    sock.write_all(resp.as_bytes()).await?;
    Ok(buf[end..].to_vec())
}

async fn serve(mut sock: TcpStream, state: Arc<State>, behavior: Behavior) -> std::io::Result<()> {
    let mut buf = handshake(&mut sock).await?;
    let conn_id = state.next_conn.fetch_add(1, Ordering::Relaxed);
    let (mut rd, mut wr) = sock.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if behavior == Behavior::Dribble {
                for piece in bytes.chunks(7) {
                    if wr.write_all(piece).await.is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            } else if wr.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut chunk = vec![0u8; 64 * 1024];
    let mut message = Vec::new();
    loop {
        let mut out = Vec::new();
        while let Some((fin, opcode, payload, used)) = client_frame(&buf) {
            buf.drain(..used);
            match opcode {
                0x8 => {
                    state.subs.lock().unwrap().retain(|s| s.0 != conn_id);
                    return Ok(());
                }
                0x9 => server_frame(&mut out, 0xA, &payload),
                0x1 | 0x0 => {
                    message.extend_from_slice(&payload);
                    if fin {
                        answer(&message, &state, behavior, conn_id, &tx, &mut out);
                        message.clear();
                    }
                }
                _ => {}
            }
        }
        if !out.is_empty() {
            let _ = tx.send(out);
        }
        let n = rd.read(&mut chunk).await?;
        if n == 0 {
            state.subs.lock().unwrap().retain(|s| s.0 != conn_id);
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn text(out: &mut Vec<u8>, msg: &[u8]) {
    server_frame(out, 0x1, msg);
}

fn answer(
    raw: &[u8],
    state: &State,
    behavior: Behavior,
    conn_id: u64,
    tx: &mpsc::UnboundedSender<Vec<u8>>,
    out: &mut Vec<u8>,
) {
    if behavior == Behavior::Silent {
        return;
    }
    if behavior == Behavior::Noisy {
        let mut m = Vec::new();
        write::notice(&mut m, "hello from a noisy relay");
        text(out, &m);
    }
    let msg = ClientMessage::parse(raw).expect("the tester sends valid messages");
    if behavior == Behavior::OkOnly {
        if let ClientMessage::Event(ev) = msg {
            let mut m = Vec::with_capacity(100);
            write::ok(&mut m, ev.id(), true, "");
            text(out, &m);
        }
        return;
    }
    let mut m = Vec::new();
    match msg {
        ClientMessage::Event(ev) => {
            let event = ev.to_event();
            match behavior {
                Behavior::Closed => write::closed(&mut m, "sub", "error: not an OK"),
                Behavior::WrongId => {
                    let mut other = *event.id.as_bytes();
                    other[0] ^= 1;
                    write::ok(&mut m, &EventId::from_bytes(other), true, "");
                }
                Behavior::Reject => write::ok(&mut m, &event.id, false, "blocked: not today"),
                _ => {
                    write::ok(&mut m, &event.id, true, "");
                    let mut ev_json = Vec::new();
                    event.write_json(&mut ev_json);
                    for (_, sub, filters, stx) in state.subs.lock().unwrap().iter() {
                        if filters.iter().any(|f| f.matches(&event)) {
                            let mut f = Vec::new();
                            let mut msg = Vec::new();
                            write::relay_event(&mut msg, sub, &event);
                            text(&mut f, &msg);
                            let _ = stx.send(f);
                        }
                    }
                    state.events.lock().unwrap().push((event, ev_json));
                }
            }
            text(out, &m);
        }
        ClientMessage::Req {
            subscription_id,
            filters,
        } => {
            if behavior == Behavior::Closed
                || (behavior == Behavior::NoSearch && filters.iter().any(|f| f.search.is_some()))
            {
                write::closed(&mut m, &subscription_id, "unsupported: no search here");
                text(out, &m);
                return;
            }
            {
                let events = state.events.lock().unwrap();
                let limit = filters
                    .iter()
                    .filter_map(|f| f.limit)
                    .max()
                    .filter(|_| behavior != Behavior::IgnoreLimit);
                let mut n = 0u64;
                for (e, _) in events.iter().rev() {
                    if limit.is_some_and(|l| n >= l) {
                        break;
                    }
                    if behavior == Behavior::WrongResults || filters.iter().any(|f| f.matches(e)) {
                        let mut msg = Vec::new();
                        write::relay_event(&mut msg, &subscription_id, e);
                        text(out, &msg);
                        n += 1;
                    }
                }
            }
            write::eose(&mut m, &subscription_id);
            text(out, &m);
            state.subs.lock().unwrap().push((
                conn_id,
                subscription_id.to_string(),
                filters,
                tx.clone(),
            ));
        }
        ClientMessage::Close(sub) => {
            state
                .subs
                .lock()
                .unwrap()
                .retain(|s| !(s.0 == conn_id && s.1 == sub));
        }
        _ => {}
    }
}

/// Waits a little for background writes to settle.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// `count` generated events in the real kind mix, from 10 authors of `seed`;
/// `stream` keeps sets of one seed apart.
pub fn mixed_events(
    seed: u64,
    stream: u64,
    count: usize,
) -> Vec<nostrwire_loadgen::workload::Prepared> {
    use nostrwire_loadgen::testdata;
    use nostrwire_loadgen::workload::{self, GenSpec, KindMix, Shapes};
    let keys = workload::authors(seed, 10);
    let mix = KindMix::load(&testdata("kind-mix.tsv")).unwrap();
    let shapes = Shapes::load(&testdata("real-events.jsonl")).unwrap();
    let spec = GenSpec {
        seed,
        stream,
        count,
        newest: nostrwire_event::Timestamp::now(),
        extra_tag: None,
    };
    workload::mixed_events(&spec, &keys, &mix, &shapes)
}

/// Our relay on a loopback port with a fresh database (durability `none`).
/// Keep the directory alive as long as the relay.
pub fn start_relay() -> (nostrwire_relay::Relay, tempfile::TempDir) {
    start_relay_with(|_| {})
}

/// [`start_relay`] with settings of the test's own.
pub fn start_relay_with(
    adjust: impl FnOnce(&mut nostrwire_relay::Config),
) -> (nostrwire_relay::Relay, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = nostrwire_relay::Config::default();
    config.relay.listen = "127.0.0.1:0".into();
    config.relay.data = dir.path().to_path_buf();
    config.storage.durability = nostrwire_store::Durability::None;
    config.storage.map_size_gib = 1;
    adjust(&mut config);
    (nostrwire_relay::start(config).unwrap(), dir)
}
