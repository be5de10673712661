//! CBOR (RFC 8949) through `ciborium`: binostr's packed profile, a 7-element
//! array with definite lengths, preferred integers, bstr for id, pubkey, sig
//! and compacted hex values, tstr for text. Batch: an array of events.

use nostrwire_event::Event;

use super::serde_model::{DocDe, SerBatch, SerEvent, Untagged};
use super::Format;
use crate::model::Doc;

/// CBOR, packed positional profile.
#[derive(Debug)]
pub struct Cbor;

impl Format for Cbor {
    fn name(&self) -> &'static str {
        "CBOR"
    }
    fn crate_name(&self) -> &'static str {
        "ciborium"
    }
    fn profile(&self) -> &'static str {
        "array [bstr id, bstr pubkey, uint created_at, uint kind, [[tstr|bstr]], tstr content, bstr sig]"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        ciborium::into_writer(&SerEvent::<false>(event), out).expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let mut input = bytes;
        let de: DocDe<Untagged> = ciborium::from_reader(&mut input)?;
        anyhow::ensure!(input.is_empty(), "trailing bytes");
        de.into_doc()
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        ciborium::into_writer(&SerBatch::<false>(events), out).expect("writing to a Vec");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let all: Vec<DocDe<Untagged>> = ciborium::from_reader(bytes)?;
        all.into_iter().map(DocDe::into_doc).collect()
    }
}
