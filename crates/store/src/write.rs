//! The write path: one transaction per batch of admitted events, with
//! their primary indexes, replacement, deletion (NIP-09), vanish
//! requests (NIP-62) and expiration (NIP-40).
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::cmp::Reverse;

use heed::{PutFlags, RoTxn, RwTxn};
use nostrwire_event::{EventId, Kind, PreimageFields, PublicKey, SignedFields, Timestamp};
use nostrwire_wire::{EventView, Value};

use crate::lmdb::LmdbStore;
use crate::read::TimeWalk;
use crate::schema::{self, key};
use crate::search;
use crate::value::{decode, split_value, FLAG_EXPIRES, FLAG_KIND, FLAG_SPLIT};
use crate::{Admitted, StoreResult, Verdict};

/// Everything indexable about one event, derived from its record only.
#[derive(Debug)]
pub(crate) struct Derived {
    pub(crate) id: EventId,
    pub(crate) pubkey: PublicKey,
    pub(crate) kind: Kind,
    pub(crate) created_at: Timestamp,
    pub(crate) tag_prefixes: Vec<[u8; schema::TAG_PREFIX]>,
    pub(crate) address: Option<Vec<u8>>,
    pub(crate) expires: Option<u64>,
}

pub(crate) fn derive(view: &EventView<'_>) -> Derived {
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

/// Parses an `a` tag value `kind:pubkey:d`.
pub(crate) fn parse_address(value: &str) -> Option<(Kind, PublicKey, String)> {
    let mut parts = value.splitn(3, ':');
    let kind = Kind(parts.next()?.parse().ok()?);
    let pubkey = PublicKey::from_hex(parts.next()?).ok()?;
    let d = parts.next().unwrap_or("").to_string();
    Some((kind, pubkey, d))
}

impl LmdbStore {
    pub(crate) fn next_serial(&self, wtxn: &mut RwTxn<'_>) -> StoreResult<u64> {
        let next = self.last_serial(wtxn)? + 1;
        self.meta
            .put(wtxn, b"next_serial", &schema::serial_bytes(next + 1))?;
        Ok(next)
    }

    /// Stores the record with the entries a writer needs at once (`ids`,
    /// `replace`, `expiration`) and a `pending` row for the time-ordered
    /// indexes (`index_waiting`); the search index follows later
    /// (`index_search_into`).
    pub(crate) fn insert(&self, wtxn: &mut RwTxn<'_>, event: &Admitted) -> StoreResult<u64> {
        let d = &event.derived;
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

    /// Removes a stored event and all its index entries.
    pub(crate) fn remove(&self, wtxn: &mut RwTxn<'_>, serial: u64) -> StoreResult<bool> {
        let sb = schema::serial_bytes(serial);
        let Some((table, value)) = self.stored_value(wtxn, &sb)? else {
            return Ok(false);
        };
        let value = self.whole_value(wtxn, &sb, value)?.into_owned();
        let (expires, stored) = split_value(&value)?;
        let record = self.unpack(stored)?.into_owned();
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

    /// Applies one verified event inside the batch transaction.
    pub(crate) fn apply_one(
        &self,
        wtxn: &mut RwTxn<'_>,
        event: &Admitted,
        now: u64,
    ) -> StoreResult<Verdict> {
        let d = &event.derived;
        if self.serial_of(wtxn, &d.id)?.is_some() {
            return Ok(Verdict::Duplicate);
        }
        if self.is_deleted(wtxn, d)? {
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
        // Requests name their targets in tags: the record is read for them.
        if d.kind == Kind::DELETION {
            self.apply_deletion(wtxn, &decode(&event.record)?)?;
        }
        if d.kind.as_u16() == 62 {
            let view = decode(&event.record)?;
            if self.vanish_applies(&view) {
                self.apply_vanish(wtxn, &view)?;
            }
        }
        let serial = self.insert(wtxn, event)?;
        Ok(Verdict::Stored(serial))
    }

    pub(crate) fn is_deleted(&self, txn: &RoTxn<'_>, d: &Derived) -> StoreResult<bool> {
        let tombstone = schema::tombstone_key(&d.id, &d.pubkey);
        if self.deleted_ids.get(txn, &tombstone)?.is_some() {
            return Ok(true);
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

    pub(crate) fn raise_marker(&self, wtxn: &mut RwTxn<'_>, key: &[u8], t: u64) -> StoreResult<()> {
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
    pub(crate) fn apply_deletion(
        &self,
        wtxn: &mut RwTxn<'_>,
        request: &EventView<'_>,
    ) -> StoreResult<()> {
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

    pub(crate) fn vanish_applies(&self, request: &EventView<'_>) -> bool {
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
    pub(crate) fn apply_vanish(
        &self,
        wtxn: &mut RwTxn<'_>,
        request: &EventView<'_>,
    ) -> StoreResult<()> {
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
}
