//! The [`EventStore`] operations of [`LmdbStore`], each carried out by the
//! file of its concern (`read`, `write`, `trailing`, `value`, `search`),
//! and opening a store: the top floor, which nothing in the store imports.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::borrow::Cow;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use heed::types::Bytes;
use nostrwire_event::{EventId, Filter, Kind, Timestamp};
use nostrwire_wire::compress::DictSet;

use crate::env::{open_env, take_writer_lock};
use crate::lmdb::{LmdbStore, OpenOptions, PageFit, WorkPosition, MAX_TABLES};
use crate::plan::{plan, AsStored, Plan, QueryCursor, ScanStatus};
use crate::read::TimeWalk;
use crate::schema::{self, table};
use crate::search::index::SearchSnapshot;
use crate::trailing::{Step, WaitingBatch};
use crate::value::decode;
use crate::{Admitted, EventStore, Found, Presence, Stats, StoreError, StoreResult, Verdict};

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

    fn admit(&self, record: Vec<u8>, json: Vec<u8>) -> StoreResult<Admitted> {
        Admitted::derive(
            record,
            json,
            |record| {
                Ok(match self.stored_form(record)? {
                    Cow::Owned(stored) => Some(stored),
                    Cow::Borrowed(_) => None,
                })
            },
            self.search.is_some(),
        )
    }

    fn submit(&self, batch: &[Admitted], now: u64) -> StoreResult<Vec<Verdict>> {
        self.submit_batch(batch, now, None)
    }

    fn submit_at(&self, batch: &[Admitted], now: u64, sequence: u64) -> StoreResult<Vec<Verdict>> {
        self.submit_batch(batch, now, Some(sequence))
    }

    fn applied_sequence(&self) -> StoreResult<u64> {
        let txn = self.env.read_txn()?;
        Ok(self
            .meta
            .get(&txn, schema::APPLIED_SEQUENCE)?
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map_or(0, u64::from_le_bytes))
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

    fn render_stored(&self, serial: u64, as_stored: AsStored) -> StoreResult<Option<Found>> {
        let txn = self.env.read_txn()?;
        let key = schema::serial_bytes(serial);
        let Some((_, value)) = self.stored_value(&txn, &key)? else {
            return Ok(None);
        };
        let whole = self.whole_value(&txn, &key, value)?;
        let (_, stored) = crate::value::split_value(&whole)?;
        let record = self.unpack(stored)?;
        let view = crate::value::decode(&record)?;
        let (form, stored) = match as_stored.keeps(stored) {
            true => (crate::read::Form::Stored, stored),
            false => (crate::read::Form::Record, &[][..]),
        };
        Ok(Some(crate::read::found_with(serial, &view, form, stored)))
    }

    fn dictionary_file(&self) -> Option<Arc<[u8]>> {
        self.dict_file
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn render(&self, serial: u64, as_record: bool) -> StoreResult<Option<Found>> {
        let txn = self.env.read_txn()?;
        match self.load(&txn, serial)? {
            Some((_, record)) => self.render_record(serial, &record, as_record).map(Some),
            None => Ok(None),
        }
    }

    fn remove_ids(&self, ids: &[EventId]) -> StoreResult<usize> {
        let mut wtxn = self.env.write_txn()?;
        let mut removed = 0;
        for id in ids {
            if let Some(serial) = self.serial_of(&wtxn, id)? {
                removed += self.remove(&mut wtxn, serial)? as usize;
            }
        }
        self.delete_applied_removals(&mut wtxn)?;
        wtxn.commit()?;
        Ok(removed)
    }

    fn setting(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        let txn = self.env.read_txn()?;
        Ok(self
            .meta
            .get(&txn, &schema::setting_key(key))?
            .map(<[u8]>::to_vec))
    }

    fn put_setting(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        let mut wtxn = self.env.write_txn()?;
        self.meta.put(&mut wtxn, &schema::setting_key(key), value)?;
        wtxn.commit()?;
        Ok(())
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
        *self.dict_file.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::from(&bytes[..]));
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

impl LmdbStore {
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
        let (dicts, dict_file) = Self::dictionaries(&mut wtxn, meta, options)?;
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
            fresh_terms: Default::default(),
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
            dict_file: RwLock::new(dict_file.map(Arc::from)),
            compress: options.compression_level != 0,
            compress_min_bytes: options.compress_min_bytes,
            max_record_bytes: options.max_record_bytes,
            event_cache: crate::event_cache::EventCache::new(options.event_cache_bytes),
            compression_level: options.compression_level.max(1),
            auto_dictionaries: options.auto_dictionaries,
            env: env.clone(),
        };
        store.fit = PageFit::new(store.events.stat(&wtxn)?.page_size as usize);
        // A database of a newer schema is refused; one this release writes
        // has the present schema; a later release upgrades older ones here.
        match store.meta.get(&wtxn, b"schema")? {
            None => {}
            Some(v) => {
                let version = u32::from_le_bytes(v.try_into().unwrap_or([0xff; 4]));
                if version != schema::SCHEMA_VERSION {
                    return Err(StoreError::Schema(version));
                }
            }
        }
        store
            .meta
            .put(&mut wtxn, b"schema", &schema::SCHEMA_VERSION.to_le_bytes())?;
        wtxn.commit()?;
        // Events a crash left unindexed (at most the lag and one batch).
        while store.index_pending(10_000)? {}
        store.search = store.prepare_search_index(path, options)?;
        Ok(store)
    }
}

impl LmdbStore {
    /// One batch, one transaction; with `sequence`, the replicated log's
    /// position it brings the database to, written in the same transaction.
    fn submit_batch(
        &self,
        batch: &[Admitted],
        now: u64,
        sequence: Option<u64>,
    ) -> StoreResult<Vec<Verdict>> {
        let mut wtxn = self.env.write_txn()?;
        let mut verdicts = Vec::with_capacity(batch.len());
        for event in batch {
            verdicts.push(self.apply_one(&mut wtxn, event, now)?);
        }
        self.delete_applied_removals(&mut wtxn)?;
        if let Some(sequence) = sequence {
            self.meta
                .put(&mut wtxn, schema::APPLIED_SEQUENCE, &sequence.to_le_bytes())?;
        }
        wtxn.commit()?;
        if self.search.is_some() {
            for (event, verdict) in batch.iter().zip(&verdicts) {
                if let (Verdict::Stored(serial), Some(terms)) = (verdict, &event.search_terms) {
                    self.fresh_terms.offer(*serial, terms.clone());
                }
            }
        }
        Ok(verdicts)
    }
}
