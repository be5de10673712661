//! The read path: id lookups, index scans in time order, and rendering
//! the events a query returns.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::collections::BinaryHeap;
use std::ops::Bound;

use heed::types::Bytes;
use heed::RoTxn;
use nostrwire_event::{EventId, Filter, PreimageFields, SignedFields, Timestamp};
use nostrwire_wire::EventView;

use crate::lmdb::{Db, LmdbStore};
use crate::plan::{AsStored, Plan, QueryCursor, ScanStatus};
use crate::schema::{self, key};
use crate::trailing::waiting_row;
use crate::value::{decode, split_value, Loaded};
use crate::{Found, StoreError, StoreResult};

/// One prefix of a time-ordered index walked newest → oldest: the entries
/// below `upper` (exclusive) down to `lower` (inclusive).
pub(crate) struct TimeWalk<'t> {
    pub(crate) blocks: heed::RoRevRange<'t, Bytes, Bytes>,
    /// The current block's entries, oldest first, consumed from the end.
    pub(crate) buffer: Vec<schema::TimeEntry>,
    pub(crate) upper: schema::TimeEntry,
    pub(crate) lower: schema::TimeEntry,
    pub(crate) done: bool,
}

impl<'t> TimeWalk<'t> {
    pub(crate) fn new(
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

    pub(crate) fn next(&mut self) -> StoreResult<Option<schema::TimeEntry>> {
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

/// Where a JSON match's JSON comes from.
enum Json<'a> {
    /// The event cache's.
    Kept(&'a [u8]),
    /// Rendered from the record, then kept with the stored value's
    /// expiration and record part.
    Render {
        expires: Option<u64>,
        stored: &'a [u8],
    },
}

/// How a query returns a match.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Canonical JSON (text connections, export).
    Json,
    /// The uncompressed nwb record (binary connections).
    Record,
    /// The record as stored (compressed), `nostrwire.v2` connections that
    /// can read it.
    Stored,
    /// Id and time only (NIP-77).
    IdOnly,
}

pub(crate) fn found(serial: u64, view: &EventView<'_>, form: Form) -> Found {
    found_with(serial, view, form, &[])
}

/// [`found`], with the stored form for [`Form::Stored`].
pub(crate) fn found_with(serial: u64, view: &EventView<'_>, form: Form, stored: &[u8]) -> Found {
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
            Form::Stored => stored.to_vec(),
            _ => Vec::new(),
        },
    }
}

impl LmdbStore {
    /// The serial of a stored event by id, in `txn`'s snapshot: from
    /// `ids`, or from the event's `pending` row while its entry waits.
    pub(crate) fn serial_of(&self, txn: &RoTxn<'_>, id: &EventId) -> StoreResult<Option<u64>> {
        Ok(self.lookup_id(txn, id)?.map(|(serial, _)| serial))
    }

    /// Like [`Self::serial_of`], with the stored value when the lookup read
    /// it to check the id (an `ids` hit), so a query need not read it again.
    pub(crate) fn lookup_id<'t>(
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

    /// A stored event as a query returns it: canonical JSON, or its
    /// uncompressed nwb record when `as_record` (binary connections).
    pub(crate) fn render_record(
        &self,
        serial: u64,
        record: &[u8],
        as_record: bool,
    ) -> StoreResult<Found> {
        let form = if as_record { Form::Record } else { Form::Json };
        Ok(found(serial, &decode(record)?, form))
    }

    /// The form a match takes for `cursor`, given its stored form.
    fn record_form(cursor: &QueryCursor, stored: Option<&[u8]>) -> Form {
        if cursor.ids_only || !cursor.renders_now() {
            Form::IdOnly
        } else if !cursor.records {
            Form::Json
        } else if stored.is_some_and(|s| cursor.as_stored.keeps(s)) {
            Form::Stored
        } else {
            Form::Record
        }
    }

