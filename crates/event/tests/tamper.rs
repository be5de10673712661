//! Changing any one field of a valid event must be caught with the right kind:
//! `id_mismatch` while the claimed id is kept, `invalid_signature` when the
//! tamperer also fixes up the id.

use nostrwire_event::{
    ErrorKind, Event, EventRef, Keys, Kind, PreimageFields, PublicKey, SignedFields, Tag, Timestamp,
};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

fn tampered(event: &Event) -> Vec<(&'static str, Event)> {
    let other_key = Keys::derive(99, 0).public_key();
    let mut out = Vec::new();
    let mut e = event.clone();
    e.pubkey = if e.pubkey == other_key {
        PublicKey::from_bytes([1; 32])
    } else {
        other_key
    };
    out.push(("pubkey", e));
    let mut e = event.clone();
    e.created_at = Timestamp::new(event.created_at.as_u64() ^ 1).unwrap();
    out.push(("created_at", e));
    let mut e = event.clone();
    e.kind = Kind(event.kind.as_u16() ^ 1);
    out.push(("kind", e));
    let mut e = event.clone();
    e.tags.push(Tag::from_strs(&["t", "x"]));
    out.push(("tags", e));
    if let Some(first) = event.tags.first() {
        let mut e = event.clone();
        let mut elements = first.as_slice().to_vec();
        elements[0].push('x');
        e.tags[0] = Tag::new(elements).unwrap();
        out.push(("tag element", e));
    }
    let mut e = event.clone();
    e.content.push(' ');
    out.push(("content", e));
    out
}

#[test]
fn any_changed_field_is_detected() {
    for line in CORPUS.lines().step_by(10) {
        let event = Event::from_json(line).unwrap();
        for (field, bad) in tampered(&event) {
            // Claimed id kept: the hash no longer matches.
            let json = bad.to_json();
            let parsed = EventRef::parse(json.as_bytes()).unwrap();
            assert_eq!(
                parsed.verify().unwrap_err().kind(),
                ErrorKind::IdMismatch,
                "{field}"
            );
            // Id recomputed by the tamperer: the signature no longer matches.
            let mut fixed = bad.clone();
            fixed.id = fixed.compute_id();
            let err = fixed.verify().unwrap_err().kind();
            assert!(
                matches!(
                    err,
                    ErrorKind::InvalidSignature | ErrorKind::InvalidPublicKey
                ),
                "{field}: {err}"
            );
        }
        // A changed signature.
        let mut bad = event.clone();
        let mut sig = *bad.sig.as_bytes();
        sig[17] ^= 0x40;
        bad.sig = nostrwire_event::Signature::from_bytes(sig);
        assert_eq!(
            bad.verify().unwrap_err().kind(),
            ErrorKind::InvalidSignature
        );
        // A changed id.
        let mut bad = event.clone();
        let mut id = *bad.id.as_bytes();
        id[0] ^= 1;
        bad.id = nostrwire_event::EventId::from_bytes(id);
        assert_eq!(bad.verify().unwrap_err().kind(), ErrorKind::IdMismatch);
    }
}

#[test]
fn every_single_byte_change_of_hex_fields_is_rejected() {
    // Flip each hex digit of id, pubkey and sig in the JSON text of one event.
    let line = CORPUS.lines().next().unwrap();
    let event = EventRef::parse(line.as_bytes()).unwrap();
    for field in [
        event.id().to_hex(),
        event.pubkey().to_hex(),
        event.sig().to_hex(),
    ] {
        let at = line.find(&field).unwrap();
        for i in 0..field.len() {
            let mut bytes = line.as_bytes().to_vec();
            bytes[at + i] = if bytes[at + i] == b'0' { b'1' } else { b'0' };
            let result = EventRef::parse(&bytes).and_then(|e| e.verify());
            assert!(result.is_err(), "flip at {i} accepted");
        }
    }
}
