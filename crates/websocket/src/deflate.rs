//! permessage-deflate (RFC 7692): raw DEFLATE per message, each message
//! ended with a sync flush whose `00 00 FF FF` tail is stripped on the wire
//! and appended again before inflating (§7.2.1, §7.2.2).
//!
//! With context takeover a side keeps its LZ77 window between messages, so
//! repeated JSON keys and pubkeys compress against earlier messages; the
//! price is the compressor state kept per connection. Without it the state
//! is reset after every message, and this module keeps one such state per
//! thread instead of one per connection.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::{Error, Role};

/// The bytes a sync flush ends with; stripped from every compressed message.
const TAIL: [u8; 4] = [0x00, 0x00, 0xFF, 0xFF];

/// Messages shorter than this are sent uncompressed (RSV1 clear): the
/// DEFLATE block overhead would eat most of the saving.
pub const DEFAULT_MIN_SIZE: usize = 64;

/// What one side is willing to do. The defaults keep context in both
/// directions, which compresses Nostr traffic best.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeflateConfig {
    /// DEFLATE level, 0 (store) to 9 (smallest).
    pub level: u32,
    /// Let the server keep its compression window between messages.
    pub server_context_takeover: bool,
    /// Let the client keep its compression window between messages.
    pub client_context_takeover: bool,
    /// Messages shorter than this many bytes are not compressed.
    pub min_size: usize,
}

impl Default for DeflateConfig {
    fn default() -> DeflateConfig {
        DeflateConfig {
            level: 1,
            server_context_takeover: true,
            client_context_takeover: true,
            min_size: DEFAULT_MIN_SIZE,
        }
    }
}

/// What the handshake settled for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeflateParams {
    /// The server resets its compression window after every message.
    pub server_no_context_takeover: bool,
    /// The client resets its compression window after every message.
    pub client_no_context_takeover: bool,
}

impl DeflateParams {
    /// The compressor for messages this `role` sends.
    pub fn compressor(&self, role: Role, config: &DeflateConfig) -> Compressor {
        let reset = match role {
            Role::Server => self.server_no_context_takeover,
            Role::Client => self.client_no_context_takeover,
        };
        Compressor {
            state: None,
            level: config.level.min(9),
            reset_each_message: reset,
            min_size: config.min_size,
        }
    }

    /// The decompressor for messages this `role` receives.
    pub fn decompressor(&self, role: Role) -> Decompressor {
        let reset = match role {
            Role::Server => self.client_no_context_takeover,
            Role::Client => self.server_no_context_takeover,
        };
        Decompressor {
            state: None,
            reset_each_message: reset,
        }
    }
}

thread_local! {
    /// Compressors for connections without context takeover, by level.
    static SHARED_COMPRESSORS: RefCell<Vec<(u32, Compress)>> = const { RefCell::new(Vec::new()) };
    /// The decompressor for peers without context takeover.
    static SHARED_DECOMPRESSOR: RefCell<Option<Decompress>> = const { RefCell::new(None) };
}

/// Compresses outgoing messages of one connection. The DEFLATE state is
/// allocated on first use, so idle connections cost nothing.
#[derive(Debug)]
pub struct Compressor {
    state: Option<Box<Compress>>,
    level: u32,
    reset_each_message: bool,
    min_size: usize,
}

impl Compressor {
    /// Whether a message of `len` bytes is worth compressing.
    pub fn wants(&self, len: usize) -> bool {
        len >= self.min_size
    }

    /// Appends the compressed form of one whole message to `out` (tail
    /// stripped), ready to be framed with RSV1 set.
    pub fn compress(&mut self, message: &[u8], out: &mut Vec<u8>) {
        if self.reset_each_message {
            SHARED_COMPRESSORS.with(|shared| {
                let mut shared = shared.borrow_mut();
                let index = match shared.iter().position(|(level, _)| *level == self.level) {
                    Some(i) => i,
                    None => {
                        shared.push((self.level, new_compress(self.level)));
                        shared.len() - 1
                    }
                };
                let state = &mut shared[index].1;
                deflate_message(state, message, out);
                state.reset();
            });
        } else {
            let level = self.level;
            let state = self
                .state
                .get_or_insert_with(|| Box::new(new_compress(level)));
            deflate_message(state, message, out);
        }
    }
}

fn new_compress(level: u32) -> Compress {
    // Raw DEFLATE (no zlib header), 15-bit window.
    Compress::new(Compression::new(level), false)
}

