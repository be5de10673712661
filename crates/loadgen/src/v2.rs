//! The `nostrwire.v2` side of a load-test connection (`v2+ws://…`): the
//! relay's dictionary set, fetched once per process over HTTP
//! (`GET /dictionaries/<sha256 hex>`), checked against its name and held,
//! and the records of batch frames, decompressed for the events that are
//! checked.

use std::collections::HashMap;
use std::sync::OnceLock;

use nostrwire_wire::compress::{DictSet, RecordDecompressor};
use nostrwire_wire::transport::{self, SetHash};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::ws::WsUrl;
use crate::Error;

/// Largest dictionary set file fetched.
const MAX_SET_BYTES: usize = 64 << 20;

/// The sets fetched so far, each prepared once and kept for the process.
fn cache() -> &'static Mutex<HashMap<SetHash, &'static DictSet>> {
    static SETS: OnceLock<Mutex<HashMap<SetHash, &'static DictSet>>> = OnceLock::new();
    SETS.get_or_init(Mutex::default)
}

/// The dictionary set `hash` names, from the cache or fetched from the
/// relay at `url`; the file must hash to its name.
pub async fn dictionary_set(url: &WsUrl, hash: &SetHash) -> Result<&'static DictSet, Error> {
    let mut sets = cache().lock().await;
    if let Some(set) = sets.get(hash) {
        return Ok(set);
    }
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    let bad = |why: String| Error::Handshake(format!("dictionary set {hex}: {why}"));
    let mut stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port)).await?;
    let request = format!(
        "GET /dictionaries/{hex} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\n\r\n",
        url.host, url.port
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reply = Vec::new();
    (&mut stream)
        .take(MAX_SET_BYTES as u64 + 4096)
        .read_to_end(&mut reply)
        .await?;
    let end = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no HTTP reply".into()))?;
    let head = String::from_utf8_lossy(&reply[..end]);
    if !head.starts_with("HTTP/1.1 200") {
        let line = head.lines().next().unwrap_or("").to_string();
        return Err(bad(format!("the relay answered `{line}`")));
    }
    let chunked = head.lines().skip(1).any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
        })
    });
    let body = &reply[end + 4..];
    let dechunked;
    let file = match chunked {
        true => {
            dechunked = dechunk(body).ok_or_else(|| bad("a malformed chunked reply".into()))?;
            &dechunked[..]
        }
        false => body,
    };
    if <[u8; 32]>::from(Sha256::digest(file)) != *hash {
        return Err(bad("the file does not hash to its name".into()));
    }
    let set = DictSet::from_bytes(file).map_err(|e| bad(e.to_string()))?;
    let set: &'static DictSet = Box::leak(Box::new(set));
    sets.insert(*hash, set);
    Ok(set)
}

/// The body of an HTTP/1.1 reply sent with `Transfer-Encoding: chunked`
/// (RFC 9112 §7.1), as servers that do not know a body's length ahead of
/// time send it; `None` when the chunks do not add up.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&body[..line_end]).ok()?;
        // Chunk extensions (`;name=value`) follow the size and are ignored.
        let size = line.split(';').next()?.trim();
        let size = usize::from_str_radix(size, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if size > MAX_SET_BYTES.saturating_sub(out.len()) || body.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&body[..size]);
        if &body[size..size + 2] != b"\r\n" {
            return None;
        }
        body = &body[size + 2..];
    }
}

/// What a `nostrwire.v2` connection holds.
pub struct V2Conn {
    /// Decompresses records with the held set (or none).
    pub decompressor: RecordDecompressor<'static>,
}

impl std::fmt::Debug for V2Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("V2Conn").finish_non_exhaustive()
    }
}

impl V2Conn {
    /// A connection holding `set` (or none).
    pub fn new(set: Option<&'static DictSet>) -> Result<V2Conn, Error> {
        Ok(V2Conn {
            decompressor: RecordDecompressor::new(set)?,
        })
    }
}

/// How many records a batch frame for `sub` holds, read from its header
/// only (`None`: another frame, or another subscription's batch).
pub fn batch_len(frame: &[u8], sub: &str) -> Option<u64> {
    let rest = frame.strip_prefix(&[transport::BATCH, sub.len() as u8])?;
    let rest = rest.strip_prefix(sub.as_bytes())?;
    let mut pos = 0;
    nostrwire_wire::varint::read(rest, &mut pos).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_replies_are_read_whole() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n").as_deref(),
            Some(&b"hello, world"[..])
        );
        assert_eq!(dechunk(b"0\r\n\r\n").as_deref(), Some(&b""[..]));
        assert_eq!(dechunk(b"5\r\nhel"), None, "a chunk cut short");
        assert_eq!(
            dechunk(b"5\r\nhelloXX0\r\n\r\n"),
            None,
            "no CRLF after the data"
        );
        assert_eq!(dechunk(b"zz\r\n"), None, "a size that is not hex");
        assert_eq!(dechunk(b"5\r\nhello\r\n"), None, "no last chunk");
        assert_eq!(
            dechunk(b"ffffffffffffffff\r\n"),
            None,
            "a size over the limit"
        );
    }

    #[test]
    fn batch_len_reads_the_header() {
        let mut b = transport::BatchBuilder::new("q1", 1 << 16);
        for _ in 0..200 {
            b.push(&[0x81, 0, 1, 0]);
        }
        let frame = b.finish();
        assert_eq!(batch_len(&frame, "q1"), Some(200));
        assert_eq!(batch_len(&frame, "q2"), None);
        assert_eq!(batch_len(b"\x05q1", "q1"), None);
    }
}
