//! Stage 1: sockets. Accepts TCP connections (TCP_NODELAY on each), answers
//! plain HTTP (NIP-11 document, `/metrics`, dictionary sets) and upgrades
//! WebSocket requests, negotiating the `nostrwire.v2` or `nostrwire.v1`
//! subprotocol and permessage-deflate.
//! A connection task turns socket bytes into messages (`nostrwire-websocket`)
//! and forwards them to its ingest worker untouched, once there is room for
//! them in the ingest queues (`Admission`); a writer task frames everything
//! queued for the connection and writes it in as few socket writes as
//! possible, and gives up on a client that does not read.
//!
//! Every resource a client can hold here is bounded (docs/security.md):
//! sockets (`max_connections`, `connections_per_ip`, a spare descriptor so
//! `accept` never starves), time (request head 10 s, pings, idle timeout,
//! socket write timeout) and memory (the connection's budget, its share of
//! the ingest queues).

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
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::address::client_key;
use crate::config::MetricsAccess;
use crate::memory::Short;
use crate::slots::{OpenConnection, SocketSlot};
use nostrwire_wire::transport::{self, Version};

use crate::msg::{
    Admission, Budget, Conn, IngestMsg, Outbox, Outgoing, Transport, CLOSE_GOING_AWAY,
};
use crate::Shared;

/// Largest HTTP request head read before deciding what the request is.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Framed bytes gathered before one socket write.
const MAX_WRITE_BATCH: usize = 1 << 20;
/// How long a connection whose reading waits for the relay's memory
/// waits before it tries again.
const STARVED_READ: Duration = Duration::from_millis(50);
/// Largest write buffer a connection keeps between batches.
const KEPT_WRITE_BUFFER: usize = 64 << 10;
/// Bytes a queued frame is counted for beyond its payload (its slot in the
/// queue, the `Conn` handle), so floods of tiny frames are bounded too.
const FRAME_OVERHEAD: usize = 64;
/// Close status: the connection sent nothing for too long.
const CLOSE_IDLE: u16 = 1001;
/// How long the close frame of a connection that is cut off may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the accept loop waits after `accept` failed (for a reason
/// other than descriptors), so a persistent error does not spin it.
const ACCEPT_BACK_OFF: Duration = Duration::from_millis(50);

/// Where the accept loop takes connections from: the relay's TCP listener
/// (tests give it others).
pub(crate) trait Listener {
    /// The next connection and its peer's address.
    fn accept(
        &self,
    ) -> impl std::future::Future<Output = io::Result<(TcpStream, std::net::SocketAddr)>> + Send;
}

impl Listener for TcpListener {
    fn accept(
        &self,
    ) -> impl std::future::Future<Output = io::Result<(TcpStream, std::net::SocketAddr)>> + Send
    {
        TcpListener::accept(self)
    }
}

/// Accepts connections until `shutdown` is cancelled; each connection's
/// task is tracked by [`Shared::tasks`].
pub async fn serve(shared: Arc<Shared>, listener: TcpListener, shutdown: CancellationToken) {
    accept_loop(shared, listener, shutdown, ACCEPT_BACK_OFF).await;
}

/// [`serve`] from any [`Listener`], waiting `back_off` after a failed
/// `accept`; a stop ends the wait.
pub(crate) async fn accept_loop<L: Listener>(
    shared: Arc<Shared>,
    listener: L,
    shutdown: CancellationToken,
    back_off: Duration,
) {
    let tasks = shared.tasks.clone();
    let next_id = Arc::new(AtomicU64::new(1));
    // A descriptor kept in reserve: when `accept` fails for want of
    // descriptors, it is given up so the waiting connection can be taken
    // and closed, instead of that connection (and every one after it)
    // waiting in the backlog while the accept loop spins.
    let mut spare = std::fs::File::open("/dev/null").ok();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) if out_of_descriptors(&e) => {
                shared.metrics.limit_hit("descriptors");
                tracing::warn!("accept failed: {e}; closing the newest connection");
                drop(spare.take());
                tokio::select! {
                    r = tokio::time::timeout(back_off, listener.accept()) => {
                        if let Ok(Ok((stream, _))) = r {
                            drop(stream);
                        }
                    }
                    _ = shutdown.cancelled() => break,
                }
                spare = std::fs::File::open("/dev/null").ok();
                continue;
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                // A stop ends the wait: the relay does not sit out a
                // back-off before it stops.
                tokio::select! {
                    () = tokio::time::sleep(back_off) => {}
                    _ = shutdown.cancelled() => break,
                }
                continue;
            }
        };
        // The socket's slot is taken here, before the next `accept`, and
        // moves into its task: a burst of connections never holds more
        // than `max_connections` (sockets not yet upgraded count too).
        let Some(slot) = SocketSlot::take(&shared) else {
            shared.metrics.limit_hit("max_connections");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let _slot = slot;
            let ip = peer.ip().to_canonical();
            if let Err(e) = connection(&shared, stream, ip, id, shutdown).await {
                tracing::debug!(conn = id, "connection ended: {e}");
            }
        });
    }
}

