//! The payloads of compressed records (spec/nwb.md §11): magicless zstd
//! frames, with a dictionary of a set file (§11.2) or none, decompressed by
//! zstd's own decoder (`vendor/zstd/`, v1.5.7, decompression only, built by
//! `build.rs`; `c/zstd_shim.c`).
//!
//! Nothing allocates: [`Zstd`] lays a static `ZSTD_DCtx` and one static
//! `ZSTD_DDict` per dictionary (holding a copy of its bytes) in memory its
//! caller owns, [`Zstd::memory_needed`] bytes of it, at most
//! [`MAX_MEMORY_BYTES`]. The wasm build keeps that memory between the
//! linker's `__heap_base` and the region `nw_reserve` hands out (see
//! `wasm`).

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

extern "C" {
    fn nwz_dctx_bytes() -> usize;
    fn nwz_ddict_bytes(dict_len: usize) -> usize;
    fn nwz_init_dctx(mem: *mut c_void, size: usize) -> *mut c_void;
    fn nwz_init_ddict(mem: *mut c_void, size: usize, dict: *const u8, len: usize) -> *const c_void;
    fn nwz_decompress(
        dctx: *mut c_void,
        ddict: *const c_void,
        dst: *mut u8,
        cap: usize,
        src: *const u8,
        len: usize,
    ) -> i64;
}

/// The largest dictionary a set file may hold (§11.2).
pub const MAX_DICTIONARY_BYTES: usize = 16 << 20;

/// The most memory a prepared set may take: the decoder's context, the
/// table of dictionaries and each dictionary's prepared tables and copy.
/// A set needing more is refused ([`ZstdError::SetTooLarge`]) before any
/// of it is prepared. A set of a few dozen 110 KB dictionaries (what
/// `nostrwire dict train --per-kind` writes) takes a few megabytes.
pub const MAX_MEMORY_BYTES: usize = 64 << 20;

/// The largest record size `R` a compressed record may claim here
/// ([`parse_record`]); callers apply their own, smaller, `max_record_bytes`.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// `SET_MAGIC`, the version byte and the levels of §11.2.
const SET_MAGIC: &[u8; 4] = b"NWBD";
const SET_VERSION: u8 = 1;
const MAX_LEVEL: i8 = 19;
/// Dictionary selectors: 0 is the fallback, `k + 1` the dictionary of kind
/// `k`, kinds being 16-bit.
const MAX_SELECTOR: u64 = 0x1_0000;

/// zstd's `ZSTD_error_dstSize_tooSmall`: the frame holds more than `R` bytes.
const ZSTD_DST_TOO_SMALL: u32 = 70;

/// Why a frame, a record or a set file was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZstdError {
    /// The record names a dictionary id the loaded set does not hold.
    UnknownDictionary(u32),
    /// The payload is not one magicless zstd frame spanning all of it: a
    /// header or block runs past its end, a reserved bit or block type is
    /// set, it has a checksum (§11 frames carry none), or bytes follow its
    /// last block.
    Malformed,
    /// zstd refused the frame while decompressing it (its `ZSTD_ErrorCode`).
    Corrupt(u32),
    /// The frame decompresses to a size other than the record's `R`.
    WrongSize,
    /// A compressed record's envelope (`0x81`, varint `D`, varint `R`) is
    /// truncated, has an overlong or oversized varint, or claims more than
    /// [`MAX_RECORD_BYTES`].
    BadRecord,
    /// The set file breaks §11.2, for the reason given.
    BadSet(&'static str),
    /// zstd refused the set's dictionary with this id (malformed entropy
    /// tables).
    BadDictionary(u32),
    /// Preparing the set would take this many bytes, over
    /// [`MAX_MEMORY_BYTES`].
    SetTooLarge(usize),
    /// The memory given holds fewer than this many bytes (in the wasm
    /// build: memory cannot grow that far).
    NoMemory(usize),
}

impl ZstdError {
    /// The negative code the wasm exports return for this error (-1 is
    /// theirs: a call outside the reserved region).
    pub fn code(&self) -> i32 {
        match self {
            ZstdError::UnknownDictionary(_) => -2,
            ZstdError::Malformed => -3,
            ZstdError::Corrupt(_) => -4,
            ZstdError::WrongSize => -5,
            ZstdError::BadRecord => -6,
            ZstdError::BadSet(_) => -7,
            ZstdError::BadDictionary(_) => -8,
            ZstdError::SetTooLarge(_) => -9,
            ZstdError::NoMemory(_) => -10,
        }
    }
}

