//! binostr's typed positional Serde model, shared by CBOR, MessagePack,
//! bincode and postcard so that they differ only in the codec:
//! `[id, pubkey, created_at, kind, tags, content, sig]` with id, pubkey and
//! sig as byte strings and tag values compacted by [`binostr_hex`].
//!
//! Self-describing formats tell text from bytes by their own types
//! (`TAGGED = false`: CBOR tstr/bstr, MessagePack str/bin); the others need an
//! explicit variant index (`TAGGED = true`).

use std::fmt;

use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature, Tag};
use serde::de::{Deserialize, Deserializer, Visitor};
use serde::ser::{Serialize, SerializeSeq, SerializeTuple, Serializer};
use serde_bytes::{ByteArray, Bytes};

use crate::model::{binostr_hex, hex_bytes, timestamp, Doc, Value};

/// An event as the positional tuple.
#[derive(Debug)]
pub struct SerEvent<'a, const TAGGED: bool>(pub &'a Event);

impl<const TAGGED: bool> Serialize for SerEvent<'_, TAGGED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut t = s.serialize_tuple(7)?;
        t.serialize_element(Bytes::new(e.id.as_bytes()))?;
        t.serialize_element(Bytes::new(e.pubkey.as_bytes()))?;
        t.serialize_element(&e.created_at.as_u64())?;
        t.serialize_element(&e.kind.as_u16())?;
        t.serialize_element(&SerTags::<TAGGED>(&e.tags))?;
        t.serialize_element(&e.content)?;
        t.serialize_element(Bytes::new(e.sig.as_bytes()))?;
        t.end()
    }
}

/// A batch of events as a sequence of tuples.
#[derive(Debug)]
pub struct SerBatch<'a, const TAGGED: bool>(pub &'a [Event]);

impl<const TAGGED: bool> Serialize for SerBatch<'_, TAGGED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for e in self.0 {
            seq.serialize_element(&SerEvent::<TAGGED>(e))?;
        }
        seq.end()
    }
}

struct SerTags<'a, const TAGGED: bool>(&'a [Tag]);

impl<const TAGGED: bool> Serialize for SerTags<'_, TAGGED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut tags = s.serialize_seq(Some(self.0.len()))?;
        for tag in self.0 {
            tags.serialize_element(&SerTag::<TAGGED>(tag.as_slice()))?;
        }
        tags.end()
    }
}

struct SerTag<'a, const TAGGED: bool>(&'a [String]);

impl<const TAGGED: bool> Serialize for SerTag<'_, TAGGED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut tag = s.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            tag.serialize_element(&SerValue::<TAGGED>(v))?;
        }
        tag.end()
    }
}

struct SerValue<'a, const TAGGED: bool>(&'a str);

impl<const TAGGED: bool> Serialize for SerValue<'_, TAGGED> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if !binostr_hex(v) {
            return if TAGGED {
                s.serialize_newtype_variant("Value", 0, "Text", v)
            } else {
                s.serialize_str(v)
            };
        }
        // Short values (ids, keys) decode on the stack.
        let mut stack = [0u8; 64];
        let heap;
        let bytes: &[u8] = if v.len() <= 2 * stack.len() {
            let out = &mut stack[..v.len() / 2];
            for (o, pair) in out.iter_mut().zip(v.as_bytes().chunks_exact(2)) {
                *o = (nibble(pair[0]) << 4) | nibble(pair[1]);
            }
            out
        } else {
            let mut b = Vec::new();
            hex_bytes(v, &mut b);
            heap = b;
            &heap
        };
        if TAGGED {
            s.serialize_newtype_variant("Value", 1, "Hex", Bytes::new(bytes))
        } else {
            s.serialize_bytes(bytes)
        }
    }
}

/// A lowercase hex digit's value (the caller checked the digit).
fn nibble(c: u8) -> u8 {
    if c <= b'9' {
        c - b'0'
    } else {
        c - b'a' + 10
    }
}

/// The positional tuple as decoded, generic over the tag value form.
#[derive(Debug, serde::Deserialize)]
pub struct DocDe<V>(
    ByteArray<32>,
    ByteArray<32>,
    u64,
    u16,
    Vec<Vec<V>>,
    String,
    ByteArray<64>,
);

/// A tag value told apart by the format's own text and byte types.
#[derive(Debug)]
#[repr(transparent)]
pub struct Untagged(pub Value);

impl<'de> Deserialize<'de> for Untagged {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Untagged;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a text or byte string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Untagged, E> {
                Ok(Untagged(Value::Text(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Untagged, E> {
                Ok(Untagged(Value::Text(v)))
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Untagged, E> {
                Ok(Untagged(Value::Hex(v.to_vec())))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Untagged, E> {
                Ok(Untagged(Value::Hex(v)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Conversion of a decoded tag value into the shared model.
pub trait IntoValue {
    /// The shared model's value.
    fn into_value(self) -> Value;
}

impl IntoValue for Value {
    fn into_value(self) -> Value {
        self
    }
}

impl IntoValue for Untagged {
    fn into_value(self) -> Value {
        self.0
    }
}

impl<V: IntoValue> DocDe<V> {
    /// The shared model (the value vectors are reused in place).
    pub fn into_doc(self) -> anyhow::Result<Doc> {
        Ok(Doc {
            id: EventId::from_bytes(self.0.into_array()),
            pubkey: PublicKey::from_bytes(self.1.into_array()),
            created_at: timestamp(self.2)?,
            kind: Kind(self.3),
            tags: self
                .4
                .into_iter()
                .map(|t| t.into_iter().map(IntoValue::into_value).collect())
                .collect(),
            content: self.5,
            sig: Signature::from_bytes(self.6.into_array()),
        })
    }
}
