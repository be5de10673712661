//! The nostrwire event store: each event kept once as an nwb record in
//! LMDB, with indexes for ids, time, kinds, authors, tags, replaceable
//! addresses, deletions and expiration, and a NIP-50 search index in an
//! environment of its own. One writer applies batches of admitted events
//! in one transaction each (group commit); readers scan snapshots.
//! Layout and invariants: `docs/design-store.md`.
//!
//! | file | concern |
//! |---|---|
//! | `lmdb.rs` | environments, tables, opening, the schema check |
//! | `writer.rs` | the one writer thread: group commit, then idle work |
//! | `write.rs` | the write path: insert, replace, delete, vanish, expire |
//! | `trailing.rs` | index entries written after their event's commit |
//! | `read.rs`, `plan.rs` | query planning, index scans, rendering |
//! | `search/` | tokenizer and queries, the search index, its builder and its scans |
//! | `value.rs` | stored values: header, page fitting, compression |
//! | `dictionaries.rs` | the database's dictionaries and their training |
//! | `compact.rs` | packed copies |
//! | `schema.rs` | key and value layouts of every table |

mod admitted;
mod compact;
mod dictionaries;
mod env;
mod event_cache;
mod lmdb;
mod plan;
mod read;
pub mod schema;
pub mod search;
mod store;
#[cfg(test)]
mod tests;
mod trailing;
mod value;
mod write;
mod writer;

use std::sync::Arc;

use nostrwire_event::{EventId, Filter};
use nostrwire_wire::EventView;

pub use admitted::Admitted;
pub use lmdb::{LmdbStore, OpenOptions, EVENT_CACHE_BYTES, INDEX_TXN_WRITES};
pub use plan::{AsStored, QueryCursor, ScanStatus};
pub use writer::{
    writer_inbox, Committed, LogPosition, Submission, Task, Write, Writer, WriterOptions,
};

/// Who may see an event a query found: the relay's read policy (NIP-42
/// restricted kinds), consulted for every candidate of a scan.
pub trait ReadGate: Send + Sync + std::fmt::Debug {
    /// May this reader see `event`?
    fn allows(&self, event: &EventView<'_>) -> bool;

    /// Does the gate hold back any kind the search index holds? Searches
    /// then test each ranked event before it counts toward the limit.
    fn restricts_searchable(&self) -> bool;
}

/// Is an event already known?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// Never seen.
    Absent,
    /// Stored.
    Stored,
    /// Removed by a deletion request (NIP-09) or a vanish request (NIP-62).
    Deleted,
}

/// What the store did with one event of a write batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Stored under this serial.
    Stored(u64),
    /// The id is already stored.
    Duplicate,
    /// A newer version of this replaceable or addressable event is stored.
    Superseded,
    /// The event was deleted earlier by its author.
    Deleted,
}

/// How writes reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fsync data and metadata on every commit (the default).
    Full,
    /// fsync data but not the metadata page: a crash may lose the last
    /// commit, never corrupt the database.
    Meta,
    /// No fsync: the OS writes back when it likes; a machine crash may lose
    /// recent commits (a process crash loses nothing).
    None,
}

/// One stored event, as a query returns it.
#[derive(Clone, Debug)]
pub struct Found {
    /// Storage serial.
    pub serial: u64,
    /// Event id (for ordering).
    pub id: EventId,
    /// Creation time (for ordering).
    pub created_at: u64,
    /// Canonical JSON of the event, UTF-8 (empty when the query asked for
    /// records).
    pub json: Vec<u8>,
    /// The uncompressed nwb record (only when the query asked for records,
    /// for binary-transport connections).
    pub record: Vec<u8>,
}

impl Found {
    /// Neither JSON nor record: a match kept by serial, id and time only
    /// (NIP-77 items, or a result past its query's `render_bytes`), to be
    /// rendered with [`EventStore::render`] when it is needed.
    pub fn is_deferred(&self) -> bool {
        self.json.is_empty() && self.record.is_empty()
    }
}

