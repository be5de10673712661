//! Stage 1: sockets. Accepts TCP connections (TCP_NODELAY on each), answers
//! plain HTTP (NIP-11 document, `/metrics`) and upgrades WebSocket requests,
//! negotiating the `nostrwire.v1` subprotocol and permessage-deflate.
//! A connection task turns socket bytes into messages (`nostrwire-websocket`)
//! and forwards them to its ingest worker untouched; a writer task frames
//! everything queued for the connection and writes it in as few socket
//! writes as possible.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostrwire_websocket::deflate::{DeflateConfig, DeflateParams};
use nostrwire_websocket::frame::opcode;
use nostrwire_websocket::{handshake, Message, MessageReader, MessageWriter, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use crate::msg::{Conn, IngestMsg, Outbox, Outgoing, CLOSE_GOING_AWAY};
use crate::Shared;

/// Largest HTTP request head read before deciding what the request is.
const MAX_HEAD: usize = 16 * 1024;
/// Framed bytes gathered before one socket write.
const MAX_WRITE_BATCH: usize = 1 << 20;

/// Accepts connections until `shutdown` flips.
pub async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let next_id = Arc::new(AtomicU64::new(1));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let ip = peer.ip().to_canonical();
            if let Err(e) = connection(shared, stream, ip, id, shutdown).await {
                tracing::debug!(conn = id, "connection ended: {e}");
            }
        });
    }
}

/// A NIP-42 challenge: 128 random bits as hex, fresh for every connection.
fn new_challenge() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("operating system randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads until the end of the HTTP request head. Returns everything read;
/// bytes after the head (frames sent right after the upgrade request) are
/// part of it.
async fn read_head(stream: &mut TcpStream) -> io::Result<(Vec<u8>, usize)> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let searched = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((head, searched + i + 4));
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
    }
}

struct Request {
    path: String,
    method: String,
    upgrade: bool,
    /// `Sec-WebSocket-Key`, as sent.
    key: Option<String>,
    /// `Sec-WebSocket-Version`.
    version: Option<String>,
    /// The client offered `nostrwire.v1` in `Sec-WebSocket-Protocol`.
    binary: bool,
    /// Every `Sec-WebSocket-Extensions` value, joined with `,`.
    extensions: String,
    accept_nostr: bool,
    accept_html: bool,
}

fn parse_head(head: &[u8]) -> Option<Request> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).ok()?;
    let values = |name: &'static str| {
        req.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    let lower = |name: &'static str| values(name).next().map(|v| v.to_ascii_lowercase());
    Some(Request {
        path: req.path?.to_string(),
        method: req.method?.to_string(),
        upgrade: lower("upgrade").is_some_and(|v| v.contains("websocket")),
        key: values("sec-websocket-key").next(),
        version: values("sec-websocket-version").next(),
        binary: values("sec-websocket-protocol").any(|v| {
            v.split(',')
                .any(|p| p.trim() == nostrwire_wire::transport::SUBPROTOCOL)
        }),
        extensions: values("sec-websocket-extensions")
            .collect::<Vec<_>>()
            .join(","),
        accept_nostr: lower("accept").is_some_and(|v| v.contains("application/nostr+json")),
        accept_html: lower("accept").is_some_and(|v| v.contains("text/html")),
    })
}