/// EMFILE or ENFILE: the process or the system has no descriptor left.
fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
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
    /// The `Host` header.
    host: Option<String>,
    /// The client's address from `relay.real_ip_header`, when set and valid.
    forwarded_ip: Option<IpAddr>,
    upgrade: bool,
    /// `Sec-WebSocket-Key`, as sent.
    key: Option<String>,
    /// `Sec-WebSocket-Version`.
    version: Option<String>,
    /// The highest binary transport version the client offered in
    /// `Sec-WebSocket-Protocol`.
    binary: Option<Version>,
    /// Every `Sec-WebSocket-Extensions` value, joined with `,`.
    extensions: String,
    accept_nostr: bool,
    accept_html: bool,
    /// `Content-Type: application/nostr+json+rpc` (NIP-86).
    rpc: bool,
    /// The `Authorization` header (NIP-98).
    authorization: Option<String>,
    /// The `Content-Length` header.
    content_length: Option<usize>,
}

fn parse_head(head: &[u8], real_ip_header: &str) -> Option<Request> {
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
    let forwarded_ip = (!real_ip_header.is_empty())
        .then(|| {
            req.headers
                .iter()
                .rev()
                .find(|h| h.name.eq_ignore_ascii_case(real_ip_header))
        })
        .flatten()
        .and_then(|h| std::str::from_utf8(h.value).ok())
        // The proxy appends the address it saw: the last one is its.
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        .map(|ip| ip.to_canonical());
    Some(Request {
        path: req.path?.to_string(),
        method: req.method?.to_string(),
        host: values("host").next(),
        forwarded_ip,
        upgrade: lower("upgrade").is_some_and(|v| v.contains("websocket")),
        key: values("sec-websocket-key").next(),
        version: values("sec-websocket-version").next(),
        binary: Version::pick(
            values("sec-websocket-protocol")
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str),
            Version::V2,
        ),
        extensions: values("sec-websocket-extensions")
            .collect::<Vec<_>>()
            .join(","),
        accept_nostr: lower("accept").is_some_and(|v| v.contains("application/nostr+json")),
        accept_html: lower("accept").is_some_and(|v| v.contains("text/html")),
        rpc: lower("content-type")
            .is_some_and(|v| v.starts_with(crate::admin::nip86::CONTENT_TYPE)),
        authorization: values("authorization").next(),
        content_length: values("content-length").next().and_then(|v| v.parse().ok()),
    })
}

async fn http_reply(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> io::Result<()> {
    http_reply_with(stream, status, content_type, body, true).await
}

/// An HTTP reply; `cors` lets web pages of any origin read it (NIP-11).
async fn http_reply_with(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
    cors: bool,
) -> io::Result<()> {
    let cors = if cors {
        "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Headers: Authorization, *\r\n\
         Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
    } else {
        ""
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         {cors}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(reply.as_bytes()).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(HEAD_TIMEOUT, write)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "reply not read"))?
}

