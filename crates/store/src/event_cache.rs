//! Stage 6a: stored events a JSON client was sent, kept decompressed and
//! rendered. Events never change, so the next query that finds the same
//! event skips zstd and the rendering of hex, escapes and tags: it decodes
//! the kept record to test the filter (the index narrows by a hash of tag
//! values, not the values) and copies the kept JSON.
//!
//! Entries are found by serial. A serial names one event for good: serials
//! only grow, and one taken by a transaction that did not commit (the only
//! one ever handed out twice) was never in a snapshot a query read, so
//! never here. A query uses an entry only for an event its own snapshot
//! holds: looked up there, or reached by an index walk while no removal's
//! index deletions wait (`read.rs`, `consider_indexed`). So a removed event
//! is never returned from here; expiration is kept with the entry, and an
//! entry made from stored bytes of another length than those a lookup
//! found (a value written again in another form) is passed over.
//!
//! Bounded by bytes ([`OpenOptions::event_cache_bytes`](crate::OpenOptions::event_cache_bytes):
//! each entry costs its record, its JSON and [`ENTRY_OVERHEAD`]), split
//! into shards by serial so query threads seldom meet on a lock, each shard
//! evicting by second chance (CLOCK): an entry read since the hand last
//! passed it stays for another round.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Shards of the cache (a power of two: the shard is the serial's low bits).
const SHARDS: usize = 64;

/// What one entry costs beside its bytes (map slot, clock slot, the
/// entry's allocation headers).
pub(crate) const ENTRY_OVERHEAD: usize = 128;

/// Serials are the store's own, not a client's: a plain multiply spreads
/// them, and no one can aim collisions at it.
type SerialHasher = std::hash::BuildHasherDefault<SerialHash>;

#[derive(Default)]
struct SerialHash(u64);

impl std::hash::Hasher for SerialHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // The shard took the low bits; the map's buckets use the high ones.
        self.0 = (n >> SHARDS.trailing_zeros()).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// One kept event: its record and its JSON in one allocation (beside its
/// reference count), so a hit reads one run of memory.
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    bytes: Arc<[u8]>,
    record_len: usize,
    /// Its NIP-40 expiration, as stored.
    pub(crate) expires: Option<u64>,
}

impl Cached {
    /// The decompressed nwb record.
    pub(crate) fn record(&self) -> &[u8] {
        &self.bytes[..self.record_len]
    }

    /// Its canonical JSON.
    pub(crate) fn json(&self) -> &[u8] {
        &self.bytes[self.record_len..]
    }
}

/// Kept events, by serial.
#[derive(Debug)]
pub(crate) struct EventCache {
    shards: Box<[Mutex<Shard>]>,
    /// Bytes each shard may hold; 0 turns the cache off.
    shard_bytes: usize,
}

#[derive(Debug, Default)]
struct Shard {
    entries: HashMap<u64, Entry, SerialHasher>,
    /// Serials in the order the clock hand reaches them.
    clock: VecDeque<u64>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    /// Length of the stored bytes the entry was made from.
    stored_len: usize,
    cached: Cached,
    /// What the entry counts against the shard's bytes.
    cost: usize,
    /// Read since the hand last passed it.
    referenced: bool,
}

impl EventCache {
    /// A cache of at most `bytes` (under [`SHARDS`] × 1 KiB: none).
    pub(crate) fn new(bytes: usize) -> EventCache {
        let shard_bytes = bytes / SHARDS;
        EventCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_bytes: if shard_bytes < 1024 { 0 } else { shard_bytes },
        }
    }

    /// Whether entries are kept at all.
    pub(crate) fn is_on(&self) -> bool {
        self.shard_bytes > 0
    }

    /// The entry of `serial`, made from stored bytes as long as `stored`.
    pub(crate) fn get(&self, serial: u64, stored: &[u8]) -> Option<Cached> {
        if !self.is_on() {
            return None;
        }
        let mut shard = self.shard(serial);
        let entry = shard.entries.get_mut(&serial)?;
        if entry.stored_len != stored.len() {
            return None;
        }
        entry.referenced = true;
        Some(entry.cached.clone())
    }

    /// The entry of `serial`, whatever its stored form: for a candidate
    /// known to be stored in the reader's snapshot without a lookup
    /// (`read.rs`, `consider_indexed`).
    pub(crate) fn get_stored(&self, serial: u64) -> Option<Cached> {
        if !self.is_on() {
            return None;
        }
        let mut shard = self.shard(serial);
        let entry = shard.entries.get_mut(&serial)?;
        entry.referenced = true;
        Some(entry.cached.clone())
    }

    /// Keeps the record and JSON of the event stored at `serial` as
    /// `stored` (expiring at `expires`). An entry larger than an eighth of
    /// its shard is not kept.
    pub(crate) fn insert(
        &self,
        serial: u64,
        (expires, stored): (Option<u64>, &[u8]),
        record: &[u8],
        json: &[u8],
    ) {
        if !self.is_on() {
            return;
        }
        let cost = record.len() + json.len() + ENTRY_OVERHEAD;
        if cost > self.shard_bytes / 8 {
            return;
        }
        // Made before the lock is taken.
        let mut bytes = Vec::with_capacity(record.len() + json.len());
        bytes.extend_from_slice(record);
        bytes.extend_from_slice(json);
        let entry = Entry {
            stored_len: stored.len(),
            cached: Cached {
                bytes: bytes.into(),
                record_len: record.len(),
                expires,
            },
            cost,
            referenced: false,
        };
        self.shard(serial).insert(serial, entry, self.shard_bytes);
    }

    fn shard(&self, serial: u64) -> MutexGuard<'_, Shard> {
        // Every change below is complete before it returns, so a panic
        // elsewhere cannot leave a shard half changed.
        self.shards[(serial as usize) & (SHARDS - 1)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Entries held and their bytes.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().expect("shard");
            (n + s.entries.len(), b + s.bytes)
        })
    }
}

