//! Building the search index: taking in stored events above its mark and
//! taking removed ones out, a batch per transaction of its environment.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::ops::Bound;
use std::path::Path;

use heed::{RoTxn, RwTxn};

use crate::lmdb::{LmdbStore, OpenOptions, SEARCH_DIR};
use crate::schema::{self, Posting};
use crate::search::fresh::FreshTerms;
use crate::search::index::{self as search_index, SearchIndex};
use crate::search::{self, EventTerms};
use crate::value::decode;
use crate::{StoreError, StoreResult};

/// While the search index is built, its progress is logged each time its
/// mark passes a multiple of this many serials.
pub(crate) const BUILD_PROGRESS_EVERY: u64 = 100_000;

/// The write transactions of one search batch: a new one every
/// `max_writes` writes.
pub(crate) struct SearchTxns<'e> {
    pub(crate) index: &'e SearchIndex,
    pub(crate) wtxn: Option<RwTxn<'e>>,
    pub(crate) max_writes: usize,
    pub(crate) writes: usize,
    pub(crate) commits: usize,
    /// Stop after this many commits, as a crash would (tests).
    pub(crate) stop_after: Option<usize>,
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

impl LmdbStore {
    /// Opens the search environment when search is on. Its index is built
    /// (in batches, logging progress) when it has never been, or
    /// when it runs ahead of the stored events (a database put back from
    /// an older copy); an index in an older posting layout is dropped and
    /// built again. An interrupted build resumes from its mark. When
    /// search is off, the environment and the removal rows are dropped. A
    /// store opened without the writer lock only opens an index that
    /// exists, as it is, and only in the present layout.
    pub(crate) fn prepare_search_index(
        &self,
        path: &Path,
        options: &OpenOptions,
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
            Some(mark) if mark <= last => last - mark,
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

    /// Walks the stored events above serial `above` and at most `upto`,
    /// oldest first, at most `max` of them, handing `f` each serial and its
    /// indexed terms (`None` for events search does not index, or without
    /// terms). Returns how many were walked and the last serial walked.
    pub(crate) fn walk_unindexed(
        &self,
        txn: &RoTxn<'_>,
        (above, upto): (u64, u64),
        max: usize,
        fresh: Option<&FreshTerms>,
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
            match fresh.and_then(|fresh| fresh.take(serial)) {
                Some(terms) => f(serial, terms),
                None => {
                    let (_, record) = self.read_value(txn, k, value)?;
                    f(serial, EventTerms::of(&decode(&record)?));
                }
            }
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
    pub(crate) fn index_search_into(
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
                let record = self.unpack(stored)?;
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
            true => self.walk_unindexed(
                &txn,
                (from, u64::MAX),
                max,
                Some(&self.fresh_terms),
                |serial, terms| {
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
                },
            )?,
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
        // Indexed, or removed before the walk came to them.
        self.fresh_terms.forget_through(reached);
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
    pub(crate) fn delete_applied_removals(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<()> {
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
}