/// A dictionary set (`GET /dictionaries/<sha256 hex>`): immutable, so
/// cacheable for good, and readable by web pages of any origin; 404 for a
/// name the relay does not serve.
async fn dictionary_reply(shared: &Shared, stream: &mut TcpStream, name: &str) -> io::Result<()> {
    const CORS: &str = "Access-Control-Allow-Origin: *\r\n";
    let reply = match shared.dictionaries.get(name) {
        Some(set) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
                 Content-Length: {}\r\nCache-Control: public, max-age=31536000, immutable\r\n\
                 ETag: \"{}\"\r\n{CORS}Connection: close\r\n\r\n",
                set.bytes.len(),
                set.hex
            );
            // The set is shared, never copied: slices of it are written a
            // chunk at a time, each holding its room in the fetch budget
            // until the socket took it, and the socket's send buffer is
            // kept to a chunk, so a fetcher that does not read holds a
            // chunk or two, not the set.
            keep_send_buffer(stream, crate::dictionaries::FETCH_CHUNK);
            let write = async {
                stream.write_all(head.as_bytes()).await?;
                for chunk in set.bytes.chunks(crate::dictionaries::FETCH_CHUNK) {
                    let _room = shared.set_fetches.hold(chunk.len()).await;
                    stream.write_all(chunk).await?;
                }
                stream.shutdown().await
            };
            return tokio::time::timeout(HEAD_TIMEOUT, write)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "reply not read"))?;
        }
        None => {
            shared.metrics.limit_hit("unknown_dictionary");
            let body = "not found: no dictionary set with this SHA-256\n";
            format!(
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 {CORS}Connection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    };
    let write = async {
        stream.write_all(&reply).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(HEAD_TIMEOUT, write)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "reply not read"))?
}

/// Sets the socket's send buffer to `bytes` (the kernel doubles it for
/// its bookkeeping), instead of letting it grow to megabytes for a client
/// that does not read.
fn keep_send_buffer(stream: &TcpStream, bytes: usize) {
    use std::os::fd::AsRawFd;
    let size = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads `size` (a c_int, as SO_SNDBUF takes) from a
    // live descriptor the stream owns.
    let failed = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            std::ptr::addr_of!(size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    } != 0;
    if failed {
        tracing::debug!("could not set a send buffer size");
    }
}

/// HTTP 429 for an address over `rate.connections_per_ip` (or its IPv6
/// network over `rate.connections_per_ipv6_56` or `…_48`).
async fn too_many_from_address(stream: &mut TcpStream) -> io::Result<()> {
    http_reply(
        stream,
        "429 Too Many Requests",
        "text/plain",
        "rate-limited: too many connections from this address\n",
    )
    .await
}

