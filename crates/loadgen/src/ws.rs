//! A WebSocket (RFC 6455) client written for measurement.
//!
//! The client is part of what is measured, so everything that distorted
//! published relay benchmarks is explicit here:
//!
//! - `TCP_NODELAY` is set on every socket before the handshake, so a small
//!   frame written right after another never waits for the peer's delayed ACK.
//! - [`WsReader`] is a buffered frame reader: it reads as much as the kernel
//!   has, parses every complete frame in its buffer before reading again, and
//!   keeps partial headers and payloads across reads, so frames that arrive
//!   back to back in one segment (or split across segments) are never lost.
//! - Bytes are counted where they cross the socket ([`Counters`]), including
//!   the handshake and frame headers, so compressed connections are
//!   measured by what they really send.
//!
//! Framing and permessage-deflate come from `nostrwire-websocket`, the same
//! code the relay uses. Only `ws://` URLs are accepted; compression is
//! offered only when the URL asks for it (`deflate+ws://…`).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nostrwire_websocket::deflate::{DeflateConfig, DeflateParams};
use nostrwire_websocket::handshake::{accept_key, base64, check_deflate_answer, deflate_offer};
use nostrwire_websocket::{MessageReader, MessageWriter, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use nostrwire_wire::transport::{SUBPROTOCOL, SUBPROTOCOL_V2};

use crate::rng::Rng;
use crate::Error;

pub use nostrwire_websocket::frame::opcode;
/// What [`WsReader::next`] returns: a whole message or a control frame.
pub use nostrwire_websocket::Message as Admitted;

/// Largest HTTP response head accepted during the handshake.
const MAX_HANDSHAKE_BYTES: usize = 16 * 1024;

/// Bytes that crossed the sockets of one or more connections.
#[derive(Debug, Default)]
pub struct Counters {
    /// Bytes received (handshake response included).
    pub bytes_in: AtomicU64,
    /// Bytes sent (handshake request included).
    pub bytes_out: AtomicU64,
}

impl Counters {
    /// A snapshot: `(bytes_in, bytes_out)`.
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        )
    }
}

/// A parsed `ws://host:port/path` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsUrl {
    /// Host name or address, without brackets.
    pub host: String,
    /// TCP port (80 when absent).
    pub port: u16,
    /// Request target, at least `/`.
    pub path: String,
    /// Ask for the `nostrwire.v1` binary transport (URL written
    /// `binary+ws://…`), or v2 when `v2` is set too.
    pub binary: bool,
    /// Ask for the `nostrwire.v2` binary transport (URL written `v2+ws://…`).
    pub v2: bool,
    /// Offer permessage-deflate (URL written `deflate+ws://…`, or
    /// `deflate-nct+ws://…` for no context takeover in either direction).
    pub deflate: Option<DeflateConfig>,
    /// Local address to connect from (`None`: the system's choice). The
    /// abuse scenarios attack from another loopback address than their
    /// probe's, as another client would.
    pub source: Option<std::net::IpAddr>,
    /// Address to claim in an `X-Forwarded-For` header, as a reverse
    /// proxy in front of the relay would send it (`None`: no header). The
    /// `spread-ipv6-48` attack claims addresses that loopback does not
    /// have; only a relay that takes the header (`relay.real_ip_header`)
    /// believes them.
    pub forwarded_for: Option<std::net::IpAddr>,
}

