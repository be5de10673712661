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
//!   the handshake and frame headers.
//!
//! Only what a Nostr relay needs is implemented: `ws://` URLs, text frames
//! (binary frames are returned as such), fragmentation, ping/pong and close.
//! No extension (compression) is offered, so frames are plain.

// RFC 6455 writes lengths and close codes in network (big-endian) byte order.
#![allow(clippy::big_endian_bytes)]

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use nostrwire_wire::transport::SUBPROTOCOL;

use crate::rng::Rng;
use crate::Error;

/// The GUID that RFC 6455 §1.3 appends to the client key.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// Largest HTTP response head accepted during the handshake.
const MAX_HANDSHAKE_BYTES: usize = 16 * 1024;
/// Initial read buffer size; it grows to hold the largest frame seen.
const INITIAL_READ_BUFFER: usize = 64 * 1024;

/// Frame opcodes (RFC 6455 §5.2).
pub mod opcode {
    /// Continuation of a fragmented message.
    pub const CONTINUATION: u8 = 0x0;
    /// Text message.
    pub const TEXT: u8 = 0x1;
    /// Binary message.
    pub const BINARY: u8 = 0x2;
    /// Connection close.
    pub const CLOSE: u8 = 0x8;
    /// Ping.
    pub const PING: u8 = 0x9;
    /// Pong.
    pub const PONG: u8 = 0xA;
}

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
    /// Ask for the `nostrwire.v1` binary transport (URL written `binary+ws://…`).
    pub binary: bool,
}

impl WsUrl {
    /// Parses a `ws://` URL. `wss://` is refused: TLS would add a cost that is
    /// not the relay's, and a benchmark runs on loopback.
    ///
    /// `binary+ws://…` is the same relay spoken to over the `nostrwire.v1`
    /// binary transport (spec/transport.md).
    pub fn parse(url: &str) -> Result<WsUrl, Error> {
        let (binary, url) = match url.strip_prefix("binary+") {
            Some(rest) => (true, rest),
            None => (false, url),
        };
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
        })
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

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (RFC 6455 §4.2.2).
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(WS_GUID.as_bytes());
    base64(&h.finalize())
}

/// Standard base64 with padding.
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Appends one frame to `out`. A client must pass a mask; a server must not.
pub fn encode_frame(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    out.push(if fin { 0x80 } else { 0 } | (opcode & 0x0F));
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let len = payload.len();
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if len <= 0xFFFF {
        out.push(mask_bit | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    match mask {
        None => out.extend_from_slice(payload),
        Some(key) => {
            out.extend_from_slice(&key);
            let start = out.len();
            out.extend_from_slice(payload);
            apply_mask(&mut out[start..], key);
        }
    }
}

/// XORs `data` with the repeating 4-byte `key` (masking and unmasking are the same).
pub fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let wide = u64::from_le_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word) ^ wide;
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// FIN bit.
    pub fin: bool,
    /// Opcode.
    pub opcode: u8,
    /// Masking key, if the frame is masked.
    pub mask: Option<[u8; 4]>,
    /// Header length in bytes.
    pub header_len: usize,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Decodes a frame header from the start of `buf`; `Ok(None)` when more bytes are needed.
pub fn decode_header(buf: &[u8]) -> Result<Option<FrameHeader>, Error> {
    if buf.len() < 2 {
        return Ok(None);
    }
    if buf[0] & 0x70 != 0 {
        return Err(Error::Protocol(
            "reserved bits set (no extension was negotiated)".into(),
        ));
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0F;
    let masked = buf[1] & 0x80 != 0;
    let (payload_len, mut header_len) = match buf[1] & 0x7F {
        126 => {
            if buf.len() < 4 {
                return Ok(None);
            }
            (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4)
        }
        127 => {
            if buf.len() < 10 {
                return Ok(None);
            }
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b), 10)
        }
        n => (u64::from(n), 2),
    };
    let mask = if masked {
        if buf.len() < header_len + 4 {
            return Ok(None);
        }
        let k = [
            buf[header_len],
            buf[header_len + 1],
            buf[header_len + 2],
            buf[header_len + 3],
        ];
        header_len += 4;
        Some(k)
    } else {
        None
    };
    if opcode >= 0x8 && (!fin || payload_len > 125) {
        return Err(Error::Protocol(
            "fragmented or oversized control frame".into(),
        ));
    }
    Ok(Some(FrameHeader {
        fin,
        opcode,
        mask,
        header_len,
        payload_len,
    }))
}

