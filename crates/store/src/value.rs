//! Stored values: the header, cutting values to whole pages, compression
//! with the database's dictionaries, and reading values back.
#![allow(clippy::big_endian_bytes)] // sort order of LMDB keys

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Bound;

use heed::RoTxn;
use nostrwire_event::Kind;
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor};
use nostrwire_wire::EventView;

use crate::lmdb::{Db, LmdbStore};
use crate::schema;
use crate::{StoreError, StoreResult};

/// Stored value header: bit 0 set = an 8-byte expiration follows.
pub(crate) const FLAG_EXPIRES: u8 = 1;

/// Stored value header: bit 1 set = the value goes on in `tails`.
pub(crate) const FLAG_SPLIT: u8 = 2;

/// Stored value header: bit 2 set = the event's kind (u16 BE) follows the
/// expiration, if any. Every value this release writes carries it.
pub(crate) const FLAG_KIND: u8 = 4;

/// A stored event as read: its expiration and its (decompressed) record.
pub(crate) type Loaded<'t> = (Option<u64>, Cow<'t, [u8]>);

/// One table's entries, in either direction.
pub(crate) type StoredIter<'t> = Box<dyn Iterator<Item = heed::Result<(&'t [u8], &'t [u8])>> + 't>;

/// The entries of `events` and `replaceable` in key (serial) order: each
/// serial is in one of them. An error comes out as soon as it is met.
pub(crate) struct MergedByKey<'t> {
    pub(crate) a: std::iter::Peekable<StoredIter<'t>>,
    pub(crate) b: std::iter::Peekable<StoredIter<'t>>,
    pub(crate) descending: bool,
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

/// Splits a stored value into (expiration, record).
pub(crate) fn split_value(value: &[u8]) -> StoreResult<(Option<u64>, &[u8])> {
    let header = ValueHeader::read(value)?;
    Ok((header.expires, &value[header.len..]))
}

/// What a stored value says before its record.
pub(crate) struct ValueHeader {
    pub(crate) expires: Option<u64>,
    /// `None` when the value does not carry it ([`FLAG_KIND`]).
    pub(crate) kind: Option<Kind>,
    /// Bytes before the record.
    pub(crate) len: usize,
}

impl ValueHeader {
    pub(crate) fn read(value: &[u8]) -> StoreResult<ValueHeader> {
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
pub(crate) fn compress(dicts: &'static DictSet, record: &[u8]) -> StoreResult<Vec<u8>> {
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

/// Whether `dicts` holds a dictionary for the kind of `record` (its own or
/// the fallback); no for a record whose kind cannot be read.
fn has_dictionary(dicts: &DictSet, record: &[u8]) -> bool {
    nostrwire_wire::peek_kind(record).is_ok_and(|kind| dicts.for_kind(kind).is_some())
}

/// The event record inside a stored one: borrowed when stored raw,
/// decompressed (on this thread's context) when stored compressed, if it
/// announces at most `max_record_bytes` (checked before allocating).
pub(crate) fn unpack<'a>(
    dicts: &'static DictSet,
    stored: &'a [u8],
    max_record_bytes: usize,
) -> StoreResult<Cow<'a, [u8]>> {
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
            .record(
                stored,
                &nostrwire_wire::Limits {
                    max_record_bytes,
                    ..nostrwire_wire::Limits::DEFAULT
                },
            )
            .map_err(|e| corrupt(&e))?;
        Ok(Cow::Owned(record.to_vec()))
    })
}

/// Decodes a record the store holds or was handed as admitted, under
/// limits bounded by its own length ([`nostrwire_wire::Limits::within`]):
/// it was admitted under the relay's limits, whatever they were (raised
/// above the defaults, or lowered since), and reading it again must not
/// refuse it.
pub(crate) fn decode(record: &[u8]) -> StoreResult<EventView<'_>> {
    EventView::decode_with(record, &nostrwire_wire::Limits::within(record.len()))
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl LmdbStore {
    /// The event record inside a stored one ([`unpack`] with this store's
    /// dictionaries and [`OpenOptions::max_record_bytes`](crate::OpenOptions::max_record_bytes)).
    pub(crate) fn unpack<'a>(&self, stored: &'a [u8]) -> StoreResult<Cow<'a, [u8]>> {
        unpack(self.dicts(), stored, self.max_record_bytes)
    }

    /// The expiration and the event record of a stored event.
    pub(crate) fn load<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        serial: u64,
    ) -> StoreResult<Option<Loaded<'t>>> {
        let key = schema::serial_bytes(serial);
        match self.stored_value(txn, &key)? {
            Some((_, value)) => self.read_value(txn, &key, value).map(Some),
            None => Ok(None),
        }
    }

    /// The whole stored value of `serial` (expiration header and record
    /// part, a cut value joined), or `None` when `txn`'s snapshot does not
    /// hold the event.
    pub(crate) fn stored_whole<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        serial: u64,
    ) -> StoreResult<Option<Cow<'t, [u8]>>> {
        let key = schema::serial_bytes(serial);
        match self.stored_value(txn, &key)? {
            Some((_, value)) => self.whole_value(txn, &key, value).map(Some),
            None => Ok(None),
        }
    }

    /// The table holding the stored value under `key`, and the value (or
    /// its first part, when cut): `events`, else `replaceable`.
    pub(crate) fn stored_value<'t>(
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
    pub(crate) fn stored_range<'t>(
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
    pub(crate) fn stored_len(&self, txn: &RoTxn<'_>) -> StoreResult<u64> {
        Ok(self.events.len(txn)? + self.replaceable.len(txn)?)
    }

    /// A whole stored value from what `events` or `replaceable` holds
    /// under `key`: with its tail appended when it was cut ([`FLAG_SPLIT`]).
    pub(crate) fn whole_value<'t>(
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
    pub(crate) fn read_value<'t>(
        &self,
        txn: &'t RoTxn<'_>,
        key: &[u8],
        value: &'t [u8],
    ) -> StoreResult<Loaded<'t>> {
        match self.whole_value(txn, key, value)? {
            Cow::Borrowed(value) => {
                let (expires, stored) = split_value(value)?;
                Ok((expires, self.unpack(stored)?))
            }
            Cow::Owned(value) => {
                let (expires, stored) = split_value(&value)?;
                Ok((expires, Cow::Owned(self.unpack(stored)?.into_owned())))
            }
        }
    }

    /// The stored form of `record`: compressed when compression is on and
    /// that makes it smaller, else the record itself. A record under
    /// `compress_min_bytes` is tried only when a dictionary serves its kind:
    /// zstd without one rarely shrinks it, while a trained dictionary makes
    /// most reactions and short notes 10–20% smaller, and nostrwire.v2 sends
    /// records as stored.
    pub(crate) fn stored_form<'r>(&self, record: &'r [u8]) -> StoreResult<Cow<'r, [u8]>> {
        if !self.compress {
            return Ok(Cow::Borrowed(record));
        }
        let dicts = self.dicts();
        if record.len() < self.compress_min_bytes && !has_dictionary(dicts, record) {
            return Ok(Cow::Borrowed(record));
        }
        compress(dicts, record).map(Cow::Owned)
    }
}
