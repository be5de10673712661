//! Protocol Buffers (proto3 binary) through `prost`, messages declared with
//! its derive macros (equivalent to the `.proto` below, binostr's
//! `ProtoEventBinary` with only the `values_v2` field). Batch: a message with
//! `repeated Event events = 1`.
//!
//! ```proto
//! message Event { bytes id = 1; bytes pubkey = 2; int64 created_at = 3; int32 kind = 4;
//!                 repeated Tag tags = 5; string content = 6; bytes sig = 7; }
//! message Tag   { repeated TagValue values = 2; }
//! message TagValue { oneof value { string text = 1; bytes hex = 2; } }
//! message Batch { repeated Event events = 1; }
//! ```

use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};
use prost::Message;

use super::Format;
use crate::model::{binostr_hex, fixed, hex_bytes, timestamp, Doc, Value};

/// Protobuf binary.
#[derive(Debug)]
pub struct Protobuf;

/// `message Event`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbEvent {
    /// Raw id.
    #[prost(bytes = "vec", tag = "1")]
    pub id: Vec<u8>,
    /// Raw pubkey.
    #[prost(bytes = "vec", tag = "2")]
    pub pubkey: Vec<u8>,
    /// Seconds.
    #[prost(int64, tag = "3")]
    pub created_at: i64,
    /// Kind.
    #[prost(int32, tag = "4")]
    pub kind: i32,
    /// Tags.
    #[prost(message, repeated, tag = "5")]
    pub tags: Vec<PbTag>,
    /// Content.
    #[prost(string, tag = "6")]
    pub content: String,
    /// Raw signature.
    #[prost(bytes = "vec", tag = "7")]
    pub sig: Vec<u8>,
}

/// `message Tag`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbTag {
    /// Elements.
    #[prost(message, repeated, tag = "2")]
    pub values: Vec<PbValue>,
}

/// `message TagValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbValue {
    /// Text or hex bytes.
    #[prost(oneof = "PbKind", tags = "1, 2")]
    pub value: Option<PbKind>,
}

/// `oneof value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum PbKind {
    /// Text.
    #[prost(string, tag = "1")]
    Text(String),
    /// Bytes of lowercase hex.
    #[prost(bytes = "vec", tag = "2")]
    Hex(Vec<u8>),
}

/// `message Batch`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbBatch {
    /// Events.
    #[prost(message, repeated, tag = "1")]
    pub events: Vec<PbEvent>,
}

fn to_pb(e: &Event) -> PbEvent {
    PbEvent {
        id: e.id.as_bytes().to_vec(),
        pubkey: e.pubkey.as_bytes().to_vec(),
        created_at: e.created_at.as_u64() as i64,
        kind: e.kind.as_u16() as i32,
        tags: e
            .tags
            .iter()
            .map(|t| PbTag {
                values: t
                    .as_slice()
                    .iter()
                    .map(|s| PbValue {
                        value: Some(if binostr_hex(s) {
                            let mut b = Vec::with_capacity(s.len() / 2);
                            hex_bytes(s, &mut b);
                            PbKind::Hex(b)
                        } else {
                            PbKind::Text(s.clone())
                        }),
                    })
                    .collect(),
            })
            .collect(),
        content: e.content.clone(),
        sig: e.sig.as_bytes().to_vec(),
    }
}

fn from_pb(p: PbEvent) -> anyhow::Result<Doc> {
    Ok(Doc {
        id: EventId::from_bytes(fixed(&p.id, "id")?),
        pubkey: PublicKey::from_bytes(fixed(&p.pubkey, "pubkey")?),
        created_at: timestamp(u64::try_from(p.created_at)?)?,
        kind: Kind(u16::try_from(p.kind)?),
        tags: p
            .tags
            .into_iter()
            .map(|t| {
                t.values
                    .into_iter()
                    .map(|v| match v.value {
                        Some(PbKind::Text(s)) => Ok(Value::Text(s)),
                        Some(PbKind::Hex(b)) => Ok(Value::Hex(b)),
                        None => Err(anyhow::anyhow!("tag value without a variant")),
                    })
                    .collect()
            })
            .collect::<anyhow::Result<_>>()?,
        content: p.content,
        sig: Signature::from_bytes(fixed(&p.sig, "sig")?),
    })
}

impl Format for Protobuf {
    fn name(&self) -> &'static str {
        "Protobuf"
    }
    fn crate_name(&self) -> &'static str {
        "prost"
    }
    fn profile(&self) -> &'static str {
        "proto3: bytes id/pubkey/sig, int64/int32, Tag{repeated TagValue{oneof text|hex}}"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        to_pb(event).encode(out).expect("a Vec grows");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        from_pb(PbEvent::decode(bytes)?)
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        let batch = PbBatch {
            events: events.iter().map(to_pb).collect(),
        };
        batch.encode(out).expect("a Vec grows");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        PbBatch::decode(bytes)?
            .events
            .into_iter()
            .map(from_pb)
            .collect()
    }
}
