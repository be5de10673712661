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
    let status = String::from_utf8_lossy(&reply[..end]);
    if !status.starts_with("HTTP/1.1 200") {
        let line = status.lines().next().unwrap_or("").to_string();
        return Err(bad(format!("the relay answered `{line}`")));
    }
    let file = &reply[end + 4..];
    if <[u8; 32]>::from(Sha256::digest(file)) != *hash {
        return Err(bad("the file does not hash to its name".into()));
    }
    let set = DictSet::from_bytes(file).map_err(|e| bad(e.to_string()))?;
    let set: &'static DictSet = Box::leak(Box::new(set));
    sets.insert(*hash, set);
    Ok(set)
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