impl core::fmt::Display for ZstdError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ZstdError::UnknownDictionary(id) => write!(f, "unknown dictionary {id}"),
            ZstdError::Malformed => f.write_str("malformed zstd frame"),
            ZstdError::Corrupt(code) => write!(f, "zstd error {code}"),
            ZstdError::WrongSize => f.write_str("frame decompresses to another size"),
            ZstdError::BadRecord => f.write_str("malformed compressed record"),
            ZstdError::BadSet(why) => write!(f, "bad dictionary set: {why}"),
            ZstdError::BadDictionary(id) => write!(f, "dictionary {id} refused by zstd"),
            ZstdError::SetTooLarge(need) => write!(
                f,
                "dictionary set needs {need} bytes, over {MAX_MEMORY_BYTES}"
            ),
            ZstdError::NoMemory(need) => write!(f, "{need} bytes of memory unavailable"),
        }
    }
}

/// A compressed record's envelope (§11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed<'a> {
    /// `D`: the dictionary id, 0 for none.
    pub dictionary: u32,
    /// `R`: the size of the record inside.
    pub size: usize,
    /// The zstd frame.
    pub frame: &'a [u8],
}

/// Splits a compressed record (first byte `0x81`) into its envelope and
/// frame; `R` is checked against [`MAX_RECORD_BYTES`] only.
pub fn parse_record(record: &[u8]) -> Result<Compressed<'_>, ZstdError> {
    if record.first() != Some(&0x81) {
        return Err(ZstdError::BadRecord);
    }
    let mut r = Reader {
        bytes: record,
        pos: 1,
    };
    let dictionary = r.varint().map_err(|_| ZstdError::BadRecord)?;
    let size = r.varint().map_err(|_| ZstdError::BadRecord)?;
    if dictionary > u64::from(u32::MAX) || size > MAX_RECORD_BYTES as u64 {
        return Err(ZstdError::BadRecord);
    }
    Ok(Compressed {
        dictionary: dictionary as u32,
        size: size as usize,
        frame: &record[r.pos..],
    })
}

/// A cursor over a set file or record envelope.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    /// A minimal LEB128 varint (§4) below 2^53, as the TypeScript reader
    /// takes them; larger values are refused by every caller anyway.
    fn varint(&mut self) -> Result<u64, ZstdError> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = *self
                .bytes
                .get(self.pos)
                .ok_or(ZstdError::BadSet("truncated"))?;
            self.pos += 1;
            if shift == 49 && b > 0x0f {
                return Err(ZstdError::BadSet("varint too large"));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                if b == 0 && shift > 0 {
                    return Err(ZstdError::BadSet("overlong varint"));
                }
                return Ok(value);
            }
            shift += 7;
        }
    }
}

/// A set file's header and entries, every count and length checked.
struct SetFile<'a> {
    level: i8,
    count: usize,
    entries: Reader<'a>,
}

/// One entry of a set file: id, selector (0 fallback, `k + 1` kind `k`),
/// dictionary bytes.
struct SetEntry<'a> {
    id: u32,
    selector: u32,
    bytes: &'a [u8],
}

impl<'a> SetFile<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, ZstdError> {
        let bad = ZstdError::BadSet;
        if bytes.len() < 7 || &bytes[..4] != SET_MAGIC {
            return Err(bad("no NWBD magic"));
        }
        if bytes[4] != SET_VERSION {
            return Err(bad("unknown set file version"));
        }
        let level = bytes[5] as i8;
        if !(1..=MAX_LEVEL).contains(&level) {
            return Err(bad("level outside 1..19"));
        }
        let mut r = Reader { bytes, pos: 6 };
        let count = r.varint()?;
        // Each entry takes at least three bytes.
        if count > ((bytes.len() - r.pos) / 3) as u64 {
            return Err(bad("more entries than bytes"));
        }
        Ok(SetFile {
            level,
            count: count as usize,
            entries: r,
        })
    }

    /// The next entry, checked on its own (uniqueness is checked by
    /// [`Zstd::new`]); `None` after the last, once the file is seen to end
    /// there.
    fn next(&mut self, index: usize) -> Result<Option<SetEntry<'a>>, ZstdError> {
        let bad = ZstdError::BadSet;
        let r = &mut self.entries;
        if index == self.count {
            return if r.pos == r.bytes.len() {
                Ok(None)
            } else {
                Err(bad("bytes after the last dictionary"))
            };
        }
        let id = r.varint()?;
        let selector = r.varint()?;
        let length = r.varint()?;
        if id == 0 || id > u64::from(u32::MAX) {
            return Err(bad("dictionary id outside 1..2^32-1"));
        }
        if selector > MAX_SELECTOR {
            return Err(bad("kind above 65535"));
        }
        if length > MAX_DICTIONARY_BYTES as u64 {
            return Err(bad("dictionary over 16 MiB"));
        }
        let length = length as usize;
        if length > r.bytes.len() - r.pos {
            return Err(bad("truncated"));
        }
        let bytes = &r.bytes[r.pos..r.pos + length];
        r.pos += length;
        Ok(Some(SetEntry {
            id: id as u32,
            selector: selector as u32,
            bytes,
        }))
    }
}