/// Whether a client at `ip` may read `/metrics`.
fn metrics_allowed(access: MetricsAccess, ip: IpAddr) -> bool {
    match access {
        MetricsAccess::Everyone => true,
        MetricsAccess::Loopback => ip.is_loopback(),
        MetricsAccess::Off => false,
    }
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
    shared: &Arc<Shared>,
    mut stream: TcpStream,
    peer_ip: IpAddr,
    id: u64,
    shutdown: CancellationToken,
) -> io::Result<()> {
    // Without a proxy header the client's address is known before its
    // request, so its sockets count from the start: one address cannot
    // hold more half-open sockets than connections either.
    let prefix = shared.config.relay.ipv6_prefix;
    let early_slot = if shared.config.relay.real_ip_header.is_empty() {
        match shared.rate.connect(client_key(peer_ip, prefix)) {
            Ok(slot) => Some(slot),
            Err(setting) => {
                shared.metrics.limit_hit(setting);
                return too_many_from_address(&mut stream).await;
            }
        }
    } else {
        None
    };
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)) => head,
        // A request still on its way when the relay stops is not waited for.
        _ = shutdown.cancelled() => return Ok(()),
    };
    let (head, head_len) =
        head.map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request"))??;
    let Some(request) = parse_head(&head[..head_len], &shared.config.relay.real_ip_header) else {
        return http_reply(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            "bad request\n",
        )
        .await;
    };
    let ip = request.forwarded_ip.unwrap_or(peer_ip);
    let address = client_key(ip, prefix);
    if shared.moderation().blocks(ip) {
        shared.metrics.limit_hit("blocked_ip");
        return http_reply(&mut stream, "403 Forbidden", "text/plain", "blocked\n").await;
    }
    if !request.upgrade && request.rpc && request.method == "POST" {
        use crate::admin::nip86;
        let answer =
            match nip86::read_body(&mut stream, &head[head_len..], request.content_length).await {
                Ok(body) => {
                    let host = request.host.as_deref().unwrap_or("");
                    let url = format!("http://{host}{}", request.path);
                    nip86::call(shared, &url, request.authorization.as_deref(), body).await
                }
                Err(answer) => answer,
            };
        return http_reply(
            &mut stream,
            answer.status,
            nip86::CONTENT_TYPE,
            &answer.body,
        )
        .await;
    }
    if !request.upgrade {
        if request.method == "OPTIONS" {
            return http_reply(&mut stream, "204 No Content", "text/plain", "").await;
        }
        if request.path == "/metrics" {
            if !metrics_allowed(shared.config.relay.metrics, ip) {
                shared.metrics.limit_hit("metrics_forbidden");
                return http_reply_with(
                    &mut stream,
                    "404 Not Found",
                    "text/plain",
                    "not found\n",
                    false,
                )
                .await;
            }
            let stats = shared.store.stats().ok();
            let mut body = shared.metrics.render(stats);
            if let Some(cluster) = &shared.cluster {
                cluster.render_metrics(&mut body);
            }
            let queued = shared.ingest_room_bytes - shared.ingest_room.available_permits();
            body.push_str(&format!(
                "# HELP nostrwire_ingest_queue_bytes Bytes of client messages read and not yet handled (limits.ingest_queue_bytes).\n\
                 # TYPE nostrwire_ingest_queue_bytes gauge\nnostrwire_ingest_queue_bytes {queued}\n"
            ));
            shared.memory.render_metrics(&mut body);
            shared.set_fetches.render_metrics(&mut body);
            return http_reply_with(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4",
                &body,
                false,
            )
            .await;
        }
        if let Some(name) = request.path.strip_prefix(crate::dictionaries::PATH) {
            if request.method == "GET" {
                return dictionary_reply(shared, &mut stream, name).await;
            }
        }
        if request.accept_nostr {
            let body = crate::nip11::document(&shared.info_config(), &shared.dictionaries.names());
            return http_reply(&mut stream, "200 OK", "application/nostr+json", &body).await;
        }
        if let Some((content_type, body)) =
            crate::web::respond(shared, &request.path, request.accept_html)
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
    let _slot = match early_slot {
        Some(slot) => slot,
        None => match shared.rate.connect(address) {
            Ok(slot) => slot,
            Err(setting) => {
                shared.metrics.limit_hit(setting);
                return too_many_from_address(&mut stream).await;
            }
        },
    };
    let version = request.binary.filter(|_| shared.config.websocket.binary);
    let deflate_config = deflate_config(shared);
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
    if let Some(version) = version {
        reply.push_str("Sec-WebSocket-Protocol: ");
        reply.push_str(version.subprotocol());
        reply.push_str("\r\n");
    }
    if let Some((_, answer)) = &deflate {
        reply.push_str("Sec-WebSocket-Extensions: ");
        reply.push_str(answer);
        reply.push_str("\r\n");
    }
    reply.push_str("\r\n");
    tokio::time::timeout(HEAD_TIMEOUT, stream.write_all(reply.as_bytes()))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upgrade not read"))??;
    // The relay as this client reached it, for NIP-42's `relay` tag.
    let url = if shared.config.relay.url.is_empty() {
        match &request.host {
            Some(host) => format!("ws://{host}{}", request.path),
            None => shared.config.public_url(),
        }
    } else {
        shared.config.relay.url.clone()
    };
    let session = Session {
        version,
        deflate: deflate.map(|(params, _)| params),
        deflate_config,
        url,
        ip,
        address,
    };
    let early = head[head_len..].to_vec();
    drop(head);
    websocket(shared, stream, &early, session, id, &shutdown).await
}

/// What the handshake settled for one connection.
struct Session {
    /// The binary transport's version, or `None` for NIP-01 JSON text.
    version: Option<Version>,
    /// permessage-deflate, if negotiated.
    deflate: Option<DeflateParams>,
    deflate_config: DeflateConfig,
    /// The relay's URL as the client reached it.
    url: String,
    /// The client's address (the TCP peer's, or `real_ip_header`'s).
    ip: IpAddr,
    /// The address its per-address limits count it under (`client_key`).
    address: IpAddr,
}

/// Waits for room for a frame of `len` bytes in the connection's share of
/// the ingest queues, then in the relay's. Meanwhile the socket is not
/// read: TCP pushes back on the client.
async fn admit(
    shared: &Shared,
    share: &Arc<Semaphore>,
    share_bytes: usize,
    len: usize,
) -> Admission {
    let bytes = len + FRAME_OVERHEAD;
    let permits = |cap: usize| bytes.min(cap).min(u32::MAX as usize) as u32;
    let connection = share
        .clone()
        .acquire_many_owned(permits(share_bytes))
        .await
        .expect("the connection's share is never closed");
    let relay = shared
        .ingest_room
        .clone()
        .acquire_many_owned(permits(shared.ingest_room_bytes))
        .await
        .expect("the ingest room is never closed");
    Admission::new(relay, connection)
}