impl WsUrl {
    /// Parses a `ws://` URL. `wss://` is refused: TLS would add a cost that is
    /// not the relay's, and a benchmark runs on loopback.
    ///
    /// Prefixes choose how to speak to the same relay, and combine
    /// (`binary+deflate+ws://…`):
    /// - `binary+`: the `nostrwire.v1` binary transport (spec/transport.md);
    /// - `v2+`: the `nostrwire.v2` binary transport (batches, records as
    ///   stored; the client fetches and holds the relay's dictionary set);
    /// - `deflate+`: offer permessage-deflate with context takeover;
    /// - `deflate-nct+`: offer it without context takeover (both sides reset
    ///   their window after every message).
    pub fn parse(url: &str) -> Result<WsUrl, Error> {
        let mut binary = false;
        let mut v2 = false;
        let mut deflate = None;
        let mut url = url;
        loop {
            if let Some(rest) = url.strip_prefix("binary+") {
                binary = true;
                url = rest;
            } else if let Some(rest) = url.strip_prefix("v2+") {
                binary = true;
                v2 = true;
                url = rest;
            } else if let Some(rest) = url.strip_prefix("deflate+") {
                deflate = Some(DeflateConfig::default());
                url = rest;
            } else if let Some(rest) = url.strip_prefix("deflate-nct+") {
                deflate = Some(DeflateConfig {
                    server_context_takeover: false,
                    client_context_takeover: false,
                    ..DeflateConfig::default()
                });
                url = rest;
            } else {
                break;
            }
        }
        let rest = url
            .strip_prefix("ws://")
            .ok_or_else(|| Error::Usage(format!("relay URL must start with ws://: {url}")))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(Error::Usage(format!("bad relay URL: {url}")));
        }
        let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
            let end = stripped
                .find(']')
                .ok_or_else(|| Error::Usage(format!("bad relay URL: {url}")))?;
            let host = &stripped[..end];
            let port = match &stripped[end + 1..] {
                "" => 80,
                p => parse_port(p.strip_prefix(':').unwrap_or("x"), url)?,
            };
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), parse_port(p, url)?),
                None => (authority.to_string(), 80),
            }
        };
        Ok(WsUrl {
            host,
            port,
            path,
            binary,
            v2,
            deflate,
            source: None,
            forwarded_for: None,
        })
    }

    /// The subprotocol a binary URL asks for.
    pub fn subprotocol(&self) -> &'static str {
        match self.v2 {
            true => SUBPROTOCOL_V2,
            false => SUBPROTOCOL,
        }
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// Resolves the host to socket addresses.
    pub async fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .collect())
    }
}

fn parse_port(p: &str, url: &str) -> Result<u16, Error> {
    p.parse()
        .map_err(|_| Error::Usage(format!("bad port in relay URL: {url}")))
}

/// The reading half of a connection: a buffered frame reader.
#[derive(Debug)]
pub struct WsReader {
    rd: OwnedReadHalf,
    frames: MessageReader,
    counters: Arc<Counters>,
}

impl WsReader {
    /// Waits for the next complete message or control frame.
    ///
    /// Cancel-safe: all state lives in `self`, and a cancelled read leaves
    /// the buffer as it was, so it may be used under a timeout.
    pub async fn next(&mut self) -> Result<Admitted<'_>, Error> {
        while !self
            .frames
            .advance()
            .map_err(|e| Error::Protocol(e.to_string()))?
        {
            let n = self.rd.read(self.frames.read_buf()).await?;
            if n == 0 {
                return Err(Error::Disconnected);
            }
            self.counters
                .bytes_in
                .fetch_add(n as u64, Ordering::Relaxed);
            self.frames.filled(n);
        }
        Ok(self.frames.message())
    }

    /// The next text message that arrives before `deadline`, passing over
    /// other frames (pings are not answered); `Ok(None)` once the deadline
    /// has passed. Cancel-safe, as [`WsReader::next`].
    pub async fn next_text_before(
        &mut self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<&[u8]>, Error> {
        loop {
            match tokio::time::timeout_at(deadline, self.next()).await {
                Err(_) => return Ok(None),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Admitted::Text(_))) => break,
                Ok(Ok(_)) => {}
            }
        }
        // The message `next` just moved to, taken again: returning it from
        // inside the loop would hold the reader borrowed across iterations.
        match self.frames.message() {
            Admitted::Text(text) => Ok(Some(text)),
            _ => unreachable!("the loop stops at a text message"),
        }
    }
}

/// The writing half of a connection. Frames are queued into one buffer and
/// written with one `write` per [`WsWriter::flush`], so a batch of messages
/// leaves in as few segments as the kernel allows.
#[derive(Debug)]
pub struct WsWriter {
    wr: OwnedWriteHalf,
    buf: Vec<u8>,
    frames: MessageWriter,
    rng: Rng,
    counters: Arc<Counters>,
}

impl WsWriter {
    fn mask(&mut self) -> Option<[u8; 4]> {
        Some(self.rng.next_u32().to_le_bytes())
    }

    /// Queues a masked text message (compressed if negotiated).
    pub fn queue_text(&mut self, payload: &[u8]) {
        let mask = self.mask();
        self.frames.text(&mut self.buf, payload, mask);
    }

    /// Queues a masked binary message (compressed if negotiated).
    pub fn queue_binary(&mut self, payload: &[u8]) {
        let mask = self.mask();
        self.frames.binary(&mut self.buf, payload, mask);
    }

    /// Queues a binary message and writes it.
    pub async fn send_binary(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.queue_binary(payload);
        self.flush().await
    }

    /// Queues a masked control frame (pong or close).
    pub fn queue_control(&mut self, op: u8, payload: &[u8]) {
        let mask = self.mask();
        self.frames.control(&mut self.buf, op, payload, mask);
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.buf.len()
    }