/// Lets `step` write into `room` zeroed bytes after `out`'s contents and
/// keeps the `written` bytes it reports. The window is sized per call, so
/// a large buffer left over from an earlier message is not zeroed again
/// (the `*_vec` calls of flate2 fill all spare capacity every time).
fn write_window(out: &mut Vec<u8>, room: usize, step: impl FnOnce(&mut [u8]) -> usize) -> usize {
    let len = out.len();
    out.resize(len + room, 0);
    let written = step(&mut out[len..]).min(room);
    out.truncate(len + written);
    written
}

fn deflate_message(state: &mut Compress, message: &[u8], out: &mut Vec<u8>) {
    if message.is_empty() {
        // RFC 7692 §7.2.3.6: an empty stored block; the window is unchanged.
        out.push(0x00);
        return;
    }
    let start_in = state.total_in();
    let start_len = out.len();
    let mut room = message.len() / 2 + 64;
    loop {
        let consumed = (state.total_in() - start_in) as usize;
        let written = write_window(out, room, |window| {
            let before = state.total_out();
            state
                .compress(&message[consumed..], window, FlushCompress::Sync)
                .expect("DEFLATE of an in-memory buffer cannot fail");
            (state.total_out() - before) as usize
        });
        let consumed = (state.total_in() - start_in) as usize;
        // The sync flush is complete once all input is in, the output ends
        // with its marker and the last call had room to spare. (Some
        // backends return early with room left, so room alone is not proof.)
        let filled = written == room;
        if consumed == message.len() && !filled && out[start_len..].ends_with(&TAIL) {
            break;
        }
        if consumed == message.len() && !filled && written == 0 {
            // Nothing more will come; should not happen with a sync flush.
            debug_assert!(false, "sync flush ended without its marker");
            break;
        }
        if filled {
            room = room.max(out.len() - start_len).max(256);
        }
    }
    if out[start_len..].ends_with(&TAIL) {
        out.truncate(out.len() - TAIL.len());
    }
}

/// Inflates incoming messages of one connection, never past a size limit.
#[derive(Debug)]
pub struct Decompressor {
    state: Option<Box<Decompress>>,
    reset_each_message: bool,
}

impl Decompressor {
    /// Appends the inflated form of one compressed message to `out`.
    /// Fails with [`Error::TooLarge`] as soon as the output passes `limit`
    /// bytes, so a small compressed bomb cannot allocate much more.
    pub fn decompress(
        &mut self,
        message: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), Error> {
        if self.reset_each_message {
            SHARED_DECOMPRESSOR.with(|shared| {
                let mut shared = shared.borrow_mut();
                let state = shared.get_or_insert_with(|| Decompress::new(false));
                let result = inflate_message(state, message, out, limit);
                state.reset(false);
                result
            })
        } else {
            let state = self
                .state
                .get_or_insert_with(|| Box::new(Decompress::new(false)));
            let result = inflate_message(state, message, out, limit);
            if result.is_err() {
                // The window is now unusable; the connection is about to
                // close anyway, but never reuse a broken state.
                state.reset(false);
            }
            result
        }
    }
}

