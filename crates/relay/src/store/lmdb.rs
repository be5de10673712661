//! The LMDB backend: each event stored once as an nwb record, with indices
//! for id, time, kind, author, author+kind, tags, replaceable addresses,
//! deletion tombstones and expiration, and a NIP-50 inverted index of event
//! text. Layout: `docs/design-store.md`.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, PutFlags, RoTxn, RwTxn};
use nostrwire_event::{EventId, Filter, Kind, PreimageFields, PublicKey, SignedFields, Timestamp};
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor};
use nostrwire_wire::{EventView, Value};

use super::plan::{plan, Plan, QueryCursor, Ranked, ScanStatus, SearchTail};
use super::schema::{self, table, Posting, TimeKey, TIME_SUFFIX};
use super::search_index::{self, block_serial, postings, SearchIndex, SearchSnapshot};
use super::{
    Durability, EventStore, Found, Incoming, Presence, Stats, StoreError, StoreResult, Verdict,
};
use crate::policy::ReadGate;
use crate::search::{self, EventTerms, Query};

type Db = Database<Bytes, Bytes>;

/// `meta` key present while the tag index is being rebuilt (schema upgrade).
const TAG_REBUILD: &[u8] = b"tag_rebuild";

/// `meta` keys of schema 10 and older, whose search index lived in the
/// main environment: its totals and its mark.
const LEGACY_SEARCH_KEYS: [&[u8]; 2] = [b"search", b"search_indexed"];

/// Directory of the search environment, inside the data directory.
const SEARCH_DIR: &str = "search";

/// `meta` key present while the time-ordered indexes are being repacked
/// into blocks (after an upgrade from schema 8 or older).
const REPACK: &[u8] = b"repack";

/// Most named tables the main environment may hold: those of
/// [`schema::table`], legacy ones included, with room to spare.
const MAX_TABLES: u32 = 32;

/// Blocks read per write transaction when repacking an index.
const REPACK_CHUNK: usize = 100_000;

/// Stored value header: bit 0 set = an 8-byte expiration follows.
const FLAG_EXPIRES: u8 = 1;
/// Stored value header: bit 1 set = the value goes on in `tails`.
const FLAG_SPLIT: u8 = 2;
/// Stored value header: bit 2 set = the event's kind (u16 BE) follows the
/// expiration, if any (schema 15; values written before have none).
const FLAG_KIND: u8 = 4;

/// Where a stored value is cut so that it fills LMDB's pages: a value too
/// large for a leaf goes to overflow pages, whole pages after a 16-byte
/// header, and its last page is on average half empty. A value that
/// would leave at least half a page empty (`inline_max` bytes or fewer
/// past its last full page) is cut there: the first part fills whole
/// overflow pages, the rest goes to `tails`, in a leaf.
#[derive(Clone, Copy, Debug)]
struct PageFit {
    page: usize,
    /// Largest value a node with an 8-byte key keeps in its leaf.
    inline_max: usize,
}

impl PageFit {
    fn new(page: usize) -> PageFit {
        // LMDB (`mdb_env_open2`, `mdb_leaf_size`): a node of 8-byte
        // header, key and value stays in its leaf up to `nodemax` bytes.
        let nodemax = (((page - 16) / 2) & !1) - 2;
        PageFit {
            page,
            inline_max: nodemax - 8 - 8,
        }
    }

    /// Where to cut a value of `len` bytes, if anywhere.
    fn cut(&self, len: usize) -> Option<usize> {
        if len <= self.inline_max {
            return None;
        }
        let first = ((len + 16) / self.page * self.page).checked_sub(16)?;
        let rest = len - first;
        (rest > 0 && rest <= self.inline_max).then_some(first)
    }
}

/// A stored event as read: its expiration and its (decompressed) record.
type Loaded<'t> = (Option<u64>, Cow<'t, [u8]>);

/// The LMDB store.
#[derive(Debug)]
pub struct LmdbStore {
    env: Env,
    events: Db,
    /// Stored values of replaceable and addressable events, apart from the
    /// others so that the holes their replaced versions leave do not stay
    /// in the leaves of `events` (LMDB merges a leaf only below a quarter
    /// full). Schema 13 and older kept them in `events`; reads look in both.
    replaceable: Db,
    ids: Db,
    created: Db,
    kind: Db,
    pubkey: Db,
    pubkey_kind: Db,
    tag: Db,
    replace: Db,
    deleted_ids: Db,
    deleted_addrs: Db,
    expiration: Db,
    /// The NIP-50 index, in its own environment; `None` when search is off.
    search: Option<SearchIndex>,
    /// serial → stored value of a removed event whose postings the search
    /// index may still hold: read by [`EventStore::index_search`], deleted
    /// by the next write once it has taken them out.
    search_removed: Db,
    /// Rows of `search_removed` the search index has applied; the writer
    /// deletes them in its next transaction.
    search_applied: Mutex<std::collections::HashSet<u64>>,
    pending: Db,
    removed: Db,
    /// serial → the end of a stored value cut to fit its pages.
    tails: Db,
    /// How stored values are cut ([`FLAG_SPLIT`]).
    fit: PageFit,
    meta: Db,
    /// Ids of the events whose `ids` entry waits in `pending`.
    waiting_ids: RwLock<WaitingIds>,
    /// An index batch [`EventStore::index_past_lag`] applies a transaction
    /// at a time, between the writer's commits. Lock it only inside a write
    /// transaction (LMDB's writer lock first, then this), as `remove` does.
    in_flight: Mutex<Option<InFlight>>,
    /// Held while open when [`OpenOptions::writer_lock`] asks for it.
    writer_lock: Option<std::fs::File>,
    /// Stored events whose time-ordered index entries may wait in `pending`.
    index_lag: u64,
    /// Most postings (and probes of other terms) one search filter reads.
    search_max_reads: usize,
    /// Most stored events the search index may trail by for a search to
    /// be answered (it tokenizes them itself).
    search_max_unindexed: u64,
    /// Size a block of search postings grows to before a new one starts.
    block_bytes: usize,
    /// Most block and `ids` writes in one transaction of an index batch.
    index_txn_writes: usize,
    relay_urls: Vec<String>,
    /// Dictionaries of the compressed records (also in `meta/dicts`); leaked
    /// once per set (at most two per open store: the one it opened with and
    /// one trained from its events) so compressors and per-thread
    /// decompressors can hold prepared dictionaries without lifetimes.
    dicts: RwLock<&'static DictSet>,
    /// Whether records are compressed (`compression_level` above 0).
    compress: bool,
    /// Records smaller than this are stored raw.
    compress_min_bytes: usize,
    /// zstd level of stored records (and of a trained set).
    compression_level: i32,
    /// Stored events after which a database without dictionaries trains
    /// its own; 0 never.
    auto_dictionaries: u64,
}

/// Entries per write transaction of a compacted copy (bounds its dirty
/// pages).
const COMPACT_CHUNK: u64 = 100_000;
/// While the search index is built, its progress is logged each time its
/// mark passes a multiple of this many serials.
const BUILD_PROGRESS_EVERY: u64 = 100_000;

/// Default of [`OpenOptions::index_txn_writes`].
pub const INDEX_TXN_WRITES: usize = 1024;

/// Most stored records a trained dictionary set learns from (the newest).
const DICTIONARY_SAMPLES: usize = 20_000;

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Largest size the database may grow to (address space, not disk).
    pub map_size: usize,
    /// How commits reach the disk.
    pub durability: Durability,
    /// URLs this relay answers to (for NIP-62 `relay` tags).
    pub relay_urls: Vec<String>,
    /// zstd level for stored records; 0 stores every record raw.
    pub compression_level: i32,
    /// Records smaller than this many bytes are stored raw.
    pub compress_min_bytes: usize,
    /// A dictionary set file (`nostrwire dict train`); the first one given is
    /// copied into the database and kept, since stored records name its ids.
    pub dictionaries: Option<PathBuf>,
    /// Keep the NIP-50 search index (dropped on open when off). A missing
    /// or outdated index is emptied on open and built by
    /// [`EventStore::index_search`], like any trailing events: opening
    /// never waits for it.
    pub search: bool,
    /// Most postings (and probes of other terms) one search filter reads.
    pub search_max_reads: usize,
    /// Most stored events the search index may trail by for a search to be
    /// answered: a search tokenizes the events the index does not hold yet
    /// itself. Further behind (the index being built), a search fails with
    /// [`StoreError::SearchBehind`].
    pub search_max_unindexed: u64,
    /// Stored events whose entries in the time-ordered indexes
    /// ([`table::TIME_ORDERED`]) may wait in `pending`: once more wait,
    /// [`EventStore::index_past_lag`] writes them all, in transactions of
    /// [`OpenOptions::index_txn_writes`], one per call while fewer than
    /// twice as many wait. 0 writes every event's entries right after its
    /// commit. The writer also
    /// calls [`EventStore::index_pending`] when it is idle.
    pub index_lag: u64,
    /// The most a block of a time-ordered index holds
    /// ([`schema::BLOCK_BYTES`]; at most that), and the bytes a block of
    /// search postings grows to before the next posting starts a new block
    /// (at most [`schema::SEARCH_BLOCK_BYTES`]). Tests use small blocks to
    /// exercise many blocks per key.
    pub block_bytes: usize,
    /// Most block and `ids` writes in one transaction of an index batch
    /// ([`EventStore::index_pending`]): a batch that writes more commits in
    /// several. Each transaction's changed pages are copied, and the old
    /// copies reused only two commits later, so the largest transaction
    /// sets how much free space the file keeps. Tests use small values to
    /// split batches often.
    pub index_txn_writes: usize,
    /// Once this many events are stored in a database without a dictionary
    /// set (and none is configured), [`EventStore::wants_dictionaries`]
    /// turns true and [`EventStore::train_dictionaries`] trains per-kind
    /// dictionaries from the newest stored events. 0 never trains.
    pub auto_dictionaries: u64,
    /// Hold the database's writer lock (`writer.lock` beside `data.mdb`)
    /// while open, and fail with [`StoreError::Busy`] when another process
    /// holds it. Only one process may store events in a database: the ids
    /// of the events whose `ids` entries still wait are known to the
    /// process that wrote them. On by default; `export` and `compact`
    /// turn it off, so they run beside a relay.
    pub writer_lock: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            map_size: 1 << 30,
            durability: Durability::Full,
            relay_urls: Vec::new(),
            compression_level: 3,
            compress_min_bytes: 256,
            dictionaries: None,
            search: true,
            search_max_reads: 100_000,
            search_max_unindexed: 20_000,
            index_lag: 0,
            block_bytes: schema::BLOCK_BYTES,
            index_txn_writes: INDEX_TXN_WRITES,
            auto_dictionaries: 0,
            writer_lock: true,
        }
    }
}

/// Everything indexable about one event, derived from its record only.
struct Derived {
    id: EventId,
    pubkey: PublicKey,
    kind: Kind,
    created_at: Timestamp,
    tag_prefixes: Vec<[u8; schema::TAG_PREFIX]>,
    address: Option<Vec<u8>>,
    expires: Option<u64>,
}

/// One table's entries, in either direction.
type StoredIter<'t> = Box<dyn Iterator<Item = heed::Result<(&'t [u8], &'t [u8])>> + 't>;

/// The entries of `events` and `replaceable` in key (serial) order: each
/// serial is in one of them. An error comes out as soon as it is met.
struct MergedByKey<'t> {
    a: std::iter::Peekable<StoredIter<'t>>,
    b: std::iter::Peekable<StoredIter<'t>>,
    descending: bool,
}

impl<'t> Iterator for MergedByKey<'t> {
    type Item = heed::Result<(&'t [u8], &'t [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) | (Some(Err(_)), _) => true,
            (None, Some(_)) | (_, Some(Err(_))) => false,
            (Some(Ok((ka, _))), Some(Ok((kb, _)))) => (ka < kb) != self.descending,
        };
        match take_a {
            true => self.a.next(),
            false => self.b.next(),
        }
    }
}

fn derive(view: &EventView<'_>) -> Derived {
    let kind = view.kind();
    let mut tag_prefixes = Vec::new();
    let mut d_tag: Option<String> = None;
    let mut expires = None;
    for tag in view.tags() {
        let name = tag.name();
        let Some(value) = tag.first_value() else {
            continue;
        };
        let name_len = name.text_len();
        if name_len == 1 {
            let letter = name.to_str();
            let letter = letter.as_bytes()[0];
            if letter.is_ascii_alphabetic() {
                tag_prefixes.push(match value {
                    Value::Hex(raw) if raw.len() == 32 => {
                        schema::tag_prefix_raw32(letter, raw.try_into().expect("32 bytes"))
                    }
                    _ => schema::tag_prefix(letter, &value.to_str()),
                });
            }
            if letter == b'd' && d_tag.is_none() {
                d_tag = Some(value.to_str().into_owned());
            }
        } else if expires.is_none() && name.eq_str("expiration") {
            expires = value.to_str().parse::<u64>().ok();
        }
    }
    tag_prefixes.sort_unstable();
    tag_prefixes.dedup();
    let address = if kind.is_replaceable() {
        Some(schema::address(kind, view.pubkey(), None))
    } else if kind.is_addressable() {
        Some(schema::address(
            kind,
            view.pubkey(),
            Some(d_tag.as_deref().unwrap_or("")),
        ))
    } else {
        None
    };
    Derived {
        id: *view.id(),
        pubkey: *view.pubkey(),
        kind,
        created_at: view.created_at(),
        tag_prefixes,
        address,
        expires,
    }
}

/// Splits a stored value into (expiration, record).
fn split_value(value: &[u8]) -> StoreResult<(Option<u64>, &[u8])> {
    let header = ValueHeader::read(value)?;
    Ok((header.expires, &value[header.len..]))
}

/// What a stored value says before its record.
struct ValueHeader {
    expires: Option<u64>,
    /// `None` in values written before schema 15.
    kind: Option<Kind>,
    /// Bytes before the record.
    len: usize,
}

impl ValueHeader {
    fn read(value: &[u8]) -> StoreResult<ValueHeader> {
        let bad = || StoreError::Corrupt("bad stored value header".into());
        let flags = *value.first().ok_or_else(bad)?;
        if flags & !(FLAG_EXPIRES | FLAG_SPLIT | FLAG_KIND) != 0 {
            return Err(bad());
        }
        let mut len = 1;
        let mut field = |n: usize| {
            let bytes = value.get(len..len + n).ok_or_else(bad)?;
            len += n;
            Ok::<_, StoreError>(bytes)
        };
        let expires = match flags & FLAG_EXPIRES {
            0 => None,
            _ => Some(u64::from_be_bytes(field(8)?.try_into().expect("8 bytes"))),
        };
        let kind = match flags & FLAG_KIND {
            0 => None,
            _ => Some(Kind(u16::from_be_bytes(
                field(2)?.try_into().expect("2 bytes"),
            ))),
        };
        Ok(ValueHeader { expires, kind, len })
    }
}

thread_local! {
    /// One decompression context per thread, for the dictionary set it was
    /// made for (identified by address: each open store leaks its own set).
    static DECOMPRESSOR: RefCell<Option<(usize, RecordDecompressor<'static>)>> =
        const { RefCell::new(None) };
    /// One compression context per thread (ingest workers, the writer,
    /// `import`'s workers), for the set it was made for, like
    /// [`DECOMPRESSOR`]: a store switching to a trained set is followed by
    /// every thread at its next record.
    static COMPRESSOR: RefCell<Option<(usize, RecordCompressor<'static>)>> =
        const { RefCell::new(None) };
}

/// The stored form of `record`, compressed with `dicts` on this thread's
/// context (the raw record again, framed as stored, when compression
/// does not make it smaller).
fn compress(dicts: &'static DictSet, record: &[u8]) -> StoreResult<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let key = dicts as *const DictSet as usize;
        if slot.as_ref().is_none_or(|(k, _)| *k != key) {
            let compressor = RecordCompressor::new(dicts).map_err(|e| {
                StoreError::Dictionaries(format!("cannot prepare the compressor: {e}"))
            })?;
            *slot = Some((key, compressor));
        }
        let (_, compressor) = slot.as_mut().expect("just set");
        let mut out = Vec::with_capacity(record.len());
        compressor
            .compress_into(record, &mut out)
            .map_err(|e| StoreError::Corrupt(format!("compression failed: {e}")))?;
        Ok(out)
    })
}

/// The event record inside a stored one: borrowed when stored raw,
/// decompressed (on this thread's context) when stored compressed.
fn unpack<'a>(dicts: &'static DictSet, stored: &'a [u8]) -> StoreResult<Cow<'a, [u8]>> {
    if stored.first() != Some(&nostrwire_wire::COMPRESSED_V1) {
        return Ok(Cow::Borrowed(stored));
    }
    let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let key = dicts as *const DictSet as usize;
        if slot.as_ref().is_none_or(|(k, _)| *k != key) {
            *slot = Some((
                key,
                RecordDecompressor::new(Some(dicts)).map_err(|e| corrupt(&e))?,
            ));
        }
        let (_, decompressor) = slot.as_mut().expect("just set");
        let record = decompressor
            .record(stored, &nostrwire_wire::Limits::default())
            .map_err(|e| corrupt(&e))?;
        Ok(Cow::Owned(record.to_vec()))
    })
}

