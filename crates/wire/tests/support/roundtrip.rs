//! The property of the `roundtrip` fuzz target (`fuzz/fuzz_targets/roundtrip.rs`),
//! shared with `tests/fuzz_regressions.rs`, which replays the inputs kept in
//! `fuzz/regressions/roundtrip/`.
//!
//! An event built from any bytes is either refused by the encoder with the
//! error the decoder gives its record, or survives encode → decode unchanged,
//! with the same id, from both encoders.

use nostrwire_event::{
    ErrorKind, Event, EventId, EventRef, Kind, PreimageFields, PublicKey, Signature, SignedFields,
    Tag, Timestamp,
};
use nostrwire_wire::{encode_json_event, try_encode_event, EventView, Limits};

/// Limits no event reaches: the encoder's output for any event.
const NONE: Limits = Limits {
    max_record_bytes: usize::MAX,
    max_tags: usize::MAX,
    max_tag_elements: usize::MAX,
    max_string_bytes: usize::MAX,
};

/// Splits the input into an event: fixed fields from the first bytes, then
/// strings separated by 0xff (0xfe ends a tag; the last string is content).
pub fn event_from(data: &[u8]) -> Option<Event> {
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

/// Checks the property for one input (panics if it does not hold).
pub fn check(data: &[u8]) {
    let Some(event) = event_from(data) else {
        return;
    };
    let limits = Limits::DEFAULT;
    let unchecked = try_encode_event(&event, &NONE).expect("nothing is over no limits");
    let decoded = EventView::decode_with(&unchecked, &limits).map(|_| ());
    let record = match try_encode_event(&event, &limits) {
        Ok(record) => record,
        Err(e) => {
            assert_eq!(
                decoded,
                Err(e),
                "the encoder refuses what the decoder refuses"
            );
            return;
        }
    };
    assert_eq!(record, unchecked);
    let view = EventView::decode(&record).expect("encoder output decodes");
    assert_eq!(view.to_event(), event);
    assert_eq!(view.compute_id(), event.compute_id());
    let json = event.to_json();
    assert_eq!(view.to_json(), json);
    match EventRef::parse(json.as_bytes()) {
        Ok(parsed) => assert_eq!(encode_json_event(&parsed), record),
        // Escaping can make the JSON longer than its limits allow.
        Err(e) => assert_eq!(e.kind(), ErrorKind::TooLarge, "canonical JSON parses: {e}"),
    }
}
