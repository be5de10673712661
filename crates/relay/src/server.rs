//! Stage 1: sockets. Accepts TCP connections (TCP_NODELAY on each), answers
//! plain HTTP (NIP-11 document, `/metrics`) and upgrades WebSocket requests.
//! A connection task forwards text frames to its ingest worker untouched and
//! writes everything queued for it in as few socket writes as possible.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::handshake::server::{
    Request as Handshake, Response as HandshakeResponse,
};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::msg::{Conn, IngestMsg, Outbox, Outgoing};
use crate::Shared;

/// Largest HTTP request head read before deciding what the request is.
const MAX_HEAD: usize = 16 * 1024;

/// A stream that first yields bytes already read from the socket.
struct Prefixed {
    head: Vec<u8>,
    pos: usize,
    stream: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.head.len() {
            let n = (self.head.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.head[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

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

async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(head);
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
    upgrade: bool,
    /// The client offered `nostrwire.v1` in `Sec-WebSocket-Protocol`.
    binary: bool,
    accept_nostr: bool,
    method: String,
}

fn parse_head(head: &[u8]) -> Option<Request> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).ok()?;
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
    };
    Some(Request {
        path: req.path?.to_string(),
        method: req.method?.to_string(),
        upgrade: header("upgrade").is_some_and(|v| v.contains("websocket")),
        binary: header("sec-websocket-protocol").is_some_and(|v| {
            v.split(',')
                .any(|p| p.trim() == nostrwire_wire::transport::SUBPROTOCOL)
        }),
        accept_nostr: header("accept").is_some_and(|v| v.contains("application/nostr+json")),
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

async fn connection(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    ip: IpAddr,
    id: u64,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let head = tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request"))??;
    let Some(request) = parse_head(&head) else {
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
            let body = crate::nip11::document(&shared.config);
            return http_reply(&mut stream, "200 OK", "application/nostr+json", &body).await;
        }
        return http_reply(
            &mut stream,
            "200 OK",
            "text/plain",
            "This is a Nostr relay. Connect with a Nostr client over WebSocket.\n",
        )
        .await;
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
    let max = shared.config.limits.max_message_bytes;
    let mut ws_config = WebSocketConfig::default();
    ws_config.max_message_size = Some(max);
    ws_config.max_frame_size = Some(max);
    let prefixed = Prefixed {
        head,
        pos: 0,
        stream,
    };
    let binary = request.binary;
    // Echoing the subprotocol is what switches the client to binary frames.
    // (The error type is tungstenite's, large by its design.)
    #[allow(clippy::result_large_err)]
    let choose_protocol = move |_: &Handshake, mut response: HandshakeResponse| {
        if binary {
            response.headers_mut().insert(
                "Sec-WebSocket-Protocol",
                HeaderValue::from_static(nostrwire_wire::transport::SUBPROTOCOL),
            );
        }
        Ok(response)
    };
    let ws =
        tokio_tungstenite::accept_hdr_async_with_config(prefixed, choose_protocol, Some(ws_config))
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
    shared
        .metrics
        .connections_open
        .fetch_add(1, Ordering::Relaxed);
    shared
        .metrics
        .connections_total
        .fetch_add(1, Ordering::Relaxed);
    let result = websocket(&shared, ws, ip, binary, id, &mut shutdown).await;
    shared
        .metrics
        .connections_open
        .fetch_sub(1, Ordering::Relaxed);
    let worker = shared.ingest_for(id);
    let _ = worker.send(IngestMsg::Closed(id));
    result
}

async fn websocket(
    shared: &Arc<Shared>,
    ws: tokio_tungstenite::WebSocketStream<Prefixed>,
    ip: IpAddr,
    binary: bool,
    id: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> io::Result<()> {
    let (mut sink, mut frames) = ws.split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
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
        outbox.send(String::from_utf8(out).expect("UTF-8"));
    }
    let ingest = shared.ingest_for(id);
    let writer_outbox = outbox.clone();
    // Socket writer: coalesce everything queued into one flush.
    let writer = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            let mut written = 0;
            let mut close = false;
            while let Some(item) = next.take() {
                match item {
                    Outgoing::Text(text) => {
                        written += text.len();
                        if sink.feed(Message::text(text)).await.is_err() {
                            return;
                        }
                    }
                    Outgoing::Binary(frame) => {
                        written += frame.len();
                        if sink.feed(Message::binary(frame)).await.is_err() {
                            return;
                        }
                    }
                    Outgoing::Close => {
                        close = true;
                        break;
                    }
                }
                next = rx.try_recv().ok();
            }
            if sink.flush().await.is_err() {
                return;
            }
            writer_outbox.sent(written);
            if close {
                let _ = sink.close().await;
                return;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = shutdown.changed() => {
                conn.outbox.close();
                break;
            }
        };
        match frame {
            Some(Ok(Message::Text(text))) if !binary => {
                let bytes = text.as_bytes().to_vec();
                if ingest.send(IngestMsg::Frame(conn.clone(), bytes)).is_err() {
                    break;
                }
            }
            Some(Ok(Message::Binary(frame))) if binary => {
                if ingest
                    .send(IngestMsg::Frame(conn.clone(), frame.to_vec()))
                    .is_err()
                {
                    break;
                }
            }
            Some(Ok(Message::Text(_) | Message::Binary(_))) => {
                let mut out = Vec::new();
                nostrwire_event::message::write::notice(
                    &mut out,
                    if binary {
                        "invalid: this connection negotiated nostrwire.v1; send binary frames"
                    } else {
                        "invalid: binary frames need the nostrwire.v1 subprotocol; send JSON text frames"
                    },
                );
                outbox.send(String::from_utf8(out).expect("UTF-8"));
            }
            Some(Ok(Message::Close(_))) | None => break,
            Some(Ok(_)) => {} // ping/pong are answered by the protocol layer
            Some(Err(e)) => {
                let mut out = Vec::new();
                nostrwire_event::message::write::notice(&mut out, &format!("error: {e}"));
                outbox.send(String::from_utf8(out).expect("UTF-8"));
                conn.outbox.close();
                break;
            }
        }
    }
    outbox.close();
    drop(conn);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    Ok(())
}
