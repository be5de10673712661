//! NIP-01 JSON through `serde_json` and derived structs (hex strings decoded
//! after parsing), the usual Rust baseline. Batch: a JSON array.

use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::Format;
use crate::model::{timestamp, Doc, Value};

/// JSON, serde_json.
#[derive(Debug)]
pub struct SerdeJson;

#[derive(serde::Serialize)]
struct Out<'a> {
    id: &'a str,
    pubkey: &'a str,
    created_at: u64,
    kind: u16,
    tags: Vec<&'a [String]>,
    content: &'a str,
    sig: &'a str,
}

#[derive(serde::Deserialize)]
struct In {
    id: String,
    pubkey: String,
    created_at: u64,
    kind: u16,
    tags: Vec<Vec<String>>,
    content: String,
    sig: String,
}

impl In {
    fn into_doc(self) -> anyhow::Result<Doc> {
        Ok(Doc {
            id: EventId::from_hex(&self.id)?,
            pubkey: PublicKey::from_hex(&self.pubkey)?,
            created_at: timestamp(self.created_at)?,
            kind: Kind(self.kind),
            tags: self
                .tags
                .into_iter()
                .map(|t| t.into_iter().map(Value::Text).collect())
                .collect(),
            content: self.content,
            sig: Signature::from_hex(&self.sig)?,
        })
    }
}

fn write(event: &Event, out: &mut Vec<u8>) {
    let (id, pubkey, sig) = (
        event.id.to_hex_bytes(),
        event.pubkey.to_hex_bytes(),
        event.sig.to_hex_bytes(),
    );
    fn ascii(b: &[u8]) -> &str {
        std::str::from_utf8(b).expect("hex is ASCII")
    }
    let value = Out {
        id: ascii(&id),
        pubkey: ascii(&pubkey),
        created_at: event.created_at.as_u64(),
        kind: event.kind.as_u16(),
        tags: event.tags.iter().map(|t| t.as_slice()).collect(),
        content: &event.content,
        sig: ascii(&sig),
    };
    serde_json::to_writer(out, &value).expect("writing to a Vec");
}

impl Format for SerdeJson {
    fn name(&self) -> &'static str {
        "JSON (serde_json)"
    }
    fn crate_name(&self) -> &'static str {
        "serde_json"
    }
    fn profile(&self) -> &'static str {
        "compact NIP-01 object through derived structs"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        write(event, out);
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        serde_json::from_slice::<In>(bytes)?.into_doc()
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write(e, out);
        }
        out.push(b']');
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        serde_json::from_slice::<Vec<In>>(bytes)?
            .into_iter()
            .map(In::into_doc)
            .collect()
    }
}
