//! The admitted event: a verified event that passed the relay's policy,
//! with everything the store and fan-out need derived from it once, by the
//! thread that admitted it. The writer, the search indexer and fan-out read
//! these fields; none of them parses the event's JSON again.

use std::sync::Arc;

use nostrwire_event::{EventId, Kind, PublicKey, SignedFields, Timestamp};
use nostrwire_wire::EventView;

use crate::search::EventTerms;
use crate::write::{derive, Derived};
use crate::{StoreError, StoreResult};

/// An event ready for [`crate::EventStore::submit`]: its nwb record, its
/// canonical JSON, its stored form, its index keys and its search terms.
#[derive(Debug)]
pub struct Admitted {
    pub(crate) derived: Derived,
    pub(crate) record: Vec<u8>,
    pub(crate) json: Vec<u8>,
    /// The stored form when it differs from the record (compressed), made
    /// by the admitting thread so that the one writer does not compress.
    pub(crate) stored: Option<Vec<u8>>,
    /// Its NIP-50 terms (`Some(None)`: a kind that is not indexed), derived
    /// when the store indexes text; the search indexer takes them once the
    /// event is stored. `None`: not derived (search off, or built outside
    /// [`crate::EventStore::admit`]).
    pub(crate) search_terms: Option<Option<Arc<EventTerms>>>,
}

impl Admitted {
    /// Derives what the store needs from `record` (an nwb record) and
    /// `json` (the same event's canonical JSON); `stored` is its stored
    /// form from [`crate::EventStore::admit`], or `None` to have the
    /// writer prepare it; `with_terms` derives the search terms too. The
    /// record is decoded here, once.
    pub(crate) fn derive(
        record: Vec<u8>,
        json: Vec<u8>,
        pack: impl FnOnce(&[u8]) -> StoreResult<Option<Vec<u8>>>,
        with_terms: bool,
    ) -> StoreResult<Admitted> {
        let view = decode_record(&record)?;
        let derived = derive(&view);
        let search_terms = with_terms.then(|| EventTerms::of(&view).map(Arc::new));
        let stored = pack(&record)?;
        Ok(Admitted {
            derived,
            record,
            json,
            stored,
            search_terms,
        })
    }

    /// An admitted event that is stored raw or compressed by the writer,
    /// or never stored (ephemeral events go to fan-out only).
    pub fn new(record: Vec<u8>, json: Vec<u8>) -> StoreResult<Admitted> {
        Admitted::derive(record, json, |_| Ok(None), false)
    }

    /// An admitted event from its nwb record alone, its JSON rendered from
    /// the record, stored raw or compressed by the writer (for tools and
    /// tests that hold records only).
    pub fn from_record(record: Vec<u8>) -> StoreResult<Admitted> {
        let json = decode_record(&record)?.to_json_bytes();
        Admitted::derive(record, json, |_| Ok(None), false)
    }

    /// Its NIP-50 terms as admitted (`Some(None)`: a kind that is not
    /// indexed); `None` when they were not derived (search off).
    pub fn search_terms(&self) -> Option<Option<&EventTerms>> {
        self.search_terms.as_ref().map(|t| t.as_deref())
    }

    /// The event's id.
    pub fn id(&self) -> &EventId {
        &self.derived.id
    }

    /// The event's author.
    pub fn pubkey(&self) -> &PublicKey {
        &self.derived.pubkey
    }

    /// The event's kind.
    pub fn kind(&self) -> Kind {
        self.derived.kind
    }

    /// The event's `created_at`.
    pub fn created_at(&self) -> Timestamp {
        self.derived.created_at
    }

    /// Its NIP-40 expiration, when its `expiration` tag holds a number.
    pub fn expires(&self) -> Option<u64> {
        self.derived.expires
    }

    /// The nwb record.
    pub fn record(&self) -> &[u8] {
        &self.record
    }

    /// The stored form when it differs from the record (compressed by the
    /// admitting thread), as `nostrwire.v2` subscribers that can read it
    /// are sent it: compressed once, whatever the number of subscribers.
    pub fn stored(&self) -> Option<&[u8]> {
        self.stored.as_deref()
    }

    /// The canonical JSON (UTF-8), as sent to subscribers.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The record, decoded in place (for filter matching).
    pub fn view(&self) -> StoreResult<EventView<'_>> {
        decode_record(&self.record)
    }

    /// Takes the record and the JSON apart.
    pub fn into_parts(self) -> (Vec<u8>, Vec<u8>) {
        (self.record, self.json)
    }
}

/// Decodes an admitted record under limits bounded by its own length
/// ([`nostrwire_wire::Limits::within`]): it passed the admitting relay's
/// limits already, which may be above the defaults.
fn decode_record(record: &[u8]) -> StoreResult<EventView<'_>> {
    EventView::decode_with(record, &nostrwire_wire::Limits::within(record.len()))
        .map_err(|e| StoreError::Corrupt(format!("admitted record: {e}")))
}
