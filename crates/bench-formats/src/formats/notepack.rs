//! notepack (the `notepack` crate): varint fields, tag elements as tagged
//! varint strings with lowercase hex of any even length stored as bytes.
//! Its only encoder input is `NoteBuf` (hex strings), so encoding includes
//! building one. No native batch: 4-byte length frames.

use nostrwire_event::{Event, EventId, Kind, PublicKey, Signature};

use super::{Format, Selective};
use crate::model::{timestamp, Doc, Value};

/// notepack.
#[derive(Debug)]
pub struct Notepack;

const SELECTIVE: &[Selective] = &[Selective {
    path: "field parser",
    contract: "notepack's streaming parser from the start of the record up to the kind \
               (version, id, pubkey, sig, created_at, kind read and bounds-checked); \
               tags and content are not looked at",
}];

fn to_notebuf(e: &Event) -> notepack::NoteBuf {
    notepack::NoteBuf {
        id: e.id.to_hex(),
        pubkey: e.pubkey.to_hex(),
        created_at: e.created_at.as_u64(),
        kind: e.kind.as_u16() as u64,
        tags: e.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
        content: e.content.clone(),
        sig: e.sig.to_hex(),
    }
}

impl Format for Notepack {
    fn name(&self) -> &'static str {
        "notepack"
    }
    fn crate_name(&self) -> &'static str {
        "notepack"
    }
    fn profile(&self) -> &'static str {
        "notepack 0.3: version, raw id/pubkey/sig, varints, tagged-varint strings"
    }
    fn encode(&self, event: &Event, out: &mut Vec<u8>) {
        let packed = notepack::pack_note(&to_notebuf(event)).expect("valid note");
        out.extend_from_slice(&packed);
    }
    fn decode(&self, bytes: &[u8]) -> anyhow::Result<Doc> {
        let note = notepack::NoteParser::new(bytes)
            .into_note()
            .map_err(|e| anyhow::anyhow!("notepack: {e:?}"))?;
        let mut iter = note.tags.clone();
        let mut tags = Vec::with_capacity(iter.len() as usize);
        while let Some(elements) = iter
            .next_tag()
            .map_err(|e| anyhow::anyhow!("notepack: {e:?}"))?
        {
            let mut tag = Vec::with_capacity(elements.remaining() as usize);
            for element in elements {
                tag.push(
                    match element.map_err(|e| anyhow::anyhow!("notepack: {e:?}"))? {
                        notepack::StringType::Str(s) => Value::Text(s.to_owned()),
                        notepack::StringType::Bytes(b) => Value::Hex(b.to_vec()),
                    },
                );
            }
            tags.push(tag);
        }
        Ok(Doc {
            id: EventId::from_bytes(*note.id),
            pubkey: PublicKey::from_bytes(*note.pubkey),
            created_at: timestamp(note.created_at)?,
            kind: Kind(u16::try_from(note.kind)?),
            tags,
            content: note.content.to_owned(),
            sig: Signature::from_bytes(*note.sig),
        })
    }
    fn selective(&self) -> &'static [Selective] {
        SELECTIVE
    }
    fn select(&self, _path: usize, bytes: &[u8]) -> anyhow::Result<(Kind, PublicKey)> {
        let mut pubkey = [0u8; 32];
        for field in notepack::NoteParser::new(bytes) {
            match field.map_err(|e| anyhow::anyhow!("notepack: {e:?}"))? {
                notepack::ParsedField::Pubkey(p) => pubkey.copy_from_slice(p),
                notepack::ParsedField::Kind(k) => {
                    return Ok((Kind(u16::try_from(k)?), PublicKey::from_bytes(pubkey)))
                }
                _ => {}
            }
        }
        anyhow::bail!("notepack: no kind")
    }
}
