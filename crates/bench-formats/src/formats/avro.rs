//! Apache Avro binary datum through `apache-avro`, values built by hand
//! against binostr's schema (below). A raw datum carries no schema and no
//! framing: both are out of band. No native batch: 4-byte length frames.
//!
//! ```json
//! {"type":"record","name":"Event","fields":[
//!   {"name":"id","type":{"type":"fixed","name":"Id","size":32}}, ...pubkey (fixed 32),
//!   {"name":"created_at","type":"long"}, {"name":"kind","type":"int"},
//!   {"name":"tags","type":{"type":"array","items":{"type":"array","items":["string","bytes"]}}},
//!   {"name":"content","type":"string"}, ...sig (fixed 64)]}
//! ```

use apache_avro::types::Value as AvroValue;
use apache_avro::Schema;
use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::Format;
use crate::model::{binostr_hex, fixed, hex_bytes, timestamp, Doc, Value};

const SCHEMA: &str = r#"{"type":"record","name":"Event","fields":[
  {"name":"id","type":{"type":"fixed","name":"Id","size":32}},
  {"name":"pubkey","type":{"type":"fixed","name":"Pubkey","size":32}},
  {"name":"created_at","type":"long"},
  {"name":"kind","type":"int"},
  {"name":"tags","type":{"type":"array","items":{"type":"array","items":["string","bytes"]}}},
  {"name":"content","type":"string"},
  {"name":"sig","type":{"type":"fixed","name":"Sig","size":64}}]}"#;

/// Avro binary datum; holds the parsed schema.
#[derive(Debug)]
pub struct Avro {
    schema: Schema,
}

impl Avro {
    /// Parses the schema once.
    pub fn new() -> Avro {
        Avro {
            schema: Schema::parse_str(SCHEMA).expect("valid schema"),
        }
    }
}

impl Default for Avro {
    fn default() -> Self {
        Avro::new()
    }
}

fn to_value(e: &Event) -> AvroValue {
    let tags = e
        .tags
        .iter()
        .map(|t| {
            AvroValue::Array(
                t.as_slice()
                    .iter()
                    .map(|s| {
                        if binostr_hex(s) {
                            let mut b = Vec::with_capacity(s.len() / 2);
                            hex_bytes(s, &mut b);
                            AvroValue::Union(1, Box::new(AvroValue::Bytes(b)))
                        } else {
                            AvroValue::Union(0, Box::new(AvroValue::String(s.clone())))
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    AvroValue::Record(vec![
        ("id".into(), AvroValue::Fixed(32, e.id.as_bytes().to_vec())),
        (
            "pubkey".into(),
            AvroValue::Fixed(32, e.pubkey.as_bytes().to_vec()),
        ),
        (
            "created_at".into(),
            AvroValue::Long(e.created_at.as_u64() as i64),
        ),
        ("kind".into(), AvroValue::Int(e.kind.as_u16() as i32)),
        ("tags".into(), AvroValue::Array(tags)),
        ("content".into(), AvroValue::String(e.content.clone())),
        (
            "sig".into(),
            AvroValue::Fixed(64, e.sig.as_bytes().to_vec()),
        ),
    ])
}

fn bytes_of(v: AvroValue, field: &str) -> anyhow::Result<Vec<u8>> {
    match v {
        AvroValue::Fixed(_, b) | AvroValue::Bytes(b) => Ok(b),
        other => anyhow::bail!("{field}: unexpected {other:?}"),
    }
}

fn to_doc(v: AvroValue) -> anyhow::Result<Doc> {
    let AvroValue::Record(fields) = v else {
        anyhow::bail!("not a record");
    };
    let mut it = fields.into_iter().map(|(_, v)| v);
    let mut next = || it.next().ok_or_else(|| anyhow::anyhow!("missing field"));
    let id = bytes_of(next()?, "id")?;
    let pubkey = bytes_of(next()?, "pubkey")?;
    let AvroValue::Long(created_at) = next()? else {
        anyhow::bail!("created_at");
    };
    let AvroValue::Int(kind) = next()? else {
        anyhow::bail!("kind");
    };
    let AvroValue::Array(list) = next()? else {
        anyhow::bail!("tags");
    };
    let mut tags = Vec::with_capacity(list.len());
    for t in list {
        let AvroValue::Array(values) = t else {
            anyhow::bail!("tag");
        };
        let mut tag = Vec::with_capacity(values.len());
        for v in values {
            tag.push(match v {
                AvroValue::Union(_, b) => match *b {
                    AvroValue::String(s) => Value::Text(s),
                    AvroValue::Bytes(b) => Value::Hex(b),
                    other => anyhow::bail!("tag value: unexpected {other:?}"),
                },
                other => anyhow::bail!("tag value: unexpected {other:?}"),
            });
        }
        tags.push(tag);
    }
    let AvroValue::String(content) = next()? else {
        anyhow::bail!("content");
    };
    let sig = bytes_of(next()?, "sig")?;
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

impl Format for Avro {
    fn name(&self) -> &'static str {
        "Avro"
    }
    fn crate_name(&self) -> &'static str {
        "apache-avro"
    }
    fn profile(&self) -> &'static str {
        "binary datum: fixed id/pubkey/sig, long, int, array<array<union[string,bytes]>>, string"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        let datum = apache_avro::to_avro_datum(&self.schema, to_value(event)).expect("valid datum");
        out.extend_from_slice(&datum);
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let mut input = bytes;
        let v = apache_avro::from_avro_datum(&self.schema, &mut input, None)?;
        anyhow::ensure!(input.is_empty(), "trailing bytes");
        to_doc(v)
    }
}