fn inflate_message(
    state: &mut Decompress,
    message: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Error> {
    let start_len = out.len();
    let mut room = message.len().saturating_mul(4).saturating_add(256);
    for chunk in [message, &TAIL[..]] {
        let mut pos = 0;
        loop {
            // Never more than one byte past the limit, so a bomb is caught
            // having allocated at most `limit + 1` bytes.
            let produced = out.len() - start_len;
            let window = room.min(limit + 1 - produced);
            let in_before = state.total_in();
            let mut status = Ok(Status::Ok);
            let written = write_window(out, window, |w| {
                let before = state.total_out();
                status = state.decompress(&chunk[pos..], w, FlushDecompress::Sync);
                (state.total_out() - before) as usize
            });
            let status = status.map_err(|_| Error::Inflate)?;
            let read = (state.total_in() - in_before) as usize;
            pos += read;
            if out.len() - start_len > limit {
                return Err(Error::TooLarge { limit });
            }
            if status == Status::StreamEnd {
                // A final block (BFINAL) ends the DEFLATE stream; the next
                // message starts a new one.
                state.reset(false);
                return Ok(());
            }
            let filled = written == window;
            if pos == chunk.len() && !filled {
                break;
            }
            if !filled && read == 0 && written == 0 {
                return Err(Error::Inflate);
            }
            if filled {
                room = room.saturating_mul(2).min(1 << 20);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(server_nct: bool, client_nct: bool) -> DeflateParams {
        DeflateParams {
            server_no_context_takeover: server_nct,
            client_no_context_takeover: client_nct,
        }
    }

    #[test]
    fn rfc7692_hello_example() {
        // §7.2.3.1: "Hello" compressed in one DEFLATE block.
        let wire = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        let mut out = Vec::new();
        params(false, false)
            .decompressor(Role::Client)
            .decompress(&wire, &mut out, 100)
            .unwrap();
        assert_eq!(out, b"Hello");
    }

    #[test]
    fn rfc7692_shared_window_example() {
        // §7.2.3.2: the second "Hello" refers back into the first message.
        let mut d = params(false, false).decompressor(Role::Client);
        let mut out = Vec::new();
        d.decompress(&[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00], &mut out, 100)
            .unwrap();
        out.clear();
        d.decompress(&[0xf2, 0x00, 0x11, 0x00, 0x00], &mut out, 100)
            .unwrap();
        assert_eq!(out, b"Hello");
    }

    #[test]
    fn round_trip_with_and_without_context_takeover() {
        let config = DeflateConfig {
            min_size: 0,
            ..DeflateConfig::default()
        };
        let messages: Vec<Vec<u8>> = (0..50)
            .map(|i| {
                format!(
                    r#"["EVENT","sub",{{"kind":1,"content":"message number {i} {}"}}]"#,
                    "x".repeat(i * 37)
                )
                .into_bytes()
            })
            .chain([Vec::new(), vec![0u8; 100_000]])
            .collect();
        for (snct, cnct) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = params(snct, cnct);
            let mut c = p.compressor(Role::Server, &config);
            let mut d = p.decompressor(Role::Client);
            let mut sizes = 0;
            for m in &messages {
                let mut wire = Vec::new();
                c.compress(m, &mut wire);
                sizes += wire.len();
                let mut back = Vec::new();
                d.decompress(&wire, &mut back, 1 << 20).unwrap();
                assert_eq!(&back, m, "server_nct {snct} client_nct {cnct}");
            }
            assert!(sizes < messages.iter().map(Vec::len).sum::<usize>() / 4);
        }
    }

    #[test]
    fn the_corpus_round_trips_through_one_connection_at_every_level() {
        // Real events, some of them follow lists of 100+ KiB whose output
        // takes several calls to write: the case where a backend returns
        // before its sync flush is complete.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/real-events.jsonl"
        );
        let corpus = std::fs::read_to_string(path).unwrap();
        for level in [1, 4, 9] {
            for (snct, cnct) in [(false, false), (true, true)] {
                let config = DeflateConfig {
                    level,
                    ..DeflateConfig::default()
                };
                let p = params(snct, cnct);
                let mut c = p.compressor(Role::Server, &config);
                let mut d = p.decompressor(Role::Client);
                for (i, line) in corpus.lines().enumerate() {
                    let message = format!(r#"["EVENT","q",{line}]"#).into_bytes();
                    let mut wire = Vec::new();
                    c.compress(&message, &mut wire);
                    let mut back = Vec::new();
                    d.decompress(&wire, &mut back, 1 << 22).unwrap();
                    assert!(back == message, "level {level}, event {i}");
                }
            }
        }
    }

    #[test]
    fn context_takeover_shrinks_repeated_messages() {
        let config = DeflateConfig::default();
        let message = br#"["EVENT","feed",{"id":"29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a","kind":1,"tags":[],"content":"gm"}]"#;
        let second_size = |p: DeflateParams| {
            let mut c = p.compressor(Role::Server, &config);
            let mut first = Vec::new();
            c.compress(message, &mut first);
            let mut second = Vec::new();
            c.compress(message, &mut second);
            (first.len(), second.len())
        };
        let (first, with_context) = second_size(params(false, false));
        let (_, without) = second_size(params(true, false));
        assert!(with_context < first / 4, "{with_context} vs {first}");
        assert_eq!(without, first);
    }

    #[test]
    fn bombs_stop_at_the_limit() {
        let config = DeflateConfig {
            level: 9,
            ..DeflateConfig::default()
        };
        let mut c = params(false, false).compressor(Role::Client, &config);
        let mut wire = Vec::new();
        c.compress(&vec![b'a'; 10_000_000], &mut wire);
        assert!(wire.len() < 100_000, "{}", wire.len());
        let mut out = Vec::new();
        let err = params(false, false)
            .decompressor(Role::Server)
            .decompress(&wire, &mut out, 1 << 20)
            .unwrap_err();
        assert_eq!(err, Error::TooLarge { limit: 1 << 20 });
        assert!(out.capacity() <= 3 << 20, "allocated {}", out.capacity());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut seed = 0x1234_5678_u32;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            let mut d = params(false, false).decompressor(Role::Server);
            let mut out = Vec::new();
            if let Err(e) = d.decompress(&bytes, &mut out, 4096) {
                assert!(matches!(e, Error::Inflate | Error::TooLarge { .. }), "{e}");
            }
        }
    }
}
