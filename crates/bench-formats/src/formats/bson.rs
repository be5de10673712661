//! BSON 1.1 through the `bson` crate, documents built by hand: field names,
//! binary subtype 0 for id, pubkey, sig and compacted hex values, int64
//! created_at, int32 kind, tags as array documents. No native batch: 4-byte
//! length frames.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document};
use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::Format;
use crate::model::{binostr_hex, fixed, hex_bytes, timestamp, Doc, Value};

/// BSON.
#[derive(Debug)]
pub struct Bson11;

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn to_document(e: &Event) -> Document {
    let tags: Vec<Bson> = e
        .tags
        .iter()
        .map(|t| {
            Bson::Array(
                t.as_slice()
                    .iter()
                    .map(|s| {
                        if binostr_hex(s) {
                            let mut b = Vec::with_capacity(s.len() / 2);
                            hex_bytes(s, &mut b);
                            binary(b)
                        } else {
                            Bson::String(s.clone())
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    let mut d = Document::new();
    d.insert("id", binary(e.id.as_bytes().to_vec()));
    d.insert("pubkey", binary(e.pubkey.as_bytes().to_vec()));
    d.insert("created_at", Bson::Int64(e.created_at.as_u64() as i64));
    d.insert("kind", Bson::Int32(e.kind.as_u16() as i32));
    d.insert("tags", Bson::Array(tags));
    d.insert("content", Bson::String(e.content.clone()));
    d.insert("sig", binary(e.sig.as_bytes().to_vec()));
    d
}

fn take_bytes(d: &mut Document, field: &str) -> anyhow::Result<Vec<u8>> {
    match d.remove(field) {
        Some(Bson::Binary(b)) => Ok(b.bytes),
        other => anyhow::bail!("{field}: unexpected {other:?}"),
    }
}

fn to_doc(mut d: Document) -> anyhow::Result<Doc> {
    let id = take_bytes(&mut d, "id")?;
    let pubkey = take_bytes(&mut d, "pubkey")?;
    let sig = take_bytes(&mut d, "sig")?;
    let created_at = d.get_i64("created_at")?;
    let kind = d.get_i32("kind")?;
    let Some(Bson::String(content)) = d.remove("content") else {
        anyhow::bail!("content");
    };
    let Some(Bson::Array(list)) = d.remove("tags") else {
        anyhow::bail!("tags");
    };
    let mut tags = Vec::with_capacity(list.len());
    for t in list {
        let Bson::Array(values) = t else {
            anyhow::bail!("tag");
        };
        let mut tag = Vec::with_capacity(values.len());
        for v in values {
            tag.push(match v {
                Bson::String(s) => Value::Text(s),
                Bson::Binary(b) => Value::Hex(b.bytes),
                other => anyhow::bail!("tag value: unexpected {other:?}"),
            });
        }
        tags.push(tag);
    }
    Ok(Doc {
        id: EventId::from_bytes(fixed(&id, "id")?),
        pubkey: PublicKey::from_bytes(fixed(&pubkey, "pubkey")?),
        created_at: timestamp(u64::try_from(created_at)?)?,
        kind: Kind(u16::try_from(kind)?),
        tags,
        content,
        sig: Signature::from_bytes(fixed(&sig, "sig")?),
    })
}

impl Format for Bson11 {
    fn name(&self) -> &'static str {
        "BSON"
    }
    fn crate_name(&self) -> &'static str {
        "bson"
    }
    fn profile(&self) -> &'static str {
        "document with field names; binary subtype 0; int64, int32; arrays of strings|binary"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        to_document(event).to_writer(out).expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let mut input = bytes;
        let d = Document::from_reader(&mut input)?;
        anyhow::ensure!(input.is_empty(), "trailing bytes");
        to_doc(d)
    }
}
