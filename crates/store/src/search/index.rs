//! Stage 6a: the NIP-50 search index, in an LMDB environment of its own
//! (`search/` in the data directory), so that its batches are written by a
//! thread of their own and never hold up the commits of stored events.
//! Layout of the postings and of the totals: `docs/design-store.md`,
//! "Search index".
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::ops::Bound;
use std::path::Path;

use heed::types::Bytes;
use heed::{Database, Env, RoTxn, RwTxn, WithTls};

use crate::schema::{self, table, Posting};
use crate::{Durability, StoreError, StoreResult};

type Db = Database<Bytes, Bytes>;

/// `meta` key: events indexed (u64 LE) ‖ sum of their lengths (u64 LE).
const TOTALS: &[u8] = b"totals";
/// `meta` key: the serial (u64 BE) up to which every event stored in the
/// main environment is indexed. Absent: the index has never been built.
const INDEXED: &[u8] = b"indexed";
/// `meta` key: the serial (u64 BE) up to which a batch that has not
/// finished may have written postings above the mark. Absent: none.
const PARTIAL: &[u8] = b"partial";
/// `meta` key: the posting layout ([`schema::POSTING_FORMAT`], u32 LE).
/// Absent: layout 1, from before the key existed.
const FORMAT: &[u8] = b"format";

/// The serial a key of the search index ends with.
pub(crate) fn block_serial(key: &[u8]) -> StoreResult<u64> {
    schema::serial_from(&key[key.len().saturating_sub(8)..])
        .ok_or_else(|| StoreError::Corrupt("bad search key".into()))
}

/// The postings of one block of the search index, from its key and value.
pub(crate) fn postings(key: &[u8], block: &[u8]) -> StoreResult<Vec<Posting>> {
    schema::decode_postings(block_serial(key)?, block).map_err(StoreError::Corrupt)
}

/// A read snapshot of the search index.
pub(crate) struct SearchSnapshot<'a> {
    pub(crate) index: &'a SearchIndex,
    pub(crate) txn: RoTxn<'a, WithTls>,
}

impl<'a> SearchSnapshot<'a> {
    pub(crate) fn of(index: &'a SearchIndex) -> StoreResult<SearchSnapshot<'a>> {
        Ok(SearchSnapshot {
            index,
            txn: index.env.read_txn()?,
        })
    }
}

/// File in the search directory naming the boot (Linux's
/// `/proc/sys/kernel/random/boot_id`) during which the index took commits
/// without syncing them. Removed once a clean close has synced them.
const UNSYNCED: &str = "unsynced-boot";

/// This boot's id, or `None` where the system has none to read.
pub(crate) fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// Whether the index in `dir` may have lost commits: it took unsynced ones
/// during a boot other than this one, so the machine restarted (or lost
/// power) before they reached the disk, and LMDB promises nothing then.
/// Within one boot the page cache holds every commit, whatever killed the
/// process.
pub(crate) fn lost_unsynced_commits(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join(UNSYNCED)) {
        Ok(recorded) => boot_id().as_deref() != Some(recorded.trim()),
        Err(_) => false,
    }
}

/// The search environment: postings and term counts in `search`, the
/// totals and the mark in `meta`.
#[derive(Debug)]
pub(crate) struct SearchIndex {
    pub(crate) env: Env,
    /// The [`UNSYNCED`] file, when this index commits without syncing: a
    /// clean close syncs and removes it.
    unsynced: Option<std::path::PathBuf>,
    /// term key ‖ serial → block of postings; term key ‖ FF×8 → the term's
    /// counts ([`schema::TermCounts`]).
    pub(crate) postings: Db,
    meta: Db,
    /// Size a block of postings grows to before a new one starts.
    block_bytes: usize,
}