async fn websocket(
    shared: &Arc<Shared>,
    stream: TcpStream,
    early: &[u8],
    session: Session,
    id: u64,
    shutdown: &CancellationToken,
) -> io::Result<()> {
    let binary = session.version.is_some();
    let limits = &shared.config.limits;
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let budget = Budget::new(limits.max_connection_bytes, Some(shared.memory.clone()));
    let outbox = Outbox::new(
        tx,
        budget,
        Transport::new(session.version, &shared.dictionaries),
    );
    let _open = OpenConnection::new(shared, id, session.address, &outbox);
    // nostrwire.v2: the relay's set first, then again whenever it changes.
    let mut sets = shared.dictionaries.subscribe();
    let v2 = outbox.v2().is_some();
    if v2 {
        let mut frame = Vec::new();
        transport::write_dictionary_set(&mut frame, sets.borrow_and_update().as_ref());
        outbox.send_frame(frame);
    }
    let challenge = if shared.config.auth.enabled {
        new_challenge()
    } else {
        String::new()
    };
    let conn = Arc::new(Conn::new(
        id,
        outbox.clone(),
        session.ip,
        session.address,
        challenge,
        session.url.clone(),
    ));
    if shared.config.auth.enabled && shared.config.auth.challenge_on_connect {
        conn.send_challenge();
    }
    let ingest = shared.ingest_for(id);
    let frames = MessageWriter::new(
        Role::Server,
        session
            .deflate
            .map(|p| p.compressor(Role::Server, &session.deflate_config)),
    );
    let write_timeout = Duration::from_secs(limits.slow_reader_seconds.max(1));
    let mut writer = tokio::spawn(write_loop(wr, rx, frames, outbox.clone(), write_timeout));
    let mut writer_done = false;
    let mut reader = MessageReader::new(
        Role::Server,
        limits.max_message_bytes,
        session.deflate.map(|p| p.decompressor(Role::Server)),
    );
    // The connection's share of the ingest queues.
    let share_bytes = 2 * (limits.max_message_bytes + FRAME_OVERHEAD);
    let share = Arc::new(Semaphore::new(share_bytes));
    let ping = Duration::from_secs(shared.config.websocket.ping_seconds);
    let idle = Duration::from_secs(limits.idle_seconds);
    // Last frame of any kind (liveness), last message (idleness).
    let mut last_frame = Instant::now();
    let mut last_message = last_frame;
    let mut pinged = false;
    // One timer, moved only when it fires: frames update the times above,
    // and a check that comes early just sets the timer again.
    let first = next_check(last_frame, ping, idle, last_frame, last_message, pinged);
    let timer = tokio::time::sleep_until(first.into());
    tokio::pin!(timer);
    reader.push(early);
    let mut reading = outbox.budget().hold_none();
    let mut was_starved = false;
    // Whether the bytes last read still need their acknowledgement, and
    // whether the last message they completed is one the relay answers
    // soon (its answer carries the acknowledgement).
    let mut unacknowledged = !early.is_empty();
    let mut answered = false;
    'connection: loop {
        loop {
            let message = match reader.next_message() {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(e) => {
                    let mut out = Vec::new();
                    nostrwire_event::message::write::notice(&mut out, &format!("error: {e}"));
                    outbox.send_control(out);
                    outbox.close_with(e.close_code());
                    break 'connection;
                }
            };
            last_frame = Instant::now();
            pinged = false;
            let is_text = matches!(message, Message::Text(_));
            answered = match &message {
                Message::Text(payload) | Message::Binary(payload) if is_text != binary => {
                    answered_soon(payload, binary)
                }
                _ => false,
            };
            match message {
                Message::Text(payload) | Message::Binary(payload) if is_text != binary => {
                    last_message = last_frame;
                    let admission = tokio::select! {
                        a = admit(shared, &share, share_bytes, payload.len()) => a,
                        _ = shutdown.cancelled() => {
                            outbox.close_with(CLOSE_GOING_AWAY);
                            break 'connection;
                        }
                        _ = &mut writer, if !writer_done => {
                            writer_done = true;
                            break 'connection;
                        }
                    };
                    let frame =
                        IngestMsg::Frame(conn.clone(), payload.to_vec(), Instant::now(), admission);
                    if ingest.send(frame).is_err() {
                        break 'connection;
                    }
                }
                Message::Text(_) | Message::Binary(_) => {
                    last_message = last_frame;
                    let mut out = Vec::new();
                    nostrwire_event::message::write::notice(
                        &mut out,
                        if binary {
                            "invalid: this connection negotiated a binary transport (nostrwire.v1 or v2); send binary frames"
                        } else {
                            "invalid: binary frames need the nostrwire.v1 subprotocol; send JSON text frames"
                        },
                    );
                    outbox.send_control(out);
                }
                Message::Ping(payload) => outbox.pong(payload),
                Message::Pong(_) => {}
                Message::Close(_) => {
                    outbox.close();
                    break 'connection;
                }
            }
        }
        if unacknowledged {
            if !answered || reader.mid_message() {
                quick_ack(&rd);
            }
            unacknowledged = false;
        }
        // What the reader holds (a large message on its way) counts in the
        // connection's budget. While the relay's is spent and this
        // connection holds more than its share, its socket is not read:
        // TCP holds the rest of its message back.
        let reader_bytes = reader.held_bytes();
        let starved = match reading.bytes().cmp(&reader_bytes) {
            std::cmp::Ordering::Less => {
                let more = reader_bytes - reading.bytes();
                match reading.grow(more) {
                    Ok(()) => false,
                    Err(Short::Relay) => true,
                    // The message limit bounds it within the connection.
                    Err(_) => {
                        reading.grow_anyway(more);
                        false
                    }
                }
            }
            std::cmp::Ordering::Greater => {
                reading.release(reading.bytes() - reader_bytes);
                false
            }
            std::cmp::Ordering::Equal => false,
        };
        if !starved {
            was_starved = false;
        }
        let read = tokio::select! {
            r = rd.read(reader.read_buf()), if !starved => r,
            () = tokio::time::sleep(STARVED_READ), if starved => {
                // Counted once per wait, not once per retry.
                if !was_starved {
                    shared.metrics.limit_hit("relay_memory_bytes");
                }
                was_starved = true;
                // Not read, but not forgotten: a client that went away
                // gives its memory back.
                let mut byte = [0u8; 1];
                let peeked = tokio::time::timeout(Duration::ZERO, rd.peek(&mut byte)).await;
                if matches!(peeked, Ok(Ok(0) | Err(_))) {
                    break;
                }
                continue;
            }
            _ = shutdown.cancelled() => {
                outbox.close_with(CLOSE_GOING_AWAY);
                break;
            }
            _ = &mut writer, if !writer_done => {
                // The writer gave up (cut off, or the socket broke).
                writer_done = true;
                break;
            }
            Ok(()) = sets.changed(), if v2 => {
                let mut frame = Vec::new();
                transport::write_dictionary_set(&mut frame, sets.borrow_and_update().as_ref());
                outbox.send_frame(frame);
                continue;
            }
            () = &mut timer => {
                let now = Instant::now();
                if !idle.is_zero()
                    && now >= last_message + idle
                    && conn.subscriptions.load(Ordering::Relaxed) == 0
                {
                    shared.metrics.limit_hit("idle_seconds");
                    outbox.close_with(CLOSE_IDLE);
                    break;
                }
                if !ping.is_zero() && now >= last_frame + ping {
                    if pinged && now >= last_frame + 2 * ping {
                        shared.metrics.limit_hit("ping_seconds");
                        outbox.close_with(CLOSE_GOING_AWAY);
                        break;
                    }
                    if !pinged {
                        pinged = true;
                        outbox.ping();
                    }
                }
                let next = next_check(now, ping, idle, last_frame, last_message, pinged);
                timer.as_mut().reset(next.into());
                continue;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                unacknowledged = true;
                answered = false;
                reader.filled(n)
            }
        }
    }
    outbox.close();
    drop(conn);
    if !writer_done {
        let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    }
    Ok(())
}