/// A prepared dictionary: its id, selector, place in the set file and
/// `ZSTD_DDict`.
#[derive(Clone, Copy)]
struct Entry {
    id: u32,
    selector: u32,
    offset: usize,
    len: usize,
    ddict: *const c_void,
}

const fn align8(n: usize) -> usize {
    n.saturating_add(7) & !7
}

/// zstd's decoder with the dictionaries of one set file (or none), in
/// memory borrowed for `'m`: the context, then the table of dictionaries
/// sorted by id, then each `ZSTD_DDict` with its copy of the dictionary.
pub struct Zstd<'m> {
    dctx: NonNull<c_void>,
    entries: *const Entry,
    count: usize,
    level: Option<i8>,
    _memory: PhantomData<&'m mut [u64]>,
}

impl core::fmt::Debug for Zstd<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Zstd")
            .field("dictionaries", &self.count)
            .field("level", &self.level)
            .finish()
    }
}

impl<'m> Zstd<'m> {
    /// The bytes [`Zstd::new`] needs for `set` (a §11.2 set file, or `None`
    /// for no dictionaries), the file's structure checked on the way.
    pub fn memory_needed(set: Option<&[u8]>) -> Result<usize, ZstdError> {
        // SAFETY: plain functions of the sizes zstd's structures take.
        let mut need = align8(unsafe { nwz_dctx_bytes() });
        let Some(set) = set else { return Ok(need) };
        let mut file = SetFile::parse(set)?;
        need = need.saturating_add(align8(
            file.count.saturating_mul(core::mem::size_of::<Entry>()),
        ));
        if need > MAX_MEMORY_BYTES {
            return Err(ZstdError::SetTooLarge(need));
        }
        let mut i = 0;
        while let Some(entry) = file.next(i)? {
            // SAFETY: as above; the length is at most 16 MiB.
            need += align8(unsafe { nwz_ddict_bytes(entry.bytes.len()) });
            if need > MAX_MEMORY_BYTES {
                return Err(ZstdError::SetTooLarge(need));
            }
            i += 1;
        }
        Ok(need)
    }