async fn http_reply(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> io::Result<()> {
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Headers: *\r\n\
         Access-Control-Allow-Methods: GET, OPTIONS\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// The permessage-deflate settings from the relay configuration.
fn deflate_config(shared: &Shared) -> DeflateConfig {
    let ws = &shared.config.websocket;
    DeflateConfig {
        level: ws.deflate_level,
        server_context_takeover: ws.server_context_takeover,
        client_context_takeover: ws.client_context_takeover,
        min_size: ws.deflate_min_bytes,
    }
}

async fn connection(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    ip: IpAddr,
    id: u64,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let (head, head_len) = tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request"))??;
    let Some(request) = parse_head(&head[..head_len]) else {
        return http_reply(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            "bad request\n",
        )
        .await;
    };
    if !request.upgrade {
        if request.method == "OPTIONS" {
            return http_reply(&mut stream, "204 No Content", "text/plain", "").await;
        }
        if request.path == "/metrics" {
            let stats = shared.store.stats().ok();
            let body = shared.metrics.render(stats);
            return http_reply(&mut stream, "200 OK", "text/plain; version=0.0.4", &body).await;
        }
        if request.accept_nostr {
            let body = crate::nip11::document(&shared.current_config());
            return http_reply(&mut stream, "200 OK", "application/nostr+json", &body).await;
        }
        if let Some((content_type, body)) =
            crate::web::respond(&shared, &request.path, request.accept_html)
        {
            return http_reply(&mut stream, "200 OK", content_type, &body).await;
        }
        return http_reply(
            &mut stream,
            "200 OK",
            "text/plain",
            "This is a Nostr relay. Connect with a Nostr client over WebSocket.\n",
        )
        .await;
    }
    let Some(key) = request.key.as_deref().filter(|_| request.method == "GET") else {
        return http_reply(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            "a WebSocket upgrade needs GET and Sec-WebSocket-Key\n",
        )
        .await;
    };
    if request.version.as_deref() != Some("13") {
        let reply = "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n";
        stream.write_all(reply.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let open = shared.metrics.connections_open.load(Ordering::Relaxed) as usize;
    if open >= shared.config.limits.max_connections {
        return http_reply(
            &mut stream,
            "503 Service Unavailable",
            "text/plain",
            "too many connections\n",
        )
        .await;
    }
    let Some(_slot) = shared.rate.connect(ip) else {
        shared.metrics.rejected("connections_per_ip");
        return http_reply(
            &mut stream,
            "429 Too Many Requests",
            "text/plain",
            "rate-limited: too many connections from this address\n",
        )
        .await;
    };
    let binary = request.binary && shared.config.websocket.binary;
    let deflate_config = deflate_config(&shared);
    let deflate = if shared.config.websocket.deflate {
        handshake::accept_deflate(&request.extensions, &deflate_config)
    } else {
        None
    };
    // Echoing the subprotocol is what switches the client to binary frames.
    let mut reply = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n",
        handshake::accept_key(key.as_bytes())
    );
    if binary {
        reply.push_str("Sec-WebSocket-Protocol: ");
        reply.push_str(nostrwire_wire::transport::SUBPROTOCOL);
        reply.push_str("\r\n");
    }
    if let Some((_, answer)) = &deflate {
        reply.push_str("Sec-WebSocket-Extensions: ");
        reply.push_str(answer);
        reply.push_str("\r\n");
    }
    reply.push_str("\r\n");
    stream.write_all(reply.as_bytes()).await?;
    let session = Session {
        binary,
        deflate: deflate.map(|(params, _)| params),
        deflate_config,
    };
    shared
        .metrics
        .connections_open
        .fetch_add(1, Ordering::Relaxed);
    shared
        .metrics
        .connections_total
        .fetch_add(1, Ordering::Relaxed);
    let early = head[head_len..].to_vec();
    drop(head);
    let result = websocket(&shared, stream, &early, ip, session, id, &mut shutdown).await;
    shared
        .metrics
        .connections_open
        .fetch_sub(1, Ordering::Relaxed);
    let worker = shared.ingest_for(id);
    let _ = worker.send(IngestMsg::Closed(id));
    result
}

/// What the handshake settled for one connection.
struct Session {
    /// `nostrwire.v1` binary frames instead of NIP-01 JSON text.
    binary: bool,
    /// permessage-deflate, if negotiated.
    deflate: Option<DeflateParams>,
    deflate_config: DeflateConfig,
}

async fn websocket(
    shared: &Arc<Shared>,
    stream: TcpStream,
    early: &[u8],
    ip: IpAddr,
    session: Session,
    id: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> io::Result<()> {
    let binary = session.binary;
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let outbox = Outbox::new(tx, shared.config.limits.max_outbound_bytes, binary);
    let challenge = if shared.config.auth.enabled {
        new_challenge()
    } else {
        String::new()
    };
    let conn = Arc::new(Conn::new(id, outbox.clone(), ip, challenge));
    if shared.config.auth.enabled {
        let mut out = Vec::new();
        nostrwire_event::message::write::auth_challenge(&mut out, &conn.challenge);
        outbox.send(out);
    }
    let ingest = shared.ingest_for(id);
    let frames = MessageWriter::new(
        Role::Server,
        session
            .deflate
            .map(|p| p.compressor(Role::Server, &session.deflate_config)),
    );
    let writer = tokio::spawn(write_loop(wr, rx, frames, outbox.clone()));
    let mut reader = MessageReader::new(
        Role::Server,
        shared.config.limits.max_message_bytes,
        session.deflate.map(|p| p.decompressor(Role::Server)),
    );
    reader.push(early);
    'connection: loop {
        loop {
            let message = match reader.next_message() {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(e) => {
                    let mut out = Vec::new();
                    nostrwire_event::message::write::notice(&mut out, &format!("error: {e}"));
                    outbox.send(out);
                    outbox.close_with(e.close_code());
                    break 'connection;
                }
            };
            match message {
                Message::Text(text) if !binary => {
                    if ingest
                        .send(IngestMsg::Frame(
                            conn.clone(),
                            text.to_vec(),
                            Instant::now(),
                        ))
                        .is_err()
                    {
                        break 'connection;
                    }
                }
                Message::Binary(frame) if binary => {
                    if ingest
                        .send(IngestMsg::Frame(
                            conn.clone(),
                            frame.to_vec(),
                            Instant::now(),
                        ))
                        .is_err()
                    {
                        break 'connection;
                    }
                }
                Message::Text(_) | Message::Binary(_) => {
                    let mut out = Vec::new();
                    nostrwire_event::message::write::notice(
                        &mut out,
                        if binary {
                            "invalid: this connection negotiated nostrwire.v1; send binary frames"
                        } else {
                            "invalid: binary frames need the nostrwire.v1 subprotocol; send JSON text frames"
                        },
                    );
                    outbox.send(out);
                }
                Message::Ping(payload) => outbox.pong(payload),
                Message::Pong(_) => {}
                Message::Close(_) => {
                    outbox.close();
                    break 'connection;
                }
            }
        }
        let read = tokio::select! {
            r = rd.read(reader.read_buf()) => r,
            _ = shutdown.changed() => {
                outbox.close_with(CLOSE_GOING_AWAY);
                break;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => reader.filled(n),
        }
    }
    outbox.close();
    drop(conn);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    Ok(())
}

/// The connection's writer: frames everything queued (compressing when
/// negotiated) and writes it with one socket write per batch.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: UnboundedReceiver<Outgoing>,
    mut frames: MessageWriter,
    outbox: Outbox,
) {
    let mut out = Vec::new();
    let mut close = None;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut written = 0;
        while let Some(item) = next.take() {
            match item {
                Outgoing::Text(text) => {
                    written += text.len();
                    frames.text(&mut out, &text, None);
                }
                Outgoing::Binary(frame) => {
                    written += frame.len();
                    frames.binary(&mut out, &frame, None);
                }
                Outgoing::Pong(payload) => {
                    written += payload.len();
                    frames.control(&mut out, opcode::PONG, &payload, None);
                }
                Outgoing::Close(code) => {
                    close = Some(code);
                    break;
                }
            }
            if out.len() >= MAX_WRITE_BATCH {
                break;
            }
            next = rx.try_recv().ok();
        }
        if wr.write_all(&out).await.is_err() {
            return;
        }
        outbox.sent(written);
        out.clear();
        if out.capacity() > 4 * MAX_WRITE_BATCH {
            out = Vec::new();
        }
        if close.is_some() {
            break;
        }
    }
    let code = close.unwrap_or(crate::msg::CLOSE_NORMAL);
    frames.close(&mut out, code, None);
    let _ = wr.write_all(&out).await;
    let _ = wr.shutdown().await;
}
