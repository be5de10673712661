//! The LMDB store's handle: [`LmdbStore`] with its tables and the state
//! its operations share, and [`OpenOptions`]. The floor of the store: the
//! operations (`read`, `write`, `trailing`, `value`, `search`, …) stand on
//! it, and `store.rs` opens it and dispatches the [`crate::EventStore`]
//! operations to them. Layout: `docs/design-store.md`.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use heed::types::Bytes;
use heed::{Database, Env, RoTxn};
use nostrwire_event::EventId;
use nostrwire_wire::compress::DictSet;

use crate::schema::{self, table, TimeKey};
use crate::search::index::SearchIndex;
use crate::{Durability, StoreResult};

pub(crate) type Db = Database<Bytes, Bytes>;

/// Directory of the search environment, inside the data directory.
pub(crate) const SEARCH_DIR: &str = "search";

/// Most named tables the main environment may hold: those of
/// [`schema::table`], with room to spare.
pub(crate) const MAX_TABLES: u32 = 32;

/// The LMDB store.
#[derive(Debug)]
pub struct LmdbStore {
    pub(crate) env: Env,
    pub(crate) events: Db,
    /// Stored values of replaceable and addressable events, apart from the
    /// others so that the holes their replaced versions leave do not stay
    /// in the leaves of `events` (LMDB merges a leaf only below a quarter
    /// full). A lookup by serial reads both tables.
    pub(crate) replaceable: Db,
    pub(crate) ids: Db,
    pub(crate) created: Db,
    pub(crate) kind: Db,
    pub(crate) pubkey: Db,
    pub(crate) pubkey_kind: Db,
    pub(crate) tag: Db,
    pub(crate) replace: Db,
    pub(crate) deleted_ids: Db,
    pub(crate) deleted_addrs: Db,
    pub(crate) expiration: Db,
    /// The NIP-50 index, in its own environment; `None` when search is off.
    pub(crate) search: Option<SearchIndex>,
    /// serial → stored value of a removed event whose postings the search
    /// index may still hold: read by [`EventStore::index_search`](crate::EventStore::index_search), deleted
    /// by the next write once it has taken them out.
    pub(crate) search_removed: Db,
    /// Rows of `search_removed` the search index has applied; the writer
    /// deletes them in its next transaction.
    pub(crate) search_applied: Mutex<std::collections::HashSet<u64>>,
    /// The search terms of events stored since the search index last
    /// caught up, as admitted (bounded; the indexer reads the rest).
    pub(crate) fresh_terms: crate::search::fresh::FreshTerms,
    pub(crate) pending: Db,
    pub(crate) removed: Db,
    /// serial → the end of a stored value cut to fit its pages.
    pub(crate) tails: Db,
    /// How stored values are cut ([`FLAG_SPLIT`]).
    pub(crate) fit: PageFit,
    pub(crate) meta: Db,
    /// Ids of the events whose `ids` entry waits in `pending`.
    pub(crate) waiting_ids: RwLock<WaitingIds>,
    /// An index batch [`EventStore::index_past_lag`](crate::EventStore::index_past_lag) applies a transaction
    /// at a time, between the writer's commits. Lock it only inside a write
    /// transaction (LMDB's writer lock first, then this), as `remove` does.
    pub(crate) in_flight: Mutex<Option<InFlight>>,
    /// Held while open when [`OpenOptions::writer_lock`] asks for it.
    pub(crate) writer_lock: Option<std::fs::File>,
    /// Stored events whose time-ordered index entries may wait in `pending`.
    pub(crate) index_lag: u64,
    /// Most postings (and probes of other terms) one search filter reads.
    pub(crate) search_max_reads: usize,
    /// Most stored events the search index may trail by for a search to
    /// be answered (it tokenizes them itself).
    pub(crate) search_max_unindexed: u64,
    /// Size a block of search postings grows to before a new one starts.
    pub(crate) block_bytes: usize,
    /// Most block and `ids` writes in one transaction of an index batch.
    pub(crate) index_txn_writes: usize,
    pub(crate) relay_urls: Vec<String>,
    /// Dictionaries of the compressed records (also in `meta/dicts`); leaked
    /// once per set (at most two per open store: the one it opened with and
    /// one trained from its events) so compressors and per-thread
    /// decompressors can hold prepared dictionaries without lifetimes.
    pub(crate) dicts: RwLock<&'static DictSet>,
    /// The set file of `dicts` as stored in `meta/dicts` (`None`: no set).
    pub(crate) dict_file: RwLock<Option<Arc<[u8]>>>,
    /// Whether records are compressed (`compression_level` above 0).
    pub(crate) compress: bool,
    /// Records smaller than this are stored raw unless a dictionary serves
    /// their kind.
    pub(crate) compress_min_bytes: usize,
    /// [`OpenOptions::max_record_bytes`].
    pub(crate) max_record_bytes: usize,
    /// Events sent to JSON clients, kept decompressed and rendered
    /// ([`OpenOptions::event_cache_bytes`]).
    pub(crate) event_cache: crate::event_cache::EventCache,
    /// zstd level of stored records (and of a trained set).
    pub(crate) compression_level: i32,
    /// Stored events after which a database without dictionaries trains
    /// its own; 0 never.
    pub(crate) auto_dictionaries: u64,
}