impl SearchIndex {
    /// Opens (creating if needed) the search environment in `dir`.
    ///
    /// The index is derived from the stored events, so a writer whose
    /// events are synced (`durability` full or meta) does not sync the
    /// index's commits. It writes this boot's id to [`UNSYNCED`] first, and
    /// an index found with another boot's id is rebuilt by
    /// [`lost_unsynced_commits`]'s caller. Without a boot id the index
    /// syncs like the events. Readers (`writer` false) never commit.
    pub(crate) fn open(
        dir: &Path,
        map_size: usize,
        durability: Durability,
        block_bytes: usize,
        writer: bool,
    ) -> StoreResult<SearchIndex> {
        let io = |e| StoreError::Lmdb(heed::Error::Io(e));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut unsynced = None;
        let mut durability = durability;
        if let Some(boot) = (writer && durability != Durability::None)
            .then(boot_id)
            .flatten()
        {
            let path = dir.join(UNSYNCED);
            write_synced(&path, boot.as_bytes()).map_err(io)?;
            unsynced = Some(path);
            durability = Durability::None;
        }
        let env = crate::env::open_env(dir, map_size, 4, durability)?;
        let mut wtxn = env.write_txn()?;
        let postings = env.create_database(&mut wtxn, Some(table::SEARCH))?;
        let meta = env.create_database(&mut wtxn, Some(table::META))?;
        wtxn.commit()?;
        Ok(SearchIndex {
            env,
            unsynced,
            postings,
            meta,
            block_bytes,
        })
    }

    /// Empties the index and marks it as trailing every stored event.
    pub(crate) fn reset(&self) -> StoreResult<()> {
        let mut wtxn = self.env.write_txn()?;
        self.postings.clear(&mut wtxn)?;
        self.meta.clear(&mut wtxn)?;
        self.put_totals(&mut wtxn, 0, 0)?;
        self.set_indexed(&mut wtxn, 0)?;
        self.meta
            .put(&mut wtxn, FORMAT, &schema::POSTING_FORMAT.to_le_bytes())?;
        wtxn.commit()?;
        Ok(())
    }

    /// The posting layout the index was written in.
    pub(crate) fn format(&self, txn: &RoTxn<'_>) -> StoreResult<u32> {
        match self.meta.get(txn, FORMAT)? {
            None => Ok(1),
            Some(v) => v
                .try_into()
                .map(u32::from_le_bytes)
                .map_err(|_| StoreError::Corrupt("bad search format".into())),
        }
    }

