//! The shared owned event model every format decodes into, and the tag
//! value compaction rules.
//!
//! A [`Doc`] keeps each tag element as the format stored it: text, or the
//! bytes of a lowercase hex string. Both spellings produce the same canonical
//! JSON, so the id computed from a `Doc` does not depend on the format.

use nostrwire_event::json::{write_escaped, write_quoted, Sink};
use nostrwire_event::{
    hex, Event, EventId, Kind, PreimageFields, PublicKey, Signature, SignedFields, Timestamp,
};

/// A tag element as a format stores it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    /// A string stored as text.
    Text(String),
    /// A lowercase hex string stored as its bytes.
    Hex(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// A decoded event: fixed fields as bytes, tag values as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// Claimed id.
    pub id: EventId,
    /// Author.
    pub pubkey: PublicKey,
    /// Creation time.
    pub created_at: Timestamp,
    /// Kind.
    pub kind: Kind,
    /// Tags; each element as stored.
    pub tags: Vec<Vec<Value>>,
    /// Content.
    pub content: String,
    /// Claimed signature.
    pub sig: Signature,
}

/// binostr's compaction rule, used by every profile that follows binostr:
/// lowercase, even length, at least 8 characters, all `0-9a-f`.
/// (nwb and notepack apply their own rule: no minimum length.)
pub fn binostr_hex(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() >= 8 && b.len() % 2 == 0 && hex::is_lower_hex(b)
}

/// Decodes a string accepted by [`binostr_hex`] (or any lowercase hex) into `out`.
pub fn hex_bytes(value: &str, out: &mut Vec<u8>) {
    out.clear();
    hex::decode_into(value.as_bytes(), out).expect("checked lowercase hex");
}

/// A timestamp from a decoded integer.
pub fn timestamp(secs: u64) -> anyhow::Result<Timestamp> {
    Timestamp::new(secs).map_err(|e| anyhow::anyhow!("created_at: {e:?}"))
}

/// A fixed-width byte field from a decoded slice.
pub fn fixed<const N: usize>(bytes: &[u8], field: &str) -> anyhow::Result<[u8; N]> {
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{field}: {} bytes, expected {N}", bytes.len()))
}

impl Doc {
    /// The model of an owned event, tag values compacted with `rule`.
    pub fn from_event(event: &Event, rule: fn(&str) -> bool) -> Doc {
        Doc {
            id: event.id,
            pubkey: event.pubkey,
            created_at: event.created_at,
            kind: event.kind,
            tags: event
                .tags
                .iter()
                .map(|t| {
                    t.as_slice()
                        .iter()
                        .map(|s| {
                            if rule(s) {
                                let mut b = Vec::with_capacity(s.len() / 2);
                                hex_bytes(s, &mut b);
                                Value::Hex(b)
                            } else {
                                Value::Text(s.clone())
                            }
                        })
                        .collect()
                })
                .collect(),
            content: event.content.clone(),
            sig: event.sig,
        }
    }
}

impl PreimageFields for Doc {
    fn pubkey(&self) -> &PublicKey {
        &self.pubkey
    }
    fn created_at(&self) -> Timestamp {
        self.created_at
    }
    fn kind(&self) -> Kind {
        self.kind
    }
    fn write_tags_json<S: Sink + ?Sized>(&self, out: &mut S) {
        out.put(b"[");
        let mut buf = [0u8; 128];
        for (i, tag) in self.tags.iter().enumerate() {
            out.put(if i == 0 { b"[" } else { b",[" });
            for (j, element) in tag.iter().enumerate() {
                if j > 0 {
                    out.put(b",");
                }
                match element {
                    Value::Text(s) => write_quoted(out, s),
                    Value::Hex(b) => {
                        out.put(b"\"");
                        for chunk in b.chunks(64) {
                            let text = &mut buf[..2 * chunk.len()];
                            hex::encode_to_slice(chunk, text);
                            out.put(text);
                        }
                        out.put(b"\"");
                    }
                }
            }
            out.put(b"]");
        }
        out.put(b"]");
    }
    fn write_content_json<S: Sink + ?Sized>(&self, out: &mut S) {
        write_escaped(out, &self.content);
    }
    fn any_tag(&self, visit: &mut dyn FnMut(&str, Option<&str>) -> bool) -> bool {
        self.tags.iter().any(|t| {
            let s = |v: Option<&Value>| match v {
                Some(Value::Text(s)) => Some(s.clone()),
                Some(Value::Hex(b)) => Some(hex::encode(b)),
                None => None,
            };
            let name = s(t.first()).unwrap_or_default();
            visit(&name, s(t.get(1)).as_deref())
        })
    }
    fn json_size_hint(&self) -> usize {
        let tags: usize = self
            .tags
            .iter()
            .map(|t| {
                t.iter()
                    .map(|v| match v {
                        Value::Text(s) => s.len() + 3,
                        Value::Hex(b) => 2 * b.len() + 3,
                    })
                    .sum::<usize>()
                    + 3
            })
            .sum();
        tags + self.content.len() + 300
    }
}

impl SignedFields for Doc {
    fn id(&self) -> &EventId {
        &self.id
    }
    fn sig(&self) -> &Signature {
        &self.sig
    }
}