/// What [`WsReader::next`] returns.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A complete text message (fragments joined).
    Text(&'a [u8]),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// A ping; the caller answers with a pong carrying the same payload.
    Ping(&'a [u8]),
    /// A pong.
    Pong,
    /// The peer closed the connection (status code, if any).
    Close(Option<u16>),
}

/// The reading half of a connection: a buffered frame reader.
#[derive(Debug)]
pub struct WsReader {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    fragments: Vec<u8>,
    fragment_opcode: Option<u8>,
    max_message: usize,
    counters: Arc<Counters>,
}

enum Ready {
    Frame { opcode: u8, from: usize, to: usize },
    Fragments { opcode: u8 },
}

impl WsReader {
    /// Waits for the next complete message or control frame.
    ///
    /// Cancel-safe: all state lives in `self`, and a cancelled read leaves
    /// the buffer as it was, so it may be used under a timeout.
    pub async fn next(&mut self) -> Result<Incoming<'_>, Error> {
        let ready = loop {
            if let Some(ready) = self.take_buffered()? {
                break ready;
            }
            self.fill().await?;
        };
        Ok(match ready {
            Ready::Frame { opcode, from, to } => {
                let payload = &self.buf[from..to];
                match opcode {
                    opcode::TEXT => Incoming::Text(payload),
                    opcode::BINARY => Incoming::Binary(payload),
                    opcode::PING => Incoming::Ping(payload),
                    opcode::PONG => Incoming::Pong,
                    _ => Incoming::Close(
                        (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]])),
                    ),
                }
            }
            Ready::Fragments { opcode } => {
                if opcode == opcode::TEXT {
                    Incoming::Text(&self.fragments)
                } else {
                    Incoming::Binary(&self.fragments)
                }
            }
        })
    }

    /// Parses the next frame already in the buffer, if it is complete.
    fn take_buffered(&mut self) -> Result<Option<Ready>, Error> {
        loop {
            let avail = &self.buf[self.start..self.end];
            let Some(h) = decode_header(avail)? else {
                return Ok(None);
            };
            if h.mask.is_some() {
                return Err(Error::Protocol("masked frame from the server".into()));
            }
            if h.payload_len > self.max_message as u64 {
                return Err(Error::Protocol(format!(
                    "frame of {} bytes exceeds the {}-byte limit",
                    h.payload_len, self.max_message
                )));
            }
            let total = h.header_len + h.payload_len as usize;
            if avail.len() < total {
                // Make room for the whole frame so the next read can complete it.
                self.reserve(total);
                return Ok(None);
            }
            let from = self.start + h.header_len;
            let to = self.start + total;
            self.start = to;
            match h.opcode {
                opcode::TEXT | opcode::BINARY if h.fin => {
                    if self.fragment_opcode.is_some() {
                        return Err(Error::Protocol(
                            "new message inside a fragmented one".into(),
                        ));
                    }
                    return Ok(Some(Ready::Frame {
                        opcode: h.opcode,
                        from,
                        to,
                    }));
                }
                opcode::TEXT | opcode::BINARY => {
                    if self.fragment_opcode.is_some() {
                        return Err(Error::Protocol(
                            "new message inside a fragmented one".into(),
                        ));
                    }
                    self.fragment_opcode = Some(h.opcode);
                    self.fragments.clear();
                    self.fragments.extend_from_slice(&self.buf[from..to]);
                }
                opcode::CONTINUATION => {
                    let Some(op) = self.fragment_opcode else {
                        return Err(Error::Protocol("continuation without a message".into()));
                    };
                    if self.fragments.len() + (to - from) > self.max_message {
                        return Err(Error::Protocol("fragmented message too large".into()));
                    }
                    self.fragments.extend_from_slice(&self.buf[from..to]);
                    if h.fin {
                        self.fragment_opcode = None;
                        return Ok(Some(Ready::Fragments { opcode: op }));
                    }
                }
                opcode::PING | opcode::PONG | opcode::CLOSE => {
                    return Ok(Some(Ready::Frame {
                        opcode: h.opcode,
                        from,
                        to,
                    }));
                }
                other => return Err(Error::Protocol(format!("unknown opcode {other:#x}"))),
            }
        }
    }

    /// Ensures the buffer can hold `needed` bytes from `start`.
    fn reserve(&mut self, needed: usize) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < needed {
            self.buf.resize(needed, 0);
        }
    }

    async fn fill(&mut self) -> Result<(), Error> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            let needed = (self.end - self.start).max(INITIAL_READ_BUFFER);
            self.reserve(needed * 2);
        }
        let n = self.rd.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            return Err(Error::Disconnected);
        }
        self.counters
            .bytes_in
            .fetch_add(n as u64, Ordering::Relaxed);
        self.end += n;
        Ok(())
    }
}

