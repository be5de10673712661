//! bincode 2 (standard configuration: varint integers) through its Serde
//! support: the positional tuple, tag values as an enum (0 text, 1 bytes).
//! Rust only; no schema outside the Rust types. Batch: a sequence.

use nostrwire_event::Event;

use super::serde_model::{DocDe, SerBatch, SerEvent};
use super::Format;
use crate::model::{Doc, Value};

/// bincode, standard configuration.
#[derive(Debug)]
pub struct Bincode;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

impl Format for Bincode {
    fn name(&self) -> &'static str {
        "bincode"
    }
    fn crate_name(&self) -> &'static str {
        "bincode"
    }
    fn profile(&self) -> &'static str {
        "Serde tuple, varint integers, length-prefixed bytes, tag values as enum"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        bincode::serde::encode_into_std_write(SerEvent::<true>(event), out, config())
            .expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let (de, read): (DocDe<Value>, usize) = bincode::serde::decode_from_slice(bytes, config())?;
        anyhow::ensure!(read == bytes.len(), "trailing bytes");
        de.into_doc()
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        bincode::serde::encode_into_std_write(SerBatch::<true>(events), out, config())
            .expect("writing to a Vec");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let (all, read): (Vec<DocDe<Value>>, usize) =
            bincode::serde::decode_from_slice(bytes, config())?;
        anyhow::ensure!(read == bytes.len(), "trailing bytes");
        all.into_iter().map(DocDe::into_doc).collect()
    }
}
