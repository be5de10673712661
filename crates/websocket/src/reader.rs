//! A buffered, sans-IO message reader.

// RFC 6455 writes close codes in network (big-endian) byte order.
#![allow(clippy::big_endian_bytes)]

use crate::deflate::Decompressor;
use crate::frame::{apply_mask, decode_header, opcode};
use crate::{Error, Role};

/// Read buffer of a fresh connection. Idle connections keep only this; the
/// buffer grows to hold the largest frame and shrinks back once drained.
const INITIAL_BUFFER: usize = 4 * 1024;
/// Smallest free space offered to a socket read.
const MIN_READ: usize = 2 * 1024;
/// Most room made at once for the rest of a frame that is still arriving.
const GROW_STEP: usize = 64 * 1024;

/// A message or control frame, borrowed from the reader until the next call.
#[derive(Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A complete text message: fragments joined, inflated, valid UTF-8.
    Text(&'a [u8]),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// A ping; answer with a pong carrying the same payload.
    Ping(&'a [u8]),
    /// A pong.
    Pong(&'a [u8]),
    /// The peer is closing, with its status code if it sent one.
    Close(Option<u16>),
}

/// A message being assembled from fragments.
#[derive(Debug, Clone, Copy)]
struct Open {
    opcode: u8,
    compressed: bool,
}

#[derive(Debug)]
enum Ready {
    /// A single unfragmented, uncompressed frame at `buf[from..to]`.
    InBuffer { opcode: u8, from: usize, to: usize },
    /// The message in `assembled`.
    Assembled { opcode: u8 },
}

/// Turns bytes read from a socket into messages.
///
/// The caller reads into [`MessageReader::read_buf`], reports the count with
/// [`MessageReader::filled`] and calls [`MessageReader::next_message`] until it
/// returns `Ok(None)`. Frames arriving back to back in one read, or split
/// across reads, are handled alike. After an `Err` the connection must be
/// closed with [`Error::close_code`].
#[derive(Debug)]
pub struct MessageReader {
    role: Role,
    max_message: usize,
    inflater: Option<Decompressor>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    open: Option<Open>,
    fragments: Vec<u8>,
    assembled: Vec<u8>,
    /// Where the message found by the last `advance` is.
    ready: Option<Ready>,
}

impl MessageReader {
    /// A reader for the `role` this side plays, refusing messages over
    /// `max_message` bytes (compressed or not), inflating with `inflater`
    /// when permessage-deflate was negotiated.
    pub fn new(role: Role, max_message: usize, inflater: Option<Decompressor>) -> MessageReader {
        MessageReader {
            role,
            max_message,
            inflater,
            buf: Vec::new(),
            start: 0,
            end: 0,
            open: None,
            fragments: Vec::new(),
            assembled: Vec::new(),
            ready: None,
        }
    }

    /// Appends bytes already read (for example those that followed the
    /// handshake in the same read).
    pub fn push(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len());
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Free space to read socket bytes into; at least 2 KiB.
    pub fn read_buf(&mut self) -> &mut [u8] {
        self.make_room(MIN_READ);
        &mut self.buf[self.end..]
    }

    /// Bytes of memory the reader holds now (its buffers' capacity): a
    /// message being received grows it up to the message limit.
    pub fn held_bytes(&self) -> usize {
        self.buf.capacity() + self.fragments.capacity() + self.assembled.capacity()
    }

    /// Records that `n` bytes were written into [`MessageReader::read_buf`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Bytes received and not yet consumed as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// True while part of a message is here: bytes of a frame not yet
    /// whole, or the first fragments of a fragmented message.
    pub fn mid_message(&self) -> bool {
        self.buffered() > 0 || !self.fragments.is_empty()
    }

    /// Ensures `additional` free bytes after `end`, moving pending bytes to
    /// the front first.
    fn make_room(&mut self, additional: usize) {
        // Compacting moves bytes: a message found earlier is no longer readable.
        self.ready = None;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > 16 * INITIAL_BUFFER && additional <= INITIAL_BUFFER {
                // Drained after a large frame: give the memory back.
                self.buf = Vec::new();
            }
        }
        if self.buf.len() - self.end >= additional {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let needed = (self.end + additional).max(INITIAL_BUFFER);
        if self.buf.len() < needed {
            self.buf
                .resize(needed.max(self.buf.len() * 2).max(INITIAL_BUFFER), 0);
        }
    }

    /// The next complete message or control frame, `Ok(None)` when more
    /// bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message<'_>>, Error> {
        Ok(if self.advance()? {
            Some(self.message())
        } else {
            None
        })
    }

    /// Moves to the next complete message or control frame; true if there
    /// is one, to be read with [`MessageReader::message`]. The two-step form
    /// lets an async caller read more bytes when this returns false without
    /// holding a borrow of the reader.
    pub fn advance(&mut self) -> Result<bool, Error> {
        self.ready = None;
        let Some(ready) = self.next_ready()? else {
            return Ok(false);
        };
        let (op, payload) = self.ready_payload(&ready);
        match op {
            opcode::TEXT => {
                std::str::from_utf8(payload).map_err(|_| Error::InvalidUtf8)?;
            }
            opcode::CLOSE => {
                close_code(payload)?;
            }
            _ => {}
        }
        self.ready = Some(ready);
        Ok(true)
    }

    /// The message [`MessageReader::advance`] moved to.
    ///
    /// # Panics
    /// If `advance` did not just return true.
    pub fn message(&self) -> Message<'_> {
        let ready = self.ready.as_ref().expect("advance() returned true first");
        let (op, payload) = self.ready_payload(ready);
        match op {
            opcode::TEXT => Message::Text(payload),
            opcode::BINARY => Message::Binary(payload),
            opcode::PING => Message::Ping(payload),
            opcode::PONG => Message::Pong(payload),
            _ => Message::Close(close_code(payload).unwrap_or(None)),
        }
    }

    fn ready_payload(&self, ready: &Ready) -> (u8, &[u8]) {
        match *ready {
            Ready::InBuffer { opcode, from, to } => (opcode, &self.buf[from..to]),
            Ready::Assembled { opcode } => (opcode, &self.assembled[..]),
        }
    }

    fn next_ready(&mut self) -> Result<Option<Ready>, Error> {
        loop {
            let avail = &self.buf[self.start..self.end];
            let Some(h) = decode_header(avail, self.inflater.is_some())? else {
                return Ok(None);
            };
            if h.mask.is_some() != (self.role == Role::Server) {
                return Err(Error::Masking);
            }
            if h.payload_len > self.max_message as u64 {
                return Err(Error::TooLarge {
                    limit: self.max_message,
                });
            }
            let total = h.header_len + h.payload_len as usize;
            if avail.len() < total {
                // Room for more of the frame, growing with what arrives: a
                // header alone does not make the reader allocate the size
                // it announces (a connection's owner may stop reading it
                // when memory is short, see `held_bytes`).
                self.make_room((total - avail.len()).min(GROW_STEP));
                return Ok(None);
            }
            let from = self.start + h.header_len;
            let to = self.start + total;
            self.start = to;
            if let Some(key) = h.mask {
                apply_mask(&mut self.buf[from..to], key);
            }
            match h.opcode {
                opcode::TEXT | opcode::BINARY => {
                    if self.open.is_some() {
                        return Err(Error::Fragmentation);
                    }
                    if h.fin && !h.rsv1 {
                        return Ok(Some(Ready::InBuffer {
                            opcode: h.opcode,
                            from,
                            to,
                        }));
                    }
                    self.fragments.clear();
                    self.fragments.extend_from_slice(&self.buf[from..to]);
                    let open = Open {
                        opcode: h.opcode,
                        compressed: h.rsv1,
                    };
                    if h.fin {
                        self.finish(open)?;
                        return Ok(Some(Ready::Assembled { opcode: h.opcode }));
                    }
                    self.open = Some(open);
                }
                opcode::CONTINUATION => {
                    if h.rsv1 {
                        return Err(Error::ReservedBits);
                    }
                    let Some(open) = self.open else {
                        return Err(Error::Fragmentation);
                    };
                    if self.fragments.len() + (to - from) > self.max_message {
                        return Err(Error::TooLarge {
                            limit: self.max_message,
                        });
                    }
                    self.fragments.extend_from_slice(&self.buf[from..to]);
                    if h.fin {
                        self.open = None;
                        self.finish(open)?;
                        return Ok(Some(Ready::Assembled {
                            opcode: open.opcode,
                        }));
                    }
                }
                opcode::PING | opcode::PONG | opcode::CLOSE => {
                    if h.rsv1 {
                        return Err(Error::ReservedBits);
                    }
                    return Ok(Some(Ready::InBuffer {
                        opcode: h.opcode,
                        from,
                        to,
                    }));
                }
                other => return Err(Error::UnknownOpcode(other)),
            }
        }
    }

    /// Moves the joined fragments into `assembled`, inflating if needed.
    fn finish(&mut self, open: Open) -> Result<(), Error> {
        self.assembled.clear();
        if open.compressed {
            let inflater = self.inflater.as_mut().ok_or(Error::ReservedBits)?;
            inflater.decompress(&self.fragments, &mut self.assembled, self.max_message)?;
        } else {
            std::mem::swap(&mut self.assembled, &mut self.fragments);
        }
        if self.fragments.capacity() > 16 * INITIAL_BUFFER {
            self.fragments = Vec::new();
        }
        Ok(())
    }
}