    /// Prepares the decoder and `set`'s dictionaries (`None`: none) in
    /// `memory`, which must hold [`Zstd::memory_needed`] bytes. Ids and
    /// selectors must be unique, and zstd must accept every dictionary.
    pub fn new(memory: &'m mut [u64], set: Option<&[u8]>) -> Result<Self, ZstdError> {
        let need = Self::memory_needed(set)?;
        if memory.len() * 8 < need {
            return Err(ZstdError::NoMemory(need));
        }
        let base = memory.as_mut_ptr().cast::<u8>();
        // SAFETY: as in `memory_needed`.
        let dctx_bytes = align8(unsafe { nwz_dctx_bytes() });
        // SAFETY: `memory` is 8-aligned and holds `need >= dctx_bytes`
        // bytes, borrowed for 'm, so the context lives as long as `Self`.
        let dctx = unsafe { nwz_init_dctx(base.cast(), dctx_bytes) };
        let dctx = NonNull::new(dctx).ok_or(ZstdError::NoMemory(need))?;
        let Some(set) = set else {
            return Ok(Zstd {
                dctx,
                entries: core::ptr::null(),
                count: 0,
                level: None,
                _memory: PhantomData,
            });
        };
        let mut file = SetFile::parse(set)?;
        let count = file.count;
        // SAFETY: the table follows the context inside `need`; `Entry` needs
        // at most 8-byte alignment; every slot is written before it is read.
        let table =
            unsafe { core::slice::from_raw_parts_mut(base.add(dctx_bytes).cast::<Entry>(), count) };
        let mut at = dctx_bytes + align8(count * core::mem::size_of::<Entry>());
        let mut i = 0;
        while let Some(entry) = file.next(i)? {
            table[i] = Entry {
                id: entry.id,
                selector: entry.selector,
                offset: entry.bytes.as_ptr() as usize - set.as_ptr() as usize,
                len: entry.bytes.len(),
                ddict: core::ptr::null(),
            };
            i += 1;
        }
        table.sort_unstable_by_key(|e| e.selector);
        if table.windows(2).any(|w| w[0].selector == w[1].selector) {
            return Err(ZstdError::BadSet(
                "two dictionaries for one kind, or two fallbacks",
            ));
        }
        table.sort_unstable_by_key(|e| e.id);
        if table.windows(2).any(|w| w[0].id == w[1].id) {
            return Err(ZstdError::BadSet("duplicate dictionary id"));
        }
        for e in table.iter_mut() {
            let bytes = &set[e.offset..e.offset + e.len];
            // SAFETY: plain size function.
            let size = align8(unsafe { nwz_ddict_bytes(bytes.len()) });
            // SAFETY: `at + size <= need <= memory`, 8-aligned, disjoint from
            // the context, the table and the other dictionaries; zstd copies
            // the dictionary into it (ZSTD_dlm_byCopy).
            let ddict =
                unsafe { nwz_init_ddict(base.add(at).cast(), size, bytes.as_ptr(), bytes.len()) };
            if ddict.is_null() {
                return Err(ZstdError::BadDictionary(e.id));
            }
            e.ddict = ddict;
            at += size;
        }
        Ok(Zstd {
            dctx,
            entries: table.as_ptr(),
            count,
            level: Some(file.level),
            _memory: PhantomData,
        })
    }

    /// The number of dictionaries prepared.
    pub fn dictionaries(&self) -> usize {
        self.count
    }

    /// The zstd level the set's writer uses; `None` without a set.
    pub fn level(&self) -> Option<i8> {
        self.level
    }

    /// Decompresses the magicless frame `frame` with dictionary `dict_id`
    /// (0: none) into `out`, which it must fill exactly.
    pub fn decompress(
        &mut self,
        dict_id: u32,
        frame: &[u8],
        out: &mut [u8],
    ) -> Result<(), ZstdError> {
        let ddict = if dict_id == 0 {
            core::ptr::null()
        } else {
            // SAFETY: `entries` points at `count` initialized entries inside
            // the memory borrowed for 'm (or `count` is 0).
            let table = if self.count == 0 {
                &[][..]
            } else {
                unsafe { core::slice::from_raw_parts(self.entries, self.count) }
            };
            match table.binary_search_by_key(&dict_id, |e| e.id) {
                Ok(i) => table[i].ddict,
                Err(_) => return Err(ZstdError::UnknownDictionary(dict_id)),
            }
        };
        check_frame(frame)?;
        // SAFETY: the context and dictionary live in memory borrowed for 'm
        // and `&mut self` makes this the only call using the context; the
        // buffers are valid for their lengths; zstd writes at most
        // `out.len()` bytes and reads at most `frame.len()`.
        let r = unsafe {
            nwz_decompress(
                self.dctx.as_ptr(),
                ddict,
                out.as_mut_ptr(),
                out.len(),
                frame.as_ptr(),
                frame.len(),
            )
        };
        if r < 0 {
            let code = (-r) as u32;
            return Err(if code == ZSTD_DST_TOO_SMALL {
                ZstdError::WrongSize
            } else {
                ZstdError::Corrupt(code)
            });
        }
        if r as usize != out.len() {
            return Err(ZstdError::WrongSize);
        }
        Ok(())
    }
}

