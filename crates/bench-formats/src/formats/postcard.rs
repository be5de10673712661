//! postcard through Serde: the positional tuple with varints, tag values as
//! an enum (0 text, 1 bytes). Rust only. Batch: a sequence.

use nostrwire_event::Event;

use super::serde_model::{DocDe, SerBatch, SerEvent};
use super::Format;
use crate::model::{Doc, Value};

/// postcard.
#[derive(Debug)]
pub struct Postcard;

impl Format for Postcard {
    fn name(&self) -> &'static str {
        "postcard"
    }
    fn crate_name(&self) -> &'static str {
        "postcard"
    }
    fn profile(&self) -> &'static str {
        "Serde tuple, varint integers and lengths, tag values as enum"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        let v = std::mem::take(out);
        *out = postcard::to_extend(&SerEvent::<true>(event), v).expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let (de, rest): (DocDe<Value>, &[u8]) = postcard::take_from_bytes(bytes)?;
        anyhow::ensure!(rest.is_empty(), "trailing bytes");
        de.into_doc()
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        let v = std::mem::take(out);
        *out = postcard::to_extend(&SerBatch::<true>(events), v).expect("writing to a Vec");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let (all, rest): (Vec<DocDe<Value>>, &[u8]) = postcard::take_from_bytes(bytes)?;
        anyhow::ensure!(rest.is_empty(), "trailing bytes");
        all.into_iter().map(DocDe::into_doc).collect()
    }
}
