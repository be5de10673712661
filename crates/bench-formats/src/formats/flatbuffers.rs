//! FlatBuffers through the `flatbuffers` crate's builder and table API,
//! written by hand for this schema (binostr's profile; crypto fields are
//! byte vectors, as there):
//!
//! ```fbs
//! table TagValue { text:string; hex:[ubyte]; }   // exactly one is set
//! table Tag { values:[TagValue]; }
//! table Event { id:[ubyte] (required); pubkey:[ubyte] (required); created_at:ulong;
//!               kind:ushort; tags:[Tag]; content:string (required); sig:[ubyte] (required); }
//! ```
//!
//! No native batch in the profile: 4-byte length frames.

use std::cell::RefCell;

use flatbuffers::{
    FlatBufferBuilder, Follow, ForwardsUOffset, InvalidFlatbuffer, Table, VOffsetT, Vector,
    Verifiable, Verifier, WIPOffset,
};
use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::{Format, Selective};
use crate::model::{binostr_hex, fixed, hex_bytes, timestamp, Doc, Value};

/// FlatBuffers.
#[derive(Debug)]
pub struct FlatBuffers;

/// vtable slot of field `i`.
const fn slot(i: VOffsetT) -> VOffsetT {
    4 + 2 * i
}
const VT_TEXT: VOffsetT = slot(0);
const VT_HEX: VOffsetT = slot(1);
const VT_VALUES: VOffsetT = slot(0);
const VT_ID: VOffsetT = slot(0);
const VT_PUBKEY: VOffsetT = slot(1);
const VT_CREATED_AT: VOffsetT = slot(2);
const VT_KIND: VOffsetT = slot(3);
const VT_TAGS: VOffsetT = slot(4);
const VT_CONTENT: VOffsetT = slot(5);
const VT_SIG: VOffsetT = slot(6);

type Bytes<'a> = ForwardsUOffset<Vector<'a, u8>>;

macro_rules! table {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name<'a> {
            tab: Table<'a>,
        }
        impl<'a> Follow<'a> for $name<'a> {
            type Inner = $name<'a>;
            unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
                // SAFETY: forwarded contract of `Follow::follow`.
                $name { tab: unsafe { Table::new(buf, loc) } }
            }
        }
    };
}

table!(
    /// `table TagValue`.
    FbValue
);
table!(
    /// `table Tag`.
    FbTag
);
table!(
    /// `table Event`.
    FbEvent
);

impl Verifiable for FbValue<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<&str>>("text", VT_TEXT, false)?
            .visit_field::<Bytes>("hex", VT_HEX, false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for FbTag<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<ForwardsUOffset<FbValue>>>>(
                "values", VT_VALUES, false,
            )?
            .finish();
        Ok(())
    }
}

impl Verifiable for FbEvent<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<Bytes>("id", VT_ID, true)?
            .visit_field::<Bytes>("pubkey", VT_PUBKEY, true)?
            .visit_field::<u64>("created_at", VT_CREATED_AT, false)?
            .visit_field::<u16>("kind", VT_KIND, false)?
            .visit_field::<ForwardsUOffset<Vector<ForwardsUOffset<FbTag>>>>("tags", VT_TAGS, false)?
            .visit_field::<ForwardsUOffset<&str>>("content", VT_CONTENT, true)?
            .visit_field::<Bytes>("sig", VT_SIG, true)?
            .finish();
        Ok(())
    }
}

// SAFETY (all accessors): tables only come from `flatbuffers::root` (verified)
// or from `root_unchecked` on a record the verifier accepted before, so every
// slot holds the type its verifier checked.
impl<'a> FbValue<'a> {
    fn text(&self) -> Option<&'a str> {
        unsafe { self.tab.get::<ForwardsUOffset<&str>>(VT_TEXT, None) }
    }
    fn hex(&self) -> Option<&'a [u8]> {
        unsafe { self.tab.get::<Bytes>(VT_HEX, None) }.map(|v| v.bytes())
    }
}

impl<'a> FbTag<'a> {
    fn values(&self) -> Option<Vector<'a, ForwardsUOffset<FbValue<'a>>>> {
        unsafe {
            self.tab
                .get::<ForwardsUOffset<Vector<ForwardsUOffset<FbValue>>>>(VT_VALUES, None)
        }
    }
}

impl<'a> FbEvent<'a> {
    fn bytes(&self, slot: VOffsetT) -> &'a [u8] {
        unsafe { self.tab.get::<Bytes>(slot, None) }.map_or(&[], |v| v.bytes())
    }
    fn created_at(&self) -> u64 {
        unsafe { self.tab.get::<u64>(VT_CREATED_AT, Some(0)) }.unwrap_or(0)
    }
    fn kind(&self) -> u16 {
        unsafe { self.tab.get::<u16>(VT_KIND, Some(0)) }.unwrap_or(0)
    }
    fn tags(&self) -> Option<Vector<'a, ForwardsUOffset<FbTag<'a>>>> {
        unsafe {
            self.tab
                .get::<ForwardsUOffset<Vector<ForwardsUOffset<FbTag>>>>(VT_TAGS, None)
        }
    }
    fn content(&self) -> &'a str {
        unsafe { self.tab.get::<ForwardsUOffset<&str>>(VT_CONTENT, None) }.unwrap_or("")
    }
}

