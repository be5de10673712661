//! One module per format. Each implements [`Format`]: encode an owned
//! [`Event`], decode to the shared [`Doc`] model, and optionally faster
//! paths its API offers (id from a borrowed view, selective reads).

use std::hint::black_box;

use nostrwire_event::{Event, EventId, Kind, PreimageFields, PublicKey, SignedFields};

use crate::model::Doc;

pub mod avro;
pub mod bincode;
pub mod bson;
pub mod capnp;
pub mod cbor;
#[allow(
    missing_debug_implementations,
    unused_imports,
    clippy::all,
    clippy::pedantic,
    dead_code
)]
#[rustfmt::skip]
mod event_capnp;
pub mod flatbuffers;
pub mod json;
pub mod msgpack;
pub mod notepack;
pub mod nwb;
pub mod postcard;
pub mod protobuf;
pub mod serde_json;
mod serde_model;

/// What a selective read of kind and pubkey checks before answering.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Selective {
    /// Name of the path, e.g. "preverified".
    pub path: &'static str,
    /// What the path verifies and what it does not.
    pub contract: &'static str,
}

/// A format under test.
///
/// The `pass_*` methods loop over a corpus inside the implementation, so the
/// per-event calls are static even when the format is used as `dyn Format`.
pub trait Format: Sync {
    /// Short name used in tables.
    fn name(&self) -> &'static str;
    /// The crate (or crates) the format uses.
    fn crate_name(&self) -> &'static str;
    /// One line: the layout used for a Nostr event.
    fn profile(&self) -> &'static str;
    /// Encodes one event, appending to `out`.
    fn encode(&self, event: &Event, out: &mut Vec<u8>);
    /// Decodes one record to the owned model; rejects malformed input.
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc>;
    /// Decodes and recomputes the id (default: through the owned model).
    fn decode_id(&self, bytes: &[u8]) -> anyhow::Result<EventId> {
        Ok(self.decode(bytes)?.compute_id())
    }
    /// Decodes, checks the id, then the signature (default: owned model).
    fn validate(&self, bytes: &[u8]) -> anyhow::Result<()> {
        Ok(self.decode(bytes)?.verify()?)
    }
    /// Selective read paths for kind and pubkey (zero-copy formats only).
    fn selective(&self) -> &'static [Selective] {
        &[]
    }
    /// Reads kind and pubkey through selective path `path` (an index into
    /// [`Format::selective`]).
    fn select(&self, _path: usize, _bytes: &[u8]) -> anyhow::Result<(Kind, PublicKey)> {
        anyhow::bail!("{}: no selective read", self.name())
    }
    /// Encodes a batch in the format's native container (default: each record
    /// behind a 4-byte big-endian length, as binostr frames streams).
    #[allow(clippy::big_endian_bytes)] // binostr's framing, for comparability.
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        let mut record = Vec::new();
        for e in events {
            record.clear();
            self.encode(e, &mut record);
            out.extend_from_slice(&(record.len() as u32).to_be_bytes());
            out.extend_from_slice(&record);
        }
    }
    /// Decodes a batch written by [`Format::encode_batch`].
    #[allow(clippy::big_endian_bytes)] // binostr's framing, for comparability.
    fn decode_batch(&self, mut bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (len, rest) = bytes
                .split_first_chunk::<4>()
                .ok_or_else(|| anyhow::anyhow!("truncated frame"))?;
            let len = u32::from_be_bytes(*len) as usize;
            anyhow::ensure!(rest.len() >= len, "truncated frame");
            out.push(self.decode(&rest[..len])?);
            bytes = &rest[len..];
        }
        Ok(out)
    }

    /// Timed pass: encode every event.
    fn pass_encode(&self, events: &[Event]) {
        let mut out = Vec::new();
        for e in events {
            out.clear();
            self.encode(e, &mut out);
            black_box(&out);
        }
    }
    /// Timed pass: decode every record to the owned model.
    fn pass_decode(&self, records: &[Vec<u8>]) {
        for r in records {
            black_box(self.decode(r).expect("checked before timing"));
        }
    }
    /// Timed pass: decode + id.
    fn pass_decode_id(&self, records: &[Vec<u8>]) {
        for r in records {
            black_box(self.decode_id(r).expect("checked before timing"));
        }
    }
    /// Timed pass: decode + id + signature.
    fn pass_validate(&self, records: &[Vec<u8>]) {
        for r in records {
            self.validate(r).expect("checked before timing");
        }
    }
    /// Timed pass: selective read through `path`.
    fn pass_select(&self, path: usize, records: &[Vec<u8>]) {
        for r in records {
            black_box(
                self.select(path, black_box(r))
                    .expect("checked before timing"),
            );
        }
    }
}

/// Every format, in report order (JSON baselines first, nwb last).
pub fn all() -> Vec<Box<dyn Format>> {
    vec![
        Box::new(json::Json),
        Box::new(serde_json::SerdeJson),
        Box::new(cbor::Cbor),
        Box::new(msgpack::MsgPack),
        Box::new(protobuf::Protobuf),
        Box::new(flatbuffers::FlatBuffers),
        Box::new(capnp::CapnpPacked),
        Box::new(avro::Avro::new()),
        Box::new(bson::Bson11),
        Box::new(bincode::Bincode),
        Box::new(postcard::Postcard),
        Box::new(notepack::Notepack),
        Box::new(nwb::Nwb),
    ]
}