/// Store-wide figures for metrics.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Events stored.
    pub events: u64,
    /// Bytes the database file occupies.
    pub disk_bytes: u64,
    /// Stored or removed events whose time-ordered index entries are not
    /// written or deleted yet.
    pub index_backlog: u64,
    /// Stored events the search index does not hold yet.
    pub search_backlog: u64,
}

/// Errors of the storage layer.
#[non_exhaustive]
#[derive(Debug)]
pub enum StoreError {
    /// LMDB reported an error.
    Lmdb(heed::Error),
    /// A stored record failed to decode (corruption or a bug).
    Corrupt(String),
    /// The database was written by a newer, incompatible schema.
    Schema(u32),
    /// The compression dictionaries could not be used: an unreadable set
    /// file, or a set that differs from the one the database already holds.
    Dictionaries(String),
    /// Another process stores events in this database (its writer lock is
    /// taken).
    Busy(String),
    /// A search cannot be answered yet: the search index holds the stored
    /// events up to serial `indexed` only, and more than a search tokenizes
    /// by itself are above it, up to `stored` (the index is being built, or
    /// is not keeping up). Nothing is wrong with the database.
    SearchBehind {
        /// The serial up to which the index holds every stored event.
        indexed: u64,
        /// The last serial handed out.
        stored: u64,
    },
    /// The writer was handed an event of a replicated log that does not
    /// come right after the position the store is applied up to (a gap
    /// or a second copy): it is not applied, and the log must be handed
    /// over again from the applied position on.
    OutOfOrder {
        /// The position the store is applied up to.
        applied: u64,
        /// The event's position.
        sequence: u64,
        /// The position it was handed over as following.
        previous: u64,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Lmdb(e) => write!(f, "storage error: {e}"),
            StoreError::Corrupt(what) => write!(f, "corrupt record: {what}"),
            StoreError::Schema(v) => write!(f, "database schema version {v} is not supported"),
            StoreError::Dictionaries(what) => write!(f, "compression dictionaries: {what}"),
            StoreError::Busy(what) => write!(f, "database in use: {what}"),
            StoreError::SearchBehind { indexed, stored } => write!(
                f,
                "the search index is being built (up to event {indexed} of {stored})"
            ),
            StoreError::OutOfOrder {
                applied,
                sequence,
                previous,
            } => write!(
                f,
                "log position {sequence} (after {previous}) does not continue the applied log (at {applied}); not applied"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<heed::Error> for StoreError {
    fn from(e: heed::Error) -> Self {
        StoreError::Lmdb(e)
    }
}

/// Result of the storage layer.
pub type StoreResult<T> = Result<T, StoreError>;

/// What the relay needs from storage.
pub trait EventStore: Send + Sync + 'static {
    /// Is this id stored or deleted? (Read snapshot; used to skip signature
    /// checks for duplicates.)
    fn presence(&self, id: &EventId) -> StoreResult<Presence>;

    /// Admits an event for [`EventStore::submit`]: derives its index keys
    /// from `record` (its nwb record; `json` is the same event's canonical
    /// JSON) and prepares its stored form (compressed). Threads that verify
    /// events call it, so the one writer neither decodes nor compresses.
    fn admit(&self, record: Vec<u8>, json: Vec<u8>) -> StoreResult<Admitted> {
        Admitted::derive(record, json, |_| Ok(None), false)
    }

    /// Applies a batch of admitted events in one transaction and returns
    /// what became of each, in order. Their index entries may wait: call
    /// [`EventStore::index_past_lag`] next.
    fn submit(&self, batch: &[Admitted], now: u64) -> StoreResult<Vec<Verdict>>;

    /// [`EventStore::submit`] for a batch read from a replicated log (a
    /// relay cluster's stream): records in the same transaction that the
    /// log is applied up to `sequence`, so a restart, or a compacted copy,
    /// resumes right after it ([`EventStore::applied_sequence`]).
    fn submit_at(&self, batch: &[Admitted], now: u64, sequence: u64) -> StoreResult<Vec<Verdict>> {
        let _ = sequence;
        self.submit(batch, now)
    }

    /// The log position the last [`EventStore::submit_at`] recorded (0:
    /// none).
    fn applied_sequence(&self) -> StoreResult<u64> {
        Ok(0)
    }

    /// Writes the waiting index entries when more wait than the store's
    /// index lag allows, a transaction's worth per call (all of them when
    /// far more wait); returns whether it wrote. Call it after
    /// [`EventStore::submit`]: the relay's writer does once it has
    /// answered the batch's publishers, so they do not wait for it, and
    /// the next batch waits for one transaction at most, not for all.
    fn index_past_lag(&self) -> StoreResult<bool> {
        Ok(false)
    }

    /// Brings the time-ordered indexes and `ids` (entries waiting to be
    /// written or deleted) up to date for at most `max` events, in as many
    /// transactions as it takes to keep each one small; returns whether
    /// more remain. The writer calls it when it has nothing to do.
    fn index_pending(&self, max: usize) -> StoreResult<bool>;

    /// Brings the search index up to date when more than `lag` stored
    /// events wait for it (with `lag = 0`, whenever anything waits):
    /// indexes at most `max` of them and takes removed events out, in one
    /// transaction of the search index, which never blocks
    /// [`EventStore::submit`]. Returns whether more remain. Called by
    /// a thread of its own.
    fn index_search(&self, max: usize, lag: u64) -> StoreResult<bool> {
        let _ = (max, lag);
        Ok(false)
    }

    /// Continues a query: examines at most `budget` index entries.
    fn scan(
        &self,
        filter: &Filter,
        cursor: &mut QueryCursor,
        budget: usize,
        now: u64,
    ) -> StoreResult<ScanStatus>;

    /// The stored event `serial` as a query returns it (JSON, or its nwb
    /// record when `as_record`), read from a fresh snapshot; `None` when it
    /// is gone since.
    fn render(&self, serial: u64, as_record: bool) -> StoreResult<Option<Found>>;

    /// [`EventStore::render`] as a record, kept in its stored form when
    /// `as_stored` allows (`nostrwire.v2` connections).
    fn render_stored(&self, serial: u64, as_stored: AsStored) -> StoreResult<Option<Found>> {
        let _ = as_stored;
        self.render(serial, true)
    }

    /// The dictionary set file (`spec/nwb.md` §11.2) the store's
    /// compressed records name, exactly as stored; `None` while it has
    /// none. A store keeps its set for good once it has one.
    fn dictionary_file(&self) -> Option<Arc<[u8]>> {
        None
    }

    /// Removes the stored events with these ids, in one transaction, and
    /// returns how many were stored (an operator's removal: no tombstone
    /// is left, so an event removed can be published again). Called by
    /// the writer ([`Write::Task`]).
    fn remove_ids(&self, ids: &[EventId]) -> StoreResult<usize>;

    /// The value stored under the operator's setting `key` (the relay's
    /// NIP-86 moderation lists), read from a fresh snapshot.
    fn setting(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Stores `value` under the operator's setting `key`, in a
    /// transaction of its own. Called by the writer ([`Write::Task`]).
    fn put_setting(&self, key: &str, value: &[u8]) -> StoreResult<()>;

    /// Removes events whose NIP-40 expiration is at or before `now`; returns how many.
    fn purge_expired(&self, now: u64, max: usize) -> StoreResult<usize>;

    /// Figures for metrics.
    fn stats(&self) -> StoreResult<Stats>;

    /// Every stored event matching `filter` (no limit), newest first, for export.
    fn export(&self, filter: &Filter, emit: &mut dyn FnMut(&Found) -> bool) -> StoreResult<()>;

    /// Flushes to disk regardless of the durability mode.
    fn sync(&self) -> StoreResult<()>;

    /// Should [`EventStore::train_dictionaries`] run now? (Enough events
    /// stored, no dictionary set yet, training enabled.)
    fn wants_dictionaries(&self) -> StoreResult<bool> {
        Ok(false)
    }

    /// Trains compression dictionaries from the stored events and uses them
    /// for new records from then on (older records stay readable as they
    /// are). Takes seconds: call it off the writer thread. Returns whether
    /// a set was installed.
    fn train_dictionaries(&self) -> StoreResult<bool> {
        Ok(false)
    }
}

impl std::fmt::Debug for dyn EventStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventStore")
    }
}
