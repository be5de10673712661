//! Cap'n Proto, packed serialization, through the `capnp` crate with the
//! schema in `schema/event.capnp` (native lists; binostr's profile instead
//! packs tags into a custom blob). The reader code in `event_capnp.rs` was
//! generated once by `capnp compile -orust` (capnproto 0.9.2 with the
//! capnpc-rust plugin 0.21, `default_parent_module = ["formats"]`) and is
//! checked in; rerun that after changing the schema. Batch: `struct Batch`.

use capnp::message::{Builder, ReaderOptions};
use capnp::serialize_packed;
use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::event_capnp::{batch, event, value};
use super::{Format, Selective};
use crate::model::{binostr_hex, fixed, hex_bytes, timestamp, Doc, Value};

/// Cap'n Proto, packed.
#[derive(Debug)]
pub struct CapnpPacked;

fn options() -> ReaderOptions {
    let mut o = ReaderOptions::new();
    o.traversal_limit_in_words(Some(1 << 24));
    o
}

fn fill(mut b: event::Builder<'_>, e: &Event) {
    b.set_id(e.id.as_bytes());
    b.set_pubkey(e.pubkey.as_bytes());
    b.set_created_at(e.created_at.as_u64());
    b.set_kind(e.kind.as_u16());
    b.set_content(e.content.as_str());
    b.set_sig(e.sig.as_bytes());
    let mut tags = b.init_tags(e.tags.len() as u32);
    let mut scratch = Vec::new();
    for (i, tag) in e.tags.iter().enumerate() {
        let mut values = tags.reborrow().init(i as u32, tag.as_slice().len() as u32);
        for (j, s) in tag.as_slice().iter().enumerate() {
            let mut v = values.reborrow().get(j as u32);
            if binostr_hex(s) {
                hex_bytes(s, &mut scratch);
                v.set_hex(&scratch);
            } else {
                v.set_text(s.as_str());
            }
        }
    }
}

fn to_doc(r: event::Reader<'_>) -> anyhow::Result<Doc> {
    let list = r.get_tags()?;
    let mut tags = Vec::with_capacity(list.len() as usize);
    for values in list.iter() {
        let values = values?;
        let mut tag = Vec::with_capacity(values.len() as usize);
        for v in values.iter() {
            tag.push(match v.which()? {
                value::Which::Text(t) => Value::Text(t?.to_string()?),
                value::Which::Hex(b) => Value::Hex(b?.to_vec()),
            });
        }
        tags.push(tag);
    }
    Ok(Doc {
        id: EventId::from_bytes(fixed(r.get_id()?, "id")?),
        pubkey: PublicKey::from_bytes(fixed(r.get_pubkey()?, "pubkey")?),
        created_at: timestamp(r.get_created_at())?,
        kind: Kind(r.get_kind()),
        tags,
        content: r.get_content()?.to_string()?,
        sig: Signature::from_bytes(fixed(r.get_sig()?, "sig")?),
    })
}

const SELECTIVE: &[Selective] = &[Selective {
    path: "unpack + read",
    contract: "packed messages are not zero-copy: unpacks the whole message and checks \
               its segment table, then follows and bounds-checks the root pointer and the \
               pubkey pointer; tags and content are not looked at",
}];

impl Format for CapnpPacked {
    fn name(&self) -> &'static str {
        "Cap'n Proto packed"
    }
    fn crate_name(&self) -> &'static str {
        "capnp"
    }
    fn profile(&self) -> &'static str {
        "struct Event: Data id/pubkey/sig, UInt64, UInt16, List(List(Value{text|hex})), Text"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        let mut message = Builder::new_default();
        fill(message.init_root::<event::Builder>(), event);
        serialize_packed::write_message(out, &message).expect("writing to a Vec");
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let message = serialize_packed::read_message(bytes, options())?;
        to_doc(message.get_root::<event::Reader>()?)
    }
    fn selective(&self) -> &'static [Selective] {
        SELECTIVE
    }
    fn select(&self, _path: usize, bytes: &[u8]) -> anyhow::Result<(Kind, PublicKey)> {
        let message = serialize_packed::read_message(bytes, options())?;
        let root = message.get_root::<event::Reader>()?;
        Ok((
            Kind(root.get_kind()),
            PublicKey::from_bytes(fixed(root.get_pubkey()?, "pubkey")?),
        ))
    }
    fn encode_batch(&self, events: &[Event], out: &mut Vec<u8>) {
        let mut message = Builder::new_default();
        let mut list = message
            .init_root::<batch::Builder>()
            .init_events(events.len() as u32);
        for (i, e) in events.iter().enumerate() {
            fill(list.reborrow().get(i as u32), e);
        }
        serialize_packed::write_message(out, &message).expect("writing to a Vec");
    }
    fn decode_batch(&self, bytes: &[u8]) -> anyhow::Result<Vec<Doc>> {
        let message = serialize_packed::read_message(bytes, options())?;
        let root = message.get_root::<batch::Reader>()?;
        root.get_events()?.iter().map(to_doc).collect()
    }
}