/// The status code of a close frame, checked as RFC 6455 §7.4 asks.
fn close_code(payload: &[u8]) -> Result<Option<u16>, Error> {
    match payload {
        [] => Ok(None),
        [_] => Err(Error::BadClose),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            let allowed = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
            if !allowed {
                return Err(Error::BadClose);
            }
            std::str::from_utf8(reason).map_err(|_| Error::InvalidUtf8)?;
            Ok(Some(code))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deflate::{DeflateConfig, DeflateParams};
    use crate::frame::{encode_frame, encode_header};
    use crate::MessageWriter;

    const MASK: Option<[u8; 4]> = Some([9, 8, 7, 6]);

    fn server(max: usize) -> MessageReader {
        MessageReader::new(Role::Server, max, None)
    }

    /// Collects every message a reader yields for `wire`, fed in `step`-byte reads.
    fn read_all(
        reader: &mut MessageReader,
        wire: &[u8],
        step: usize,
    ) -> Result<Vec<String>, Error> {
        let mut seen = Vec::new();
        for chunk in wire.chunks(step.max(1)) {
            let space = reader.read_buf();
            let n = chunk.len().min(space.len());
            space[..n].copy_from_slice(&chunk[..n]);
            reader.filled(n);
            reader.push(&chunk[n..]);
            while let Some(m) = reader.next_message()? {
                seen.push(match m {
                    Message::Text(t) => format!("text:{}", String::from_utf8_lossy(t)),
                    Message::Binary(b) => format!("binary:{}", b.len()),
                    Message::Ping(p) => format!("ping:{}", p.len()),
                    Message::Pong(p) => format!("pong:{}", p.len()),
                    Message::Close(c) => format!("close:{c:?}"),
                });
            }
        }
        Ok(seen)
    }

    #[test]
    fn frames_split_and_joined_across_reads() {
        let mut wire = Vec::new();
        encode_frame(&mut wire, true, opcode::TEXT, b"one", MASK);
        encode_frame(&mut wire, false, opcode::TEXT, b"tw", MASK);
        encode_frame(&mut wire, true, opcode::PING, b"p", MASK);
        encode_frame(&mut wire, true, opcode::CONTINUATION, b"o", MASK);
        encode_frame(&mut wire, true, opcode::BINARY, &[0u8; 70_000], MASK);
        encode_frame(&mut wire, true, opcode::CLOSE, &1000u16.to_be_bytes(), MASK);
        for step in [1, 2, 3, 7, 100, 4096, wire.len()] {
            let got = read_all(&mut server(1 << 20), &wire, step).unwrap();
            assert_eq!(
                got,
                [
                    "text:one",
                    "ping:1",
                    "text:two",
                    "binary:70000",
                    "close:Some(1000)"
                ],
                "step {step}"
            );
        }
    }

    #[test]
    fn protocol_violations_have_their_errors() {
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, opcode::TEXT, b"x", None);
                    w
                },
                Error::Masking,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, opcode::CONTINUATION, b"x", MASK);
                    w
                },
                Error::Fragmentation,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, false, opcode::TEXT, b"x", MASK);
                    encode_frame(&mut w, true, opcode::TEXT, b"y", MASK);
                    w
                },
                Error::Fragmentation,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, 0x3, b"x", MASK);
                    w
                },
                Error::UnknownOpcode(3),
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, opcode::TEXT, &[0xff, 0xfe], MASK);
                    w
                },
                Error::InvalidUtf8,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, opcode::CLOSE, &[3], MASK);
                    w
                },
                Error::BadClose,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, true, opcode::CLOSE, &1005u16.to_be_bytes(), MASK);
                    w
                },
                Error::BadClose,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_header(&mut w, true, true, opcode::TEXT, 1, MASK);
                    w.push(0);
                    w
                },
                Error::ReservedBits,
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_header(&mut w, true, false, opcode::TEXT, 2_000, MASK);
                    w
                },
                Error::TooLarge { limit: 1000 },
            ),
            (
                {
                    let mut w = Vec::new();
                    encode_frame(&mut w, false, opcode::TEXT, &[b'a'; 600], MASK);
                    encode_frame(&mut w, true, opcode::CONTINUATION, &[b'a'; 600], MASK);
                    w
                },
                Error::TooLarge { limit: 1000 },
            ),
        ];
        for (wire, expected) in cases {
            assert_eq!(
                read_all(&mut server(1000), &wire, 5),
                Err(expected.clone()),
                "{expected}"
            );
        }
    }

    #[test]
    fn an_oversized_length_is_refused_before_any_allocation() {
        let mut wire = Vec::new();
        encode_header(
            &mut wire,
            true,
            false,
            opcode::BINARY,
            usize::MAX >> 1,
            MASK,
        );
        let mut reader = server(1 << 20);
        reader.push(&wire);
        assert_eq!(
            reader.next_message(),
            Err(Error::TooLarge { limit: 1 << 20 })
        );
        assert!(reader.buf.len() < 64 * 1024);
    }

    #[test]
    fn compressed_messages_round_trip_between_writer_and_reader() {
        let config = DeflateConfig {
            min_size: 10,
            ..DeflateConfig::default()
        };
        for (snct, cnct) in [(false, false), (true, true)] {
            let params = DeflateParams {
                server_no_context_takeover: snct,
                client_no_context_takeover: cnct,
            };
            let mut writer =
                MessageWriter::new(Role::Client, Some(params.compressor(Role::Client, &config)));
            let mut reader = MessageReader::new(
                Role::Server,
                1 << 20,
                Some(params.decompressor(Role::Server)),
            );
            let mut wire = Vec::new();
            let texts: Vec<String> = (0..20)
                .map(|i| format!("[\"REQ\",\"s{i}\",{{\"kinds\":[1],\"limit\":{i}}}]"))
                .collect();
            for t in &texts {
                writer.text(&mut wire, t.as_bytes(), MASK);
            }
            writer.text(&mut wire, b"[]", MASK); // under min_size: sent plain
            let got = read_all(&mut reader, &wire, 13).unwrap();
            let mut expected: Vec<String> = texts.iter().map(|t| format!("text:{t}")).collect();
            expected.push("text:[]".into());
            assert_eq!(got, expected);
            if !cnct {
                // With context, each request compresses against the last.
                assert!(wire.len() < texts.iter().map(String::len).sum::<usize>());
            }
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let mut seed = 0x9e37_79b9_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for round in 0..2_000 {
            let len = (next() % 200) as usize;
            let mut wire: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 0 && !wire.is_empty() {
                // Mostly valid headers so the payload paths are reached too.
                wire[0] = 0x80 | (0x40 * (next() % 2) as u8) | (next() % 3) as u8;
                if wire.len() > 1 {
                    wire[1] = 0x80 | ((wire[1] & 0x7f) % 126);
                }
            }
            let params = DeflateParams::default();
            let mut reader =
                MessageReader::new(Role::Server, 4096, Some(params.decompressor(Role::Server)));
            let _ = read_all(&mut reader, &wire, 1 + round % 17);
        }
    }
}