/// Whether the relay answers this client message soon after it arrives:
/// `REQ`, `COUNT`, `NEG-OPEN` and `NEG-MSG` with results or `EOSE`, `EVENT`
/// and `AUTH` with `OK` (for a stored event, after its commit: a
/// millisecond or a few). Its answer then carries the acknowledgement of
/// the bytes that brought it, and the read needs no acknowledgement of its
/// own. `CLOSE`, `NEG-CLOSE` and what does not parse get none, so their
/// read is acknowledged at once.
fn answered_soon(payload: &[u8], binary: bool) -> bool {
    let json = match binary {
        true => match payload.split_first() {
            Some((&transport::JSON, rest)) => rest,
            Some((&(transport::EVENT | transport::AUTH), _)) => return true,
            _ => return false,
        },
        false => payload,
    };
    let mut rest = json.trim_ascii_start();
    let Some(after) = rest.strip_prefix(b"[") else {
        return false;
    };
    rest = after.trim_ascii_start();
    [
        &b"\"REQ\""[..],
        b"\"EVENT\"",
        b"\"COUNT\"",
        b"\"AUTH\"",
        b"\"NEG-OPEN\"",
        b"\"NEG-MSG\"",
    ]
    .iter()
    .any(|name| rest.starts_with(name))
}

