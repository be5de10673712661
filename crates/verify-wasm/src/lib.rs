//! Nostr event verification built for WebAssembly: libsecp256k1 (BIP-340,
//! the 10×26 field) with the id's canonical serialization and SHA-256
//! computed here too, many events per call, parsed x-only keys cached.
//!
//! Two inputs, both one packed buffer of many events:
//! - **JSON fields** ([`verify_events`]): per event a little-endian `u32`
//!   length of what follows, then `id`, `pubkey` and `sig` as 64, 64 and
//!   128 ASCII bytes of lowercase hex, `created_at` and `kind` as `f64`,
//!   a `u32` tag count, per tag a `u32` element count and per element a
//!   `u32` byte length and UTF-8 bytes, then the content as a `u32` length
//!   and UTF-8 bytes (what `js/src/verify-wasm.ts` writes);
//! - **nwb records** ([`verify_records`]): per record a `u32` length and an
//!   event record (form byte `0x01`, spec/nwb.md), checked as a decoder
//!   checks it.
//!
//! One verdict byte per event: 1 when the event is well formed, its id is
//! the hash of its canonical serialization and its signature is valid for
//! its pubkey, else 0. Built for `wasm32-unknown-unknown` by
//! `js/scripts/build-verifier.sh`; the host build exists for tests.

#![cfg_attr(target_arch = "wasm32", no_std)]

mod hash;
mod nwb;

use hash::{unhex, Hasher};

extern "C" {
    fn nw_xonly_parse(out64: *mut u8, in32: *const u8) -> i32;
    fn nw_schnorr_verify(sig64: *const u8, msg32: *const u8, xonly64: *const u8) -> i32;
}

/// The packed buffer does not hold the number of entries it was said to, or
/// an entry's lengths run past it: a bug of whoever packed it, not a bad
/// event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

const CACHE_SLOTS: usize = 1024;

#[derive(Clone, Copy)]
struct Slot {
    key: [u8; 32],
    parsed: [u8; 64],
    full: bool,
}

/// Parsed x-only public keys, direct-mapped by their first bytes: authors
/// repeat within a REQ, and parsing a key costs a square root. Only valid
/// keys are kept.
pub struct KeyCache {
    slots: [Slot; CACHE_SLOTS],
}

impl core::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyCache")
            .field("used", &self.slots.iter().filter(|s| s.full).count())
            .finish()
    }
}

impl KeyCache {
    /// An empty cache.
    pub const fn new() -> Self {
        KeyCache {
            slots: [Slot {
                key: [0; 32],
                parsed: [0; 64],
                full: false,
            }; CACHE_SLOTS],
        }
    }

    /// Forgets every key (the benchmarks time cold caches).
    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.full = false;
        }
    }

    fn parsed(&mut self, key: &[u8; 32]) -> Option<&[u8; 64]> {
        let i = usize::from(u16::from_le_bytes([key[0], key[1]])) % CACHE_SLOTS;
        let slot = &mut self.slots[i];
        if !(slot.full && slot.key == *key) {
            let mut parsed = [0u8; 64];
            // SAFETY: 64 bytes out, 32 bytes in, as the shim's signature says.
            if unsafe { nw_xonly_parse(parsed.as_mut_ptr(), key.as_ptr()) } != 1 {
                return None;
            }
            *slot = Slot {
                key: *key,
                parsed,
                full: true,
            };
        }
        Some(&slot.parsed)
    }
}

impl Default for KeyCache {
    fn default() -> Self {
        Self::new()
    }
}

fn signature_ok(cache: &mut KeyCache, pubkey: &[u8; 32], id: &[u8; 32], sig: &[u8; 64]) -> bool {
    let Some(parsed) = cache.parsed(pubkey) else {
        return false;
    };
    // SAFETY: 64-byte signature, 32-byte message, a parsed key.
    unsafe { nw_schnorr_verify(sig.as_ptr(), id.as_ptr(), parsed.as_ptr()) == 1 }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.bytes.len() - self.at {
            return Err(Malformed);
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<usize, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn f64(&mut self) -> Result<f64, Malformed> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes(b.try_into().map_err(|_| Malformed)?))
    }

    fn string(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.u32()?;
        self.take(n)
    }
}

