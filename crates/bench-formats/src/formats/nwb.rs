//! nwb, nostrwire's binary format (`nostrwire-wire`, spec/nwb.md): fixed
//! 139-byte prefix, varint tag block with hex compaction, content last.
//! Decoding enforces every canonical rule; the id is computed from the
//! borrowed view. Batch: the spec's varint-length frames (§10).

use nostrwire_event::{Event, EventId, Kind, PreimageFields, PublicKey, SignedFields};
use nostrwire_wire::{encode_event_into, frame, peek_kind_and_pubkey, EventView, Limits};

use super::{Format, Selective};
use crate::model::{Doc, Value};

/// nwb.
#[derive(Debug)]
pub struct Nwb;

const SELECTIVE: &[Selective] = &[Selective {
    path: "peek",
    contract: "checks the form byte and that the record is at least the 139-byte prefix; \
               reads kind and pubkey at fixed offsets; nothing else of the record is verified",
}];

impl Format for Nwb {
    fn name(&self) -> &'static str {
        "nwb"
    }
    fn crate_name(&self) -> &'static str {
        "nostrwire-wire"
    }
    fn profile(&self) -> &'static str {
        "spec/nwb.md v1: fixed prefix, canonical varint tag block, content"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        encode_event_into(event, out);
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let v = EventView::decode_with(bytes, &Limits::DEFAULT)?;
        Ok(Doc {
            id: *v.id(),
            pubkey: *v.pubkey(),
            created_at: v.created_at(),
            kind: v.kind(),
            tags: v
                .tags()
                .map(|t| {
                    t.iter()
                        .map(|e| match e {
                            nostrwire_wire::Value::Text(s) => Value::Text(s.to_owned()),
                            nostrwire_wire::Value::Hex(b) => Value::Hex(b.to_vec()),
                        })
                        .collect()
                })
                .collect(),
            content: v.content().to_owned(),
            sig: *v.sig(),
        })
    }
    fn decode_id(&self, bytes: &[u8]) -> anyhow::Result<EventId> {
        Ok(EventView::decode_with(bytes, &Limits::DEFAULT)?.compute_id())
    }
    fn validate(&self, bytes: &[u8]) -> anyhow::Result<()> {
        Ok(EventView::decode_with(bytes, &Limits::DEFAULT)?.verify()?)
    }
    fn selective(&self) -> &'static [Selective] {
        SELECTIVE
    }
    fn select(&self, _path: usize, bytes: &[u8]) -> anyhow::Result<(Kind, PublicKey)> {
        Ok(peek_kind_and_pubkey(bytes)?)
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        let mut record = Vec::new();
        for e in events {
            record.clear();
            encode_event_into(e, &mut record);
            frame::push_frame(out, &record);
        }
    }
    fn decode_batch(&self, mut bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (record, rest) = frame::split_frame(bytes, Limits::DEFAULT.max_record_bytes)?;
            out.push(self.decode(record)?);
            bytes = rest;
        }
        Ok(out)
    }
}