/// Acknowledges what was just read at once. A client without
/// `TCP_NODELAY` that sends two messages in a row (`CLOSE`, then its next
/// `REQ`) holds the second until the first is acknowledged, and a message
/// the relay does not answer would leave that acknowledgement delayed (up
/// to 40 ms on Linux): every query of such a client waited that long.
/// One system call, and one packet, per read it is called for: reads whose
/// last message is answered soon ([`answered_soon`]) skip it.
#[cfg(target_os = "linux")]
fn quick_ack(stream: &tokio::net::tcp::OwnedReadHalf) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the connection's open socket, and the
    // option's value is a c_int of the size given.
    unsafe {
        libc::setsockopt(
            stream.as_ref().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of_val(&on) as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn quick_ack(_stream: &tokio::net::tcp::OwnedReadHalf) {}

/// When a connection's timers are next due: a ping after `ping` without a
/// frame (the close after twice that), idleness after `idle` without a
/// message (or, for a connection kept open by its subscriptions, another
/// `idle` from now); an hour when neither is set.
fn next_check(
    now: Instant,
    ping: Duration,
    idle: Duration,
    last_frame: Instant,
    last_message: Instant,
    pinged: bool,
) -> Instant {
    let mut at = now + Duration::from_secs(3600);
    if !ping.is_zero() {
        at = at.min(last_frame + if pinged { 2 * ping } else { ping });
    }
    if !idle.is_zero() {
        let idle_at = last_message + idle;
        at = at.min(if idle_at > now { idle_at } else { now + idle });
    }
    at
}

/// The connection's writer: frames everything queued (compressing when
/// negotiated) and writes it with one socket write per batch. A write the
/// client does not take within `write_timeout`, or a cut-off, ends it: the
/// queue is dropped and the socket closed.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: UnboundedReceiver<Outgoing>,
    mut frames: MessageWriter,
    outbox: Outbox,
    write_timeout: Duration,
) {
    let mut out = Vec::new();
    let mut close = None;
    let binary = outbox.is_binary();
    while let Some(first) = rx.recv().await {
        if outbox.is_cut_off() {
            break;
        }
        let mut next = Some(first);
        let mut written = (0, 0);
        while let Some(item) = next.take() {
            let (budget, control) = item.room();
            written = (written.0 + budget, written.1 + control);
            match item {
                Outgoing::Text(text) => frames.text(&mut out, &text, None),
                Outgoing::Texts(texts) => {
                    for text in texts.messages() {
                        frames.text(&mut out, text, None);
                    }
                }
                Outgoing::Binary(frame) => frames.binary(&mut out, &frame, None),
                Outgoing::Control(frame) if binary => frames.binary(&mut out, &frame, None),
                Outgoing::Control(text) => frames.text(&mut out, &text, None),
                Outgoing::Pong(payload) => {
                    frames.control(&mut out, opcode::PONG, &payload, None);
                }
                Outgoing::Ping => frames.control(&mut out, opcode::PING, b"", None),
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
        // Most writes fit the socket buffer at once; only the rest waits,
        // under the write timeout.
        let done = match wr.try_write(&out) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => return drop_queue(rx, &outbox, written),
        };
        let rest = &out[done..];
        let wrote = if rest.is_empty() {
            Ok(Ok(()))
        } else {
            tokio::time::timeout(write_timeout, wr.write_all(rest)).await
        };
        match wrote {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return drop_queue(rx, &outbox, written),
            Err(_) => {
                // The client stopped reading: drop it rather than hold its
                // queue and socket buffers for good.
                outbox.cut_off();
                return drop_queue(rx, &outbox, written);
            }
        }
        outbox.sent(written);
        out.clear();
        // A large batch's buffer is not kept: thousands of connections
        // that once received one would each hold it.
        if out.capacity() > KEPT_WRITE_BUFFER {
            out = Vec::new();
        }
        if close.is_some() {
            break;
        }
    }
    if outbox.is_cut_off() {
        // What is queued is not sent: the client gets why, and the socket closes.
        drop_queue(rx, &outbox, (0, 0));
        out.clear();
        match outbox.cut_off_notice() {
            Outgoing::Text(text) => frames.text(&mut out, &text, None),
            Outgoing::Binary(frame) => frames.binary(&mut out, &frame, None),
            _ => {}
        }
        frames.close(&mut out, crate::msg::CLOSE_POLICY, None);
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, wr.write_all(&out)).await;
        return;
    }
    let code = close.unwrap_or(crate::msg::CLOSE_NORMAL);
    frames.close(&mut out, code, None);
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
        let _ = wr.write_all(&out).await;
        let _ = wr.shutdown().await;
    })
    .await;
}