/// Default of [`OpenOptions::index_txn_writes`].
pub const INDEX_TXN_WRITES: usize = 1024;

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
    /// Records smaller than this many bytes are stored raw unless a
    /// dictionary serves their kind (then every record is tried).
    pub compress_min_bytes: usize,
    /// A dictionary set file (`nostrwire dict train`); the first one given is
    /// copied into the database and kept, since stored records name its ids.
    pub dictionaries: Option<PathBuf>,
    /// Keep the NIP-50 search index (dropped on open when off). A missing
    /// or outdated index is emptied on open and built by
    /// [`EventStore::index_search`](crate::EventStore::index_search), like any trailing events: opening
    /// never waits for it.
    pub search: bool,
    /// Most postings (and probes of other terms) one search filter reads.
    pub search_max_reads: usize,
    /// Most stored events the search index may trail by for a search to be
    /// answered: a search tokenizes the events the index does not hold yet
    /// itself. Further behind (the index being built), a search fails with
    /// [`StoreError::SearchBehind`](crate::StoreError::SearchBehind).
    pub search_max_unindexed: u64,
    /// Stored events whose entries in the time-ordered indexes
    /// ([`table::TIME_ORDERED`]) may wait in `pending`: once more wait,
    /// [`EventStore::index_past_lag`](crate::EventStore::index_past_lag) writes them all, in transactions of
    /// [`OpenOptions::index_txn_writes`], one per call while fewer than
    /// twice as many wait. 0 writes every event's entries right after its
    /// commit. The writer also
    /// calls [`EventStore::index_pending`](crate::EventStore::index_pending) when it is idle.
    pub index_lag: u64,
    /// The most a block of a time-ordered index holds
    /// ([`schema::BLOCK_BYTES`]; at most that), and the bytes a block of
    /// search postings grows to before the next posting starts a new block
    /// (at most [`schema::SEARCH_BLOCK_BYTES`]). Tests use small blocks to
    /// exercise many blocks per key.
    pub block_bytes: usize,
    /// Most block and `ids` writes in one transaction of an index batch
    /// ([`EventStore::index_pending`](crate::EventStore::index_pending)): a batch that writes more commits in
    /// several. Each transaction's changed pages are copied, and the old
    /// copies reused only two commits later, so the largest transaction
    /// sets how much free space the file keeps. Tests use small values to
    /// split batches often.
    pub index_txn_writes: usize,
    /// Once this many events are stored in a database without a dictionary
    /// set (and none is configured), [`EventStore::wants_dictionaries`](crate::EventStore::wants_dictionaries)
    /// turns true and [`EventStore::train_dictionaries`](crate::EventStore::train_dictionaries) trains per-kind
    /// dictionaries from the newest stored events. 0 never trains.
    pub auto_dictionaries: u64,
    /// Hold the database's writer lock (`writer.lock` beside `data.mdb`)
    /// while open, and fail with [`StoreError::Busy`](crate::StoreError::Busy) when another process
    /// holds it. Only one process may store events in a database: the ids
    /// of the events whose `ids` entries still wait are known to the
    /// process that wrote them. On by default; `export` and `compact`
    /// turn it off, so they run beside a relay.
    pub writer_lock: bool,
    /// The largest record a stored compressed one may decompress to
    /// (checked before allocating; a corrupt value cannot make the store
    /// allocate more): at least the largest record ever stored. A relay
    /// passes the larger of `[limits] max_message_bytes` and the default.
    pub max_record_bytes: usize,
    /// Bytes of memory that stored events found for JSON queries may keep,
    /// decompressed and rendered, so the next query finding one copies its
    /// JSON instead of decompressing and rendering it again (each entry
    /// holds the stored bytes, the record and the JSON). Below 64 KiB:
    /// nothing is kept. Default [`EVENT_CACHE_BYTES`].
    pub event_cache_bytes: usize,
}

/// Default of [`OpenOptions::event_cache_bytes`]: 64 MiB.
pub const EVENT_CACHE_BYTES: usize = 64 << 20;

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
            max_record_bytes: nostrwire_wire::Limits::DEFAULT.max_record_bytes,
            event_cache_bytes: EVENT_CACHE_BYTES,
        }
    }
}

