//! MessagePack through `rmp-serde`: the same positional array as CBOR, with
//! bin for id, pubkey, sig and compacted hex values, str for text, shortest
//! integers, no ext types. Batch: an array of events.

use nostrwire_event::Event;

use super::serde_model::{DocDe, SerBatch, SerEvent, Untagged};
use super::Format;
use crate::model::Doc;

/// MessagePack, positional profile.
#[derive(Debug)]
pub struct MsgPack;

impl Format for MsgPack {
    fn name(&self) -> &'static str {
        "MessagePack"
    }
    fn crate_name(&self) -> &'static str {
        "rmp-serde"
    }
    fn profile(&self) -> &'static str {
        "array [bin id, bin pubkey, int created_at, int kind, [[str|bin]], str content, bin sig]"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        rmp_serde::encode::write(out, &SerEvent::<false>(event)).expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let mut input = bytes;
        let doc: DocDe<Untagged> =
            serde::Deserialize::deserialize(&mut rmp_serde::Deserializer::new(&mut input))?;
        anyhow::ensure!(input.is_empty(), "trailing bytes");
        doc.into_doc()
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        rmp_serde::encode::write(out, &SerBatch::<false>(events)).expect("writing to a Vec");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let all: Vec<DocDe<Untagged>> = rmp_serde::from_slice(bytes)?;
        all.into_iter().map(DocDe::into_doc).collect()
    }
}
