//! Canonical NIP-01 serialization and the event id, shared by every event
//! representation (owned, borrowed JSON view, and binary views in other crates).
//!
//! The id is `sha256([0,<pubkey>,<created_at>,<kind>,<tags>,<content>])` with
//! the escaping rule of [`crate::json`]. The preimage is streamed into the
//! hash through a small buffer; no intermediate string is built.

use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind};
use crate::json::Sink;
use crate::types::{EventId, Kind, PublicKey, Signature, Timestamp};

/// The fields that make up the id preimage, however they are stored.
pub trait PreimageFields {
    /// Author's public key.
    fn pubkey(&self) -> &PublicKey;
    /// Creation time.
    fn created_at(&self) -> Timestamp;
    /// Event kind.
    fn kind(&self) -> Kind;
    /// Writes the canonical JSON of the tags array, brackets included.
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S);
    /// Writes the canonical JSON of the content, quotes excluded.
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S);
    /// Calls `visit(name, first_value)` for each tag until it returns true;
    /// returns whether it did. Used by filter matching.
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool;
    /// A cheap upper estimate of the canonical JSON size, for pre-sizing.
    fn json_size_hint(&self) -> usize {
        512
    }

    /// Streams the canonical preimage into `out`.
    fn write_preimage<S: Sink + ?Sized>(&self, out: &mut S) {
        out.put(b"[0,\"");
        out.put(&self.pubkey().to_hex_bytes());
        out.put(b"\",");
        put_u64(out, self.created_at().as_u64());
        out.put(b",");
        put_u64(out, self.kind().as_u16() as u64);
        out.put(b",");
        self.write_tags_json(out);
        out.put(b",\"");
        self.write_content_json(out);
        out.put(b"\"]");
    }

    /// Computes the event id.
    fn compute_id(&self) -> EventId {
        let mut sink = HashSink::new();
        self.write_preimage(&mut sink);
        sink.finish()
    }
}

/// An event with its claimed id and signature.
pub trait SignedFields: PreimageFields {
    /// Claimed id.
    fn id(&self) -> &EventId;
    /// Claimed signature.
    fn sig(&self) -> &Signature;

    /// Checks that the claimed id is the hash of the canonical serialization.
    fn verify_id(&self) -> Result<(), Error> {
        if self.compute_id() == *self.id() {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::IdMismatch).with_field("id"))
        }
    }

    /// Checks the BIP-340 signature over the claimed id (the id itself is not recomputed).
    fn verify_signature(&self) -> Result<(), Error> {
        crate::keys::verify_signature(self.id(), self.pubkey(), self.sig())
    }

    /// Full check: id first (cheap), then the signature.
    fn verify(&self) -> Result<(), Error> {
        self.verify_id()?;
        self.verify_signature()
    }

    /// Writes the event as canonical compact JSON, keys in NIP-01 order.
    fn write_json<S: Sink + ?Sized>(&self, out: &mut S) {
        out.put(b"{\"id\":\"");
        out.put(&self.id().to_hex_bytes());
        out.put(b"\",\"pubkey\":\"");
        out.put(&self.pubkey().to_hex_bytes());
        out.put(b"\",\"created_at\":");
        put_u64(out, self.created_at().as_u64());
        out.put(b",\"kind\":");
        put_u64(out, self.kind().as_u16() as u64);
        out.put(b",\"tags\":");
        self.write_tags_json(out);
        out.put(b",\"content\":\"");
        self.write_content_json(out);
        out.put(b"\",\"sig\":\"");
        out.put(&self.sig().to_hex_bytes());
        out.put(b"\"}");
    }

    /// The event as canonical compact JSON.
    fn to_json(&self) -> String {
        String::from_utf8(self.to_json_bytes()).expect("canonical JSON is UTF-8")
    }

    /// The event as canonical compact JSON, as bytes: UTF-8 (written from
    /// the event's `&str`s and ASCII) without the check [`to_json`] pays
    /// for, for callers that only pass the bytes on.
    ///
    /// [`to_json`]: SignedFields::to_json
    fn to_json_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.json_size_hint());
        self.write_json(&mut out);
        out
    }
}

/// Writes a decimal integer.
pub fn put_u64<S: Sink + ?Sized>(out: &mut S, mut value: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

/// Buffers small writes so SHA-256 sees large contiguous runs (several
/// 64-byte blocks per call, which the SHA-NI path processes fastest).
pub struct HashSink {
    hasher: Sha256,
    buf: [u8; 1024],
    len: usize,
}

impl Default for HashSink {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for HashSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashSink")
            .field("buffered", &self.len)
            .finish()
    }
}

impl HashSink {
    /// An empty hash.
    pub fn new() -> HashSink {
        HashSink {
            hasher: Sha256::new(),
            buf: [0; 1024],
            len: 0,
        }
    }

    /// The digest of everything written.
    pub fn finish(mut self) -> EventId {
        self.hasher.update(&self.buf[..self.len]);
        EventId::from_bytes(self.hasher.finalize().into())
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if bytes.len() <= self.buf.len() - self.len {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        self.hasher.update(&self.buf[..self.len]);
        self.len = 0;
        if bytes.len() >= self.buf.len() / 2 {
            self.hasher.update(bytes);
        } else {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_sink_matches_one_shot() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expected: [u8; 32] = Sha256::digest(&data).into();
        for step in [1usize, 3, 63, 64, 65, 500, 511, 512, 1000, 1024, 5000] {
            let mut sink = HashSink::new();
            for chunk in data.chunks(step) {
                sink.put(chunk);
            }
            assert_eq!(sink.finish().as_bytes(), &expected, "step {step}");
        }
    }

    #[test]
    fn decimal() {
        for v in [0u64, 9, 10, 1234567890, u64::MAX] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }
}