/// A row of `pending` or `removed`.
fn waiting_row(value: &[u8]) -> StoreResult<schema::PendingRow<'_>> {
    schema::PendingRow::parse(value).ok_or_else(|| StoreError::Corrupt("bad waiting row".into()))
}

fn decode(record: &[u8]) -> StoreResult<EventView<'_>> {
    EventView::decode(record).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn key(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out
}

/// Parses an `a` tag value `kind:pubkey:d`.
fn parse_address(value: &str) -> Option<(Kind, PublicKey, String)> {
    let mut parts = value.splitn(3, ':');
    let kind = Kind(parts.next()?.parse().ok()?);
    let pubkey = PublicKey::from_hex(parts.next()?).ok()?;
    let d = parts.next().unwrap_or("").to_string();
    Some((kind, pubkey, d))
}

/// Merges the blocks of a time-ordered index, read in key order, into full
/// blocks (`repack_time_indexes`, `compact_to`).
struct BlockPacker {
    prefix_len: usize,
    max_bytes: usize,
    prefix: Vec<u8>,
    entries: Vec<schema::TimeEntry>,
}

/// Receives each packed block: key, value.
type EmitBlock<'a> = dyn FnMut(&[u8], &[u8]) -> StoreResult<()> + 'a;

impl BlockPacker {
    /// Entries held before the full blocks among them are emitted.
    const HELD: usize = 4096;

    fn new(prefix_len: usize, max_bytes: usize) -> BlockPacker {
        BlockPacker {
            prefix_len,
            max_bytes,
            prefix: Vec::new(),
            entries: Vec::new(),
        }
    }

    fn push(&mut self, key: &[u8], value: &[u8], emit: &mut EmitBlock<'_>) -> StoreResult<()> {
        if key.len() != self.prefix_len + TIME_SUFFIX {
            return Err(StoreError::Corrupt("bad time-ordered index key".into()));
        }
        if key[..self.prefix_len] != self.prefix[..] {
            self.flush(emit, true)?;
            self.prefix = key[..self.prefix_len].to_vec();
        }
        let before = self.entries.len();
        schema::decode_time_block(key, value, &mut self.entries).map_err(StoreError::Corrupt)?;
        if before > 0 && self.entries[before] <= self.entries[before - 1] {
            return Err(StoreError::Corrupt("overlapping index blocks".into()));
        }
        if self.entries.len() >= Self::HELD {
            self.flush(emit, false)?;
        }
        Ok(())
    }

    /// Emits the blocks held; all of them, or all but the last (which may
    /// take the next entries).
    fn flush(&mut self, emit: &mut EmitBlock<'_>, all: bool) -> StoreResult<()> {
        let mut blocks = schema::encode_time_blocks(&self.entries, self.max_bytes);
        let kept = if all { None } else { blocks.pop() };
        for (suffix, value) in &blocks {
            emit(&key(&[&self.prefix, suffix]), value)?;
        }
        match kept.and_then(|(suffix, _)| schema::split_time_suffix(&suffix)) {
            Some(first_kept) => {
                let at = self.entries.partition_point(|e| *e < first_kept);
                self.entries.drain(..at);
            }
            None => self.entries.clear(),
        }
        Ok(())
    }

    fn finish(&mut self, emit: &mut EmitBlock<'_>) -> StoreResult<()> {
        self.flush(emit, true)
    }
}

/// One prefix of a time-ordered index walked newest → oldest: the entries
/// below `upper` (exclusive) down to `lower` (inclusive).
struct TimeWalk<'t> {
    blocks: heed::RoRevRange<'t, Bytes, Bytes>,
    /// The current block's entries, oldest first, consumed from the end.
    buffer: Vec<schema::TimeEntry>,
    upper: schema::TimeEntry,
    lower: schema::TimeEntry,
    done: bool,
}

impl<'t> TimeWalk<'t> {
    fn new(
        txn: &'t RoTxn<'_>,
        db: Db,
        prefix: &[u8],
        lower: schema::TimeEntry,
        upper: schema::TimeEntry,
    ) -> StoreResult<TimeWalk<'t>> {
        // The first block read is the one keyed at or below `upper`: it may
        // hold entries above it, which are skipped.
        let top = key(&[prefix, &schema::entry_suffix(upper)]);
        let blocks = db.rev_range(txn, &(Bound::Included(prefix), Bound::Included(&top[..])))?;
        Ok(TimeWalk {
            blocks,
            buffer: Vec::new(),
            upper,
            lower,
            done: false,
        })
    }

    fn next(&mut self) -> StoreResult<Option<schema::TimeEntry>> {
        loop {
            if let Some(entry) = self.buffer.pop() {
                if entry >= self.upper {
                    continue;
                }
                if entry < self.lower {
                    self.done = true;
                    self.buffer.clear();
                    return Ok(None);
                }
                return Ok(Some(entry));
            }
            if self.done {
                return Ok(None);
            }
            match self.blocks.next().transpose()? {
                Some((k, v)) => schema::decode_time_block(k, v, &mut self.buffer)
                    .map_err(StoreError::Corrupt)?,
                None => self.done = true,
            }
        }
    }
}