    /// Whether permessage-deflate was negotiated (messages are compressed).
    pub fn compresses(&self) -> bool {
        self.frames.compresses()
    }

    /// Takes the frames queued so far, unwritten, to be sent again with
    /// [`WsWriter::queue_raw`] (a message compressed without context
    /// takeover is self-contained, so its frame may be repeated).
    pub fn take_queued(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Queues frames built earlier, byte for byte.
    pub fn queue_raw(&mut self, frames: &[u8]) {
        self.buf.extend_from_slice(frames);
    }

    /// Writes everything queued.
    pub async fn flush(&mut self) -> Result<(), Error> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.wr.write_all(&self.buf).await?;
        self.counters
            .bytes_out
            .fetch_add(self.buf.len() as u64, Ordering::Relaxed);
        self.buf.clear();
        Ok(())
    }

    /// Queues a text message and writes it.
    pub async fn send_text(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.queue_text(payload);
        self.flush().await
    }

    /// Sends a close frame (status 1000) and shuts the write side down.
    pub async fn close(&mut self) -> Result<(), Error> {
        let mask = self.mask();
        self.frames.close(&mut self.buf, 1000, mask);
        self.flush().await?;
        self.wr.shutdown().await?;
        Ok(())
    }
}

/// A TCP connection to the relay, from `url.source` when set.
pub async fn tcp_connect(url: &WsUrl) -> std::io::Result<TcpStream> {
    let Some(source) = url.source else {
        return TcpStream::connect((url.host.as_str(), url.port)).await;
    };
    let mut last = None;
    for addr in tokio::net::lookup_host((url.host.as_str(), url.port)).await? {
        if addr.is_ipv4() != source.is_ipv4() {
            continue;
        }
        let socket = if source.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        match socket.connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("no address of {} to reach from {source}", url.host),
        )
    }))
}