/// Checks that `frame` is one magicless frame spanning all its bytes
/// (RFC 8878 §3.1.1, without the magic number) with no checksum, walking
/// its header and block headers; zstd checks the rest while decompressing.
/// Without this, zstd would take bytes after the frame as further frames.
fn check_frame(frame: &[u8]) -> Result<(), ZstdError> {
    let len = frame.len();
    let fhd = *frame.first().ok_or(ZstdError::Malformed)?;
    // Reserved bit, and the checksum flag (§11 frames carry none; the
    // TypeScript decoder refuses it too).
    if fhd & 0x0c != 0 {
        return Err(ZstdError::Malformed);
    }
    let single = usize::from((fhd >> 5) & 1);
    let dict_id_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_bytes = [single, 2, 4, 8][usize::from(fhd >> 6)];
    let mut at = 1 + (1 - single) + dict_id_bytes + fcs_bytes;
    loop {
        if at + 3 > len {
            return Err(ZstdError::Malformed);
        }
        let header =
            u32::from(frame[at]) | u32::from(frame[at + 1]) << 8 | u32::from(frame[at + 2]) << 16;
        at += 3;
        let size = (header >> 3) as usize;
        let body = match (header >> 1) & 3 {
            0 | 2 => size,
            1 => 1,
            _ => return Err(ZstdError::Malformed),
        };
        if body > len - at {
            return Err(ZstdError::Malformed);
        }
        at += body;
        if header & 1 == 1 {
            break;
        }
    }
    if at != len {
        return Err(ZstdError::Malformed);
    }
    Ok(())
}

/// The most dictionary sets the wasm build holds prepared at once: a page
/// reading several relays, each with its own set, switches between them
/// without preparing a set again.
pub const MAX_HELD_SETS: usize = 4;

/// The most memory the held sets take together (each at most
/// [`MAX_MEMORY_BYTES`] on its own).
pub const MAX_HELD_BYTES: usize = 64 << 20;

/// The WebAssembly interface. Memory from the linker's `__heap_base`
/// (8-aligned) is laid out as
///
/// ```text
/// [ no-set decoder ][ held set 0 ]...[ held set n-1 ][ region of nw_reserve ... ]
/// ```
///
/// The decoder without dictionaries is the `ZSTD_DCtx` alone (about 95 KB
/// on wasm32); each held set is a decoder with its dictionaries
/// ([`Zstd::memory_needed`] bytes). The region `nw_reserve` hands out
/// (verdicts, then input) starts after the last held set
/// ([`region_start`]): loading a set moves it, so callers ask
/// `nw_reserve` again after `nw_zstd_load_set`, as they do before every
/// call. Up to [`MAX_HELD_SETS`] sets and [`MAX_HELD_BYTES`] are held; a
/// set that does not fit replaces the sets loaded last, as many as it
/// takes. One of them (or the no-set decoder) is in use:
/// `nw_zstd_load_set` selects the set it loads, `nw_zstd_use_set` another.
#[cfg(target_arch = "wasm32")]
pub(crate) mod wasm {
    use super::{parse_record, Zstd, ZstdError, MAX_HELD_BYTES, MAX_HELD_SETS};
    use core::arch::wasm32::{memory_grow, memory_size};
    use core::cell::UnsafeCell;

    extern "C" {
        static __heap_base: u8;
    }

    struct Global<T>(UnsafeCell<T>);
    // SAFETY: wasm32-unknown-unknown without the atomics feature has one thread.
    unsafe impl<T> Sync for Global<T> {}

    /// The decoders and where their memory ends.
    struct Held {
        /// The decoder without dictionaries, made on first use.
        plain: Option<Zstd<'static>>,
        /// The held sets, in the order they were loaded (and lie in memory).
        sets: [Option<Zstd<'static>>; MAX_HELD_SETS],
        /// Where each held set's memory ends.
        ends: [usize; MAX_HELD_SETS],
        count: usize,
        /// The set in use; `None`: the decoder without dictionaries.
        current: Option<usize>,
    }

    static HELD: Global<Held> = Global(UnsafeCell::new(Held {
        plain: None,
        sets: [None, None, None, None],
        ends: [0; MAX_HELD_SETS],
        count: 0,
        current: None,
    }));

    /// SAFETY: single-threaded instance; callers keep the reference for
    /// one export call and take no second one meanwhile.
    fn held() -> &'static mut Held {
        unsafe { &mut *HELD.0.get() }
    }

    fn base() -> usize {
        // Only the address of the linker's symbol is taken.
        (core::ptr::addr_of!(__heap_base) as usize + 7) & !7
    }

