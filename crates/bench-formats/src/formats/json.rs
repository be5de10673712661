//! NIP-01 JSON through nostrwire's own codec (`nostrwire-event`): strict
//! parse into the borrowed `EventRef`, id computed from the view. Batch: JSON
//! Lines.

use nostrwire_event::{Event, EventId, EventRef, PreimageFields, SignedFields};

use super::Format;
use crate::model::{Doc, Value};

/// JSON, nostrwire-event codec.
#[derive(Debug)]
pub struct Json;

impl Format for Json {
    fn name(&self) -> &'static str {
        "JSON (nostrwire)"
    }
    fn crate_name(&self) -> &'static str {
        "nostrwire-event"
    }
    fn profile(&self) -> &'static str {
        "compact NIP-01 object, hex strings, canonical escaping"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        event.write_json(out);
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let e = EventRef::parse(bytes)?;
        Ok(Doc {
            id: *e.id(),
            pubkey: *e.pubkey(),
            created_at: e.created_at(),
            kind: e.kind(),
            tags: e
                .tags()
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|s| Value::Text(s.value().into_owned()))
                        .collect()
                })
                .collect(),
            content: e.content().value().into_owned(),
            sig: *e.sig(),
        })
    }
    fn decode_id(&self, bytes: &[u8]) -> anyhow::Result<EventId> {
        Ok(EventRef::parse(bytes)?.compute_id())
    }
    fn validate(&self, bytes: &[u8]) -> anyhow::Result<()> {
        Ok(EventRef::parse(bytes)?.verify()?)
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        for e in events {
            e.write_json(out);
            out.push(b'\n');
        }
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| self.decode(l))
            .collect()
    }
}
