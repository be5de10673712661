//! BIP-340 signatures checked many at a time, for native builds.
//!
//! A [`Batch`] collects up to [`BATCH_MAX`] signatures and checks them with
//! one multi-scalar multiplication (BIP-340's batch verification, in the C
//! of `crates/verify-wasm/c/shim.c` on the vendored libsecp256k1): valid
//! exactly when every signature is, except with probability at most
//! 2^-126 for a batch holding an invalid one. The randomizers are drawn
//! from a hash of the whole batch, so invalid signatures cannot be made to
//! cancel out. A batch that fails says nothing about which signature is
//! bad: the caller checks them one by one (with the same library as ever),
//! so a batch never changes a verdict, only what it costs.
//!
//! Keys are parsed once (a square root on the curve) and kept in a small
//! direct-mapped cache per [`Batch`], since the same authors sign event
//! after event.

use std::fmt;

extern "C" {
    fn nw_xonly_parse(out64: *mut u8, in32: *const u8) -> i32;
    fn nw_schnorr_verify(sig64: *const u8, msg32: *const u8, xonly64: *const u8) -> i32;
    fn nw_schnorr_verify_batch(items: *const u8, n: usize) -> i32;
}

/// Signatures one batch check takes at most (`NW_BATCH_MAX` in the C).
pub const BATCH_MAX: usize = 64;

/// Slots of a batch's cache of parsed keys (96 bytes each).
const KEY_CACHE_SLOTS: usize = 1024;

/// A key and its parsed form (`nw_xonly_parse`), or nothing.
type KeySlot = Option<([u8; 32], [u8; 64])>;

/// One signature, as the C reads it: the parsed key, the x-only key, the
/// 32-byte message and the 64-byte signature (192 bytes, no padding).
#[derive(Clone, Copy)]
#[repr(C)]
struct Item {
    parsed_key: [u8; 64],
    key: [u8; 32],
    message: [u8; 32],
    signature: [u8; 64],
}

const _: () = assert!(std::mem::size_of::<Item>() == 192);

/// Signatures waiting to be checked together.
pub struct Batch {
    items: Vec<Item>,
    keys: Box<[KeySlot]>,
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("len", &self.items.len())
            .finish_non_exhaustive()
    }
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// An empty batch with an empty key cache.
    pub fn new() -> Batch {
        Batch {
            items: Vec::with_capacity(BATCH_MAX),
            keys: vec![None; KEY_CACHE_SLOTS].into_boxed_slice(),
        }
    }

    /// Signatures waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no signature waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether the batch holds [`BATCH_MAX`] signatures.
    pub fn is_full(&self) -> bool {
        self.items.len() >= BATCH_MAX
    }

    /// Adds the signature `signature` of `message` by the x-only key `key`.
    /// `false` (and nothing added) when the key is not on the curve or the
    /// batch is full: such a signature is for a single check to refuse.
    pub fn push(&mut self, key: &[u8; 32], message: &[u8; 32], signature: &[u8; 64]) -> bool {
        if self.is_full() {
            return false;
        }
        let Some(parsed_key) = self.parsed_key(key) else {
            return false;
        };
        self.items.push(Item {
            parsed_key,
            key: *key,
            message: *message,
            signature: *signature,
        });
        true
    }

    /// Drops the signatures waiting, unchecked.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Whether every signature waiting is valid (with the probability in
    /// the crate's documentation); the batch is emptied either way. An
    /// empty batch is valid.
    pub fn verify(&mut self) -> bool {
        let n = self.items.len();
        // SAFETY: `n` ≤ BATCH_MAX items of 192 bytes each (`Item` is
        // `repr(C)` of byte arrays), as `nw_schnorr_verify_batch` reads
        // them; the C keeps no pointer after returning.
        let valid = unsafe { nw_schnorr_verify_batch(self.items.as_ptr().cast(), n) == 1 };
        self.items.clear();
        valid
    }

    /// Checks each signature waiting on its own, in the order pushed; the
    /// batch is emptied. What a caller does after [`Batch::verify`] fails.
    pub fn verify_each(&mut self) -> Vec<bool> {
        let verdicts = self
            .items
            .iter()
            .map(|item| {
                // SAFETY: three buffers of the sizes the C reads (64, 32
                // and a parsed key of 64 bytes).
                unsafe {
                    nw_schnorr_verify(
                        item.signature.as_ptr(),
                        item.message.as_ptr(),
                        item.parsed_key.as_ptr(),
                    ) == 1
                }
            })
            .collect();
        self.items.clear();
        verdicts
    }

    /// `key` parsed, from the cache when it was seen lately.
    fn parsed_key(&mut self, key: &[u8; 32]) -> Option<[u8; 64]> {
        let slot = usize::from(u16::from_le_bytes([key[0], key[1]])) % KEY_CACHE_SLOTS;
        if let Some((cached, parsed)) = &self.keys[slot] {
            if cached == key {
                return Some(*parsed);
            }
        }
        let mut parsed = [0u8; 64];
        // SAFETY: a 64-byte output and a 32-byte input, as the C expects.
        if unsafe { nw_xonly_parse(parsed.as_mut_ptr(), key.as_ptr()) } != 1 {
            return None;
        }
        self.keys[slot] = Some((*key, parsed));
        Some(parsed)
    }
}

/// Checks `signatures` (key, message, signature) in batches of up to
/// [`BATCH_MAX`], a batch that fails one by one: one verdict each, as single
/// checks would give.
pub fn verify_all(batch: &mut Batch, signatures: &[([u8; 32], [u8; 32], [u8; 64])]) -> Vec<bool> {
    let mut verdicts = Vec::with_capacity(signatures.len());
    for group in signatures.chunks(BATCH_MAX) {
        let pushed: Vec<bool> = group
            .iter()
            .map(|(key, message, signature)| batch.push(key, message, signature))
            .collect();
        let each = if batch.verify() {
            vec![true; batch_len(&pushed)]
        } else {
            for ((key, message, signature), _) in group.iter().zip(&pushed).filter(|(_, p)| **p) {
                batch.push(key, message, signature);
            }
            batch.verify_each()
        };
        let mut each = each.into_iter();
        verdicts.extend(pushed.iter().map(|&p| p && each.next().unwrap_or(false)));
    }
    verdicts
}

fn batch_len(pushed: &[bool]) -> usize {
    pushed.iter().filter(|p| **p).count()
}

#[cfg(test)]
mod tests;