    /// Whether `cursor` keeps its next match as JSON rendered now: the
    /// queries the event cache serves (not counts, not NIP-77 ids, not
    /// records for binary connections).
    fn renders_json(cursor: &QueryCursor) -> bool {
        !cursor.count_only
            && cursor.as_stored == AsStored::Never
            && Self::record_form(cursor, None) == Form::Json
    }

    /// Adds a search result to `cursor`: rendered, or deferred once the
    /// cursor's `render_bytes` are spent.
    pub(crate) fn push_result(
        &self,
        cursor: &mut QueryCursor,
        serial: u64,
        record: &[u8],
    ) -> StoreResult<()> {
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
    pub(crate) fn consider(
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
        if cursor.as_stored != AsStored::Never {
            let Some(whole) = self.stored_whole(txn, serial)? else {
                return Ok(());
            };
            let (expires, stored) = split_value(&whole)?;
            let record = self.unpack(stored)?;
            return self.consider_with(
                serial,
                (expires, record),
                Some(stored),
                filter,
                cursor,
                now,
            );
        }
        if self.event_cache.is_on() && Self::renders_json(cursor) {
            return self.consider_for_json(txn, serial, filter, cursor, now);
        }
        let Some(loaded) = self.load(txn, serial)? else {
            return Ok(());
        };
        self.consider_loaded(serial, loaded, filter, cursor, now)
    }

    /// [`Self::consider`] for a candidate an index walk reached: when it is
    /// known to be stored in `txn`'s snapshot (`present`) and the event
    /// cache holds it, a JSON query takes it from there without looking it
    /// up. A serial names one event for good, so the entry is that event
    /// whichever snapshot made it.
    fn consider_indexed(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
        present: bool,
    ) -> StoreResult<()> {
        let kept = match present && Self::renders_json(cursor) {
            true => self.event_cache.get_stored(serial),
            false => None,
        };
        let Some(kept) = kept else {
            return self.consider(txn, serial, filter, cursor, now);
        };
        cursor.examined += 1;
        if cursor.seen.contains(&serial) || kept.expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        self.keep_if_matching(
            serial,
            kept.record(),
            Json::Kept(kept.json()),
            filter,
            cursor,
        )
    }

    /// Tests a candidate's record against `filter` and the read gate, and
    /// keeps a match as JSON: the kept JSON, or rendered now and kept in
    /// the event cache.
    fn keep_if_matching(
        &self,
        serial: u64,
        record: &[u8],
        json: Json<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
    ) -> StoreResult<()> {
        let view = decode(record)?;
        if !filter.matches(&view) || !cursor.gate.as_deref().is_none_or(|g| g.allows(&view)) {
            return Ok(());
        }
        cursor.seen.insert(serial);
        let json = match json {
            Json::Kept(json) => json.to_vec(),
            Json::Render { expires, stored } => {
                let json = view.to_json_bytes();
                self.event_cache
                    .insert(serial, (expires, stored), record, &json);
                json
            }
        };
        Self::keep_match(
            cursor,
            Found {
                serial,
                id: *view.id(),
                created_at: view.created_at().as_u64(),
                json,
                record: Vec::new(),
            },
        );
        Ok(())
    }

    /// [`Self::consider`] for a query that renders JSON now
    /// ([`Self::record_form`] is [`Form::Json`]): the record and
    /// JSON come from the event cache when it holds this event as stored
    /// in `txn`'s snapshot, and a rendered match is kept there.
    fn consider_for_json(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        // Looked up in the snapshot every time: a removed event is gone
        // here, whatever the cache holds.
        let Some(whole) = self.stored_whole(txn, serial)? else {
            return Ok(());
        };
        let (expires, stored) = split_value(&whole)?;
        if expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        match self.event_cache.get(serial, stored) {
            Some(kept) => self.keep_if_matching(
                serial,
                kept.record(),
                Json::Kept(kept.json()),
                filter,
                cursor,
            ),
            None => {
                let record = self.unpack(stored)?;
                let json = Json::Render { expires, stored };
                self.keep_if_matching(serial, &record, json, filter, cursor)
            }
        }
    }

    /// [`Self::consider`] for an event already read (and counted).
    pub(crate) fn consider_loaded(
        &self,
        serial: u64,
        loaded: Loaded<'_>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        self.consider_with(serial, loaded, None, filter, cursor, now)
    }

    /// [`Self::consider_loaded`], with the stored form when it was read.
    fn consider_with(
        &self,
        serial: u64,
        (expires, record): Loaded<'_>,
        stored: Option<&[u8]>,
        filter: &Filter,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<()> {
        if expires.is_some_and(|t| t <= now) {
            return Ok(());
        }
        let view = decode(&record)?;
        if !filter.matches(&view) || !cursor.gate.as_deref().is_none_or(|g| g.allows(&view)) {
            return Ok(());
        }
        cursor.seen.insert(serial);
        if cursor.count_only {
            cursor.counted += 1;
            return Ok(());
        }
        let form = Self::record_form(cursor, stored);
        let f = found_with(serial, &view, form, stored.unwrap_or_default());
        Self::keep_match(cursor, f);
        Ok(())
    }

    /// Records a match in `cursor`; the `limit`-th sets its boundary.
    fn keep_match(cursor: &mut QueryCursor, f: Found) {
        cursor.rendered += f.json.len() + f.record.len();
        let created_at = f.created_at;
        cursor.found.push(f);
        if cursor.found.len() == cursor.limit {
            cursor.boundary = Some(created_at);
        }
    }

    pub(crate) fn scan_index(
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
        let index_decides = cursor.index_decides(filter, table_name);
        // Every serial the walks reach is stored in this snapshot unless a
        // removal's index deletions still wait (`removed`, see
        // `LmdbStore::remove`): only then does a candidate need a lookup
        // to be known present.
        let all_present = self.removed.is_empty(txn)?;
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
                // The walk moves on first, so that the next entry is known:
                // entries that share a created_at need their ids.
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
                let tie = cursor.last_time == Some(t) || heap.peek().is_some_and(|e| e.0 == t);
                cursor.last_time = Some(t);
                if !(index_decides && !tie && self.keep_as_stored(txn, serial, t, cursor, now)?) {
                    self.consider_indexed(txn, serial, filter, cursor, now, all_present)?;
                }
                if cursor.count_only && cursor.counted >= cursor.limit as u64 {
                    return Ok(ScanStatus::Done);
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

    /// A match the index alone decided ([`QueryCursor::index_decides`]),
    /// created at `t` and sharing that time with no other entry: kept as
    /// stored, neither decompressed nor decoded, with a zero id. False
    /// (nothing done) when its stored form is not one the reader takes;
    /// then it is considered as any other.
    fn keep_as_stored(
        &self,
        txn: &RoTxn<'_>,
        serial: u64,
        t: u64,
        cursor: &mut QueryCursor,
        now: u64,
    ) -> StoreResult<bool> {
        if cursor.seen.contains(&serial) {
            cursor.examined += 1;
            return Ok(true);
        }
        let Some(whole) = self.stored_whole(txn, serial)? else {
            cursor.examined += 1;
            return Ok(true);
        };
        let (expires, stored) = split_value(&whole)?;
        if !cursor.as_stored.keeps(stored) {
            return Ok(false);
        }
        cursor.examined += 1;
        if expires.is_some_and(|e| e <= now) {
            return Ok(true);
        }
        cursor.seen.insert(serial);
        let record = match cursor.renders_now() {
            true => stored.to_vec(),
            // Deferred: rendered (as stored) when it is sent.
            false => Vec::new(),
        };
        cursor.rendered += record.len();
        cursor.found.push(Found {
            serial,
            id: EventId::from_bytes([0; 32]),
            created_at: t,
            json: Vec::new(),
            record,
        });
        if cursor.found.len() == cursor.limit {
            cursor.boundary = Some(t);
        }
        Ok(true)
    }

    /// The stored events whose entries still wait in `pending`, created in
    /// `since..=until` and with a key in `table` under a `wanted` prefix,
    /// as (created_at, serial), oldest first.
    pub(crate) fn pending_matches(
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