/// A JSON integer as `JSON.stringify` writes it, for integers it writes
/// without an exponent (|v| ≤ 2^53 − 1, which the packer ensures).
fn as_integer(v: f64) -> Option<i64> {
    let i = v as i64;
    (i as f64 == v && i.unsigned_abs() < (1 << 53)).then_some(i)
}

/// One packed event: the verdict, or `Malformed` if its fields do not fit.
fn verify_packed_event(entry: &[u8], cache: &mut KeyCache) -> Result<bool, Malformed> {
    let mut c = Cursor {
        bytes: entry,
        at: 0,
    };
    let id_hex = c.take(64)?;
    let pubkey_hex = c.take(64)?;
    let sig_hex = c.take(128)?;
    let created_at = c.f64()?;
    let kind = c.f64()?;

    let mut h = Hasher::new();
    h.put(b"[0,");
    h.json_str(pubkey_hex);
    h.byte(b',');
    let (Some(created_at), Some(kind)) = (as_integer(created_at), as_integer(kind)) else {
        return Ok(false);
    };
    h.json_int(created_at);
    h.byte(b',');
    h.json_int(kind);
    h.put(b",[");
    let tags = c.u32()?;
    for i in 0..tags {
        if i > 0 {
            h.byte(b',');
        }
        h.byte(b'[');
        let elements = c.u32()?;
        for j in 0..elements {
            if j > 0 {
                h.byte(b',');
            }
            h.json_str(c.string()?);
        }
        h.byte(b']');
    }
    h.put(b"],");
    h.json_str(c.string()?);
    h.byte(b']');
    if c.at != entry.len() {
        return Err(Malformed);
    }

    let (Some(id), Some(pubkey), Some(sig)) = (
        unhex::<32>(id_hex),
        unhex::<32>(pubkey_hex),
        unhex::<64>(sig_hex),
    ) else {
        return Ok(false);
    };
    if h.finish() != id {
        return Ok(false);
    }
    Ok(signature_ok(cache, &pubkey, &id, &sig))
}

/// Runs `check` on each of the `verdicts.len()` length-prefixed entries of
/// `input`, writing 1 or 0 per entry; the number of valid ones. The entries
/// must fill `input` exactly.
fn each_entry(
    input: &[u8],
    verdicts: &mut [u8],
    mut check: impl FnMut(&[u8]) -> Result<bool, Malformed>,
) -> Result<usize, Malformed> {
    let mut c = Cursor {
        bytes: input,
        at: 0,
    };
    let mut valid = 0;
    for v in verdicts.iter_mut() {
        let ok = check(c.string()?)?;
        *v = u8::from(ok);
        valid += usize::from(ok);
    }
    if c.at != input.len() {
        return Err(Malformed);
    }
    Ok(valid)
}

/// Verifies the `verdicts.len()` events packed in `input` (JSON fields, see
/// the crate docs), writing 1 or 0 per event; the number of valid events.
pub fn verify_events(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
) -> Result<usize, Malformed> {
    each_entry(input, verdicts, |entry| verify_packed_event(entry, cache))
}

/// One nwb event record: valid record, id and signature.
pub fn verify_record(record: &[u8], cache: &mut KeyCache) -> bool {
    let mut h = Hasher::new();
    let Some(signed) = nwb::hash_record(record, &mut h) else {
        return false;
    };
    h.finish() == signed.id && signature_ok(cache, &signed.pubkey, &signed.id, &signed.sig)
}

/// Verifies the `verdicts.len()` records packed in `input` (each a `u32`
/// length and the record), writing 1 or 0 per record; the number of valid
/// ones.
pub fn verify_records(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
) -> Result<usize, Malformed> {
    each_entry(input, verdicts, |record| Ok(verify_record(record, cache)))
}