impl Shard {
    fn insert(&mut self, serial: u64, entry: Entry, cap: usize) {
        let cost = entry.cost;
        match self.entries.insert(serial, entry) {
            // Replaced in place (another thread's copy, or other bytes at a
            // reused serial): its place on the clock stays.
            Some(old) => self.bytes = self.bytes - old.cost + cost,
            None => {
                self.clock.push_back(serial);
                self.bytes += cost;
            }
        }
        // The hand goes round: referenced entries get a second chance, the
        // first unreferenced one goes. Each step evicts or clears a bit, so
        // this ends within two rounds.
        while self.bytes > cap {
            let Some(oldest) = self.clock.pop_front() else {
                break;
            };
            let Some(entry) = self.entries.get_mut(&oldest) else {
                continue;
            };
            if entry.referenced && oldest != serial {
                entry.referenced = false;
                self.clock.push_back(oldest);
                continue;
            }
            let gone = self.entries.remove(&oldest).expect("present");
            self.bytes -= gone.cost;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_found_by_serial_and_the_length_of_its_stored_bytes() {
        let cache = EventCache::new(1 << 20);
        assert!(cache.get(7, b"stored").is_none());
        cache.insert(7, (None, b"stored"), b"record", b"{\"json\":1}");
        let hit = cache.get(7, b"stored").expect("kept");
        assert_eq!(hit.record(), b"record");
        assert_eq!(hit.json(), b"{\"json\":1}");
        // Same serial, stored bytes of another length: not this entry.
        assert!(cache.get(7, b"other bytes").is_none());
        assert!(cache.get(8, b"stored").is_none());
        // Another form at that serial replaces it in place.
        cache.insert(7, (None, b"other bytes"), b"r2", b"j2");
        assert_eq!(cache.get(7, b"other bytes").expect("kept").json(), b"j2");
        assert!(cache.get(7, b"stored").is_none());
        assert_eq!(cache.held().0, 1);
    }

    #[test]
    fn the_cache_stays_within_its_bytes_and_keeps_what_is_read() {
        // 64 shards of 4,000 bytes: about ten 300-byte entries each.
        let cache = EventCache::new(SHARDS * 4_000);
        let part = vec![b'x'; 90];
        // Serial 0 is read after each insert into its shard (0, 64, 128, …).
        cache.insert(0, (None, b"zero"), &part, &part);
        for serial in 1..10_000u64 {
            cache.insert(serial, (None, &part), &part, &part);
            if serial % SHARDS as u64 == 0 {
                assert!(
                    cache.get(0, b"zero").is_some(),
                    "a read entry was evicted at {serial}"
                );
            }
            let (_, bytes) = cache.held();
            assert!(bytes <= SHARDS * 4_000, "{bytes} bytes held");
        }
        let (entries, _) = cache.held();
        assert!(entries > SHARDS * 5, "{entries} entries: the cache is used");
    }

    #[test]
    fn an_off_cache_keeps_nothing() {
        for bytes in [0, SHARDS * 1_000] {
            let cache = EventCache::new(bytes);
            assert!(!cache.is_on());
            cache.insert(1, (None, b"s"), b"r", b"j");
            assert!(cache.get(1, b"s").is_none());
            assert_eq!(cache.held(), (0, 0));
        }
    }

    #[test]
    fn an_entry_larger_than_an_eighth_of_its_shard_is_not_kept() {
        let cache = EventCache::new(SHARDS * 2_000);
        cache.insert(1, (None, b"s"), &[0; 100], &[0; 30]);
        assert_eq!(cache.held().0, 0);
        cache.insert(2, (None, b"s"), b"r", b"j");
        assert_eq!(cache.held().0, 1);
    }
}