thread_local! {
    static BUILDER: RefCell<FlatBufferBuilder<'static>> =
        RefCell::new(FlatBufferBuilder::with_capacity(4096));
}

fn build(b: &mut FlatBufferBuilder<'static>, e: &Event) {
    let mut scratch = Vec::new();
    let mut tags = Vec::with_capacity(e.tags.len());
    let mut values = Vec::new();
    for tag in &e.tags {
        values.clear();
        for s in tag.as_slice() {
            let value = if binostr_hex(s) {
                hex_bytes(s, &mut scratch);
                let v = b.create_vector(&scratch);
                let t = b.start_table();
                b.push_slot_always(VT_HEX, v);
                b.end_table(t)
            } else {
                let v = b.create_string(s);
                let t = b.start_table();
                b.push_slot_always(VT_TEXT, v);
                b.end_table(t)
            };
            values.push(value);
        }
        let v = b.create_vector(&values);
        let t = b.start_table();
        b.push_slot_always(VT_VALUES, v);
        tags.push(b.end_table(t));
    }
    let tags: WIPOffset<_> = b.create_vector(&tags);
    let id = b.create_vector(e.id.as_bytes());
    let pubkey = b.create_vector(e.pubkey.as_bytes());
    let sig = b.create_vector(e.sig.as_bytes());
    let content = b.create_string(&e.content);
    let t = b.start_table();
    b.push_slot::<u64>(VT_CREATED_AT, e.created_at.as_u64(), 0);
    b.push_slot_always(VT_ID, id);
    b.push_slot_always(VT_PUBKEY, pubkey);
    b.push_slot_always(VT_TAGS, tags);
    b.push_slot_always(VT_CONTENT, content);
    b.push_slot_always(VT_SIG, sig);
    b.push_slot::<u16>(VT_KIND, e.kind.as_u16(), 0);
    let root = b.end_table(t);
    b.finish_minimal(root);
}

fn to_doc(e: FbEvent<'_>) -> anyhow::Result<Doc> {
    let mut tags = Vec::new();
    for tag in e.tags().into_iter().flatten() {
        let mut out = Vec::new();
        for v in tag.values().into_iter().flatten() {
            out.push(match (v.text(), v.hex()) {
                (Some(s), None) => Value::Text(s.to_owned()),
                (None, Some(b)) => Value::Hex(b.to_vec()),
                _ => anyhow::bail!("a tag value needs exactly one of text and hex"),
            });
        }
        tags.push(out);
    }
    Ok(Doc {
        id: EventId::from_bytes(fixed(e.bytes(VT_ID), "id")?),
        pubkey: PublicKey::from_bytes(fixed(e.bytes(VT_PUBKEY), "pubkey")?),
        created_at: timestamp(e.created_at())?,
        kind: Kind(e.kind()),
        tags,
        content: e.content().to_owned(),
        sig: Signature::from_bytes(fixed(e.bytes(VT_SIG), "sig")?),
    })
}

fn verified(bytes: &[u8]) -> anyhow::Result<FbEvent<'_>> {
    flatbuffers::root::<FbEvent>(bytes).map_err(|e| anyhow::anyhow!("flatbuffers: {e:?}"))
}

const SELECTIVE: &[Selective] = &[
    Selective {
        path: "verify each read",
        contract: "runs the FlatBuffers verifier over the whole buffer (offsets, bounds, \
                   UTF-8 of strings, required fields), then reads two slots",
    },
    Selective {
        path: "preverified",
        contract: "no check at read time: valid only for a buffer the verifier accepted \
                   earlier (e.g. at ingest); reads kind and pubkey slots through the vtable",
    },
];

impl Format for FlatBuffers {
    fn name(&self) -> &'static str {
        "FlatBuffers"
    }
    fn crate_name(&self) -> &'static str {
        "flatbuffers"
    }
    fn profile(&self) -> &'static str {
        "tables: [ubyte] id/pubkey/sig, ulong, ushort, [Tag{[TagValue{text|hex}]}], string"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        BUILDER.with(|b| {
            let mut b = b.borrow_mut();
            b.reset();
            build(&mut b, event);
            out.extend_from_slice(b.finished_data());
        });
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        to_doc(verified(bytes)?)
    }
    fn selective(&self) -> &'static [Selective] {
        SELECTIVE
    }
    /// Path 1 (`preverified`) must only be given records that [`Format::decode`]
    /// accepted; the harness checks every record before timing.
    fn select(&self, path: usize, bytes: &[u8]) -> anyhow::Result<(Kind, PublicKey)> {
        let e = if path == 0 {
            verified(bytes)?
        } else {
            // SAFETY: see the method doc: the record was verified before.
            unsafe { flatbuffers::root_unchecked::<FbEvent>(bytes) }
        };
        Ok((
            Kind(e.kind()),
            PublicKey::from_bytes(fixed(e.bytes(VT_PUBKEY), "pubkey")?),
        ))
    }
}