impl LmdbStore {
    /// Writes a compacted copy of the database to `dir/data.mdb` (and of
    /// the search index to `dir/search/data.mdb`): every
    /// table copied in key order with `MDB_APPEND`, so leaves are packed
    /// full (inserts in the middle of a tree leave them half full), the
    /// blocks of the time-ordered indexes merged into full blocks, and free
    /// pages gone. The copy is a consistent snapshot (one read
    /// transaction) and may be taken while the relay writes. `dir` is
    /// created if needed; an existing `data.mdb` there is refused, never
    /// overwritten. `progress` is told each table and the entries copied so
    /// far. Returns the size of the copy in bytes.
    pub fn compact_to(&self, dir: &Path, progress: &mut dyn FnMut(&str, u64)) -> StoreResult<u64> {
        let io = |e: std::io::Error| StoreError::Lmdb(heed::Error::Io(e));
        std::fs::create_dir_all(dir).map_err(io)?;
        let target = dir.join("data.mdb");
        if target.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            )));
        }
        // The search index first: its snapshot is then older than the
        // events', which hold every event it indexes and the removal rows
        // of every event removed since.
        let mut search_size = 0;
        if let Some(index) = &self.search {
            let search_dir = dir.join(SEARCH_DIR);
            std::fs::create_dir_all(&search_dir).map_err(io)?;
            search_size =
                self.copy_packed(&index.env, &search_dir, false, &mut |name, copied| {
                    progress(&format!("{SEARCH_DIR}/{name}"), copied)
                })?;
        }
        Ok(self.copy_packed(&self.env, dir, true, progress)? + search_size)
    }

    /// Copies every table of `source` into a new environment in `dir`, in
    /// key order with `MDB_APPEND` (packed leaves, no free pages), merging
    /// the blocks of the time-ordered indexes on the way when
    /// `merge_blocks` (the events' environment); one read snapshot,
    /// transactions of [`COMPACT_CHUNK`] entries, one sync at the end.
    /// Returns the size of the copy's file.
    fn copy_packed(
        &self,
        source: &Env,
        dir: &Path,
        merge_blocks: bool,
        progress: &mut dyn FnMut(&str, u64),
    ) -> StoreResult<u64> {
        let io = |e: std::io::Error| StoreError::Lmdb(heed::Error::Io(e));
        let target = dir.join("data.mdb");
        if target.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", target.display()),
            )));
        }
        let mut options = EnvOpenOptions::new();
        options.map_size(source.info().map_size).max_dbs(MAX_TABLES);
        // SAFETY: a new environment in a directory that holds no database
        // (checked above), opened once, by this function only; without
        // syncs until the one at the end (a copy cut short is not used).
        let copy = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(dir)?
        };
        let rtxn = source.read_txn()?;
        // Every table the environment holds, as its main database lists
        // them: a table added later is copied without being named here.
        let mut tables = Vec::new();
        if let Some(main) = source.open_database::<Bytes, Bytes>(&rtxn, None)? {
            for item in main.iter(&rtxn)? {
                let name = String::from_utf8_lossy(item?.0).into_owned();
                if let Some(db) = source.open_database::<Bytes, Bytes>(&rtxn, Some(&name))? {
                    tables.push((name, db));
                }
            }
        }
        for (name, table) in &tables {
            let mut wtxn = copy.write_txn()?;
            let target: Db = copy.create_database(&mut wtxn, Some(name))?;
            let mut copied = 0u64;
            // The time-ordered indexes are merged into full blocks on the way.
            let mut packer = (merge_blocks && table::TIME_ORDERED.contains(&name.as_str()))
                .then(|| BlockPacker::new(schema::time_prefix_len(name), self.block_bytes));
            for item in table.iter(&rtxn)? {
                let (k, v) = item?;
                let mut append = |k: &[u8], v: &[u8]| -> StoreResult<()> {
                    target.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)?;
                    Ok(())
                };
                match packer.as_mut() {
                    Some(packer) => packer.push(k, v, &mut append)?,
                    None => append(k, v)?,
                }
                copied += 1;
                if copied % COMPACT_CHUNK == 0 {
                    wtxn.commit()?;
                    wtxn = copy.write_txn()?;
                    progress(name, copied);
                }
            }
            if let Some(packer) = packer.as_mut() {
                packer.finish(&mut |k, v| {
                    target.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)?;
                    Ok(())
                })?;
            }
            wtxn.commit()?;
            progress(name, copied);
        }
        copy.force_sync()?;
        drop(copy);
        Ok(std::fs::metadata(&target).map_err(io)?.len())
    }

    /// Whether searches read a search index: false when search is off,
    /// and for a reader that found none it may use (never built, or left
    /// for the relay to rebuild). Without one, a `search` filter matches
    /// nothing.
    pub fn has_search_index(&self) -> bool {
        self.search.is_some()
    }

    /// Closes the database and hands back its writer lock (when held), so
    /// the caller can put another `data.mdb` in place before letting go.
    pub fn close(self) -> Option<std::fs::File> {
        let LmdbStore {
            env,
            search,
            writer_lock,
            ..
        } = self;
        env.prepare_for_closing().wait();
        if let Some(index) = search {
            index.close();
        }
        writer_lock
    }

    /// Opens (creating if needed) the store in directory `path`.
    pub fn open(path: &Path, options: &OpenOptions) -> StoreResult<LmdbStore> {
        std::fs::create_dir_all(path).map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
        let writer_lock = match options.writer_lock {
            true => Some(take_writer_lock(path)?),
            false => None,
        };
        let env = open_env(path, options.map_size, MAX_TABLES, options.durability)?;
        let mut wtxn = env.write_txn()?;
        let meta = env.create_database::<Bytes, Bytes>(&mut wtxn, Some(table::META))?;
        let dicts = Self::dictionaries(&mut wtxn, meta, options)?;
        let mut db = |name| env.create_database::<Bytes, Bytes>(&mut wtxn, Some(name));
        let mut store = LmdbStore {
            events: db(table::EVENTS)?,
            replaceable: db(table::REPLACEABLE)?,
            ids: db(table::IDS)?,
            created: db(table::CREATED)?,
            kind: db(table::KIND)?,
            pubkey: db(table::PUBKEY)?,
            pubkey_kind: db(table::PUBKEY_KIND)?,
            tag: db(table::TAG)?,
            replace: db(table::REPLACE)?,
            deleted_ids: db(table::DELETED_IDS)?,
            deleted_addrs: db(table::DELETED_ADDRS)?,
            expiration: db(table::EXPIRATION)?,
            search: None,
            search_removed: db(table::SEARCH_REMOVED)?,
            search_applied: Mutex::default(),
            pending: db(table::PENDING)?,
            waiting_ids: RwLock::default(),
            in_flight: Mutex::default(),
            writer_lock,
            removed: db(table::REMOVED)?,
            tails: db(table::TAILS)?,
            fit: PageFit::new(4096),
            meta,
            index_lag: options.index_lag,
            search_max_reads: options.search_max_reads.max(1),
            search_max_unindexed: options.search_max_unindexed,
            block_bytes: options.block_bytes.clamp(1, schema::BLOCK_BYTES),
            index_txn_writes: options.index_txn_writes.max(1),
            relay_urls: options.relay_urls.clone(),
            dicts: RwLock::new(dicts),
            compress: options.compression_level != 0,
            compress_min_bytes: options.compress_min_bytes,
            compression_level: options.compression_level.max(1),
            auto_dictionaries: options.auto_dictionaries,
            env: env.clone(),
        };
        store.fit = PageFit::new(store.events.stat(&wtxn)?.page_size as usize);
        let version = match store.meta.get(&wtxn, b"schema")? {
            None => schema::SCHEMA_VERSION,
            Some(v) => u32::from_le_bytes(v.try_into().unwrap_or([0xff; 4])),
        };
        match version {
            schema::SCHEMA_VERSION => {}
            // Version 6 kept waiting tag entries in `pending_tags`: they are
            // written here; the other indexes were complete.
            6 => store.write_legacy_pending_tags(&mut wtxn)?,
            // Version 7 deleted the entries of a removed event with it, and
            // version 5 wrote every entry with its event: empty `pending`
            // and `removed` tables (created above) are their state. Rows
            // of versions 7 to 9 carry no id: their `ids` entry is written.
            // Version 10 differs only by where its search index lives.
            // Version 11 differs only by never cutting a stored value, and
            // up to version 12 `ids` is keyed by whole ids (rewritten below).
            // Version 13 keeps replaceable events in `events`: they stay
            // there until replaced (reads look in both tables). Values
            // written before version 15 carry no kind: readers load those.
            // Version 15 keyed a tombstone by the id alone: readers take
            // those keys too.
            5 | 7..=15 => {}
            // Versions 3 and 4 keep one entry per posting: the search index
            // is emptied below, like that of every version up to 10.
            3 | 4 => {}
            // Versions 1 and 2 have longer tag keys and (2) document
            // frequencies in their own table: the tag index is emptied here
            // and rebuilt from `events` below (`meta/tag_rebuild` makes an
            // interrupted rebuild start over); the search index like any
            // other up to version 10.
            1 | 2 => {
                store.tag.clear(&mut wtxn)?;
                store.meta.put(&mut wtxn, TAG_REBUILD, &[])?;
                let legacy =
                    env.open_database::<Bytes, Bytes>(&wtxn, Some(table::LEGACY_SEARCH_TERMS))?;
                if let Some(legacy) = legacy {
                    legacy.clear(&mut wtxn)?;
                }
            }
            _ => return Err(StoreError::Schema(version)),
        }
        if version != schema::SCHEMA_VERSION {
            tracing::info!(from = version, "upgrading the database schema");
        }
        if version < 9 {
            // Versions 1 to 8 hold one entry per key in the time-ordered
            // indexes: valid blocks of one entry, merged into full ones below.
            store.meta.put(&mut wtxn, REPACK, &[])?;
        }
        if version < 13 {
            store.shorten_id_keys(&mut wtxn)?;
        }
        if version < 11 {
            // Versions up to 10 kept the search index in this environment:
            // it is emptied, and built in its own below.
            if let Some(legacy) = env.open_database::<Bytes, Bytes>(&wtxn, Some(table::SEARCH))? {
                legacy.clear(&mut wtxn)?;
            }
            for key in LEGACY_SEARCH_KEYS {
                store.meta.delete(&mut wtxn, key)?;
            }
        }
        store
            .meta
            .put(&mut wtxn, b"schema", &schema::SCHEMA_VERSION.to_le_bytes())?;
        wtxn.commit()?;
        store.rebuild_tag_index()?;
        store.repack_time_indexes()?;
        // Events a crash left unindexed (at most the lag and one batch).
        while store.index_pending(10_000)? {}
        store.search = store.prepare_search_index(path, options, version < 11)?;
        Ok(store)
    }

    /// Walks `events` in serial order, in write transactions of 10,000
    /// events: `extract` reads what each record contributes, `apply` writes
    /// one batch in the same transaction. `apply` is told which batch is the
    /// last (possibly empty), so a completion marker commits atomically with
    /// the last entries and an interrupted walk is detected at the next open.
    fn for_each_event_batch<T>(
        &self,
        what: &str,
        mut extract: impl FnMut(&EventView<'_>) -> T,
        mut apply: impl FnMut(&mut RwTxn<'_>, &[(u64, T)], bool) -> StoreResult<()>,
    ) -> StoreResult<()> {
        const BATCH: usize = 10_000;
        let mut after: Option<[u8; 8]> = None;
        let mut seen = 0u64;
        loop {
            let mut wtxn = self.env.write_txn()?;
            let mut batch = Vec::with_capacity(BATCH);
            {
                let lower = match &after {
                    Some(k) => Bound::Excluded(&k[..]),
                    None => Bound::Unbounded,
                };
                for item in self.stored_range(&wtxn, &(lower, Bound::Unbounded), false)? {
                    let (k, value) = item?;
                    let serial = schema::serial_from(k)
                        .ok_or_else(|| StoreError::Corrupt("bad serial key".into()))?;
                    let (_, record) = self.read_value(&wtxn, k, value)?;
                    batch.push((serial, extract(&decode(&record)?)));
                    if batch.len() == BATCH {
                        break;
                    }
                }
            }
            let last = batch.len() < BATCH;
            apply(&mut wtxn, &batch, last)?;
            wtxn.commit()?;
            seen += batch.len() as u64;
            tracing::info!(done = seen, "{what}");
            match batch.last() {
                Some((serial, _)) if !last => after = Some(schema::serial_bytes(*serial)),
                _ => return Ok(()),
            }
        }
    }

    /// Rebuilds the tag index from `events` while `meta/tag_rebuild` is
    /// present (after a schema upgrade); the marker is removed with the
    /// last batch.
    fn rebuild_tag_index(&self) -> StoreResult<()> {
        {
            let txn = self.env.read_txn()?;
            if self.meta.get(&txn, TAG_REBUILD)?.is_none() {
                return Ok(());
            }
        }
        let mut wtxn = self.env.write_txn()?;
        self.tag.clear(&mut wtxn)?;
        wtxn.commit()?;
        tracing::info!("rebuilding the tag index");
        self.for_each_event_batch(
            "rebuilding the tag index",
            |view| {
                let d = derive(view);
                (d.created_at, d.tag_prefixes)
            },
            |wtxn, batch, last| {
                let mut changes = Vec::new();
                for (serial, (created_at, prefixes)) in batch {
                    let suffix = schema::time_suffix(*created_at, *serial);
                    for prefix in prefixes {
                        changes.extend(TimeKey::new(prefix, &suffix).map(|k| (k, true)));
                    }
                }
                self.update_time_index(wtxn, self.tag, changes)?;
                if last {
                    self.meta.delete(wtxn, TAG_REBUILD)?;
                }
                Ok(())
            },
        )
    }

    /// Opens the search environment when search is on. Its index is built
    /// (in batches, logging progress) when it has never been, when the
    /// database comes from a schema that kept it elsewhere (`fresh`), or
    /// when it runs ahead of the stored events (a database put back from
    /// an older copy); an index in an older posting layout is dropped and
    /// built again. An interrupted build resumes from its mark. When
    /// search is off, the environment and the removal rows are dropped. A
    /// store opened without the writer lock only opens an index that
    /// exists, as it is, and only in the present layout.
    fn prepare_search_index(
        &self,
        path: &Path,
        options: &OpenOptions,
        fresh: bool,
    ) -> StoreResult<Option<SearchIndex>> {
        let dir = path.join(SEARCH_DIR);
        let block_bytes = self.block_bytes.min(schema::SEARCH_BLOCK_BYTES);
        let writer = options.writer_lock;
        let open = || {
            SearchIndex::open(
                &dir,
                options.map_size,
                options.durability,
                block_bytes,
                writer,
            )
        };
        let current_layout = |index: &SearchIndex| -> StoreResult<bool> {
            let stxn = index.env.read_txn()?;
            Ok(index.format(&stxn)? == schema::POSTING_FORMAT)
        };
        if !options.writer_lock {
            if !(options.search && dir.join("data.mdb").exists()) {
                return Ok(None);
            }
            if search_index::lost_unsynced_commits(&dir) {
                tracing::warn!("the search index may have lost commits in a machine restart: not used until the relay rebuilds it");
                return Ok(None);
            }
            let index = open()?;
            if !current_layout(&index)? {
                tracing::warn!("the search index has an older posting layout: not used until the relay rebuilds it");
                return Ok(None);
            }
            return Ok(Some(index));
        }
        if !options.search {
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
                tracing::info!("search is off: search index dropped");
            }
            let mut wtxn = self.env.write_txn()?;
            self.search_removed.clear(&mut wtxn)?;
            wtxn.commit()?;
            return Ok(None);
        }
        if dir.exists() && search_index::lost_unsynced_commits(&dir) {
            std::fs::remove_dir_all(&dir).map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
            tracing::warn!("the machine restarted before the search index's last commits reached the disk: rebuilding it");
        }
        let mut index = open()?;
        let built = {
            let stxn = index.env.read_txn()?;
            index.indexed(&stxn)?.is_some()
        };
        if built && !current_layout(&index)? {
            // Dropped rather than emptied, so that its file starts small again.
            drop(index);
            std::fs::remove_dir_all(&dir).map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
            tracing::info!("the search index has an older posting layout: rebuilding it");
            index = open()?;
        }
        let (mark, last) = {
            let stxn = index.env.read_txn()?;
            let txn = self.env.read_txn()?;
            (index.indexed(&stxn)?, self.last_serial(&txn)?)
        };
        let behind = match mark {
            Some(mark) if !fresh && mark <= last => last - mark,
            _ => {
                if mark.is_some_and(|m| m > last) {
                    tracing::warn!(
                        indexed = mark,
                        stored = last,
                        "the search index is ahead of the stored events: rebuilding it"
                    );
                }
                index.reset()?;
                // Their postings went with the index.
                let mut wtxn = self.env.write_txn()?;
                self.search_removed.clear(&mut wtxn)?;
                wtxn.commit()?;
                last
            }
        };
        // Built like any trailing events, by `index_search`: opening does
        // not wait for it, and searches are refused until it is close.
        if behind > self.search_max_unindexed {
            tracing::info!(
                events = behind,
                "the search index trails the stored events: building it in the background"
            );
        }
        Ok(Some(index))
    }

    /// The newest serial handed out (0 before the first event).
    fn last_serial(&self, txn: &RoTxn<'_>) -> StoreResult<u64> {
        Ok(self
            .meta
            .get(txn, b"next_serial")?
            .and_then(schema::serial_from)
            .map_or(0, |next| next - 1))
    }

    /// Walks the stored events above serial `above` and at most `upto`,
    /// oldest first, at most `max` of them, handing `f` each serial and its
    /// indexed terms (`None` for events search does not index, or without
    /// terms). Returns how many were walked and the last serial walked.
    fn walk_unindexed(
        &self,
        txn: &RoTxn<'_>,
        (above, upto): (u64, u64),
        max: usize,
        mut f: impl FnMut(u64, Option<EventTerms>),
    ) -> StoreResult<(usize, Option<u64>)> {
        let (lower, upper) = (schema::serial_bytes(above), schema::serial_bytes(upto));
        let (mut walked, mut last) = (0, None);
        let range = (Bound::Excluded(&lower[..]), Bound::Included(&upper[..]));
        for item in self.stored_range(txn, &range, false)? {
            if walked == max {
                break;
            }
            let (k, value) = item?;
            let serial = schema::serial_from(k)
                .ok_or_else(|| StoreError::Corrupt("bad serial key".into()))?;
            let (_, record) = self.read_value(txn, k, value)?;
            f(serial, EventTerms::of(&decode(&record)?));
            walked += 1;
            last = Some(serial);
        }
        Ok((walked, last))
    }

    /// One batch of the search index (see [`EventStore::index_search`]):
    /// first the removed events of the main snapshot (`search_removed`)
    /// are taken out, then the stored events above the mark, oldest first,
    /// at most `max`, are indexed and the mark raised past them. Postings
    /// are written in key order and each term's document frequency once
    /// per batch, so a batch dirties far fewer pages than one event at a
    /// time.
    ///
    /// The main snapshot is taken after the search transaction starts, so
    /// it holds every event the index holds. A removal row is applied in
    /// the first batch whose snapshot shows it, and taking postings out
    /// finds them only once, so applying a row again (its deletion by the
    /// writer not committed yet, or lost in a crash) changes nothing.
    ///
    /// A batch commits every [`OpenOptions::index_txn_writes`] writes, as
    /// the writer's do, so that the file keeps little free space. Until its
    /// last commit raises the mark, the postings it wrote above the mark
    /// are left out by searches (and out of document frequencies), and
    /// `meta/partial` says how far they may go: a batch cut short is
    /// applied again (appending skips the postings a term holds already),
    /// and the events of that range removed meanwhile are taken out.
    /// `stop_after` ends the batch after that many commits, as a crash
    /// would (tests).
    fn index_search_into(
        &self,
        index: &SearchIndex,
        max: usize,
        lag: u64,
        stop_after: Option<usize>,
    ) -> StoreResult<bool> {
        let (from, last, removals) = {
            let stxn = index.env.read_txn()?;
            let txn = self.env.read_txn()?;
            (
                index.indexed(&stxn)?.unwrap_or(0),
                self.last_serial(&txn)?,
                !self.search_removed.is_empty(&txn)?,
            )
        };
        let behind = last.saturating_sub(from);
        if behind <= lag && !(lag == 0 && removals) {
            return Ok(false);
        }
        let wtxn = index.env.write_txn()?;
        let txn = self.env.read_txn()?;
        let from = index.indexed(&wtxn)?.unwrap_or(0);
        let partial = index.partial(&wtxn)?;
        let (mut docs, mut tokens) = index.totals(&wtxn)?;
        // First everything this batch needs from the events' snapshot,
        // which is then let go: while a reader holds it, the writer's
        // commits cannot reuse the pages they free.
        let mut applied = Vec::new();
        let mut removals = Vec::new();
        {
            // A copy: the writer takes the set in every commit, and must
            // not wait for this transaction.
            let skip = self
                .search_applied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            for item in self.search_removed.iter(&txn)? {
                let (k, stored) = item?;
                let serial = schema::serial_from(k)
                    .ok_or_else(|| StoreError::Corrupt("bad serial key".into()))?;
                if skip.contains(&serial) {
                    continue;
                }
                applied.push(serial);
                // Above the mark, an event was never indexed, unless a
                // batch cut short wrote its postings.
                if serial > from && partial.is_none_or(|p| serial > p) {
                    continue;
                }
                let record = unpack(self.dicts(), stored)?;
                if let Some(terms) = EventTerms::of(&decode(&record)?) {
                    removals.push((serial, terms));
                }
            }
        }
        let last = self.last_serial(&txn)?;
        if applied.is_empty() && from >= last {
            // Only rows already applied, waiting for the writer: nothing to
            // write (the transaction is dropped, not committed).
            return Ok(false);
        }
        // Term → its new postings, in serial order (the walk's). Keyed by
        // the event's own term strings: no allocation per posting.
        let mut added: std::collections::HashMap<String, Vec<Posting>, search::TermHasher> =
            Default::default();
        let (mut added_docs, mut added_tokens) = (0u64, 0u64);
        let (walked, walked_to) = match from < last {
            true => self.walk_unindexed(&txn, (from, u64::MAX), max, |serial, terms| {
                let Some(terms) = terms else {
                    return;
                };
                added_docs += 1;
                added_tokens += u64::from(terms.len);
                for (term, tf) in terms.terms {
                    added.entry(term).or_default().push(Posting {
                        serial,
                        tf,
                        len: schema::stored_length(terms.len),
                    });
                }
            })?,
            false => (0, None),
        };
        drop(txn);
        let mut txns = SearchTxns {
            index,
            wtxn: None,
            max_writes: self.index_txn_writes,
            writes: 0,
            commits: 0,
            stop_after,
        };
        txns.wtxn = Some(wtxn);
        for (serial, terms) in removals {
            if index.remove_postings(txns.open(), serial, terms.terms.keys())? {
                docs = docs.saturating_sub(1);
                tokens = tokens.saturating_sub(u64::from(terms.len));
            }
            if !txns.wrote(2 * terms.terms.len(), docs, tokens)? {
                return Ok(true);
            }
        }
        let mut more = false;
        let mut reached = from;
        if from < last {
            // Postings above the mark from here on, until the last commit.
            let reach = partial.max(walked_to);
            index.set_partial(txns.open(), reach)?;
            // Written in key order: neighbouring terms share pages.
            let mut added: Vec<(Vec<u8>, Vec<Posting>)> = added
                .into_iter()
                .map(|(term, new)| (schema::term_prefix(&term), new))
                .collect();
            added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for (prefix, new) in added {
                let puts = index.append_postings(txns.open(), &prefix, &new)?;
                if !txns.wrote(puts, docs, tokens)? {
                    return Ok(true);
                }
            }
            // Removed events leave gaps: once the walk has run out of
            // events, the mark passes every serial handed out.
            more = walked == max && walked_to.is_some_and(|s| s < last);
            let indexed = match more {
                true => walked_to.unwrap_or(last),
                false => last,
            };
            index.set_indexed(txns.open(), indexed)?;
            reached = indexed;
            index.set_partial(txns.open(), reach.filter(|&r| r > indexed))?;
            docs += added_docs;
            tokens += added_tokens;
        }
        let mut wtxn = txns.wtxn.take().expect("open");
        index.put_totals(&mut wtxn, docs, tokens)?;
        wtxn.commit()?;
        // LMDB reuses the pages a transaction freed only two transactions
        // later. Without this small commit in between, the next batch
        // could not reuse the pages this one's last commit freed.
        let mut tick = index.env.write_txn()?;
        index.put_totals(&mut tick, docs, tokens)?;
        tick.commit()?;
        if !applied.is_empty() {
            self.search_applied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(applied);
        }
        let behind = |mark: u64| last.saturating_sub(mark) > self.search_max_unindexed;
        if behind(from) {
            if !behind(reached) {
                tracing::info!(stored = last, "search index ready");
            } else if reached / BUILD_PROGRESS_EVERY != from / BUILD_PROGRESS_EVERY {
                tracing::info!(
                    indexed = reached,
                    stored = last,
                    "building the search index"
                );
            }
        }
        Ok(more)
    }

    /// Deletes the rows of `search_removed` the search index has applied.
    fn delete_applied_removals(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
        let applied = std::mem::take(
            &mut *self
                .search_applied
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for serial in applied {
            self.search_removed
                .delete(wtxn, &schema::serial_bytes(serial))?;
        }
        Ok(())
    }

    /// The dictionary set records are compressed with: the one the database
    /// holds, else the configured file (then stored), else none. A database
    /// keeps its set for good: its records name the set's ids.
    fn dictionaries(
        wtxn: &mut RwTxn<'_>,
        meta: Db,
        options: &OpenOptions,
    ) -> StoreResult<&'static DictSet> {
        let bad = |what: String| StoreError::Dictionaries(what);
        let configured = match &options.dictionaries {
            Some(path) => Some(
                std::fs::read(path)
                    .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?,
            ),
            None => None,
        };
        let stored = meta.get(wtxn, b"dicts")?.map(<[u8]>::to_vec);
        let bytes = match (stored, configured) {
            (Some(stored), Some(configured)) if stored != configured => {
                return Err(bad(
                    "the database already holds a different dictionary set; \
                     records compressed with it need it, so it cannot be replaced"
                        .into(),
                ))
            }
            (Some(stored), _) => Some(stored),
            (None, Some(configured)) => {
                meta.put(wtxn, b"dicts", &configured)?;
                Some(configured)
            }
            (None, None) => None,
        };
        let level = options.compression_level.max(1);
        let set = match bytes {
            Some(bytes) => {
                // The configured level, not the one the set file names
                // (`dict train` defaults to 19, several times the CPU of 3).
                DictSet::from_bytes_at_level(&bytes, level)
                    .map_err(|e| bad(format!("bad dictionary set: {e}")))?
            }
            None => DictSet::new(level, Vec::new())
                .map_err(|e| bad(format!("cannot prepare zstd: {e}")))?,
        };
        // One small, bounded leak per opened store (normally once per process).
        Ok(Box::leak(Box::new(set)))
    }

    /// The dictionary set records are compressed with now.
    fn dicts(&self) -> &'static DictSet {
        *self.dicts.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Samples for a dictionary set: the newest stored records (at most
    /// [`DICTIONARY_SAMPLES`]), uncompressed, with their kinds.
    fn dictionary_samples(&self) -> StoreResult<Vec<(Kind, Vec<u8>)>> {
        let txn = self.env.read_txn()?;
        let mut samples = Vec::new();
        let all = (Bound::Unbounded, Bound::Unbounded);
        for item in self
            .stored_range(&txn, &all, true)?
            .take(DICTIONARY_SAMPLES)
        {
            let (k, value) = item?;
            let (_, record) = self.read_value(&txn, k, value)?;
            let kind = decode(&record)?.kind();
            samples.push((kind, record.into_owned()));
        }
        Ok(samples)
    }

    fn table(&self, name: &str) -> Db {
        match name {
            table::CREATED => self.created,
            table::KIND => self.kind,
            table::PUBKEY => self.pubkey,
            table::PUBKEY_KIND => self.pubkey_kind,
            table::TAG => self.tag,
            _ => unreachable!("not a time index: {name}"),
        }
    }

    fn next_serial(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<u64> {
        let next = self.last_serial(wtxn)? + 1;
        self.meta
            .put(wtxn, b"next_serial", &schema::serial_bytes(next + 1))?;
        Ok(next)
    }

    /// The expiration and the event record of a stored event.
    fn load<'t>(&self, txn: &'t RoTxn<'_>, serial: u64) -> StoreResult<Option<Loaded<'t>>> {
        let key = schema::serial_bytes(serial);
        match self.stored_value(txn, &key)? {
            Some((_, value)) => self.read_value(txn, &key, value).map(Some),
            None => Ok(None),
        }
    }

    /// The table holding the stored value under `key`, and the value (or
    /// its first part, when cut): `events`, else `replaceable`.
    fn stored_value<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        key: &[u8],
    ) -> StoreResult<Option<(Db, &'t [u8])>> {
        if let Some(value) = self.events.get(txn, key)? {
            return Ok(Some((self.events, value)));
        }
        Ok(self
            .replaceable
            .get(txn, key)?
            .map(|v| (self.replaceable, v)))
    }

    /// The stored values of both tables with serials in `range`, in serial
    /// order (`descending`: newest first).
    fn stored_range<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        range: &(Bound<&[u8]>, Bound<&[u8]>),
        descending: bool,
    ) -> StoreResult<MergedByKey<'t>> {
        let (a, b): (StoredIter<'t>, StoredIter<'t>) = match descending {
            false => (
                Box::new(self.events.range(txn, range)?),
                Box::new(self.replaceable.range(txn, range)?),
            ),
            true => (
                Box::new(self.events.rev_range(txn, range)?),
                Box::new(self.replaceable.rev_range(txn, range)?),
            ),
        };
        Ok(MergedByKey {
            a: a.peekable(),
            b: b.peekable(),
            descending,
        })
    }

    /// Stored events in both tables.
    fn stored_len(&self, txn: &RoTxn<'_>) -> StoreResult<u64> {
        Ok(self.events.len(txn)? + self.replaceable.len(txn)?)
    }

    /// A whole stored value from what `events` or `replaceable` holds
    /// under `key`: with its tail appended when it was cut ([`FLAG_SPLIT`]).
    fn whole_value<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        key: &[u8],
        value: &'t [u8],
    ) -> StoreResult<Cow<'t, [u8]>> {
        if value.first().is_none_or(|h| h & FLAG_SPLIT == 0) {
            return Ok(Cow::Borrowed(value));
        }
        let tail = self
            .tails
            .get(txn, key)?
            .ok_or_else(|| StoreError::Corrupt("a cut stored value without its tail".into()))?;
        Ok(Cow::Owned([value, tail].concat()))
    }

    /// The expiration and the event record of what `events` or
    /// `replaceable` holds under `key`.
    fn read_value<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        key: &[u8],
        value: &'t [u8],
    ) -> StoreResult<Loaded<'t>> {
        match self.whole_value(txn, key, value)? {
            Cow::Borrowed(value) => {
                let (expires, stored) = split_value(value)?;
                Ok((expires, unpack(self.dicts(), stored)?))
            }
            Cow::Owned(value) => {
                let (expires, stored) = split_value(&value)?;
                Ok((
                    expires,
                    Cow::Owned(unpack(self.dicts(), stored)?.into_owned()),
                ))
            }
        }
    }

    /// The stored form of `record`: compressed when that is on and pays.
    /// The stored form of `record`: compressed when compression is on and
    /// the record is large enough, else the record itself.
    fn stored_form<'r>(&self, record: &'r [u8]) -> StoreResult<Cow<'r, [u8]>> {
        if !self.compress || record.len() < self.compress_min_bytes {
            return Ok(Cow::Borrowed(record));
        }
        compress(self.dicts(), record).map(Cow::Owned)
    }

    /// Stores the record with the entries a writer needs at once (`ids`,
    /// `replace`, `expiration`) and a `pending` row for the time-ordered
    /// indexes (`index_waiting`); the search index follows later
    /// (`index_search_into`).
    fn insert(&self, wtxn: &mut RwTxn<'_>, d: &Derived, event: &Incoming) -> StoreResult<u64> {
        let serial = self.next_serial(wtxn)?;
        let sb = schema::serial_bytes(serial);
        let mut value = Vec::with_capacity(event.record.len() + 11);
        match d.expires {
            Some(t) => {
                value.push(FLAG_EXPIRES | FLAG_KIND);
                value.extend_from_slice(&t.to_be_bytes());
                self.expiration
                    .put(wtxn, &schema::expiration_key(t, serial), &[])?;
            }
            None => value.push(FLAG_KIND),
        }
        // The kind in the clear: a search tests it without decompressing.
        value.extend_from_slice(&d.kind.as_u16().to_be_bytes());
        match &event.stored {
            Some(stored) => value.extend_from_slice(stored),
            None => value.extend_from_slice(&self.stored_form(&event.record)?),
        }
        // Serials only grow: appending fills leaf pages instead of splitting
        // them in half.
        let table = match d.address {
            Some(_) => self.replaceable,
            None => self.events,
        };
        match self.fit.cut(value.len()) {
            Some(at) => {
                value[0] |= FLAG_SPLIT;
                table.put_with_flags(wtxn, PutFlags::APPEND, &sb, &value[..at])?;
                self.tails
                    .put_with_flags(wtxn, PutFlags::APPEND, &sb, &value[at..])?;
            }
            None => table.put_with_flags(wtxn, PutFlags::APPEND, &sb, &value)?,
        }
        // The `ids` entry and the time-ordered index entries wait
        // (`index_waiting` writes them in batches, in key order): each sits
        // on its own page of its index, and a follow list alone has
        // hundreds. The row is appended; lookups by id find the waiting
        // ones through `waiting_ids`.
        self.pending.put_with_flags(
            wtxn,
            PutFlags::APPEND,
            &sb,
            &schema::pending_value(
                d.created_at,
                d.kind,
                &d.pubkey,
                Some(&d.id),
                &d.tag_prefixes,
            ),
        )?;
        self.waiting_ids
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .insert(d.id, serial);
        if let Some(address) = &d.address {
            self.replace.put(wtxn, address, &sb)?;
        }
        Ok(serial)
    }

    /// Writes the `ids` and time-ordered index entries of the oldest `max`
    /// events in `pending` and deletes the time-ordered entries of the
    /// first `max` removed events in `removed`, each index's keys in key
    /// order (entries of one prefix share pages: a replaced follow list's
    /// old and new entries sit side by side), and drops their rows. Call
    /// [`LmdbStore::drop_waiting_ids`] with `moved_through` once committed.
    fn index_waiting(&self, wtxn: &mut RwTxn<'_>, max: usize) -> StoreResult<WaitingBatch> {
        let work = self.waiting_work(wtxn, max)?;
        self.apply_waiting_work(wtxn, &work, &mut WorkPosition::default(), usize::MAX)?;
        self.finish_waiting_work(wtxn, &work)
    }

    /// Reads the oldest `max` rows of `pending` and of `removed`: the index
    /// changes they stand for, each index's sorted by key.
    fn waiting_work(&self, txn: &RoTxn<'_>, max: usize) -> StoreResult<WaitingWork> {
        let mut work = WaitingWork::default();
        work.last_added = self.waiting_changes(
            txn,
            self.pending,
            max,
            WaitingRows::Pending(&mut work.ids),
            &mut work.changes,
        )?;
        self.waiting_changes(
            txn,
            self.removed,
            max,
            WaitingRows::Removed(&mut work.dropped),
            &mut work.changes,
        )?;
        for changes in &mut work.changes {
            changes.sort_unstable();
        }
        work.ids.sort_unstable();
        Ok(work)
    }

    /// Applies `work` from `at` on, until about `max_writes` blocks and
    /// `ids` entries are written. Returns whether it is all applied. Every
    /// change is idempotent (adding an entry a block holds, or deleting one
    /// it lacks, changes nothing), so work interrupted between two
    /// transactions is simply applied again from its rows.
    fn apply_waiting_work(
        &self,
        wtxn: &mut RwTxn<'_>,
        work: &WaitingWork,
        at: &mut WorkPosition,
        max_writes: usize,
    ) -> StoreResult<bool> {
        let mut writes = 0;
        while let Some(changes) = work.changes.get(at.index) {
            if at.next >= changes.len() {
                *at = WorkPosition {
                    index: at.index + 1,
                    next: 0,
                };
                continue;
            }
            if writes >= max_writes {
                return Ok(false);
            }
            let db = self.table(table::TIME_ORDERED[at.index]);
            let (next, wrote) =
                self.update_time_blocks(wtxn, db, changes, at.next, max_writes - writes)?;
            at.next = next;
            writes += wrote;
        }
        while let Some((id, serial)) = work.ids.get(at.next) {
            if writes >= max_writes {
                return Ok(false);
            }
            if !work.cancelled.contains(serial) {
                self.ids.put(wtxn, &schema::id_entry(id, *serial), &[])?;
                writes += 1;
            }
            at.next += 1;
        }
        Ok(true)
    }

    /// Drops the rows `work` was read from, once it is applied.
    fn finish_waiting_work(
        &self,
        wtxn: &mut RwTxn<'_>,
        work: &WaitingWork,
    ) -> StoreResult<WaitingBatch> {
        // New rows of `pending` always come after the work's.
        if let Some(last) = work.last_added {
            let upper = schema::serial_bytes(last);
            self.pending
                .delete_range(wtxn, &(Bound::Unbounded, Bound::Included(&upper[..])))?;
        }
        for &serial in &work.dropped {
            self.removed.delete(wtxn, &schema::serial_bytes(serial))?;
        }
        Ok(WaitingBatch {
            more: !self.pending.is_empty(wtxn)? || !self.removed.is_empty(wtxn)?,
            moved_through: work.last_added,
        })
    }

    /// Applies `changes` to a time-ordered index: full keys (`prefix ‖
    /// created_at ‖ serial`), with `true` to add the entry and `false` to
    /// delete it. The index holds blocks of entries
    /// ([`schema::encode_time_blocks`]), each keyed by its first entry;
    /// the blocks of one prefix cover disjoint ranges. Each block a change
    /// falls in is read, changed and rewritten once, split when it outgrows
    /// `block_bytes`.
    fn update_time_index(
        &self,
        wtxn: &mut RwTxn<'_>,
        db: Db,
        mut changes: Vec<(TimeKey, bool)>,
    ) -> StoreResult<()> {
        changes.sort_unstable();
        self.update_time_blocks(wtxn, db, &changes, 0, usize::MAX)?;
        Ok(())
    }

    /// Applies the sorted `changes` from `start` on, a block at a time,
    /// until `max_writes` block writes (puts and deletes) are spent; each
    /// call applies at least one block's changes. Returns the first change
    /// not applied and the writes spent.
    fn update_time_blocks(
        &self,
        wtxn: &mut RwTxn<'_>,
        db: Db,
        changes: &[(TimeKey, bool)],
        start: usize,
        max_writes: usize,
    ) -> StoreResult<(usize, usize)> {
        let corrupt = |e: String| StoreError::Corrupt(e);
        let mut entries = Vec::new();
        let mut i = start;
        let mut writes = 0;
        while i < changes.len() && writes < max_writes {
            let first = changes[i].0;
            let (k, prefix) = (first.as_bytes(), first.prefix());
            // The block holding k: the last one keyed at or below it, else
            // (k is older than every entry) the prefix's first.
            let at_or_below = (Bound::Included(prefix), Bound::Included(k));
            let mut found = db.rev_range(wtxn, &at_or_below)?.next().transpose()?;
            if found.is_none() {
                let above = (Bound::Excluded(k), Bound::Unbounded);
                found = db
                    .range(wtxn, &above)?
                    .next()
                    .transpose()?
                    .filter(|(bk, _)| bk.starts_with(prefix));
            }
            entries.clear();
            let block_key = match found {
                Some((bk, value)) => {
                    schema::decode_time_block(bk, value, &mut entries).map_err(corrupt)?;
                    Some(bk.to_vec())
                }
                None => None,
            };
            // Later changes of this prefix below the next block's key fall
            // in this block too.
            let more_here = changes
                .get(i + 1)
                .is_some_and(|(k2, _)| k2.prefix() == prefix);
            let next_block = match (&block_key, more_here) {
                (Some(bk), true) => db
                    .range(wtxn, &(Bound::Excluded(&bk[..]), Bound::Unbounded))?
                    .next()
                    .transpose()?
                    .map(|(nk, _)| nk)
                    .filter(|nk| nk.starts_with(prefix))
                    .map(<[u8]>::to_vec),
                _ => None,
            };
            while let Some((ck, add)) = changes.get(i) {
                if ck.prefix() != prefix
                    || next_block
                        .as_ref()
                        .is_some_and(|nb| ck.as_bytes() >= &nb[..])
                {
                    break;
                }
                let entry = ck.entry();
                match (entries.binary_search(&entry), add) {
                    (Err(at), true) => entries.insert(at, entry),
                    (Ok(at), false) => {
                        entries.remove(at);
                    }
                    _ => {}
                }
                i += 1;
            }
            let blocks = schema::encode_time_blocks(&entries, self.block_bytes);
            if let Some(bk) = &block_key {
                let reused = blocks
                    .first()
                    .is_some_and(|(suffix, _)| bk[prefix.len()..] == suffix[..]);
                if !reused {
                    db.delete(wtxn, bk)?;
                    writes += 1;
                }
            }
            for (suffix, value) in &blocks {
                db.put(wtxn, &key(&[prefix, suffix]), value)?;
            }
            writes += blocks.len();
        }
        Ok((i, writes))
    }

    /// Rewrites every time-ordered index in full blocks, in write
    /// transactions of about [`REPACK_CHUNK`] blocks read, while
    /// `meta/repack` is present (after an upgrade from a schema that kept
    /// one entry per key); the marker is removed with the last chunk.
    fn repack_time_indexes(&self) -> StoreResult<()> {
        {
            let txn = self.env.read_txn()?;
            if self.meta.get(&txn, REPACK)?.is_none() {
                return Ok(());
            }
        }
        for name in table::TIME_ORDERED {
            let db = self.table(name);
            let prefix_len = schema::time_prefix_len(name);
            let mut after: Option<Vec<u8>> = None;
            let mut done = 0u64;
            loop {
                let mut wtxn = self.env.write_txn()?;
                let mut read = Vec::new();
                let mut packed = Vec::new();
                {
                    let from = match &after {
                        Some(k) => Bound::Excluded(&k[..]),
                        None => Bound::Unbounded,
                    };
                    let mut packer = BlockPacker::new(prefix_len, self.block_bytes);
                    let mut collect = |k: &[u8], v: &[u8]| -> StoreResult<()> {
                        packed.push((k.to_vec(), v.to_vec()));
                        Ok(())
                    };
                    for item in db.range(&wtxn, &(from, Bound::Unbounded))? {
                        let (k, v) = item?;
                        read.push(k.to_vec());
                        packer.push(k, v, &mut collect)?;
                        if read.len() >= REPACK_CHUNK {
                            break;
                        }
                    }
                    packer.finish(&mut collect)?;
                }
                for k in &read {
                    db.delete(&mut wtxn, k)?;
                }
                for (k, v) in &packed {
                    db.put(&mut wtxn, k, v)?;
                }
                let last_chunk = read.len() < REPACK_CHUNK;
                if last_chunk && name == table::TAG {
                    self.meta.delete(&mut wtxn, REPACK)?;
                }
                wtxn.commit()?;
                done += read.len() as u64;
                if last_chunk {
                    break;
                }
                tracing::info!(table = name, blocks = done, "repacking an index");
                after = read.pop();
            }
        }
        Ok(())
    }

    /// Adds to `changes`, per time-ordered index, the keys of the first
    /// `max` rows of `pending` (entries to add; the rows' `ids` entries go
    /// to the given list) or `removed` (entries to delete; the rows'
    /// serials go to the given list); returns the last serial read.
    fn waiting_changes(
        &self,
        txn: &RoTxn<'_>,
        rows: Db,
        max: usize,
        mut read: WaitingRows<'_>,
        changes: &mut [Vec<(TimeKey, bool)>; 5],
    ) -> StoreResult<Option<u64>> {
        let add = matches!(read, WaitingRows::Pending(_));
        let mut last = None;
        for item in rows.iter(txn)?.take(max) {
            let (k, v) = item?;
            let serial = schema::serial_from(k)
                .ok_or_else(|| StoreError::Corrupt("bad waiting-row key".into()))?;
            let row = waiting_row(v)?;
            let suffix = schema::entry_suffix((row.created_at, serial));
            match &mut read {
                // Rows from before schema 10 have no id: their entry is in `ids`.
                WaitingRows::Pending(ids) => {
                    if let Some(id) = row.id() {
                        ids.push((*id, serial));
                    }
                }
                WaitingRows::Removed(serials) => serials.push(serial),
            }
            for (name, changes) in table::TIME_ORDERED.iter().zip(changes.iter_mut()) {
                // Row prefixes have fixed lengths, all within a time key.
                row.for_each_prefix(name, |prefix| {
                    changes.extend(TimeKey::new(prefix, &suffix).map(|k| (k, add)))
                });
            }
            last = Some(serial);
        }
        Ok(last)
    }

    /// Schema 6 upgrade: writes the tag entries waiting in `pending_tags`
    /// (`created_at (8, BE) ‖ tag key × n` per serial) and empties it.
    fn write_legacy_pending_tags(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
        let Some(legacy) = self
            .env
            .open_database::<Bytes, Bytes>(wtxn, Some(table::LEGACY_PENDING_TAGS))?
        else {
            return Ok(());
        };
        let mut changes = Vec::new();
        for item in legacy.iter(wtxn)? {
            let (k, v) = item?;
            let bad = || StoreError::Corrupt("bad pending_tags row".into());
            let (created, tag_keys) = v.split_first_chunk::<8>().ok_or_else(bad)?;
            if k.len() != 8 || tag_keys.len() % schema::TAG_PREFIX != 0 {
                return Err(bad());
            }
            let serial = schema::serial_from(k).ok_or_else(bad)?;
            let suffix = schema::entry_suffix((u64::from_be_bytes(*created), serial));
            for tag_key in tag_keys.chunks_exact(schema::TAG_PREFIX) {
                changes.extend(TimeKey::new(tag_key, &suffix).map(|k| (k, true)));
            }
        }
        self.update_time_index(wtxn, self.tag, changes)?;
        legacy.clear(wtxn)?;
        Ok(())
    }

    /// Removes a stored event and all its index entries.
    fn remove(&self, wtxn: &mut RwTxn<'_>, serial: u64) -> StoreResult<bool> {
        let sb = schema::serial_bytes(serial);
        let Some((table, value)) = self.stored_value(wtxn, &sb)? else {
            return Ok(false);
        };
        let value = self.whole_value(wtxn, &sb, value)?.into_owned();
        let (expires, stored) = split_value(&value)?;
        let record = unpack(self.dicts(), stored)?.into_owned();
        let view = decode(&record)?;
        // The search index may hold its postings: they are taken out from
        // this copy (`index_search`).
        let search_copy =
            (self.search.is_some() && search::indexed_kind(view.kind())).then(|| stored.to_vec());
        let d = derive(&view);
        table.delete(wtxn, &sb)?;
        if value[0] & FLAG_SPLIT != 0 {
            self.tails.delete(wtxn, &sb)?;
        }
        if let Some(copy) = search_copy {
            self.search_removed.put(wtxn, &sb, &copy)?;
        }
        self.ids
            .delete(wtxn, &schema::id_entry(d.id.as_bytes(), serial))?;
        // Its time-ordered entries were either never written (the row is
        // still waiting: dropped) or all written: they are deleted by the
        // next batch, and until then lead to a serial that is gone, which
        // every reader skips. A row the batch in flight has read may have
        // some written, and more to come: that batch skips its `ids` entry,
        // and the next one deletes the rest.
        let in_flight = self.cancel_in_flight(serial);
        if !self.pending.delete(wtxn, &sb)? || in_flight {
            self.removed.put(
                wtxn,
                &sb,
                &schema::pending_value(d.created_at, d.kind, &d.pubkey, None, &d.tag_prefixes),
            )?;
        }
        if let Some(address) = &d.address {
            if self.replace.get(wtxn, address)? == Some(&sb[..]) {
                self.replace.delete(wtxn, address)?;
            }
        }
        if let Some(t) = expires {
            self.expiration
                .delete(wtxn, &schema::expiration_key(t, serial))?;
        }
        Ok(true)
    }

    /// Tells the index batch in flight, if it read `serial`'s row, that the
    /// event is being removed; returns whether it had.
    fn cancel_in_flight(&self, serial: u64) -> bool {
        let mut slot = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_mut() {
            Some(flight) if flight.work.last_added.is_some_and(|last| serial <= last) => {
                flight.work.cancelled.insert(serial);
                true
            }
            _ => false,
        }
    }

    /// Applies one transaction of the index batch in flight (`index_txn_writes`
    /// writes) and commits it; the last one drops the batch's rows. With
    /// none in flight, `start` reads a new batch of at most that many
    /// events' rows, if any wait. Between two calls the writer commits new
    /// events: a batch of thousands of events no longer holds them up for
    /// all its transactions at once.
    fn step_waiting_work(&self, start: Option<usize>) -> StoreResult<Step> {
        // LMDB's writer lock first, then the slot (as `remove` takes them).
        let mut wtxn = self.env.write_txn()?;
        let mut slot = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let Some(max) = start else {
                return Ok(Step::Idle);
            };
            if self.pending.is_empty(&wtxn)? && self.removed.is_empty(&wtxn)? {
                return Ok(Step::Idle);
            }
            *slot = Some(InFlight {
                work: self.waiting_work(&wtxn, max.max(1))?,
                at: WorkPosition::default(),
            });
        }
        let flight = slot.as_mut().expect("a batch in flight");
        // Advanced only once committed: an aborted transaction is applied again.
        let mut at = flight.at;
        if !self.apply_waiting_work(&mut wtxn, &flight.work, &mut at, self.index_txn_writes)? {
            wtxn.commit()?;
            flight.at = at;
            return Ok(Step::More);
        }
        let flight = slot.take().expect("a batch in flight");
        // Should this commit fail, the rows stay and the next batch reads them again.
        let batch = self.finish_waiting_work(&mut wtxn, &flight.work)?;
        self.delete_applied_removals(&mut wtxn)?;
        wtxn.commit()?;
        drop(slot);
        self.drop_waiting_ids(batch.moved_through);
        Ok(Step::Finished)
    }

    /// Applies the rest of the index batch in flight inside `wtxn` and drops
    /// its rows, for a writer that must see every entry written (NIP-62).
    fn finish_in_flight_in(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
        let flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(mut flight) = flight {
            self.apply_waiting_work(wtxn, &flight.work, &mut flight.at, usize::MAX)?;
            self.finish_waiting_work(wtxn, &flight.work)?;
        }
        Ok(())
    }

    /// The serial of a stored event by id, in `txn`'s snapshot: from
    /// `ids`, or from the event's `pending` row while its entry waits.
    fn serial_of(&self, txn: &RoTxn<'_>, id: &EventId) -> StoreResult<Option<u64>> {
        Ok(self.lookup_id(txn, id)?.map(|(serial, _)| serial))
    }

    /// Like [`Self::serial_of`], with the stored value when the lookup read
    /// it to check the id (an `ids` hit), so a query need not read it again.
    fn lookup_id<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        id: &EventId,
    ) -> StoreResult<Option<(u64, Option<Loaded<'t>>)>> {
        // Keys hold a prefix of the id: each stored event under it is
        // checked (one, nearly always; none for a new event).
        for item in self
            .ids
            .prefix_iter(txn, &id.as_bytes()[..schema::ID_PREFIX])?
        {
            let (k, _) = item?;
            let serial = schema::serial_from(&k[schema::ID_PREFIX..])
                .ok_or_else(|| StoreError::Corrupt("bad ids key".into()))?;
            if let Some(loaded) = self.load(txn, serial)? {
                if decode(&loaded.1)?.id() == id {
                    return Ok(Some((serial, Some(loaded))));
                }
            }
        }
        let (hit, dropped_through) = {
            let waiting = self.waiting_ids.read().unwrap_or_else(|e| e.into_inner());
            (waiting.by_id.get(id).copied(), waiting.dropped_through)
        };
        // The map may name an event this snapshot does not hold (not yet
        // committed, or its commit failed): only the row counts.
        if let Some(serial) = hit {
            if self.waiting_row_id(txn, serial)? == Some(*id.as_bytes()) {
                return Ok(Some((serial, None)));
            }
        }
        // A snapshot taken before the last batch still holds rows the map
        // has dropped since: those are read (none, for a newer snapshot).
        let upper = schema::serial_bytes(dropped_through);
        for item in self
            .pending
            .range(txn, &(Bound::Unbounded, Bound::Included(&upper[..])))?
        {
            let (k, v) = item?;
            let row = waiting_row(v)?;
            if row.id() == Some(id.as_bytes()) {
                return Ok(schema::serial_from(k).map(|serial| (serial, None)));
            }
        }
        Ok(None)
    }

    /// Schema 12 and older keyed `ids` by the whole id, the serial as its
    /// value: rewritten as [`schema::id_entry`] keys, in the transaction
    /// that raises the schema.
    fn shorten_id_keys(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
        let mut keys = Vec::new();
        for item in self.ids.iter(wtxn)? {
            let (k, v) = item?;
            let bad = || StoreError::Corrupt("bad ids entry".into());
            let id: &[u8; 32] = k.try_into().map_err(|_| bad())?;
            keys.push(schema::id_entry(
                id,
                schema::serial_from(v).ok_or_else(bad)?,
            ));
        }
        if keys.is_empty() {
            return Ok(());
        }
        tracing::info!(
            entries = keys.len(),
            "rewriting the id index with shorter keys"
        );
        self.ids.clear(wtxn)?;
        keys.sort_unstable();
        for key in &keys {
            self.ids.put_with_flags(wtxn, PutFlags::APPEND, key, &[])?;
        }
        Ok(())
    }

    /// The id in the `pending` row of `serial`, if it has one.
    fn waiting_row_id(&self, txn: &RoTxn<'_>, serial: u64) -> StoreResult<Option<[u8; 32]>> {
        let Some(value) = self.pending.get(txn, &schema::serial_bytes(serial))? else {
            return Ok(None);
        };
        let row = waiting_row(value)?;
        Ok(row.id().copied())
    }

    /// After the commit of a batch that moved the `pending` rows up to
    /// `through` into the indexes: their ids are in `ids` now.
    fn drop_waiting_ids(&self, through: Option<u64>) {
        if let Some(through) = through {
            let mut waiting = self.waiting_ids.write().unwrap_or_else(|e| e.into_inner());
            waiting.by_id.retain(|_, serial| *serial > through);
            waiting.dropped_through = waiting.dropped_through.max(through);
        }
    }

    /// Applies one verified event inside the batch transaction.
    fn apply_one(&self, wtxn: &mut RwTxn<'_>, event: &Incoming, now: u64) -> StoreResult<Verdict> {
        let view = decode(&event.record)?;
        let d = derive(&view);
        if self.serial_of(wtxn, &d.id)?.is_some() {
            return Ok(Verdict::Duplicate);
        }
        if self.is_deleted(wtxn, &d)? {
            return Ok(Verdict::Deleted);
        }
        if let Some(expires) = d.expires {
            if expires <= now {
                // Checked by ingest too; a batch may cross the second.
                return Ok(Verdict::Deleted);
            }
        }
        if let Some(address) = &d.address {
            if let Some(old) = self
                .replace
                .get(wtxn, address)?
                .and_then(schema::serial_from)
            {
                if let Some((_, old_record)) = self.load(wtxn, old)? {
                    let old_view = decode(&old_record)?;
                    let old_key = (Reverse(old_view.created_at()), *old_view.id());
                    let new_key = (Reverse(d.created_at), d.id);
                    // Keep the newest; on equal time the lowest id.
                    if old_key <= new_key {
                        return Ok(Verdict::Superseded);
                    }
                }
                self.remove(wtxn, old)?;
            }
        }
        if d.kind == Kind::DELETION {
            self.apply_deletion(wtxn, &view)?;
        }
        if d.kind.as_u16() == 62 && self.vanish_applies(&view) {
            self.apply_vanish(wtxn, &view)?;
        }
        let serial = self.insert(wtxn, &d, event)?;
        Ok(Verdict::Stored(serial))
    }

    fn is_deleted(&self, txn: &RoTxn<'_>, d: &Derived) -> StoreResult<bool> {
        let tombstone = schema::tombstone_key(&d.id, &d.pubkey);
        if self.deleted_ids.get(txn, &tombstone)?.is_some() {
            return Ok(true);
        }
        if let Some(deleter) = self
            .deleted_ids
            .get(txn, schema::legacy_tombstone_key(&d.id))?
        {
            if deleter == d.pubkey.as_bytes() {
                return Ok(true);
            }
        }
        if let Some(address) = &d.address {
            if let Some(t) = self.deleted_addrs.get(txn, address)? {
                let t = u64::from_be_bytes(t.try_into().unwrap_or([0; 8]));
                if d.created_at.as_u64() <= t {
                    return Ok(true);
                }
            }
        }
        let vanish = key(&[b"vanish:", d.pubkey.as_bytes()]);
        if let Some(t) = self.deleted_addrs.get(txn, &vanish)? {
            let t = u64::from_be_bytes(t.try_into().unwrap_or([0; 8]));
            if d.created_at.as_u64() <= t && d.kind.as_u16() != 62 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn raise_marker(&self, wtxn: &mut RwTxn<'_>, key: &[u8], t: u64) -> StoreResult<()> {
        let current = self
            .deleted_addrs
            .get(wtxn, key)?
            .map(|v| u64::from_be_bytes(v.try_into().unwrap_or([0; 8])));
        if current.is_none_or(|c| c < t) {
            self.deleted_addrs.put(wtxn, key, &t.to_be_bytes())?;
        }
        Ok(())
    }

    /// NIP-09: `e` tags delete the author's own events (never deletions or
    /// vanish requests); `a` tags delete the author's versions up to the
    /// request's time. Tombstones block re-submission.
    fn apply_deletion(&self, wtxn: &mut RwTxn<'_>, request: &EventView<'_>) -> StoreResult<()> {
        let author = *request.pubkey();
        let until = request.created_at().as_u64();
        for tag in request.tags() {
            let (Some(value), name) = (tag.first_value(), tag.name()) else {
                continue;
            };
            if name.eq_str("e") {
                let Ok(id) = EventId::from_hex(&value.to_str()) else {
                    continue;
                };
                if let Some(serial) = self.serial_of(wtxn, &id)? {
                    let Some((_, record)) = self.load(wtxn, serial)? else {
                        continue;
                    };
                    let target = decode(&record)?;
                    let kind = target.kind().as_u16();
                    if *target.pubkey() != author || kind == 5 || kind == 62 {
                        continue;
                    }
                    self.remove(wtxn, serial)?;
                }
                // One tombstone per requesting author: a request by anyone
                // else never replaces the author's (the event may arrive
                // later, and only its author's tombstone refuses it).
                self.deleted_ids
                    .put(wtxn, &schema::tombstone_key(&id, &author), &[])?;
            } else if name.eq_str("a") {
                let Some((kind, pubkey, d)) = parse_address(&value.to_str()) else {
                    continue;
                };
                if pubkey != author || !(kind.is_replaceable() || kind.is_addressable()) {
                    continue;
                }
                let address = if kind.is_addressable() {
                    schema::address(kind, &pubkey, Some(&d))
                } else {
                    schema::address(kind, &pubkey, None)
                };
                self.raise_marker(wtxn, &address, until)?;
                if let Some(serial) = self
                    .replace
                    .get(wtxn, &address)?
                    .and_then(schema::serial_from)
                {
                    if let Some((_, record)) = self.load(wtxn, serial)? {
                        if decode(&record)?.created_at().as_u64() <= until {
                            self.remove(wtxn, serial)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn vanish_applies(&self, request: &EventView<'_>) -> bool {
        request.tags().any(|tag| {
            tag.name().eq_str("relay")
                && tag.first_value().is_some_and(|v| {
                    let v = v.to_str();
                    v == "ALL_RELAYS"
                        || self
                            .relay_urls
                            .iter()
                            .any(|u| u.trim_end_matches('/') == v.trim_end_matches('/'))
                })
        })
    }

    /// NIP-62: removes everything the author published up to the request's
    /// time (deletions included) and gift wraps addressed to them.
    fn apply_vanish(&self, wtxn: &mut RwTxn<'_>, request: &EventView<'_>) -> StoreResult<()> {
        let author = *request.pubkey();
        let until = request.created_at();
        self.raise_marker(wtxn, &key(&[b"vanish:", author.as_bytes()]), until.as_u64())?;
        // The sweep below reads `pubkey` and `tag`: nothing may wait.
        self.finish_in_flight_in(wtxn)?;
        self.index_waiting(wtxn, usize::MAX)?;
        let mut doomed = Vec::new();
        {
            let upper = (until.as_u64(), u64::MAX);
            let mut by_author = TimeWalk::new(wtxn, self.pubkey, author.as_bytes(), (0, 0), upper)?;
            while let Some((_, serial)) = by_author.next()? {
                doomed.push(serial);
            }
            let author_hex = author.to_hex();
            let wrap = schema::tag_prefix(b'p', &author_hex);
            let mut wraps = TimeWalk::new(wtxn, self.tag, &wrap, (0, 0), upper)?;
            while let Some((_, serial)) = wraps.next()? {
                if let Some((_, record)) = self.load(wtxn, serial)? {
                    // The tag key holds 8 bytes of the value: re-check it.
                    let view = decode(&record)?;
                    let addressed = view.tags().any(|t| {
                        t.name().eq_str("p")
                            && t.first_value().is_some_and(|v| v.eq_str(&author_hex))
                    });
                    if view.kind().as_u16() == 1059 && addressed {
                        doomed.push(serial);
                    }
                }
            }
        }
        for serial in doomed {
            self.remove(wtxn, serial)?;
        }
        Ok(())
    }

    /// A stored event as a query returns it: canonical JSON, or its
    /// uncompressed nwb record when `as_record` (binary connections).
    fn render_record(&self, serial: u64, record: &[u8], as_record: bool) -> StoreResult<Found> {
        let form = if as_record { Form::Record } else { Form::Json };
        Ok(found(serial, &decode(record)?, form))
    }

    /// Adds a search result to `cursor`: rendered, or deferred once the
    /// cursor's `render_bytes` are spent.
    fn push_result(&self, cursor: &mut QueryCursor, serial: u64, record: &[u8]) -> StoreResult<()> {
        let f = if cursor.renders_now() {
            self.render_record(serial, record, cursor.records)?
        } else {
            found(serial, &decode(record)?, Form::IdOnly)
        };
        cursor.rendered += f.json.len() + f.record.len();
        cursor.found.push(f);
        Ok(())
    }

    /// Tests one candidate; records it when it matches.
    fn consider(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        cursor.examined += 1;
        if cursor.seen.contains(&serial) {
            return Ok(());
        }
        let Some(loaded) = self.load(txn, serial)? else {
            return Ok(());
        };
        self.consider_loaded(serial, loaded, filter, cursor, now)
    }

    /// [`Self::consider`] for an event already read (and counted).
    fn consider_loaded(
        &self,
        serial: u64,
        (expires, record): Loaded<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        if expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        let view = decode(&record)?;
        if !filter.matches(&view) || !ReadGate::admits(cursor.gate.as_deref(), &view) {
            return Ok(());
        }
        cursor.seen.insert(serial);
        if cursor.count_only {
            cursor.counted += 1;
            return Ok(());
        }
        let form = if cursor.ids_only || !cursor.renders_now() {
            Form::IdOnly
        } else if cursor.records {
            Form::Record
        } else {
            Form::Json
        };
        let f = found(serial, &view, form);
        cursor.rendered += f.json.len() + f.record.len();
        cursor.found.push(f);
        if cursor.found.len() == cursor.limit {
            cursor.boundary = Some(view.created_at().as_u64());
        }
        Ok(())
    }

    /// The search plan for `filter`, or `None` when nothing can match
    /// (search off, no usable terms, or a term no event holds).
    /// Plans a search: `search` reads the index, `txn` the stored events
    /// (a snapshot taken after the index's).
    fn plan_search(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
    ) -> StoreResult<Option<Plan>> {
        let (index, stxn) = (search.index, &search.txn);
        let Some(text) = filter.search.as_deref() else {
            return Ok(None);
        };
        let Some(mark) = index.indexed(stxn)? else {
            return Ok(None);
        };
        let last = self.last_serial(txn)?;
        if last.saturating_sub(mark) > self.search_max_unindexed {
            return Err(StoreError::SearchBehind {
                indexed: mark,
                stored: last,
            });
        }
        let (docs, tokens) = index.totals(stxn)?;
        let query = Query::parse(text);
        if query.terms.is_empty() {
            return Ok(None);
        }
        let df = vec![0; query.terms.len()];
        Ok(Some(Plan::SearchTail(Box::new(SearchTail {
            terms: query.terms,
            mark,
            upper: last,
            walked_to: mark,
            docs,
            tokens,
            df,
            matches: Vec::new(),
        }))))
    }

    /// Tokenizes at most `budget` of the stored events above the index's
    /// mark (those stored when the search was planned), with the same rules
    /// as the index; once all are walked, plans the walk of the index
    /// ([`Plan::Search`]), or ends the search when a term is nowhere.
    fn scan_search_tail(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        let Some(Plan::SearchTail(mut tail)) = cursor.plan.take() else {
            unreachable!("search tail plan");
        };
        let t = &mut *tail;
        let (walked, last) =
            self.walk_unindexed(txn, (t.walked_to, t.upper), budget, |serial, terms| {
                let Some(terms) = terms else {
                    return;
                };
                t.docs += 1;
                t.tokens += u64::from(terms.len);
                let tfs: Vec<u16> = t
                    .terms
                    .iter()
                    .map(|term| terms.terms.get(term).copied().unwrap_or(0))
                    .collect();
                for (df, &tf) in t.df.iter_mut().zip(&tfs) {
                    *df += u64::from(tf > 0);
                }
                if tfs.iter().all(|&tf| tf > 0) {
                    // Scored with the length a posting would keep, like indexed events.
                    t.matches
                        .push((serial, tfs, schema::stored_length(terms.len)));
                }
            })?;
        cursor.examined += walked as u64;
        if walked == budget && last.is_some_and(|s| s < t.upper) {
            t.walked_to = last.unwrap_or(t.walked_to);
            cursor.plan = Some(Plan::SearchTail(tail));
            return Ok(ScanStatus::More);
        }
        let (index, stxn) = (search.index, &search.txn);
        let avg_len = t.tokens as f64 / t.docs.max(1) as f64;
        let mut idfs = Vec::with_capacity(t.terms.len());
        let mut terms = Vec::with_capacity(t.terms.len());
        for (term, tail_df) in t.terms.iter().zip(&t.df) {
            let prefix = schema::term_prefix(term);
            // Postings written above the planned mark since (or by a batch
            // before its last commit) are counted in the tail instead.
            let held = index.document_frequency(stxn, &prefix)?;
            let above = index.postings_above(stxn, &prefix, t.mark)?;
            match held.saturating_sub(above) + tail_df {
                0 => return Ok(ScanStatus::Done),
                df => {
                    let idf = search::idf(t.docs, df);
                    idfs.push(idf);
                    terms.push((df, prefix, idf));
                }
            }
        }
        let scored = std::mem::take(&mut t.matches)
            .into_iter()
            .map(|(serial, tfs, len)| {
                let score = idfs
                    .iter()
                    .zip(tfs)
                    .map(|(&idf, tf)| search::term_score(idf, tf, len, avg_len))
                    .sum();
                (serial, score)
            })
            .collect();
        terms.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        cursor.plan = Some(Plan::Search {
            terms: terms
                .into_iter()
                .map(|(_, prefix, idf)| (prefix, idf))
                .collect(),
            avg_len,
            tail: scored,
            // The walk starts at the mark: the tail holds the events above.
            resume_below: Some(t.mark.saturating_add(1)),
            reads: 0,
            done: false,
        });
        // The rest of this slice goes to the index.
        let left = budget.saturating_sub(walked).max(1);
        self.scan_search(search, txn, filter, cursor, left, now)
    }

    /// Walks the rarest term's postings newest first, probes the other terms
    /// per candidate (AND), scores matches with BM25 and, at the end, keeps
    /// the `limit` best. At most `search_max_reads` index entries are read.
    fn scan_search(
        &self,
        search: &SearchSnapshot<'_>,
        txn: &RoTxn<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        let (index, stxn) = (search.index, &search.txn);
        let Some(Plan::Search {
            terms,
            avg_len,
            tail,
            mut resume_below,
            mut reads,
            done,
        }) = cursor.plan.take()
        else {
            unreachable!("search plan");
        };
        let mut status = ScanStatus::Done;
        for (serial, score) in tail {
            self.rank(txn, serial, score, filter, cursor, now)?;
        }
        if !done {
            let (rarest, rest) = terms.split_first().expect("at least one term");
            let lower = schema::search_key(&rarest.0, 0);
            // Blocks keyed below the resume point (a block may still hold
            // serials at or above it: they are skipped), else every block:
            // below the term's document frequency entry (serial FF×8).
            let upper = match resume_below {
                Some(serial) => schema::search_key(&rarest.0, serial),
                None => schema::df_key(&rarest.0),
            };
            let range = (Bound::Included(&lower[..]), Bound::Excluded(&upper[..]));
            // The block each other term was last probed in: candidates come
            // newest first, so consecutive probes mostly land in it again.
            let mut probed: Vec<Option<(u64, Vec<Posting>)>> = vec![None; rest.len()];
            let mut spent = 0;
            'blocks: for item in index.postings.rev_range(stxn, &range)? {
                let (k, v) = item?;
                for posting in postings(k, v)?.into_iter().rev() {
                    if resume_below.is_some_and(|below| posting.serial >= below) {
                        continue;
                    }
                    if reads >= self.search_max_reads {
                        tracing::debug!(reads, "search stopped at its read cap");
                        cursor.capped = true;
                        break 'blocks;
                    }
                    if spent >= budget {
                        status = ScanStatus::More;
                        break 'blocks;
                    }
                    let serial = posting.serial;
                    resume_below = Some(serial);
                    reads += 1;
                    spent += 1;
                    cursor.examined += 1;
                    let len = posting.len;
                    let mut score = search::term_score(rarest.1, posting.tf, len, avg_len);
                    let mut all = true;
                    for ((prefix, idf), cached) in rest.iter().zip(&mut probed) {
                        reads += 1;
                        spent += 1;
                        if cached.as_ref().is_none_or(|(from, _)| *from > serial) {
                            *cached = index
                                .block_holding(stxn, prefix, serial)?
                                .map(|(key, block)| block_serial(&key).map(|s| (s, block)))
                                .transpose()?;
                        }
                        let tf = cached.as_ref().and_then(|(_, block)| {
                            block
                                .binary_search_by_key(&serial, |p| p.serial)
                                .ok()
                                .map(|i| block[i].tf)
                        });
                        match tf {
                            Some(tf) => score += search::term_score(*idf, tf, len, avg_len),
                            None => {
                                all = false;
                                break;
                            }
                        }
                    }
                    if all {
                        self.rank(txn, serial, score, filter, cursor, now)?;
                        if cursor.count_only && cursor.counted >= cursor.limit as u64 {
                            break 'blocks;
                        }
                    }
                }
            }
            if status == ScanStatus::Done {
                self.finish_search(txn, cursor)?;
            }
        }
        cursor.plan = Some(Plan::Search {
            terms,
            avg_len,
            tail: Vec::new(),
            resume_below,
            reads,
            done: status == ScanStatus::Done,
        });
        Ok(status)
    }

    /// Tests one search candidate against the rest of the filter; keeps it
    /// for ranking when it matches.
    fn rank(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        score: f64,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        if cursor.rank_unloaded {
            // The stored value's header says whether the event is there and
            // unexpired; nothing is decompressed.
            let key = schema::serial_bytes(serial);
            let Some((_, value)) = self.stored_value(txn, &key)? else {
                return Ok(());
            };
            let header = ValueHeader::read(value)?;
            if header.expires.is_some_and(|t| t <= now) {
                return Ok(());
            }
            if let Some(kinds) = &filter.kinds {
                let kind = match header.kind {
                    Some(kind) => kind,
                    // Stored before values carried their kind.
                    None => match self.load(txn, serial)? {
                        Some((_, record)) => decode(&record)?.kind(),
                        None => return Ok(()),
                    },
                };
                if !kinds.contains(&kind) {
                    return Ok(());
                }
            }
            if !cursor.seen.insert(serial) {
                return Ok(());
            }
            if cursor.count_only {
                cursor.counted += 1;
            } else {
                cursor.ranked.push(Ranked {
                    score,
                    created_at: 0,
                    id: EventId::from_bytes([0; 32]),
                    serial,
                });
            }
            return Ok(());
        }
        let Some((expires, record)) = self.load(txn, serial)? else {
            return Ok(());
        };
        if expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        let view = decode(&record)?;
        if !filter.matches(&view)
            || !ReadGate::admits(cursor.gate.as_deref(), &view)
            || !cursor.seen.insert(serial)
        {
            return Ok(());
        }
        if cursor.count_only {
            cursor.counted += 1;
            return Ok(());
        }
        cursor.ranked.push(Ranked {
            score,
            created_at: view.created_at().as_u64(),
            id: *view.id(),
            serial,
        });
        Ok(())
    }

    /// Orders the search matches (score, then newest, then lowest id) and
    /// renders the `limit` best into `found`.
    fn finish_search(&self, txn: &RoTxn<'_>, cursor: &mut QueryCursor) -> StoreResult<()> {
        if cursor.rank_unloaded {
            return self.finish_unloaded_search(txn, cursor);
        }
        let mut ranked = std::mem::take(&mut cursor.ranked);
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.created_at.cmp(&a.created_at))
                .then(a.id.cmp(&b.id))
        });
        ranked.truncate(cursor.limit);
        for r in ranked {
            if let Some((_, record)) = self.load(txn, r.serial)? {
                self.push_result(cursor, r.serial, &record)?;
            }
        }
        Ok(())
    }

    /// [`Self::finish_search`] for matches ranked from their postings alone:
    /// loads them best score first, a whole group of equal scores at a time
    /// (`created_at` and id order a group), until `limit` are loaded, then
    /// orders and renders those. An event deleted since it was ranked (a
    /// search runs in slices, each on its own snapshot) makes room for the
    /// next.
    fn finish_unloaded_search(&self, txn: &RoTxn<'_>, cursor: &mut QueryCursor) -> StoreResult<()> {
        let mut ranked = std::mem::take(&mut cursor.ranked);
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut picked: Vec<(Ranked, Vec<u8>)> = Vec::new();
        let mut next = 0;
        while next < ranked.len() && picked.len() < cursor.limit {
            let score = ranked[next].score;
            while let Some(r) = ranked
                .get(next)
                .filter(|r| r.score.total_cmp(&score).is_eq())
            {
                next += 1;
                let Some((_, record)) = self.load(txn, r.serial)? else {
                    continue;
                };
                let view = decode(&record)?;
                let r = Ranked {
                    created_at: view.created_at().as_u64(),
                    id: *view.id(),
                    ..r.clone()
                };
                picked.push((r, record.into_owned()));
            }
        }
        picked.sort_by(|(a, _), (b, _)| {
            b.score
                .total_cmp(&a.score)
                .then(b.created_at.cmp(&a.created_at))
                .then(a.id.cmp(&b.id))
        });
        picked.truncate(cursor.limit);
        for (r, record) in picked {
            self.push_result(cursor, r.serial, &record)?;
        }
        Ok(())
    }

    fn scan_index(
        &self,
        txn: &RoTxn<'_>,
        filter: &Filter,
        table_name: &'static str,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        let db = self.table(table_name);
        let since = filter.since.unwrap_or_default();
        let until = filter.until.unwrap_or(Timestamp::MAX);
        let Some(Plan::Index { ranges, tail, .. }) = cursor.plan.take() else {
            unreachable!("index plan");
        };
        let mut ranges = ranges;
        let mut tail = match tail {
            Some(tail) => tail,
            None => self.pending_matches(txn, table_name, since, until, |prefix| {
                ranges.iter().any(|r| r.prefix == prefix)
            })?,
        };
        // The tail's place in the heap: after the ranges.
        let from_tail = ranges.len();
        let result = (|| {
            // One walk per live range, merged on (created_at, serial).
            let mut walks = Vec::with_capacity(ranges.len());
            let mut heap = BinaryHeap::new();
            for (i, r) in ranges.iter().enumerate() {
                if r.done {
                    walks.push(None);
                    continue;
                }
                let upper = r.resume_below.unwrap_or((until.as_u64(), u64::MAX));
                let mut walk = TimeWalk::new(txn, db, &r.prefix, (since.as_u64(), 0), upper)?;
                match walk.next()? {
                    Some((t, s)) => {
                        heap.push((t, s, i));
                        walks.push(Some(walk));
                    }
                    None => walks.push(None),
                }
            }
            if let Some(&(t, s)) = tail.last() {
                heap.push((t, s, from_tail));
            }
            let mut spent = 0usize;
            loop {
                let Some((t, serial, i)) = heap.pop() else {
                    for r in ranges.iter_mut() {
                        r.done = true;
                    }
                    return Ok(ScanStatus::Done);
                };
                if cursor.boundary.is_some_and(|b| t < b) {
                    return Ok(ScanStatus::Done);
                }
                self.consider(txn, serial, filter, cursor, now)?;
                if cursor.count_only && cursor.counted >= cursor.limit as u64 {
                    return Ok(ScanStatus::Done);
                }
                if i == from_tail {
                    tail.pop();
                    if let Some(&(t2, s2)) = tail.last() {
                        heap.push((t2, s2, from_tail));
                    }
                } else {
                    let r = &mut ranges[i];
                    r.resume_below = Some((t, serial));
                    match walks[i].as_mut() {
                        Some(walk) => match walk.next()? {
                            Some((t2, s2)) => heap.push((t2, s2, i)),
                            None => r.done = true,
                        },
                        None => r.done = true,
                    }
                }
                spent += 1;
                if spent >= budget {
                    return Ok(ScanStatus::More);
                }
            }
        })();
        cursor.plan = Some(Plan::Index {
            table: table_name,
            ranges,
            tail: Some(tail),
        });
        result
    }

    /// The stored events whose entries still wait in `pending`, created in
    /// `since..=until` and with a key in `table` under a `wanted` prefix,
    /// as (created_at, serial), oldest first.
    fn pending_matches(
        &self,
        txn: &RoTxn<'_>,
        table_name: &str,
        since: Timestamp,
        until: Timestamp,
        wanted: impl Fn(&[u8]) -> bool,
    ) -> StoreResult<Vec<(u64, u64)>> {
        let mut matches = Vec::new();
        for item in self.pending.iter(txn)? {
            let (k, v) = item?;
            let serial = schema::serial_from(k)
                .ok_or_else(|| StoreError::Corrupt("bad pending key".into()))?;
            let row = waiting_row(v)?;
            if !(since.as_u64()..=until.as_u64()).contains(&row.created_at) {
                continue;
            }
            let mut hit = false;
            row.for_each_prefix(table_name, |prefix| hit |= wanted(prefix));
            if hit {
                matches.push((row.created_at, serial));
            }
        }
        matches.sort_unstable();
        Ok(matches)
    }
}

impl EventStore for LmdbStore {
    fn presence(&self, id: &EventId) -> StoreResult<Presence> {
        let txn = self.env.read_txn()?;
        if self.serial_of(&txn, id)?.is_some() {
            return Ok(Presence::Stored);
        }
        if self
            .deleted_ids
            .prefix_iter(&txn, id.as_bytes())?
            .next()
            .transpose()?
            .is_some()
        {
            // The tombstone only binds the same author; the writer decides.
            return Ok(Presence::Deleted);
        }
        Ok(Presence::Absent)
    }

    fn pack(&self, record: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        Ok(match self.stored_form(record)? {
            Cow::Owned(stored) => Some(stored),
            Cow::Borrowed(_) => None,
        })
    }

    fn write_batch(&self, batch: &[Incoming], now: u64) -> StoreResult<Vec<Verdict>> {
        let mut wtxn = self.env.write_txn()?;
        let mut verdicts = Vec::with_capacity(batch.len());
        for event in batch {
            verdicts.push(self.apply_one(&mut wtxn, event, now)?);
        }
        self.delete_applied_removals(&mut wtxn)?;
        wtxn.commit()?;
        Ok(verdicts)
    }

    fn index_past_lag(&self) -> StoreResult<bool> {
        let waiting = {
            let txn = self.env.read_txn()?;
            self.pending.len(&txn)? + self.removed.len(&txn)?
        };
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if !in_flight && waiting <= self.index_lag {
            return Ok(false);
        }
        // One transaction per call keeps each pause short; with no lag, or
        // when publishing outruns a transaction per commit, all of it.
        let all = self.index_lag == 0 || waiting > self.index_lag.saturating_mul(2);
        while self.step_waiting_work(Some(usize::MAX))? == Step::More && all {}
        Ok(true)
    }

    fn index_pending(&self, max: usize) -> StoreResult<bool> {
        // A batch in flight goes first, to its end.
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if in_flight {
            while self.step_waiting_work(None)? == Step::More {}
        }
        let waiting = {
            let txn = self.env.read_txn()?;
            !self.pending.is_empty(&txn)? || !self.removed.is_empty(&txn)?
        };
        let applied = !self
            .search_applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if !waiting && !applied {
            return Ok(false);
        }
        let mut wtxn = self.env.write_txn()?;
        let mut batch = WaitingBatch::default();
        if waiting {
            // LMDB copies every page a transaction changes and reuses the
            // old copies only two commits later, so the file keeps room for
            // about the largest transaction twice: the batch is applied in
            // transactions of a bounded number of writes.
            let work = self.waiting_work(&wtxn, max.max(1))?;
            let mut at = WorkPosition::default();
            while !self.apply_waiting_work(&mut wtxn, &work, &mut at, self.index_txn_writes)? {
                wtxn.commit()?;
                wtxn = self.env.write_txn()?;
            }
            batch = self.finish_waiting_work(&mut wtxn, &work)?;
        }
        self.delete_applied_removals(&mut wtxn)?;
        wtxn.commit()?;
        self.drop_waiting_ids(batch.moved_through);
        Ok(batch.more)
    }

    fn index_search(&self, max: usize, lag: u64) -> StoreResult<bool> {
        match &self.search {
            Some(index) => self.index_search_into(index, max.max(1), lag, None),
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus> {
        if filter.is_empty_match() || cursor.limit == 0 {
            return Ok(ScanStatus::Done);
        }
        // A search reads its index from a snapshot taken before the events'
        // one: every event the index holds is in the latter.
        let search = match (&self.search, &filter.search) {
            (Some(index), Some(_)) => Some(SearchSnapshot::of(index)?),
            _ => None,
        };
        let txn = self.env.read_txn()?;
        if cursor.plan.is_none() {
            if filter.search.is_some() {
                cursor.by_rank = true;
                cursor.rank_unloaded = filter.ids.is_none()
                    && filter.authors.is_none()
                    && filter.tags.is_empty()
                    && filter.since.is_none()
                    && filter.until.is_none()
                    && cursor
                        .gate
                        .as_deref()
                        .is_none_or(|g| !g.restricts_searchable());
                let planned = match &search {
                    Some(search) => self.plan_search(search, &txn, filter)?,
                    None => None,
                };
                match planned {
                    Some(p) => cursor.plan = Some(p),
                    None => return Ok(ScanStatus::Done),
                }
            } else {
                cursor.plan = Some(plan(filter));
            }
        }
        match cursor.plan.take().expect("planned") {
            Plan::Ids { ids, mut next } => {
                let mut status = ScanStatus::Done;
                let mut spent = 0;
                while next < ids.len() {
                    if spent >= budget {
                        status = ScanStatus::More;
                        break;
                    }
                    match self.lookup_id(&txn, &ids[next])? {
                        Some((serial, Some(loaded))) if !cursor.seen.contains(&serial) => {
                            cursor.examined += 1;
                            self.consider_loaded(serial, loaded, filter, cursor, now)?;
                        }
                        Some((serial, _)) => self.consider(&txn, serial, filter, cursor, now)?,
                        None => {}
                    }
                    next += 1;
                    spent += 1;
                }
                cursor.plan = Some(Plan::Ids { ids, next });
                Ok(status)
            }
            plan @ Plan::Index { table, .. } => {
                cursor.plan = Some(plan);
                self.scan_index(&txn, filter, table, cursor, budget, now)
            }
            plan @ Plan::SearchTail(_) => {
                cursor.plan = Some(plan);
                let Some(search) = &search else {
                    return Ok(ScanStatus::Done);
                };
                self.scan_search_tail(search, &txn, filter, cursor, budget, now)
            }
            plan @ Plan::Search { .. } => {
                cursor.plan = Some(plan);
                let Some(search) = &search else {
                    return Ok(ScanStatus::Done);
                };
                self.scan_search(search, &txn, filter, cursor, budget, now)
            }
        }
    }

    fn render(&self, serial: u64, as_record: bool) -> StoreResult<Option<Found>> {
        let txn = self.env.read_txn()?;
        match self.load(&txn, serial)? {
            Some((_, record)) => self.render_record(serial, &record, as_record).map(Some),
            None => Ok(None),
        }
    }

    fn purge_expired(&self, now: u64, max: usize) -> StoreResult<usize> {
        let mut wtxn = self.env.write_txn()?;
        let mut serials = Vec::new();
        {
            let upper = schema::expiration_key(now, u64::MAX);
            let range = (Bound::Unbounded, Bound::Included(&upper[..]));
            for item in self.expiration.range(&wtxn, &range)? {
                let (k, _) = item?;
                serials.push(schema::serial_from(&k[8..]).unwrap_or(0));
                if serials.len() >= max {
                    break;
                }
            }
        }
        let mut removed = 0;
        for serial in serials {
            removed += self.remove(&mut wtxn, serial)? as usize;
        }
        wtxn.commit()?;
        Ok(removed)
    }

    fn stats(&self) -> StoreResult<Stats> {
        let txn = self.env.read_txn()?;
        let (search_backlog, search_bytes) = match &self.search {
            Some(index) => {
                let stxn = index.env.read_txn()?;
                let mark = index.indexed(&stxn)?.unwrap_or(0);
                (
                    self.last_serial(&txn)?.saturating_sub(mark),
                    index.env.real_disk_size().unwrap_or(0),
                )
            }
            None => (0, 0),
        };
        Ok(Stats {
            events: self.stored_len(&txn)?,
            disk_bytes: self.env.real_disk_size().unwrap_or(0) + search_bytes,
            index_backlog: self.pending.len(&txn)? + self.removed.len(&txn)?,
            search_backlog,
        })
    }

    fn export(&self, filter: &Filter, emit: &mut dyn FnMut(&Found) -> bool) -> StoreResult<()> {
        let txn = self.env.read_txn()?;
        // Events still waiting in `pending` are not in `created` yet: they
        // are merged in by (created_at, serial). Between the transactions
        // of one index batch an event can be in both: it is taken once.
        let mut waiting = self.pending_matches(
            &txn,
            table::CREATED,
            Timestamp::default(),
            Timestamp::MAX,
            |_| true,
        )?;
        let mut indexed = TimeWalk::new(&txn, self.created, &[], (0, 0), (u64::MAX, u64::MAX))?;
        let mut next_indexed = indexed.next()?;
        loop {
            let serial = match (waiting.last(), next_indexed) {
                (None, None) => break,
                (Some(&w), Some(i)) if w > i => waiting.pop().map_or(0, |w| w.1),
                (Some(&w), Some(i)) if w == i => {
                    waiting.pop();
                    next_indexed = indexed.next()?;
                    w.1
                }
                (Some(_), None) => waiting.pop().map_or(0, |w| w.1),
                (_, Some((_, serial))) => {
                    next_indexed = indexed.next()?;
                    serial
                }
            };
            let Some((_, record)) = self.load(&txn, serial)? else {
                continue;
            };
            let view = decode(&record)?;
            if filter.matches(&view) && !emit(&self.render_record(serial, &record, false)?) {
                break;
            }
        }
        Ok(())
    }

    fn sync(&self) -> StoreResult<()> {
        self.env.force_sync()?;
        if let Some(index) = &self.search {
            index.env.force_sync()?;
        }
        Ok(())
    }

    fn wants_dictionaries(&self) -> StoreResult<bool> {
        if self.auto_dictionaries == 0 || !self.compress || !self.dicts().dictionaries().is_empty()
        {
            return Ok(false);
        }
        let txn = self.env.read_txn()?;
        Ok(self.meta.get(&txn, b"dicts")?.is_none()
            && self.stored_len(&txn)? >= self.auto_dictionaries)
    }

    fn train_dictionaries(&self) -> StoreResult<bool> {
        if !self.wants_dictionaries()? {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let samples = self.dictionary_samples()?;
        let borrowed: Vec<(Kind, &[u8])> = samples.iter().map(|(k, r)| (*k, &r[..])).collect();
        let options = nostrwire_wire::compress::TrainOptions {
            level: self.compression_level,
            ..Default::default()
        };
        let bad = |e: &dyn std::fmt::Display| StoreError::Dictionaries(e.to_string());
        let trained = DictSet::train(&borrowed, &options).map_err(|e| bad(&e))?;
        let bytes = trained.to_bytes();
        let set: &'static DictSet = Box::leak(Box::new(
            DictSet::from_bytes_at_level(&bytes, self.compression_level).map_err(|e| bad(&e))?,
        ));
        // Stored first: a record compressed with the set must never be
        // committed without it.
        let mut wtxn = self.env.write_txn()?;
        if self.meta.get(&wtxn, b"dicts")?.is_some() {
            return Ok(false);
        }
        self.meta.put(&mut wtxn, b"dicts", &bytes)?;
        wtxn.commit()?;
        *self.dicts.write().unwrap_or_else(|e| e.into_inner()) = set;
        tracing::info!(
            samples = samples.len(),
            dictionaries = set.dictionaries().len(),
            bytes = bytes.len(),
            seconds = started.elapsed().as_secs_f64(),
            "trained a dictionary set from the stored events"
        );
        Ok(true)
    }
}

/// Opens the LMDB environment in directory `path` with the flags of
/// `durability`.
pub(super) fn open_env(
    path: &Path,
    map_size: usize,
    max_tables: u32,
    durability: Durability,
) -> StoreResult<Env> {
    let mut options = EnvOpenOptions::new();
    options
        .map_size(map_size)
        .max_dbs(max_tables)
        .max_readers(512);
    let flags = match durability {
        Durability::Full => EnvFlags::empty(),
        Durability::Meta => EnvFlags::NO_META_SYNC,
        Durability::None => EnvFlags::NO_SYNC,
    };
    // SAFETY: the flags are documented LMDB flags; each environment is
    // opened once per process and path, by the store that owns it (the
    // relay holds it for its lifetime).
    let env = unsafe {
        options.flags(flags | EnvFlags::NO_READ_AHEAD);
        options.open(path)?
    };
    Ok(env)
}

/// Takes the writer lock of the database in `dir`, released when the file
/// is closed (also when the process dies).
fn take_writer_lock(dir: &Path) -> StoreResult<std::fs::File> {
    let path = dir.join("writer.lock");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(file);
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::WouldBlock => Err(StoreError::Busy(format!(
            "{} is held by another process (a relay or an import on the same database)",
            path.display()
        ))),
        _ => Err(StoreError::Lmdb(heed::Error::Io(e))),
    }
}

/// Ids of the stored events whose `ids` entry still waits in their
/// `pending` row, so a lookup by id need not read the rows. Filled by the
/// writer as it inserts (before the commit: an entry counts only where the
/// snapshot holds the row) and emptied after each commit of a batch that
/// moved rows into `ids`.
#[derive(Debug, Default)]
struct WaitingIds {
    by_id: std::collections::HashMap<EventId, u64>,
    /// Entries of serials up to this one have been dropped; a snapshot from
    /// before that batch reads its rows up to here instead.
    dropped_through: u64,
}

/// The write transactions of one search batch: a new one every
/// `max_writes` writes.
struct SearchTxns<'e> {
    index: &'e SearchIndex,
    wtxn: Option<RwTxn<'e>>,
    max_writes: usize,
    writes: usize,
    commits: usize,
    /// Stop after this many commits, as a crash would (tests).
    stop_after: Option<usize>,
}

impl<'e> SearchTxns<'e> {
    fn open(&mut self) -> &mut RwTxn<'e> {
        self.wtxn.as_mut().expect("a transaction is open")
    }

    /// Counts `writes`; at the bound, commits with these totals (those of
    /// the events below the mark) and opens the next transaction. Returns
    /// `false` when the batch is to stop there.
    fn wrote(&mut self, writes: usize, docs: u64, tokens: u64) -> StoreResult<bool> {
        self.writes += writes;
        if self.writes < self.max_writes {
            return Ok(true);
        }
        let mut done = self.wtxn.take().expect("a transaction is open");
        self.index.put_totals(&mut done, docs, tokens)?;
        done.commit()?;
        self.writes = 0;
        self.commits += 1;
        if self.stop_after.is_some_and(|n| self.commits >= n) {
            return Ok(false);
        }
        self.wtxn = Some(self.index.env.write_txn()?);
        Ok(true)
    }
}

/// The index changes a batch of `pending` and `removed` rows stands for.
#[derive(Default)]
struct WaitingWork {
    /// Per time-ordered index ([`table::TIME_ORDERED`]): full keys, sorted,
    /// with `true` to add the entry and `false` to delete it.
    changes: [Vec<(TimeKey, bool)>; 5],
    /// `ids` entries to write, sorted.
    ids: Vec<([u8; 32], u64)>,
    /// The last `pending` row read.
    last_added: Option<u64>,
    /// The `removed` rows read. Deleted one by one when the work is done:
    /// while it is in flight, an event at a lower serial may be removed and
    /// get a row of its own, which a range would take.
    dropped: Vec<u64>,
    /// Events among those of the `pending` rows read that were removed
    /// while the work was in flight: their `ids` entries are not written
    /// (the removal deleted any that was), and their `removed` rows have
    /// the next batch delete the time-ordered entries this one writes.
    cancelled: std::collections::HashSet<u64>,
}

/// An index batch applied a transaction at a time between the writer's
/// commits ([`LmdbStore::step_waiting_work`]).
struct InFlight {
    work: WaitingWork,
    at: WorkPosition,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("last_added", &self.work.last_added)
            .field("removed_rows", &self.work.dropped.len())
            .field("cancelled", &self.work.cancelled.len())
            .field("index", &self.at.index)
            .field("next", &self.at.next)
            .finish()
    }
}

