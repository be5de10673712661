//! The encoder writes only records the decoder accepts: an owned event over
//! the limits is refused with the decoder's own error, and JSON parsed under
//! some limits encodes to records that decode under the same limits.

use nostrwire_event::{Event, EventId, EventRef, Kind, PublicKey, Signature, Tag, Timestamp};
use nostrwire_wire::{
    encode_event, encode_json_event, try_encode_event, try_encode_event_into, Error, EventView,
    Limits,
};

const NONE: Limits = Limits {
    max_record_bytes: usize::MAX,
    max_tags: usize::MAX,
    max_tag_elements: usize::MAX,
    max_string_bytes: usize::MAX,
};

fn event(tags: Vec<Vec<String>>, content: &str) -> Event {
    Event {
        id: EventId::from_bytes([1; 32]),
        pubkey: PublicKey::from_bytes([2; 32]),
        created_at: Timestamp::new(1_700_000_000).unwrap(),
        kind: Kind(1),
        tags: tags.into_iter().map(|t| Tag::new(t).unwrap()).collect(),
        content: content.to_string(),
        sig: Signature::from_bytes([3; 64]),
    }
}

/// The 1,015-element tag the `roundtrip` fuzz target found
/// (`fuzz/regressions/roundtrip/tag-of-1015-elements`).
fn wide_tag() -> Event {
    event(vec![vec!["a".to_string(); 1_015]], "")
}

#[test]
fn a_tag_over_the_element_limit_is_refused_by_the_encoder() {
    let event = wide_tag();
    assert_eq!(
        try_encode_event(&event, &Limits::DEFAULT),
        Err(Error::TooManyTagElements)
    );
    let record = try_encode_event(&event, &NONE).unwrap();
    assert_eq!(EventView::decode(&record), Err(Error::TooManyTagElements));
    // A refused event leaves the buffer as it was.
    let mut out = b"kept".to_vec();
    assert!(try_encode_event_into(&event, &Limits::DEFAULT, &mut out).is_err());
    assert_eq!(out, b"kept");
    // At the limit it encodes and decodes.
    let at_limit = self::event(vec![vec!["a".to_string(); 1_000]], "");
    let record = encode_event(&at_limit);
    assert_eq!(EventView::decode(&record).unwrap().to_event(), at_limit);
}

#[test]
#[should_panic(expected = "event over the default decoder limits")]
fn encode_event_panics_rather_than_write_an_unreadable_record() {
    encode_event(&wide_tag());
}

/// Strings of each class the encoder writes differently: a one-byte name
/// (short form), text, hex (stored as bytes), at and around the length limit.
fn strings() -> Vec<String> {
    let mut out = vec![String::new(), "t".to_string(), "é".to_string()];
    for len in [3, 4, 5, 6, 7, 8] {
        out.push("x".repeat(len));
        if len % 2 == 0 {
            out.push("ab".repeat(len / 2));
        }
    }
    out
}

#[test]
fn the_encoder_refuses_exactly_what_the_decoder_refuses() {
    let limits = Limits {
        max_record_bytes: 220,
        max_tags: 3,
        max_tag_elements: 3,
        max_string_bytes: 6,
    };
    let strings = strings();
    let mut checked = 0;
    let mut refused = 0;
    for tags in 0..=4 {
        for elements in 1..=4 {
            for (i, s) in strings.iter().enumerate() {
                let name = strings[(i + 1) % strings.len()].clone();
                let mut tag = vec![name];
                tag.extend(std::iter::repeat_n(s.clone(), elements - 1));
                let content = &strings[(i + tags) % strings.len()];
                let event = event(vec![tag; tags], content);
                let unchecked = try_encode_event(&event, &NONE).unwrap();
                let decoded = EventView::decode_with(&unchecked, &limits).map(|_| ());
                let encoded = try_encode_event(&event, &limits);
                assert_eq!(
                    encoded.as_ref().map(|_| ()).map_err(|e| *e),
                    decoded,
                    "{event:?}"
                );
                if let Ok(record) = encoded {
                    assert_eq!(record, unchecked);
                } else {
                    refused += 1;
                }
                checked += 1;
            }
        }
    }
    // Both outcomes were reached, for each limit.
    assert!(refused > 0 && refused < checked, "{refused} of {checked}");
    for error in [
        Error::TooManyTags,
        Error::TooManyTagElements,
        Error::StringTooLarge,
        Error::RecordTooLarge,
    ] {
        let limits = match error {
            Error::TooManyTags => Limits {
                max_tags: 1,
                ..NONE
            },
            Error::TooManyTagElements => Limits {
                max_tag_elements: 1,
                ..NONE
            },
            Error::StringTooLarge => Limits {
                max_string_bytes: 3,
                ..NONE
            },
            _ => Limits {
                max_record_bytes: 150,
                ..NONE
            },
        };
        let event = event(vec![vec!["p".into(), "abcd".into()]; 2], "hello");
        assert_eq!(try_encode_event(&event, &limits), Err(error));
    }
}

#[test]
fn json_limits_carry_over_to_the_decoder() {
    assert_eq!(
        Limits::DEFAULT,
        Limits::from(&nostrwire_event::Limits::DEFAULT)
    );
    // An event at every JSON limit encodes to a record the decoder accepts.
    let json_limits = nostrwire_event::Limits {
        max_event_bytes: 4_000,
        max_tags: 4,
        max_tag_elements: 5,
        max_string_bytes: 128,
        ..nostrwire_event::Limits::DEFAULT
    };
    let hex = "ab".repeat(32);
    let json = format!(
        r#"{{"id":"{0}","pubkey":"{0}","created_at":1,"kind":1,"tags":[{1}],"content":"{2}","sig":"{0}{0}"}}"#,
        "cd".repeat(32),
        vec![format!(r#"["p","{hex}","{hex}","\u0041","{hex}"]"#); 4].join(","),
        "\\n".repeat(64),
    );
    let parsed = EventRef::parse_with(json.as_bytes(), &json_limits).unwrap();
    let record = encode_json_event(&parsed);
    EventView::decode_with(&record, &Limits::from(&json_limits)).unwrap();
}