/// Opens a connection: TCP with `TCP_NODELAY`, then the opening handshake.
pub async fn connect(
    url: &WsUrl,
    counters: Arc<Counters>,
    rng: &mut Rng,
    max_message: usize,
) -> Result<(WsReader, WsWriter), Error> {
    let stream = tcp_connect(url).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let mut key_bytes = [0u8; 16];
    for chunk in key_bytes.chunks_mut(4) {
        chunk.copy_from_slice(&rng.next_u32().to_le_bytes());
    }
    let key = base64(&key_bytes);
    let mut protocol = if url.binary {
        format!("Sec-WebSocket-Protocol: {}\r\n", url.subprotocol())
    } else {
        String::new()
    };
    if let Some(config) = &url.deflate {
        protocol.push_str(&format!(
            "Sec-WebSocket-Extensions: {}\r\n",
            deflate_offer(config)
        ));
    }
    if let Some(ip) = url.forwarded_for {
        protocol.push_str(&format!("X-Forwarded-For: {ip}\r\n"));
    }
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{protocol}\r\n",
        url.path,
        url.host_header()
    );
    wr.write_all(request.as_bytes()).await?;
    counters
        .bytes_out
        .fetch_add(request.len() as u64, Ordering::Relaxed);

    let mut buf = vec![0u8; MAX_HANDSHAKE_BYTES];
    let mut end = 0;
    let head_len = loop {
        if let Some(i) = find_head_end(&buf[..end]) {
            break i;
        }
        if end >= MAX_HANDSHAKE_BYTES {
            return Err(Error::Handshake("response head too large".into()));
        }
        let n = rd.read(&mut buf[end..]).await?;
        if n == 0 {
            return Err(Error::Handshake(
                "connection closed during the handshake".into(),
            ));
        }
        counters.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        end += n;
    };
    let deflate = check_response(&buf[..head_len], &accept_key(key.as_bytes()), url)?;
    let config = url.deflate.unwrap_or_default();
    let mut frames = MessageReader::new(
        Role::Client,
        max_message,
        deflate.map(|p| p.decompressor(Role::Client)),
    );
    frames.push(&buf[head_len..end]);
    let reader = WsReader {
        rd,
        frames,
        counters: counters.clone(),
    };
    let writer = WsWriter {
        wr,
        buf: Vec::with_capacity(64 * 1024),
        frames: MessageWriter::new(
            Role::Client,
            deflate.map(|p| p.compressor(Role::Client, &config)),
        ),
        rng: Rng::new(rng.next_u64()),
        counters,
    };
    Ok((reader, writer))
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Checks the handshake response; returns the permessage-deflate
/// parameters if the relay accepted the offer.
fn check_response(
    head: &[u8],
    expected_accept: &str,
    url: &WsUrl,
) -> Result<Option<DeflateParams>, Error> {
    let binary = url.binary;
    let text =
        std::str::from_utf8(head).map_err(|_| Error::Handshake("non-UTF-8 response".into()))?;
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code != "101" {
        return Err(Error::Handshake(format!("expected 101, got `{status}`")));
    }
    let mut accept_ok = false;
    let mut upgrade_ok = false;
    let mut protocol_ok = !binary;
    let mut extensions: Option<String> = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("sec-websocket-accept") {
                accept_ok = value == expected_accept;
            } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                if !binary || value != url.subprotocol() {
                    return Err(Error::Handshake(format!(
                        "unrequested subprotocol `{value}`"
                    )));
                }
                protocol_ok = true;
            } else if name.eq_ignore_ascii_case("upgrade") {
                upgrade_ok = value.eq_ignore_ascii_case("websocket");
            } else if name.eq_ignore_ascii_case("sec-websocket-extensions") && !value.is_empty() {
                let joined = match extensions.take() {
                    Some(earlier) => format!("{earlier}, {value}"),
                    None => value.to_string(),
                };
                extensions = Some(joined);
            }
        }
    }
    if !upgrade_ok {
        return Err(Error::Handshake("missing `Upgrade: websocket`".into()));
    }
    if !accept_ok {
        return Err(Error::Handshake(
            "wrong or missing Sec-WebSocket-Accept".into(),
        ));
    }
    if !protocol_ok {
        return Err(Error::Handshake(format!(
            "the relay does not speak the {} binary transport",
            url.subprotocol()
        )));
    }
    match (&url.deflate, extensions) {
        (_, None) => Ok(None),
        (None, Some(value)) => Err(Error::Handshake(format!("unrequested extension `{value}`"))),
        (Some(config), Some(value)) => {
            check_deflate_answer(Some(&value), config).map_err(|e| Error::Handshake(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = WsUrl::parse("ws://127.0.0.1:7777").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 7777, "/")
        );
        assert_eq!(u.host_header(), "127.0.0.1:7777");
        assert!(!u.binary && u.deflate.is_none());
        let u = WsUrl::parse("ws://[::1]:8080/relay").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8080, "/relay")
        );
        assert_eq!(WsUrl::parse("ws://localhost").unwrap().port, 80);
        assert!(WsUrl::parse("wss://relay.example").is_err());
        assert!(WsUrl::parse("ws://host:notaport").is_err());
        assert!(WsUrl::parse("http://x").is_err());
    }

    #[test]
    fn url_prefixes_combine() {
        let u = WsUrl::parse("binary+deflate+ws://127.0.0.1:7777").unwrap();
        assert!(u.binary);
        assert_eq!(u.deflate, Some(DeflateConfig::default()));
        let u = WsUrl::parse("v2+deflate+ws://127.0.0.1:7777").unwrap();
        assert!(u.binary && u.v2 && u.subprotocol() == "nostrwire.v2");
        let u = WsUrl::parse("deflate-nct+ws://127.0.0.1:7777").unwrap();
        let d = u.deflate.unwrap();
        assert!(!u.binary && !d.server_context_takeover && !d.client_context_takeover);
        assert!(WsUrl::parse("gzip+ws://127.0.0.1").is_err());
    }

    #[test]
    fn handshake_response_checks() {
        let plain = WsUrl::parse("ws://h:1").unwrap();
        let binary = WsUrl::parse("binary+ws://h:1").unwrap();
        let deflate = WsUrl::parse("deflate+ws://h:1").unwrap();
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\n\r\n";
        assert!(matches!(
            check_response(good.as_bytes(), "abc", &plain),
            Ok(None)
        ));
        assert!(
            check_response(good.as_bytes(), "abc", &binary).is_err(),
            "binary asked, not granted"
        );
        assert!(
            matches!(check_response(good.as_bytes(), "abc", &deflate), Ok(None)),
            "deflate declined: plain frames"
        );
        assert!(check_response(good.as_bytes(), "abd", &plain).is_err());
        let bad = "HTTP/1.1 200 OK\r\n\r\n";
        assert!(check_response(bad.as_bytes(), "abc", &plain).is_err());
        let compressed = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: abc\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n\r\n";
        assert!(
            check_response(compressed.as_bytes(), "abc", &plain).is_err(),
            "extension not offered"
        );
        let params = check_response(compressed.as_bytes(), "abc", &deflate)
            .unwrap()
            .unwrap();
        assert!(params.server_no_context_takeover && !params.client_no_context_takeover);
    }
}