/// Which rows [`LmdbStore::waiting_changes`] reads, and where it puts
/// what else it learns from them.
enum WaitingRows<'a> {
    /// `pending`: the `ids` entries to write.
    Pending(&'a mut Vec<([u8; 32], u64)>),
    /// `removed`: the serials of the rows read.
    Removed(&'a mut Vec<u64>),
}

/// What [`LmdbStore::step_waiting_work`] did.
#[derive(PartialEq, Eq, Debug)]
enum Step {
    /// Nothing was in flight, and no new batch was started.
    Idle,
    /// One transaction of the batch in flight was committed; more remain.
    More,
    /// The batch's last transaction was committed, with its rows dropped.
    Finished,
}

/// How far [`LmdbStore::apply_waiting_work`] got: the next change of the
/// time-ordered index `index`, or (`index` past them) the next `ids` entry.
#[derive(Default, Clone, Copy)]
struct WorkPosition {
    index: usize,
    next: usize,
}

/// What [`LmdbStore::index_waiting`] did.
#[derive(Default)]
struct WaitingBatch {
    /// Rows remain in `pending` or `removed`.
    more: bool,
    /// The last `pending` row moved into the indexes.
    moved_through: Option<u64>,
}

/// How a query returns a match.
#[derive(Clone, Copy)]
enum Form {
    /// Canonical JSON (text connections, export).
    Json,
    /// The uncompressed nwb record (binary connections).
    Record,
    /// Id and time only (NIP-77).
    IdOnly,
}

fn found(serial: u64, view: &EventView<'_>, form: Form) -> Found {
    Found {
        serial,
        id: *view.id(),
        created_at: view.created_at().as_u64(),
        json: match form {
            Form::Json => view.to_json_bytes(),
            _ => Vec::new(),
        },
        record: match form {
            Form::Record => view.record().to_vec(),
            _ => Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostrwire_event::{Keys, UnsignedEvent};

    fn note(keys: &Keys, content: &str) -> (EventId, Vec<u8>) {
        let event = UnsignedEvent::new(
            keys,
            Timestamp::new(1000).unwrap(),
            Kind(1),
            Vec::new(),
            content,
        )
        .sign(keys);
        (event.id, nostrwire_wire::encode_event(&event))
    }

    fn open(dir: &Path) -> LmdbStore {
        let options = OpenOptions {
            map_size: 1 << 30,
            durability: Durability::None,
            index_lag: 1_000,
            ..OpenOptions::default()
        };
        LmdbStore::open(dir, &options).unwrap()
    }

    #[test]
    fn a_waiting_id_is_found_before_and_after_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let keys = Keys::derive(3, 1);
        let (id, record) = note(&keys, "waiting");
        store.write_batch(&[record.clone().into()], 0).unwrap();
        // Waiting: not in `ids`, found through its row.
        assert_eq!(store.presence(&id).unwrap(), Presence::Stored);
        let before = store.env.read_txn().unwrap();
        let entry = schema::id_entry(id.as_bytes(), 1);
        assert!(store.ids.get(&before, &entry).unwrap().is_none());
        assert_eq!(store.serial_of(&before, &id).unwrap(), Some(1));
        // The batch (on another thread: this one holds a snapshot) moves it
        // into `ids` and drops it from the map; the snapshot taken before
        // still finds it, in its own row.
        let more = std::thread::scope(|s| s.spawn(|| store.index_pending(100).unwrap()).join());
        assert!(!more.unwrap());
        assert!(store.waiting_ids.read().unwrap().by_id.is_empty());
        assert_eq!(store.serial_of(&before, &id).unwrap(), Some(1));
        drop(before);
        let after = store.env.read_txn().unwrap();
        assert!(store.ids.get(&after, &entry).unwrap().is_some());
        assert!(store.pending.is_empty(&after).unwrap());
        drop(after);
        assert_eq!(
            store.write_batch(&[record.into()], 0).unwrap(),
            vec![Verdict::Duplicate]
        );
    }

    #[test]
    fn a_snapshot_between_the_transactions_of_a_batch_sees_each_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let keys = Keys::derive(3, 3);
        let notes: Vec<_> = (0..40).map(|i| note(&keys, &format!("note {i}"))).collect();
        let records: Vec<Incoming> = notes.iter().map(|(_, r)| r.clone().into()).collect();
        store.write_batch(&records, 0).unwrap();
        // The first transactions of a batch split every few writes: some
        // events now have entries and still their row.
        {
            let mut wtxn = store.env.write_txn().unwrap();
            let work = store.waiting_work(&wtxn, usize::MAX).unwrap();
            let mut at = WorkPosition::default();
            for _ in 0..3 {
                assert!(!store
                    .apply_waiting_work(&mut wtxn, &work, &mut at, 7)
                    .unwrap());
            }
            wtxn.commit().unwrap();
        }
        let txn = store.env.read_txn().unwrap();
        assert_eq!(store.pending.len(&txn).unwrap(), 40);
        assert!(!store.created.is_empty(&txn).unwrap());
        drop(txn);
        let mut exported = Vec::new();
        store
            .export(&Filter::new(), &mut |found| {
                exported.push(found.id);
                true
            })
            .unwrap();
        let mut found = Vec::new();
        let by_author = Filter {
            authors: Some(vec![keys.public_key()]),
            ..Filter::new()
        };
        let mut cursor = QueryCursor::new(100);
        while store.scan(&by_author, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
        found.extend(cursor.found.iter().map(|f| f.id));
        for got in [&mut exported, &mut found] {
            got.sort_unstable();
            let mut expected: Vec<_> = notes.iter().map(|(id, _)| *id).collect();
            expected.sort_unstable();
            assert_eq!(*got, expected);
        }
        // Reopening applies the whole batch again, from its rows.
        drop(store);
        let store = open(dir.path());
        let txn = store.env.read_txn().unwrap();
        assert!(store.pending.is_empty(&txn).unwrap());
        assert_eq!(store.ids.len(&txn).unwrap(), 40);
        assert_eq!(store.created.len(&txn).unwrap(), 1);
    }

    #[test]
    fn page_fit_matches_lmdb() {
        let dir = tempfile::tempdir().unwrap();
        let env = open_env(dir.path(), 1 << 26, 4, Durability::None).unwrap();
        let mut wtxn = env.write_txn().unwrap();
        let db: Db = env.create_database(&mut wtxn, Some("t")).unwrap();
        let fit = PageFit::new(db.stat(&wtxn).unwrap().page_size as usize);
        let overflow = |wtxn: &mut RwTxn<'_>, serial: u64, len: usize| {
            let before = db.stat(wtxn).unwrap().overflow_pages;
            db.put(wtxn, &schema::serial_bytes(serial), &vec![7; len])
                .unwrap();
            db.stat(wtxn).unwrap().overflow_pages - before
        };
        // The largest value kept in its leaf, and the smallest that is not.
        assert_eq!(overflow(&mut wtxn, 1, fit.inline_max), 0);
        assert_eq!(overflow(&mut wtxn, 2, fit.inline_max + 1), 1);
        // A cut leaves a first part that fills its pages exactly, and a
        // rest that stays in a leaf.
        for (i, len) in [
            fit.page,
            3 * fit.page + 100,
            5 * fit.page + fit.inline_max - 16,
        ]
        .into_iter()
        .enumerate()
        {
            let at = fit.cut(len).unwrap();
            let key = 10 * (i as u64 + 1);
            assert_eq!(overflow(&mut wtxn, key, at), (at + 16) / fit.page, "{len}");
            assert_eq!(overflow(&mut wtxn, key + 1, len - at), 0, "{len}");
            assert_eq!(
                overflow(&mut wtxn, key + 2, at + 1),
                (at + 16) / fit.page + 1
            );
        }
        // Values that would fill their last page well stay whole.
        assert_eq!(fit.cut(fit.inline_max), None);
        assert_eq!(fit.cut(fit.page + fit.inline_max), None);
        assert_eq!(fit.cut(2 * fit.page - 16), None);
    }

    #[test]
    fn large_values_are_cut_to_fit_whole_pages() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let keys = Keys::derive(3, 4);
        // Content that compresses little: values of 2 to 14 KB.
        let mut seed = 7u64;
        let mut noise = |len: usize| -> String {
            (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    char::from(b'!' + (seed >> 58) as u8)
                })
                .collect()
        };
        let event = |kind: u16, at: u64, content: &str| {
            UnsignedEvent::new(
                &keys,
                Timestamp::new(at).unwrap(),
                Kind(kind),
                Vec::new(),
                content,
            )
            .sign(&keys)
        };
        let mut events: Vec<_> = (0..60)
            .map(|i| event(1, 1000 + i, &noise(2_000 + i as usize * 200)))
            .collect();
        // A replaceable event, cut, then replaced by another: its tail goes.
        let profile = event(0, 900, &noise(4_000));
        events.push(profile.clone());
        let records: Vec<Incoming> = events
            .iter()
            .map(|e| nostrwire_wire::encode_event(e).into())
            .collect();
        store.write_batch(&records, 0).unwrap();
        let txn = store.env.read_txn().unwrap();
        let cut = store.tails.len(&txn).unwrap();
        assert!((10..61).contains(&cut), "{cut} values cut");
        // Every tail fits in its leaf: the cut is where LMDB's limits are.
        assert_eq!(store.tails.stat(&txn).unwrap().overflow_pages, 0);
        drop(txn);
        let newer = event(0, 901, &noise(4_000));
        let record = nostrwire_wire::encode_event(&newer).into();
        store.write_batch(&[record], 0).unwrap();
        events.retain(|e| e.id != profile.id);
        events.push(newer);
        let txn = store.env.read_txn().unwrap();
        assert_eq!(store.tails.len(&txn).unwrap(), cut);
        drop(txn);
        // Every event comes back whole, before and after reopening.
        let mut expected: Vec<Vec<u8>> = events.iter().map(|e| e.to_json_bytes()).collect();
        expected.sort();
        let exported = |store: &LmdbStore| {
            let mut exported = Vec::new();
            store
                .export(&Filter::new(), &mut |found| {
                    exported.push(found.json.clone());
                    true
                })
                .unwrap();
            exported.sort();
            exported
        };
        assert_eq!(exported(&store), expected);
        drop(store);
        assert_eq!(exported(&open(dir.path())), expected);
    }

    #[test]
    fn ids_that_share_a_prefix_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let keys = Keys::derive(3, 5);
        let (first, record) = note(&keys, "first");
        store.write_batch(&[record.into()], 0).unwrap();
        let (second, record) = note(&keys, "second");
        store.write_batch(&[record.into()], 0).unwrap();
        store.index_pending(100).unwrap();
        // A key under the second id's prefix that leads to the first event
        // (serial 1), as a stored event whose id began like the second's
        // would have: it sorts before the second's own key (serial 2).
        let mut wtxn = store.env.write_txn().unwrap();
        store
            .ids
            .put(&mut wtxn, &schema::id_entry(second.as_bytes(), 1), &[])
            .unwrap();
        wtxn.commit().unwrap();
        assert_eq!(store.presence(&first).unwrap(), Presence::Stored);
        assert_eq!(store.presence(&second).unwrap(), Presence::Stored);
        let txn = store.env.read_txn().unwrap();
        assert_eq!(store.serial_of(&txn, &first).unwrap(), Some(1));
        assert_eq!(store.serial_of(&txn, &second).unwrap(), Some(2));
        // An id with the same first bytes that no event has.
        let mut unknown = *second.as_bytes();
        unknown[31] ^= 1;
        let unknown = EventId::from_bytes(unknown);
        assert_eq!(store.serial_of(&txn, &unknown).unwrap(), None);
        drop(txn);
        assert_eq!(store.presence(&unknown).unwrap(), Presence::Absent);
    }

    #[test]
    fn a_search_batch_cut_short_is_left_out_and_applied_again() {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            durability: Durability::None,
            index_lag: 1_000,
            index_txn_writes: 4,
            ..OpenOptions::default()
        };
        let store = LmdbStore::open(dir.path(), &options).unwrap();
        let (keys, other) = (Keys::derive(3, 6), Keys::derive(3, 7));
        let event = |keys: &Keys, kind: u16, at: u64, content: &str| {
            let event = UnsignedEvent::new(
                keys,
                Timestamp::new(at).unwrap(),
                Kind(kind),
                Vec::new(),
                content,
            )
            .sign(keys);
            (
                event.id,
                Incoming::from(nostrwire_wire::encode_event(&event)),
            )
        };
        let mut apples: Vec<EventId> = Vec::new();
        let mut batch = Vec::new();
        for i in 0..30 {
            let (id, record) = event(&keys, 1, 1000 + i, &format!("apple word{i}"));
            apples.push(id);
            batch.push(record);
        }
        let (profile, record) = event(&other, 0, 900, "apple orchard");
        apples.push(profile);
        batch.push(record);
        store.write_batch(&batch, 0).unwrap();
        let index = store.search.as_ref().unwrap();
        // A batch that stops after two commits, as a crash would: postings
        // above the mark, the mark where it was.
        assert!(store
            .index_search_into(index, usize::MAX, 0, Some(2))
            .unwrap());
        let apple = schema::term_prefix("apple");
        let stxn = index.env.read_txn().unwrap();
        assert_eq!(index.indexed(&stxn).unwrap(), Some(0));
        assert!(index.partial(&stxn).unwrap().is_some());
        assert!(index.postings_above(&stxn, &apple, 0).unwrap() > 0);
        drop(stxn);
        // Searches find each event once, and count each once.
        let search = Filter {
            search: Some("apple".into()),
            ..Filter::new()
        };
        let mut cursor = QueryCursor::new(100);
        while store.scan(&search, &mut cursor, 7, 0).unwrap() == ScanStatus::More {}
        let mut found: Vec<EventId> = cursor.into_results().iter().map(|f| f.id).collect();
        found.sort_unstable();
        apples.sort_unstable();
        assert_eq!(found, apples);
        let mut count = QueryCursor::counting(1_000);
        while store.scan(&search, &mut count, 7, 0).unwrap() == ScanStatus::More {}
        assert_eq!(count.counted, 31);
        // The profile is replaced: the postings of the old one, which the
        // cut batch may have written, go with it.
        let (_, record) = event(&other, 0, 901, "pear orchard");
        store.write_batch(&[record], 0).unwrap();
        while store.index_search(usize::MAX, 0).unwrap() {}
        let stxn = index.env.read_txn().unwrap();
        assert_eq!(index.partial(&stxn).unwrap(), None);
        let held = |term: &str| -> Vec<u64> {
            let prefix = schema::term_prefix(term);
            let lower = schema::search_key(&prefix, 0);
            let upper = schema::df_key(&prefix);
            let range = (Bound::Included(&lower[..]), Bound::Excluded(&upper[..]));
            let mut serials = Vec::new();
            for item in index.postings.range(&stxn, &range).unwrap() {
                let (k, v) = item.unwrap();
                serials.extend(
                    super::super::search_index::postings(k, v)
                        .unwrap()
                        .iter()
                        .map(|p| p.serial),
                );
            }
            assert_eq!(
                index.document_frequency(&stxn, &prefix).unwrap(),
                serials.len() as u64,
                "{term}"
            );
            serials
        };
        assert_eq!(held("apple"), (1..=30).collect::<Vec<u64>>());
        assert_eq!(held("orchard"), [32]);
        assert_eq!(held("pear"), [32]);
        assert_eq!(index.totals(&stxn).unwrap().0, 31);
    }

    #[test]
    fn one_writer_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let writer = OpenOptions::default();
        let first = LmdbStore::open(dir.path(), &writer).unwrap();
        let second = LmdbStore::open(dir.path(), &writer);
        assert!(matches!(second, Err(StoreError::Busy(_))), "{second:?}");
        drop(first);
        drop(LmdbStore::open(dir.path(), &writer).unwrap());
    }

    #[test]
    fn a_waiting_id_counts_only_with_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let keys = Keys::derive(3, 2);
        let (stored, record) = note(&keys, "stored");
        store.write_batch(&[record.into()], 0).unwrap();
        // What a failed commit leaves: map entries for serials whose rows
        // are not there, or hold another event.
        let (ghost, ghost_record) = note(&keys, "never committed");
        store
            .waiting_ids
            .write()
            .unwrap()
            .by_id
            .extend([(ghost, 1), (EventId::from_bytes([5; 32]), 99)]);
        let txn = store.env.read_txn().unwrap();
        assert_eq!(store.serial_of(&txn, &stored).unwrap(), Some(1));
        assert_eq!(store.serial_of(&txn, &ghost).unwrap(), None);
        assert_eq!(
            store
                .serial_of(&txn, &EventId::from_bytes([5; 32]))
                .unwrap(),
            None
        );
        drop(txn);
        assert_eq!(
            store.write_batch(&[ghost_record.into()], 0).unwrap(),
            vec![Verdict::Stored(2)]
        );
    }
}