/// The writing half of a connection. Frames are queued into one buffer and
/// written with one `write` per [`WsWriter::flush`], so a batch of messages
/// leaves in as few segments as the kernel allows.
#[derive(Debug)]
pub struct WsWriter {
    wr: OwnedWriteHalf,
    buf: Vec<u8>,
    rng: Rng,
    counters: Arc<Counters>,
}

impl WsWriter {
    /// Queues a masked text frame.
    pub fn queue_text(&mut self, payload: &[u8]) {
        let key = self.rng.next_u32().to_le_bytes();
        encode_frame(&mut self.buf, true, opcode::TEXT, payload, Some(key));
    }

    /// Queues a masked binary frame.
    pub fn queue_binary(&mut self, payload: &[u8]) {
        let key = self.rng.next_u32().to_le_bytes();
        encode_frame(&mut self.buf, true, opcode::BINARY, payload, Some(key));
    }

    /// Queues a binary frame and writes it.
    pub async fn send_binary(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.queue_binary(payload);
        self.flush().await
    }

    /// Queues a masked control frame (pong or close).
    pub fn queue_control(&mut self, op: u8, payload: &[u8]) {
        let key = self.rng.next_u32().to_le_bytes();
        let payload = &payload[..payload.len().min(125)];
        encode_frame(&mut self.buf, true, op, payload, Some(key));
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.buf.len()
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

    /// Queues a text frame and writes it.
    pub async fn send_text(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.queue_text(payload);
        self.flush().await
    }

    /// Sends a close frame (status 1000) and shuts the write side down.
    pub async fn close(&mut self) -> Result<(), Error> {
        self.queue_control(opcode::CLOSE, &1000u16.to_be_bytes());
        self.flush().await?;
        self.wr.shutdown().await?;
        Ok(())
    }
}

/// Opens a connection: TCP with `TCP_NODELAY`, then the opening handshake.
pub async fn connect(
    url: &WsUrl,
    counters: Arc<Counters>,
    rng: &mut Rng,
    max_message: usize,
) -> Result<(WsReader, WsWriter), Error> {
    let stream = TcpStream::connect((url.host.as_str(), url.port)).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let mut key_bytes = [0u8; 16];
    for chunk in key_bytes.chunks_mut(4) {
        chunk.copy_from_slice(&rng.next_u32().to_le_bytes());
    }
    let key = base64(&key_bytes);
    let protocol = if url.binary {
        format!("Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n")
    } else {
        String::new()
    };
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

    let mut buf = vec![0u8; INITIAL_READ_BUFFER];
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
    check_response(&buf[..head_len], &accept_key(&key), url.binary)?;
    let reader = WsReader {
        rd,
        buf,
        start: head_len,
        end,
        fragments: Vec::new(),
        fragment_opcode: None,
        max_message,
        counters: counters.clone(),
    };
    let writer = WsWriter {
        wr,
        buf: Vec::with_capacity(INITIAL_READ_BUFFER),
        rng: Rng::new(rng.next_u64()),
        counters,
    };
    Ok((reader, writer))
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn check_response(head: &[u8], expected_accept: &str, binary: bool) -> Result<(), Error> {
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
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("sec-websocket-accept") {
                accept_ok = value == expected_accept;
            } else if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                if !binary || value != SUBPROTOCOL {
                    return Err(Error::Handshake(format!(
                        "unrequested subprotocol `{value}`"
                    )));
                }
                protocol_ok = true;
            } else if name.eq_ignore_ascii_case("upgrade") {
                upgrade_ok = value.eq_ignore_ascii_case("websocket");
            } else if name.eq_ignore_ascii_case("sec-websocket-extensions") && !value.is_empty() {
                return Err(Error::Handshake(format!("unrequested extension `{value}`")));
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
            "the relay does not speak the {SUBPROTOCOL} binary transport"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_handshake_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn base64_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn rfc6455_frame_examples() {
        let mut out = Vec::new();
        encode_frame(&mut out, true, opcode::TEXT, b"Hello", None);
        assert_eq!(out, [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        out.clear();
        encode_frame(
            &mut out,
            true,
            opcode::TEXT,
            b"Hello",
            Some([0x37, 0xfa, 0x21, 0x3d]),
        );
        assert_eq!(
            out,
            [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        );
        let h = decode_header(&out).unwrap().unwrap();
        assert_eq!(h.header_len, 6);
        assert_eq!(h.payload_len, 5);
        let mut payload = out[6..].to_vec();
        apply_mask(&mut payload, h.mask.unwrap());
        assert_eq!(payload, b"Hello");
    }

    #[test]
    fn header_lengths_and_partial_input() {
        for len in [0usize, 125, 126, 65535, 65536, 200_000] {
            let payload = vec![b'x'; len];
            let mut out = Vec::new();
            encode_frame(&mut out, true, opcode::TEXT, &payload, None);
            let h = decode_header(&out).unwrap().unwrap();
            assert_eq!(h.payload_len as usize, len);
            assert_eq!(h.header_len + len, out.len());
            for cut in 0..h.header_len {
                assert_eq!(
                    decode_header(&out[..cut]).unwrap(),
                    None,
                    "len {len} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn mask_is_an_involution_for_every_length() {
        let key = [1, 2, 3, 250];
        for len in 0..40 {
            let original: Vec<u8> = (0..len as u8).collect();
            let mut data = original.clone();
            apply_mask(&mut data, key);
            for (i, (a, b)) in data.iter().zip(&original).enumerate() {
                assert_eq!(*a, b ^ key[i % 4]);
            }
            apply_mask(&mut data, key);
            assert_eq!(data, original);
        }
    }

    #[test]
    fn control_frames_are_checked() {
        assert!(decode_header(&[0x09, 0x00]).is_err(), "fragmented ping");
        assert!(
            decode_header(&[0x89, 126, 0, 200]).is_err(),
            "oversized ping"
        );
        assert!(
            decode_header(&[0xC1, 0x00]).is_err(),
            "RSV1 without extension"
        );
    }

    #[test]
    fn urls() {
        let u = WsUrl::parse("ws://127.0.0.1:7777").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 7777, "/")
        );
        assert_eq!(u.host_header(), "127.0.0.1:7777");
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
    fn handshake_response_checks() {
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\n\r\n";
        assert!(check_response(good.as_bytes(), "abc", false).is_ok());
        assert!(
            check_response(good.as_bytes(), "abc", true).is_err(),
            "binary asked, not granted"
        );
        assert!(check_response(good.as_bytes(), "abd", false).is_err());
        let bad = "HTTP/1.1 200 OK\r\n\r\n";
        assert!(check_response(bad.as_bytes(), "abc", false).is_err());
    }
}