/// Where a stored value is cut so that it fills LMDB's pages: a value too
/// large for a leaf goes to overflow pages, whole pages after a 16-byte
/// header, and its last page is on average half empty. A value that
/// would leave at least half a page empty (`inline_max` bytes or fewer
/// past its last full page) is cut there: the first part fills whole
/// overflow pages, the rest goes to `tails`, in a leaf.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageFit {
    pub(crate) page: usize,
    /// Largest value a node with an 8-byte key keeps in its leaf.
    pub(crate) inline_max: usize,
}

impl PageFit {
    pub(crate) fn new(page: usize) -> PageFit {
        // LMDB (`mdb_env_open2`, `mdb_leaf_size`): a node of 8-byte
        // header, key and value stays in its leaf up to `nodemax` bytes.
        let nodemax = (((page - 16) / 2) & !1) - 2;
        PageFit {
            page,
            inline_max: nodemax - 8 - 8,
        }
    }

    /// Where to cut a value of `len` bytes, if anywhere.
    pub(crate) fn cut(&self, len: usize) -> Option<usize> {
        if len <= self.inline_max {
            return None;
        }
        let first = ((len + 16) / self.page * self.page).checked_sub(16)?;
        let rest = len - first;
        (rest > 0 && rest <= self.inline_max).then_some(first)
    }
}

/// Ids of the stored events whose `ids` entry still waits in their
/// `pending` row, so a lookup by id need not read the rows. Filled by the
/// writer as it inserts (before the commit: an entry counts only where the
/// snapshot holds the row) and emptied after each commit of a batch that
/// moved rows into `ids`.
#[derive(Debug, Default)]
pub(crate) struct WaitingIds {
    pub(crate) by_id: std::collections::HashMap<EventId, u64>,
    /// Entries of serials up to this one have been dropped; a snapshot from
    /// before that batch reads its rows up to here instead.
    pub(crate) dropped_through: u64,
}

/// The index changes a batch of `pending` and `removed` rows stands for.
#[derive(Default)]
pub(crate) struct WaitingWork {
    /// Per time-ordered index ([`table::TIME_ORDERED`]): full keys, sorted,
    /// with `true` to add the entry and `false` to delete it.
    pub(crate) changes: [Vec<(TimeKey, bool)>; 5],
    /// `ids` entries to write, sorted.
    pub(crate) ids: Vec<([u8; 32], u64)>,
    /// The last `pending` row read.
    pub(crate) last_added: Option<u64>,
    /// The `removed` rows read. Deleted one by one when the work is done:
    /// while it is in flight, an event at a lower serial may be removed and
    /// get a row of its own, which a range would take.
    pub(crate) dropped: Vec<u64>,
    /// Events among those of the `pending` rows read that were removed
    /// while the work was in flight: their `ids` entries are not written
    /// (the removal deleted any that was), and their `removed` rows have
    /// the next batch delete the time-ordered entries this one writes.
    pub(crate) cancelled: std::collections::HashSet<u64>,
}

/// An index batch applied a transaction at a time between the writer's
/// commits ([`LmdbStore::step_waiting_work`]).
pub(crate) struct InFlight {
    pub(crate) work: WaitingWork,
    pub(crate) at: WorkPosition,
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

/// How far [`LmdbStore::apply_waiting_work`] got: the next change of the
/// time-ordered index `index`, or (`index` past them) the next `ids` entry.
#[derive(Default, Clone, Copy)]
pub(crate) struct WorkPosition {
    pub(crate) index: usize,
    pub(crate) next: usize,
}

impl LmdbStore {
    /// Whether searches read a search index: false when search is off,
    /// and for a reader that found none it may use (never built, or left
    /// for the relay to rebuild). Without one, a `search` filter matches
    /// nothing.
    pub fn has_search_index(&self) -> bool {
        self.search.is_some()
    }

    /// The newest serial handed out (0 before the first event).
    pub(crate) fn last_serial(&self, txn: &RoTxn<'_>) -> StoreResult<u64> {
        Ok(self
            .meta
            .get(txn, b"next_serial")?
            .and_then(schema::serial_from)
            .map_or(0, |next| next - 1))
    }

    pub(crate) fn table(&self, name: &str) -> Db {
        match name {
            table::CREATED => self.created,
            table::KIND => self.kind,
            table::PUBKEY => self.pubkey,
            table::PUBKEY_KIND => self.pubkey_kind,
            table::TAG => self.tag,
            _ => unreachable!("not a time index: {name}"),
        }
    }
}