    /// Where the held sets start: after the decoder without dictionaries.
    fn sets_start() -> usize {
        // The size of a context without dictionaries cannot fail.
        base() + Zstd::memory_needed(None).unwrap_or(0)
    }

    /// Where held set `i` starts (`i == count`: where the next one would).
    fn start(h: &Held, i: usize) -> usize {
        if i == 0 {
            sets_start()
        } else {
            h.ends[i - 1]
        }
    }

    /// Where the region of `nw_reserve` starts: after the held sets.
    pub(crate) fn region_start() -> usize {
        let h = held();
        start(h, h.count)
    }

    /// Grows memory to at least `end` bytes.
    fn ensure(end: usize) -> Result<(), ZstdError> {
        let have = memory_size(0) * 65536;
        if end > have && memory_grow(0, (end - have).div_ceil(65536)) == usize::MAX {
            return Err(ZstdError::NoMemory(end));
        }
        Ok(())
    }

    /// The `words` 8-byte words at `at`, which memory holds.
    ///
    /// SAFETY: `at` is 8-aligned, memory holds `at + 8 * words` bytes, and
    /// nothing else uses those bytes while the slice lives.
    unsafe fn words(at: usize, words: usize) -> &'static mut [u64] {
        // SAFETY: the caller's.
        unsafe { core::slice::from_raw_parts_mut(at as *mut u64, words) }
    }

    /// The decoder in use: a held set's, or the one without dictionaries
    /// (made on first use).
    pub(crate) fn decoder() -> Result<&'static mut Zstd<'static>, ZstdError> {
        let h = held();
        if let Some(i) = h.current {
            return h.sets[i].as_mut().ok_or(ZstdError::NoMemory(0));
        }
        if h.plain.is_none() {
            let need = sets_start() - base();
            ensure(sets_start())?;
            // SAFETY: [base, sets_start) is this decoder's and nothing
            // else's; memory holds it (above).
            let memory = unsafe { words(base(), need / 8) };
            h.plain = Some(Zstd::new(memory, None)?);
        }
        // Set just above.
        h.plain.as_mut().ok_or(ZstdError::NoMemory(0))
    }

    /// The `len` input bytes at `at`, if memory holds them.
    fn input(at: usize, len: usize) -> Option<&'static [u8]> {
        if at + len > memory_size(0) * 65536 {
            return None;
        }
        // SAFETY: in bounds (above); the input is only read.
        Some(unsafe { core::slice::from_raw_parts(at as *const u8, len) })
    }

    fn load(len: usize) -> Result<usize, ZstdError> {
        let h = held();
        let at = start(h, h.count);
        let set = input(at, len).ok_or(ZstdError::NoMemory(at + len))?;
        // The file's structure is checked here, before any set makes way.
        let need = Zstd::memory_needed(Some(set))?;
        // The sets loaded last make way for it, as many as it takes.
        let mut keep = h.count;
        while keep > 0
            && (keep == MAX_HELD_SETS || start(h, keep) - sets_start() + need > MAX_HELD_BYTES)
        {
            keep -= 1;
        }
        if keep < h.count {
            // Sets make way only for a set zstd takes: a trial in free
            // memory first (a set loaded beside them needs none: refused,
            // it leaves them as they were).
            let trial = (at + len + 7) & !7;
            ensure(trial + need)?;
            // SAFETY: past the input, inside memory (above); dropped at once.
            Zstd::new(unsafe { words(trial, need / 8) }, Some(set))?;
        }
        for slot in &mut h.sets[keep..] {
            *slot = None;
        }
        h.count = keep;
        if h.current.is_some_and(|i| i >= keep) {
            h.current = None;
        }
        // The input moves past where the decoder goes, which zstd reads
        // while it prepares the dictionaries into their own copies.
        let to = start(h, keep);
        ensure(to + need + len)?;
        // SAFETY: both ranges are inside memory, past the kept sets;
        // `copy` allows overlap.
        unsafe { core::ptr::copy(at as *const u8, (to + need) as *mut u8, len) };
        // SAFETY: [to + need, + len) is inside memory and only read.
        let set = unsafe { core::slice::from_raw_parts((to + need) as *const u8, len) };
        // SAFETY: [to, to + need) is past the kept sets and nothing else's.
        let zstd = Zstd::new(unsafe { words(to, need / 8) }, Some(set))?;
        let count = zstd.dictionaries();
        h.sets[keep] = Some(zstd);
        h.ends[keep] = to + need;
        h.count = keep + 1;
        h.current = Some(keep);
        Ok(count)
    }

    /// Loads the set file (spec/nwb.md §11.2) of `len` bytes placed at the
    /// input address (`nw_reserve(0, len)`) as the last held set and uses
    /// it: the number of dictionaries, or a negative [`ZstdError::code`].
    /// A refused set leaves the held sets, and the one in use, as they
    /// were. The region moves: call `nw_reserve` again.
    #[no_mangle]
    pub extern "C" fn nw_zstd_load_set(len: u32) -> i32 {
        match load(len as usize) {
            Ok(count) => count as i32,
            Err(e) => e.code(),
        }
    }

    /// How many sets are held: the last loaded is `nw_zstd_sets() - 1`.
    #[no_mangle]
    pub extern "C" fn nw_zstd_sets() -> u32 {
        held().count as u32
    }

    /// Uses held set `index` (in load order) for what follows, or with
    /// `u32::MAX` the decoder without dictionaries: 0, or -1 if no set is
    /// held there.
    #[no_mangle]
    pub extern "C" fn nw_zstd_use_set(index: u32) -> i32 {
        let h = held();
        if index == u32::MAX {
            h.current = None;
            return 0;
        }
        let i = index as usize;
        if i >= h.count {
            return -1;
        }
        h.current = Some(i);
        0
    }

    /// Decompresses the magicless frame of `len` bytes at the input address
    /// with dictionary `dict` (0: none) into the `out_len` bytes after it
    /// (reserve with `nw_reserve(0, len + out_len)`): 0, or a negative
    /// [`ZstdError::code`] (-1: outside the reserved memory).
    #[no_mangle]
    pub extern "C" fn nw_zstd_decompress(dict: u32, len: u32, out_len: u32) -> i32 {
        let zstd = match decoder() {
            Ok(z) => z,
            Err(e) => return e.code(),
        };
        let (at, len, out_len) = (region_start(), len as usize, out_len as usize);
        if at + len + out_len > memory_size(0) * 65536 {
            return -1;
        }
        // SAFETY: in bounds (above), disjoint, and past the decoder.
        let (frame, out) = unsafe {
            (
                core::slice::from_raw_parts(at as *const u8, len),
                core::slice::from_raw_parts_mut((at + len) as *mut u8, out_len),
            )
        };
        match zstd.decompress(dict, frame, out) {
            Ok(()) => 0,
            Err(e) => e.code(),
        }
    }

    /// Decompresses `count` compressed records (spec/nwb.md §11) packed as
    /// a little-endian `u32` length and the record each (as
    /// `nw_verify_records` takes records) in the `len` input bytes
    /// (`nw_reserve(0, len)`), one after another into memory past the
    /// input: the total bytes decompressed, or a negative
    /// [`ZstdError::code`] for the first that fails (-1: the buffer is
    /// malformed). For the benchmarks.
    #[no_mangle]
    pub extern "C" fn nw_zstd_decompress_records(count: u32, len: u32) -> i32 {
        match records(count as usize, len as usize) {
            Ok(total) => total.min(i32::MAX as usize) as i32,
            Err(code) => code,
        }
    }

    fn records(count: usize, len: usize) -> Result<usize, i32> {
        let zstd = decoder().map_err(|e| e.code())?;
        let at = region_start();
        let input = input(at, len).ok_or(-1)?;
        let out_at = at + len;
        let mut pos = 0;
        let mut total = 0;
        for _ in 0..count {
            let n = input.get(pos..pos + 4).ok_or(-1)?;
            let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize;
            let record = input.get(pos + 4..pos + 4 + n).ok_or(-1)?;
            pos += 4 + n;
            let c = parse_record(record).map_err(|e| e.code())?;
            ensure(out_at + c.size).map_err(|e| e.code())?;
            // SAFETY: past the input, inside memory (above).
            let out = unsafe { core::slice::from_raw_parts_mut(out_at as *mut u8, c.size) };
            zstd.decompress(c.dictionary, c.frame, out)
                .map_err(|e| e.code())?;
            total += c.size;
        }
        if pos != len {
            return Err(-1);
        }
        Ok(total)
    }
}

#[cfg(test)]
#[path = "zstd_tests.rs"]
pub(crate) mod tests;