/// Bare BIP-340 checks: per item a 32-byte x-only key, a 32-byte message
/// and a 64-byte signature, `verdicts.len()` items; the number valid. For
/// callers that checked the ids themselves, and for the BIP-340 vectors.
pub fn verify_signatures(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
) -> Result<usize, Malformed> {
    if input.len() != verdicts.len().checked_mul(128).ok_or(Malformed)? {
        return Err(Malformed);
    }
    let mut valid = 0;
    for (item, v) in input.chunks_exact(128).zip(verdicts.iter_mut()) {
        let pubkey: &[u8; 32] = item[..32].try_into().map_err(|_| Malformed)?;
        let msg: &[u8; 32] = item[32..64].try_into().map_err(|_| Malformed)?;
        let sig: &[u8; 64] = item[64..].try_into().map_err(|_| Malformed)?;
        let ok = signature_ok(cache, pubkey, msg, sig);
        *v = u8::from(ok);
        valid += usize::from(ok);
    }
    Ok(valid)
}

/// The WebAssembly interface, used by `js/src/verify-wasm.ts`. Memory past
/// the linker's `__heap_base` is one region this module owns: `count`
/// verdict bytes (rounded up to 8), then the packed input.
#[cfg(target_arch = "wasm32")]
mod wasm {
    use super::KeyCache;
    use core::arch::wasm32::{memory_grow, memory_size};
    use core::cell::UnsafeCell;

    extern "C" {
        static __heap_base: u8;
    }

    /// State of a single-threaded instance (each Web Worker has its own).
    struct Global(UnsafeCell<KeyCache>);
    // SAFETY: wasm32-unknown-unknown without the atomics feature has one thread.
    unsafe impl Sync for Global {}
    static CACHE: Global = Global(UnsafeCell::new(KeyCache::new()));

    fn region() -> usize {
        // Only the address of the linker's symbol is taken.
        let base = core::ptr::addr_of!(__heap_base) as usize;
        (base + 7) & !7
    }

    fn input_offset(count: usize) -> usize {
        region() + ((count + 7) & !7)
    }

    /// Room for `count` verdicts and `len` input bytes; the address where
    /// the input goes, or 0 if memory cannot grow that far.
    #[no_mangle]
    pub extern "C" fn nw_reserve(count: u32, len: u32) -> usize {
        let end = input_offset(count as usize) + len as usize;
        let have = memory_size(0) * 65536;
        if end > have {
            let pages = (end - have).div_ceil(65536);
            if memory_grow(0, pages) == usize::MAX {
                return 0;
            }
        }
        input_offset(count as usize)
    }

    /// Where the verdicts of the last call are.
    #[no_mangle]
    pub extern "C" fn nw_verdicts() -> usize {
        region()
    }

    /// One of the crate's batch functions.
    type Batch = fn(&[u8], &mut [u8], &mut KeyCache) -> Result<usize, super::Malformed>;

    fn run(count: u32, len: u32, f: Batch) -> i32 {
        let count = count as usize;
        let at = input_offset(count);
        if at + len as usize > memory_size(0) * 65536 {
            return -1;
        }
        // SAFETY: the region was reserved by `nw_reserve` (checked above),
        // the verdicts and the input do not overlap, and nothing else in
        // this single-threaded instance holds the cache.
        let (input, verdicts, cache) = unsafe {
            (
                core::slice::from_raw_parts(at as *const u8, len as usize),
                core::slice::from_raw_parts_mut(region() as *mut u8, count),
                &mut *CACHE.0.get(),
            )
        };
        match f(input, verdicts, cache) {
            Ok(valid) => valid as i32,
            Err(_) => -1,
        }
    }

    /// Verifies `count` events packed as JSON fields in the `len` bytes at
    /// the input address; the number valid, or -1 if the buffer is malformed.
    #[no_mangle]
    pub extern "C" fn nw_verify_events(count: u32, len: u32) -> i32 {
        run(count, len, super::verify_events)
    }

    /// Verifies `count` packed nwb records; as [`nw_verify_events`].
    #[no_mangle]
    pub extern "C" fn nw_verify_records(count: u32, len: u32) -> i32 {
        run(count, len, super::verify_records)
    }

    /// Empties the key cache.
    #[no_mangle]
    pub extern "C" fn nw_clear_keys() {
        // SAFETY: single-threaded instance; no call is running.
        unsafe { (*CACHE.0.get()).clear() };
    }

    /// Bare signature checks ([`super::verify_signatures`]).
    #[no_mangle]
    pub extern "C" fn nw_verify_signatures(count: u32, len: u32) -> i32 {
        run(count, len, super::verify_signatures)
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        core::arch::wasm32::unreachable()
    }
}

#[cfg(test)]
mod tests;