/// Gives back the room of everything still queued (and of what was taken
/// from the queue but not written, `in_hand` as [`Outgoing::room`] counts
/// it), so the connection's memory is freed as soon as the writer stops.
fn drop_queue(mut rx: UnboundedReceiver<Outgoing>, outbox: &Outbox, in_hand: (usize, usize)) {
    rx.close();
    let mut room = in_hand;
    while let Ok(item) = rx.try_recv() {
        let (budget, control) = item.room();
        room = (room.0 + budget, room.1 + control);
    }
    outbox.sent(room);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener whose every `accept` fails, and that says so each time.
    struct Failing(tokio::sync::mpsc::UnboundedSender<()>);

    impl Listener for Failing {
        fn accept(
            &self,
        ) -> impl std::future::Future<Output = io::Result<(TcpStream, std::net::SocketAddr)>> + Send
        {
            let _ = self.0.send(());
            std::future::ready(Err(io::Error::other("no buffer space available")))
        }
    }

    /// A stop while the accept loop waits out its back-off after a failed
    /// `accept` ends the loop then, not when the back-off is over (here an
    /// hour, which the test would never see the end of).
    #[test]
    fn answered_messages_are_told_from_the_others() {
        for text in [
            &br#"["REQ","s",{}]"#[..],
            br#" [ "EVENT",{}]"#,
            br#"["COUNT","c",{}]"#,
            br#"["AUTH",{}]"#,
            br#"["NEG-OPEN","n",{},"61"]"#,
            br#"["NEG-MSG","n","61"]"#,
        ] {
            assert!(
                answered_soon(text, false),
                "{}",
                String::from_utf8_lossy(text)
            );
            let framed = [&[transport::JSON][..], text].concat();
            assert!(answered_soon(&framed, true));
        }
        for text in [
            &br#"["CLOSE","s"]"#[..],
            br#"["NEG-CLOSE","n"]"#,
            br#"["REQUEST"]"#,
            b"",
            b"not json",
        ] {
            assert!(
                !answered_soon(text, false),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        assert!(answered_soon(&[transport::EVENT, 1, 2], true));
        assert!(answered_soon(&[transport::AUTH], true));
        assert!(!answered_soon(&[transport::HOLD], true));
        assert!(!answered_soon(b"", true));
    }

    #[test]
    fn a_stop_during_the_accept_back_off_ends_the_loop() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::Config::default();
        config.relay.listen = "127.0.0.1:0".into();
        config.relay.data = dir.path().to_path_buf();
        let relay = crate::start(config).unwrap();
        let shared = relay.shared.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ended = runtime.block_on(async {
            let (tx, mut failed) = tokio::sync::mpsc::unbounded_channel();
            let stop = CancellationToken::new();
            let serving = tokio::spawn(accept_loop(
                shared.clone(),
                Failing(tx),
                stop.clone(),
                Duration::from_secs(3600),
            ));
            // The first accept failed: the loop waits out its back-off.
            failed.recv().await.expect("the loop accepts");
            stop.cancel();
            tokio::time::timeout(Duration::from_secs(30), serving)
                .await
                .is_ok()
        });
        assert!(ended, "the accept loop sat out its back-off after the stop");
        drop(shared);
        relay.shutdown();
    }
}