    /// Events indexed (those holding at least one term) and the sum of
    /// their lengths.
    pub(crate) fn totals(&self, txn: &RoTxn<'_>) -> StoreResult<(u64, u64)> {
        let value = self.meta.get(txn, TOTALS)?.unwrap_or(&[0; 16]);
        let half = |range: std::ops::Range<usize>| {
            value
                .get(range)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| StoreError::Corrupt("bad search totals".into()))
        };
        Ok((half(0..8)?, half(8..16)?))
    }

    pub(crate) fn put_totals(
        &self,
        wtxn: &mut RwTxn<'_>,
        docs: u64,
        tokens: u64,
    ) -> StoreResult<()> {
        let mut value = [0u8; 16];
        value[..8].copy_from_slice(&docs.to_le_bytes());
        value[8..].copy_from_slice(&tokens.to_le_bytes());
        self.meta.put(wtxn, TOTALS, &value)?;
        Ok(())
    }

    /// The serial up to which every stored event is indexed; `None` when
    /// the index has never been built.
    pub(crate) fn indexed(&self, txn: &RoTxn<'_>) -> StoreResult<Option<u64>> {
        self.meta
            .get(txn, INDEXED)?
            .map(|v| {
                schema::serial_from(v).ok_or_else(|| StoreError::Corrupt("bad search mark".into()))
            })
            .transpose()
    }

    pub(crate) fn set_indexed(&self, wtxn: &mut RwTxn<'_>, serial: u64) -> StoreResult<()> {
        self.meta
            .put(wtxn, INDEXED, &schema::serial_bytes(serial))?;
        Ok(())
    }

    /// The serial up to which a batch cut short may have written postings
    /// above the mark.
    pub(crate) fn partial(&self, txn: &RoTxn<'_>) -> StoreResult<Option<u64>> {
        self.meta
            .get(txn, PARTIAL)?
            .map(|v| {
                schema::serial_from(v)
                    .ok_or_else(|| StoreError::Corrupt("bad search partial mark".into()))
            })
            .transpose()
    }

    pub(crate) fn set_partial(&self, wtxn: &mut RwTxn<'_>, serial: Option<u64>) -> StoreResult<()> {
        match serial {
            Some(serial) => self
                .meta
                .put(wtxn, PARTIAL, &schema::serial_bytes(serial))?,
            None => self.meta.delete(wtxn, PARTIAL).map(drop)?,
        }
        Ok(())
    }

    /// Postings of the term with this key prefix above serial `mark`: those
    /// a batch that has not finished wrote. Searches leave them out, and
    /// take them out of the term's document frequency.
    pub(crate) fn postings_above(
        &self,
        txn: &RoTxn<'_>,
        prefix: &[u8],
        mark: u64,
    ) -> StoreResult<u64> {
        let lower = schema::search_key(prefix, 0);
        let upper = schema::df_key(prefix);
        let range = (Bound::Included(&lower[..]), Bound::Excluded(&upper[..]));
        let mut above = 0;
        for item in self.postings.rev_range(txn, &range)? {
            let (k, v) = item?;
            above += postings(k, v)?.iter().filter(|p| p.serial > mark).count() as u64;
            if block_serial(k)? <= mark {
                break;
            }
        }
        Ok(above)
    }

    /// Events holding the term with this key prefix.
    pub(crate) fn document_frequency(&self, txn: &RoTxn<'_>, prefix: &[u8]) -> StoreResult<u64> {
        Ok(self
            .postings
            .get(txn, &schema::df_key(prefix))?
            .map(schema::decode_term_counts)
            .transpose()
            .map_err(StoreError::Corrupt)?
            .map_or(0, |counts| counts.df))
    }

    /// Writes a term's counts; a document frequency of 0 drops them.
    pub(crate) fn put_term_counts(
        &self,
        wtxn: &mut RwTxn<'_>,
        prefix: &[u8],
        counts: schema::TermCounts,
    ) -> StoreResult<()> {
        let key = schema::df_key(prefix);
        match counts.df {
            0 => self.postings.delete(wtxn, &key).map(drop)?,
            _ => self
                .postings
                .put(wtxn, &key, &schema::encode_term_counts(counts))?,
        }
        Ok(())
    }

    /// Appends postings (serials strictly increasing: the index grows in
    /// serial order) to a term's last block, starting new blocks as they
    /// fill, and raises the term's document frequency by their number.
    /// Postings at or below the term's last one are in already (a batch
    /// cut short, applied again) and are skipped. Returns the puts made.
    pub(crate) fn append_postings(
        &self,
        wtxn: &mut RwTxn<'_>,
        prefix: &[u8],
        new: &[Posting],
    ) -> StoreResult<usize> {
        // One walk down the tree finds the term's counts (keyed right after
        // its postings) and its last block; the counts name the last
        // posting's serial, so the block is decoded only when they do not.
        let (counts, last_block) = {
            let lower = schema::search_key(prefix, 0);
            let upper = schema::df_key(prefix);
            let range = (Bound::Included(&lower[..]), Bound::Included(&upper[..]));
            let mut walk = self.postings.rev_range(wtxn, &range)?;
            let mut next = walk.next().transpose()?;
            let mut counts = schema::TermCounts::default();
            if let Some((k, v)) = next {
                if k == &upper[..] {
                    counts = schema::decode_term_counts(v).map_err(StoreError::Corrupt)?;
                    next = walk.next().transpose()?;
                }
            }
            let last_block = match next {
                Some((k, v)) => {
                    let key_serial = block_serial(k)?;
                    let prev = match counts.last {
                        Some(last) => last,
                        None => schema::last_posting_serial(key_serial, v)
                            .map_err(StoreError::Corrupt)?,
                    };
                    Some((key_serial, prev, v.to_vec()))
                }
                None => None,
            };
            (counts, last_block)
        };
        let new = match &last_block {
            Some((_, prev, _)) => &new[new.partition_point(|p| p.serial <= *prev)..],
            None => new,
        };
        let Some(first) = new.first() else {
            return Ok(0);
        };
        let (mut key_serial, mut prev, mut block) = match last_block {
            Some((key_serial, prev, block)) if block.len() < self.block_bytes => {
                (key_serial, prev, block)
            }
            _ => (first.serial, first.serial, Vec::new()),
        };
        let mut puts = 0;
        for &posting in new {
            if block.len() >= self.block_bytes {
                self.postings
                    .put(wtxn, &schema::search_key(prefix, key_serial), &block)?;
                puts += 1;
                (key_serial, prev) = (posting.serial, posting.serial);
                block.clear();
            }
            schema::push_posting(&mut block, prev, posting);
            prev = posting.serial;
        }
        self.postings
            .put(wtxn, &schema::search_key(prefix, key_serial), &block)?;
        let counts = schema::TermCounts {
            df: counts.df + new.len() as u64,
            last: Some(prev),
        };
        self.put_term_counts(wtxn, prefix, counts)?;
        Ok(puts + 2)
    }

    /// The block of a term's postings that would hold `serial` (the last one
    /// keyed at or below it), with its key, decoded.
    pub(crate) fn block_holding(
        &self,
        txn: &RoTxn<'_>,
        prefix: &[u8],
        serial: u64,
    ) -> StoreResult<Option<(Vec<u8>, Vec<Posting>)>> {
        let lower = schema::search_key(prefix, 0);
        let upper = schema::search_key(prefix, serial);
        let range = (Bound::Included(&lower[..]), Bound::Included(&upper[..]));
        match self.postings.rev_range(txn, &range)?.next().transpose()? {
            Some((k, v)) => Ok(Some((k.to_vec(), postings(k, v)?))),
            None => Ok(None),
        }
    }

    /// Takes the postings of event `serial` out of these terms, lowering
    /// the document frequency of each term that held one (a term no event
    /// holds any more is dropped). Returns whether any posting was found:
    /// removing the same event twice changes nothing the second time.
    pub(crate) fn remove_postings<'a>(
        &self,
        wtxn: &mut RwTxn<'_>,
        serial: u64,
        terms: impl Iterator<Item = &'a String>,
    ) -> StoreResult<bool> {
        let mut found = false;
        for term in terms {
            let prefix = schema::term_prefix(term);
            let Some((key, mut block)) = self.block_holding(wtxn, &prefix, serial)? else {
                continue;
            };
            let before = block.len();
            block.retain(|p| p.serial != serial);
            if block.len() == before {
                continue;
            }
            found = true;
            if block.is_empty() {
                self.postings.delete(wtxn, &key)?;
            } else {
                let value = schema::encode_postings(block_serial(&key)?, &block);
                self.postings.put(wtxn, &key, &value)?;
            }
            // The last posting may be the one taken out: the counts stop
            // naming it, and the next append reads the block instead.
            let counts = schema::TermCounts {
                df: self.document_frequency(wtxn, &prefix)?.saturating_sub(1),
                last: None,
            };
            self.put_term_counts(wtxn, &prefix, counts)?;
        }
        Ok(found)
    }

    /// Syncs the commits taken unsynced and removes the [`UNSYNCED`] file;
    /// if syncing fails the file stays, and an open in another boot
    /// rebuilds the index.
    pub(crate) fn settle(&mut self) {
        if let Some(path) = self.unsynced.take() {
            match self.env.force_sync() {
                Ok(()) => {
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::warn!("cannot remove {}: {e}", path.display());
                    }
                }
                Err(e) => tracing::warn!("cannot sync the search index: {e}"),
            }
        }
    }

    /// Closes the environment (settled first) and waits until it is closed.
    pub(crate) fn close(mut self) {
        self.settle();
        let env = self.env.clone();
        drop(self);
        env.prepare_for_closing().wait();
    }
}

impl Drop for SearchIndex {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Writes `bytes` to `path` and syncs the file and its directory, so the
/// file is on disk before anything that relies on it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
