//! The trailing indexes: entries of the time-ordered indexes and `ids`
//! that wait in `pending` and `removed` after their event's commit, and
//! the batches that write them.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::ops::Bound;

use heed::{RoTxn, RwTxn};

use crate::lmdb::{Db, InFlight, LmdbStore, WaitingWork, WorkPosition};
use crate::schema::{self, key, table, TimeKey};
use crate::{StoreError, StoreResult};

/// A row of `pending` or `removed`.
pub(crate) fn waiting_row(value: &[u8]) -> StoreResult<schema::PendingRow<'_>> {
    schema::PendingRow::parse(value).ok_or_else(|| StoreError::Corrupt("bad waiting row".into()))
}

/// Which rows [`LmdbStore::waiting_changes`] reads, and where it puts
/// what else it learns from them.
pub(crate) enum WaitingRows<'a> {
    /// `pending`: the `ids` entries to write.
    Pending(&'a mut Vec<([u8; 32], u64)>),
    /// `removed`: the serials of the rows read.
    Removed(&'a mut Vec<u64>),
}

/// What [`LmdbStore::step_waiting_work`] did.
#[derive(PartialEq, Eq, Debug)]
pub(crate) enum Step {
    /// Nothing was in flight, and no new batch was started.
    Idle,
    /// One transaction of the batch in flight was committed; more remain.
    More,
    /// The batch's last transaction was committed, with its rows dropped.
    Finished,
}

/// What [`LmdbStore::index_waiting`] did.
#[derive(Default)]
pub(crate) struct WaitingBatch {
    /// Rows remain in `pending` or `removed`.
    pub(crate) more: bool,
    /// The last `pending` row moved into the indexes.
    pub(crate) moved_through: Option<u64>,
}

impl LmdbStore {
    /// Writes the `ids` and time-ordered index entries of the oldest `max`
    /// events in `pending` and deletes the time-ordered entries of the
    /// first `max` removed events in `removed`, each index's keys in key
    /// order (entries of one prefix share pages: a replaced follow list's
    /// old and new entries sit side by side), and drops their rows. Call
    /// [`LmdbStore::drop_waiting_ids`] with `moved_through` once committed.
    pub(crate) fn index_waiting(
        &self,
        wtxn: &mut RwTxn<'_>,
        max: usize,
    ) -> StoreResult<WaitingBatch> {
        let work = self.waiting_work(wtxn, max)?;
        self.apply_waiting_work(wtxn, &work, &mut WorkPosition::default(), usize::MAX)?;
        self.finish_waiting_work(wtxn, &work)
    }

    /// Reads the oldest `max` rows of `pending` and of `removed`: the index
    /// changes they stand for, each index's sorted by key.
    pub(crate) fn waiting_work(&self, txn: &RoTxn<'_>, max: usize) -> StoreResult<WaitingWork> {
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
    pub(crate) fn apply_waiting_work(
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
    pub(crate) fn finish_waiting_work(
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

    /// Applies the sorted `changes` from `start` on, a block at a time,
    /// until `max_writes` block writes (puts and deletes) are spent; each
    /// call applies at least one block's changes. Returns the first change
    /// not applied and the writes spent.
    pub(crate) fn update_time_blocks(
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

    /// Adds to `changes`, per time-ordered index, the keys of the first
    /// `max` rows of `pending` (entries to add; the rows' `ids` entries go
    /// to the given list) or `removed` (entries to delete; the rows'
    /// serials go to the given list); returns the last serial read.
    pub(crate) fn waiting_changes(
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
                // A row without an id has its entry in `ids` already.
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

    /// Tells the index batch in flight, if it read `serial`'s row, that the
    /// event is being removed; returns whether it had.
    pub(crate) fn cancel_in_flight(&self, serial: u64) -> bool {
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
    pub(crate) fn step_waiting_work(&self, start: Option<usize>) -> StoreResult<Step> {
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
    pub(crate) fn finish_in_flight_in(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
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

    /// The id in the `pending` row of `serial`, if it has one.
    pub(crate) fn waiting_row_id(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
    ) -> StoreResult<Option<[u8; 32]>> {
        let Some(value) = self.pending.get(txn, &schema::serial_bytes(serial))? else {
            return Ok(None);
        };
        let row = waiting_row(value)?;
        Ok(row.id().copied())
    }

    /// After the commit of a batch that moved the `pending` rows up to
    /// `through` into the indexes: their ids are in `ids` now.
    pub(crate) fn drop_waiting_ids(&self, through: Option<u64>) {
        if let Some(through) = through {
            let mut waiting = self.waiting_ids.write().unwrap_or_else(|e| e.into_inner());
            waiting.by_id.retain(|_, serial| *serial > through);
            waiting.dropped_through = waiting.dropped_through.max(through);
        }
    }
}
