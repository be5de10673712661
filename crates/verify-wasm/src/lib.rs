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
//! its pubkey, else 0. The serializations are written to a scratch buffer
//! and hashed four at a time (`sha256.rs`) before the signature checks. Built for `wasm32-unknown-unknown` by
//! `js/scripts/build-verifier.sh`; the host build exists for tests.

#![cfg_attr(target_arch = "wasm32", no_std)]

mod hash;
mod nwb;
mod render;
mod sha256;
pub mod zstd;

pub use render::{check_list, render_records, ListError, Rendered};

use hash::{unhex, Buf, Hasher, Sink};

extern "C" {
    fn nw_xonly_parse(out64: *mut u8, in32: *const u8) -> i32;
    fn nw_schnorr_verify(sig64: *const u8, msg32: *const u8, xonly64: *const u8) -> i32;
    fn nw_schnorr_verify_batch(items: *const u8, n: usize) -> i32;
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

/// The signed fields of an event, as bytes.
pub(crate) struct Signed {
    pub(crate) pubkey: [u8; 32],
    pub(crate) id: [u8; 32],
    pub(crate) sig: [u8; 64],
}

/// An input form: how one entry turns into its serialization.
trait Form {
    /// Writes the canonical serialization of `entry` to `sink`; its signed
    /// fields, `None` if the event is invalid on its face, `Malformed` if
    /// the entry does not fit its layout.
    fn serialize<S: Sink>(entry: &[u8], sink: &mut S) -> Result<Option<Signed>, Malformed>;
}

/// Events packed as JSON fields (the crate docs).
struct Fields;

impl Form for Fields {
    fn serialize<S: Sink>(entry: &[u8], h: &mut S) -> Result<Option<Signed>, Malformed> {
        let mut c = Cursor {
            bytes: entry,
            at: 0,
        };
        let id_hex = c.take(64)?;
        let pubkey_hex = c.take(64)?;
        let sig_hex = c.take(128)?;
        let created_at = c.f64()?;
        let kind = c.f64()?;
        let (Some(id), Some(pubkey), Some(sig)) = (
            unhex::<32>(id_hex),
            unhex::<32>(pubkey_hex),
            unhex::<64>(sig_hex),
        ) else {
            return Ok(None);
        };
        let (Some(created_at), Some(kind)) = (as_integer(created_at), as_integer(kind)) else {
            return Ok(None);
        };

        h.put(b"[0,");
        h.json_str(pubkey_hex);
        h.byte(b',');
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
        Ok(Some(Signed { pubkey, id, sig }))
    }
}

/// nwb event records.
struct Records;

impl Form for Records {
    fn serialize<S: Sink>(record: &[u8], h: &mut S) -> Result<Option<Signed>, Malformed> {
        Ok(nwb::hash_record(record, h))
    }
}

/// Serializations waiting in the scratch buffer to be hashed together.
const GROUP: usize = 64;

struct Waiting {
    verdict: usize,
    start: usize,
    len: usize,
    signed: Signed,
}

impl Waiting {
    const EMPTY: Waiting = Waiting {
        verdict: 0,
        start: 0,
        len: 0,
        signed: Signed {
            pubkey: [0; 32],
            id: [0; 32],
            sig: [0; 64],
        },
    };
}

/// Hashes the waiting serializations four at a time, then checks ids and
/// signatures; the number valid.
fn settle(waiting: &[Waiting], scratch: &[u8], verdicts: &mut [u8], cache: &mut KeyCache) -> usize {
    let mut spans = [(0, 0); GROUP];
    for (s, w) in spans.iter_mut().zip(waiting) {
        *s = (w.start, w.len);
    }
    let mut digests = [[0u8; 32]; GROUP];
    let digests = &mut digests[..waiting.len()];
    sha256::digest_many(scratch, &spans[..waiting.len()], digests);
    let mut batch = Batch::new();
    for (w, d) in waiting.iter().zip(digests.iter()) {
        verdicts[w.verdict] = 0;
        if *d == w.signed.id {
            batch.push(cache, w.verdict, &w.signed);
        }
    }
    batch.settle(verdicts, cache)
}

/// Signatures checked together (`nw_schnorr_verify_batch` in `c/shim.c`).
const BATCH_MAX: usize = GROUP;
/// Bytes of one batch item: parsed key, x-only key, message, signature.
const BATCH_ITEM: usize = 192;

/// Signatures waiting to be checked in one BIP-340 batch, with the verdict
/// each one decides.
struct Batch {
    items: [u8; BATCH_MAX * BATCH_ITEM],
    verdicts: [usize; BATCH_MAX],
    len: usize,
}

impl Batch {
    fn new() -> Self {
        Batch {
            items: [0; BATCH_MAX * BATCH_ITEM],
            verdicts: [0; BATCH_MAX],
            len: 0,
        }
    }

    /// Adds a signature whose id matched; one with an invalid key is left
    /// out (its verdict stays 0).
    fn push(&mut self, cache: &mut KeyCache, verdict: usize, s: &Signed) {
        let Some(parsed) = cache.parsed(&s.pubkey) else {
            return;
        };
        let item = &mut self.items[self.len * BATCH_ITEM..][..BATCH_ITEM];
        item[..64].copy_from_slice(parsed);
        item[64..96].copy_from_slice(&s.pubkey);
        item[96..128].copy_from_slice(&s.id);
        item[128..].copy_from_slice(&s.sig);
        self.verdicts[self.len] = verdict;
        self.len += 1;
    }

    /// Whether every signature of the batch is valid (BIP-340 batch
    /// verification: wrong with probability at most 2^-126).
    fn accepts(&self) -> bool {
        // SAFETY: `len` items of BATCH_ITEM bytes, len ≤ BATCH_MAX.
        unsafe { nw_schnorr_verify_batch(self.items.as_ptr(), self.len) == 1 }
    }

    /// Checks the batch, writing its verdicts; the number valid. A batch
    /// that fails is checked one signature at a time, to find which.
    fn settle(&self, verdicts: &mut [u8], cache: &mut KeyCache) -> usize {
        if self.accepts() {
            for &v in &self.verdicts[..self.len] {
                verdicts[v] = 1;
            }
            return self.len;
        }
        let mut valid = 0;
        for (item, &v) in self
            .items
            .chunks_exact(BATCH_ITEM)
            .zip(&self.verdicts[..self.len])
        {
            let pubkey: &[u8; 32] = item[64..96].try_into().expect("32 bytes");
            let id: &[u8; 32] = item[96..128].try_into().expect("32 bytes");
            let sig: &[u8; 64] = item[128..].try_into().expect("64 bytes");
            let ok = signature_ok(cache, pubkey, id, sig);
            verdicts[v] = u8::from(ok);
            valid += usize::from(ok);
        }
        valid
    }
}

/// Checks each of the `verdicts.len()` length-prefixed entries of `input`
/// (which they must fill exactly), writing 1 or 0 per entry; the number of
/// valid ones. Serializations collect in `scratch` and are hashed in
/// groups; one that does not fit an empty `scratch` is hashed as it is
/// written.
fn verify_batch<F: Form>(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
    scratch: &mut [u8],
) -> Result<usize, Malformed> {
    let mut c = Cursor {
        bytes: input,
        at: 0,
    };
    let mut valid = 0;
    let mut waiting = [const { Waiting::EMPTY }; GROUP];
    let mut n = 0;
    let mut used = 0;
    for v in 0..verdicts.len() {
        let entry = c.string()?;
        let mut attempt = 0;
        let verdict = loop {
            let mut buf = Buf::new(&mut scratch[used..]);
            let Some(signed) = F::serialize(entry, &mut buf)? else {
                break Some(false);
            };
            if !buf.full {
                waiting[n] = Waiting {
                    verdict: v,
                    start: used,
                    len: buf.len,
                    signed,
                };
                used += buf.len;
                n += 1;
                break None;
            }
            if n > 0 && attempt == 0 {
                valid += settle(&waiting[..n], scratch, verdicts, cache);
                n = 0;
                used = 0;
                attempt = 1;
                continue;
            }
            // Larger than the whole scratch buffer.
            let mut h = Hasher::new();
            F::serialize(entry, &mut h)?;
            break Some(
                h.finish() == signed.id
                    && signature_ok(cache, &signed.pubkey, &signed.id, &signed.sig),
            );
        };
        if let Some(ok) = verdict {
            verdicts[v] = u8::from(ok);
            valid += usize::from(ok);
        }
        if n == GROUP {
            valid += settle(&waiting[..n], scratch, verdicts, cache);
            n = 0;
            used = 0;
        }
    }
    if c.at != input.len() {
        return Err(Malformed);
    }
    valid += settle(&waiting[..n], scratch, verdicts, cache);
    Ok(valid)
}

/// Scratch bytes the wasm build gives [`verify_events`] and
/// [`verify_records`]: a serialization longer than this is hashed as it is
/// written, without the other lanes.
pub const SCRATCH_BYTES: usize = 1 << 20;

/// Verifies the `verdicts.len()` events packed in `input` (JSON fields, see
/// the crate docs), writing 1 or 0 per event; the number of valid events.
/// `scratch` holds serializations between their writing and their hashing
/// (any size works; see [`SCRATCH_BYTES`]).
pub fn verify_events(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
    scratch: &mut [u8],
) -> Result<usize, Malformed> {
    verify_batch::<Fields>(input, verdicts, cache, scratch)
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
/// ones. `scratch` as for [`verify_events`].
pub fn verify_records(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
    scratch: &mut [u8],
) -> Result<usize, Malformed> {
    verify_batch::<Records>(input, verdicts, cache, scratch)
}

/// SHA-256 of each of the `digests.len() / 32` length-prefixed messages of
/// `input` (which they must fill exactly) into `digests`, hashed four at a
/// time as [`verify_events`] hashes ids; the number of messages.
pub fn sha256_many(input: &[u8], digests: &mut [u8]) -> Result<usize, Malformed> {
    if digests.len() % 32 != 0 {
        return Err(Malformed);
    }
    let mut c = Cursor {
        bytes: input,
        at: 0,
    };
    let mut spans = [(0usize, 0usize); sha256::MAX_MESSAGES];
    let mut out = [[0u8; 32]; sha256::MAX_MESSAGES];
    for group in digests.chunks_mut(32 * sha256::MAX_MESSAGES) {
        let n = group.len() / 32;
        for span in spans[..n].iter_mut() {
            let len = c.u32()?;
            *span = (c.at, len);
            c.take(len)?;
        }
        sha256::digest_many(input, &spans[..n], &mut out[..n]);
        for (g, d) in group.chunks_exact_mut(32).zip(out.iter()) {
            g.copy_from_slice(d);
        }
    }
    if c.at != input.len() {
        return Err(Malformed);
    }
    Ok(digests.len() / 32)
}

/// Bare BIP-340 checks: per item a 32-byte x-only key, a 32-byte message
/// and a 64-byte signature, `verdicts.len()` items; the number valid. For
/// callers that checked the ids themselves, and for the BIP-340 vectors.
/// Checked in batches as events are.
pub fn verify_signatures(
    input: &[u8],
    verdicts: &mut [u8],
    cache: &mut KeyCache,
) -> Result<usize, Malformed> {
    if input.len() != verdicts.len().checked_mul(128).ok_or(Malformed)? {
        return Err(Malformed);
    }
    let mut valid = 0;
    let mut batch = Batch::new();
    for (i, item) in input.chunks_exact(128).enumerate() {
        verdicts[i] = 0;
        let signed = Signed {
            pubkey: item[..32].try_into().map_err(|_| Malformed)?,
            id: item[32..64].try_into().map_err(|_| Malformed)?,
            sig: item[64..].try_into().map_err(|_| Malformed)?,
        };
        batch.push(cache, i, &signed);
        if batch.len == BATCH_MAX {
            valid += batch.settle(verdicts, cache);
            batch.len = 0;
        }
    }
    valid += batch.settle(verdicts, cache);
    Ok(valid)
}

/// One signature checked alone, as a batch that fails is (for the tests,
/// which compare the two).
#[cfg(test)]
fn verify_signature_alone(cache: &mut KeyCache, item: &[u8]) -> bool {
    let pubkey: &[u8; 32] = item[..32].try_into().unwrap();
    let msg: &[u8; 32] = item[32..64].try_into().unwrap();
    let sig: &[u8; 64] = item[64..128].try_into().unwrap();
    signature_ok(cache, pubkey, msg, sig)
}

/// The WebAssembly interface, used by `js/src/verify-wasm.ts`. Memory past
/// the linker's `__heap_base` and the zstd decoder (`zstd::wasm`) is one
/// region this module owns: `count` verdict bytes (rounded up to 8), then
/// the packed input.
#[cfg(target_arch = "wasm32")]
mod wasm {
    use super::KeyCache;
    use core::arch::wasm32::{memory_grow, memory_size};
    use core::cell::UnsafeCell;

    /// State of a single-threaded instance (each Web Worker has its own).
    struct Global<T>(UnsafeCell<T>);
    // SAFETY: wasm32-unknown-unknown without the atomics feature has one thread.
    unsafe impl<T> Sync for Global<T> {}
    static CACHE: Global<KeyCache> = Global(UnsafeCell::new(KeyCache::new()));
    static SCRATCH: Global<[u8; super::SCRATCH_BYTES]> =
        Global(UnsafeCell::new([0; super::SCRATCH_BYTES]));

    /// After the zstd decoder's memory (`zstd::wasm`), which starts at the
    /// linker's `__heap_base`.
    fn region() -> usize {
        super::zstd::wasm::region_start()
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
    type Batch = fn(&[u8], &mut [u8], &mut KeyCache, &mut [u8]) -> Result<usize, super::Malformed>;

    /// Runs `f` over `len` input bytes after `out` output bytes.
    fn run(out: usize, len: u32, f: Batch) -> i32 {
        let at = input_offset(out);
        if at + len as usize > memory_size(0) * 65536 {
            return -1;
        }
        // SAFETY: the region was reserved by `nw_reserve` (checked above),
        // the output and the input do not overlap, and nothing else in this
        // single-threaded instance holds the cache or the scratch buffer.
        let (input, output, cache, scratch) = unsafe {
            (
                core::slice::from_raw_parts(at as *const u8, len as usize),
                core::slice::from_raw_parts_mut(region() as *mut u8, out),
                &mut *CACHE.0.get(),
                &mut *SCRATCH.0.get(),
            )
        };
        match f(input, output, cache, scratch) {
            Ok(valid) => valid as i32,
            Err(_) => -1,
        }
    }

    /// Verifies `count` events packed as JSON fields in the `len` bytes at
    /// the input address; the number valid, or -1 if the buffer is malformed.
    #[no_mangle]
    pub extern "C" fn nw_verify_events(count: u32, len: u32) -> i32 {
        run(count as usize, len, super::verify_events)
    }

    /// Verifies `count` packed nwb records; as [`nw_verify_events`].
    #[no_mangle]
    pub extern "C" fn nw_verify_records(count: u32, len: u32) -> i32 {
        run(count as usize, len, super::verify_records)
    }

    /// Renders records of a batch list (each a varint length and the
    /// record) placed at the input address: from byte `at` of its `len`
    /// bytes, at most `count` records, as a JSON array into the `cap` bytes
    /// that follow the input (rounded up to 8) and a 16-byte head; with
    /// `records_cap` > 0 the event records too, into that many bytes after
    /// the JSON (`cap` rounded up to 8). The head: the JSON's length, the
    /// byte where the next record starts, the records' length, as `u32`s.
    /// Reserve with `nw_reserve(0, align8(len) + 16 + align8(cap) +
    /// records_cap)`. The number of records written, or -1 when a length
    /// runs past the list or `cap` is under 6 ([`super::render_records`]).
    #[no_mangle]
    pub extern "C" fn nw_render_records(
        len: u32,
        at: u32,
        count: u32,
        cap: u32,
        records_cap: u32,
    ) -> i32 {
        let input = input_offset(0);
        let head = input + ((len as usize + 7) & !7);
        let json = head + 16;
        let records = json + ((cap as usize + 7) & !7);
        if records + records_cap as usize > memory_size(0) * 65536 {
            return -1;
        }
        // SAFETY: reserved by `nw_reserve` (checked above); the list, the
        // head and both outputs do not overlap; the scratch buffer is this
        // instance's and no other call is running.
        let (list, head, json, records, scratch) = unsafe {
            (
                core::slice::from_raw_parts(input as *const u8, len as usize),
                core::slice::from_raw_parts_mut(head as *mut u8, 16),
                core::slice::from_raw_parts_mut(json as *mut u8, cap as usize),
                (records_cap > 0).then(|| {
                    core::slice::from_raw_parts_mut(records as *mut u8, records_cap as usize)
                }),
                &mut *SCRATCH.0.get(),
            )
        };
        let zstd = crate::zstd::wasm::decoder().ok();
        match super::render_records(
            list,
            at as usize,
            count as usize,
            json,
            records,
            scratch,
            zstd,
        ) {
            Ok(r) => {
                head[..4].copy_from_slice(&(r.len as u32).to_le_bytes());
                head[4..8].copy_from_slice(&(r.next as u32).to_le_bytes());
                head[8..12].copy_from_slice(&(r.records_len as u32).to_le_bytes());
                r.records as i32
            }
            Err(_) => -1,
        }
    }

    /// Checks the `count` records of the batch list of `len` bytes at the
    /// input address ([`super::check_list`]): 0, or a negative
    /// [`super::ListError::code`] (-1: outside the reserved memory).
    #[no_mangle]
    pub extern "C" fn nw_check_list(len: u32, count: u32) -> i32 {
        let input = input_offset(0);
        if input + len as usize > memory_size(0) * 65536 {
            return -1;
        }
        // SAFETY: in bounds (above); only read.
        let list = unsafe { core::slice::from_raw_parts(input as *const u8, len as usize) };
        match super::check_list(list, count as usize) {
            Ok(()) => 0,
            Err(e) => e.code(),
        }
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
        run(count as usize, len, |i, v, c, _| {
            super::verify_signatures(i, v, c)
        })
    }

    /// SHA-256 of `count` messages packed as a `u32` length and the bytes
    /// each, four at a time as the verifier hashes ids ([`super::sha256_many`]);
    /// the digests, 32 bytes each, where the verdicts go. Reserve with
    /// `nw_reserve(32 * count, len)`. For the tests of the hash.
    #[no_mangle]
    pub extern "C" fn nw_sha256_many(count: u32, len: u32) -> i32 {
        run(32 * count as usize, len, |i, d, _, _| {
            super::sha256_many(i, d)
        })
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        core::arch::wasm32::unreachable()
    }
}

#[cfg(test)]
mod tests;
