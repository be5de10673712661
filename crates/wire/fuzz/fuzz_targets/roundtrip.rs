//! Encode → decode: an event built from the input survives the round trip
//! unchanged, with the same id, from both encoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::{Event, EventId, EventRef, Kind, PreimageFields, PublicKey, Signature, SignedFields, Tag, Timestamp};
use nostrwire_wire::{encode_event, encode_json_event, EventView};

/// Splits the input into an event: fixed fields from the first bytes, then
/// strings separated by 0xff (0xfe ends a tag; the last string is content).
fn event_from(data: &[u8]) -> Option<Event> {
    let head = data.get(..16)?;
    let rest = &data[16..];
    let mut fixed = [0u8; 128];
    for (i, b) in fixed.iter_mut().enumerate() {
        *b = head[i % 16].wrapping_mul(i as u8 | 1);
    }
    let created_at = u64::from_le_bytes(head[..8].try_into().ok()?) & Timestamp::MAX.as_u64();
    let kind = u16::from_le_bytes([head[8], head[9]]);
    let mut tags = Vec::new();
    let mut current = Vec::new();
    let mut content = String::new();
    let pieces: Vec<&[u8]> = rest.split(|&b| b == 0xff).collect();
    for (i, piece) in pieces.iter().enumerate() {
        let (text, ends_tag) = match piece.split_last() {
            Some((0xfe, text)) => (text, true),
            _ => (*piece, false),
        };
        let text = String::from_utf8_lossy(text).into_owned();
        if i + 1 == pieces.len() {
            content = text;
            break;
        }
        current.push(text);
        if ends_tag {
            tags.push(Tag::new(std::mem::take(&mut current))?);
        }
    }
    if let Some(tag) = Tag::new(current) {
        tags.push(tag);
    }
    Some(Event {
        id: EventId::from_bytes(fixed[..32].try_into().ok()?),
        pubkey: PublicKey::from_bytes(fixed[32..64].try_into().ok()?),
        created_at: Timestamp::new(created_at).ok()?,
        kind: Kind(kind),
        tags,
        content,
        sig: Signature::from_bytes(fixed[..64].try_into().ok()?),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(event) = event_from(data) else {
        return;
    };
    let record = encode_event(&event);
    let view = EventView::decode(&record).expect("encoder output decodes");
    assert_eq!(view.to_event(), event);
    assert_eq!(view.compute_id(), event.compute_id());
    let json = event.to_json();
    assert_eq!(view.to_json(), json);
    let parsed = EventRef::parse(json.as_bytes()).expect("canonical JSON parses");
    assert_eq!(encode_json_event(&parsed), record);
});
