//! Differential and hostile-input tests on the real corpus
//! (`testdata/real-events.jsonl`, 1,001 signed events).

use nostrwire_event::{EventRef, PreimageFields, SignedFields};
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor, TrainOptions};
use nostrwire_wire::{
    encode_event, encode_json_event, frame, peek_created_at, peek_id, peek_kind_and_pubkey,
    peek_sig, Error, EventView, Limits,
};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

fn lines() -> impl Iterator<Item = &'static str> {
    CORPUS.lines().filter(|l| !l.trim().is_empty())
}

fn records() -> Vec<Vec<u8>> {
    lines()
        .map(|l| encode_json_event(&EventRef::parse(l.as_bytes()).unwrap()))
        .collect()
}

#[test]
fn every_event_round_trips_byte_identically_with_the_same_id() {
    let mut count = 0;
    for line in lines() {
        let event = EventRef::parse(line.as_bytes()).unwrap();
        let record = encode_json_event(&event);
        let view = EventView::decode(&record).unwrap_or_else(|e| panic!("{}: {e}", event.id()));

        // JSON -> binary -> JSON reproduces the canonical JSON (the corpus is canonical).
        assert_eq!(view.to_json(), event.to_json());
        assert_eq!(view.to_json(), line);
        // The id recomputed from the binary view is the claimed id.
        assert_eq!(view.compute_id(), *event.id());
        view.verify_id().unwrap();

        // Owned and borrowed encoders agree; decode -> encode is the identity.
        let owned = view.to_event();
        assert_eq!(owned, event.to_event());
        assert_eq!(encode_event(&owned), record);

        // Selective reads agree with the view.
        let (kind, pubkey) = peek_kind_and_pubkey(&record).unwrap();
        assert_eq!(kind, view.kind());
        assert_eq!(&pubkey, view.pubkey());
        assert_eq!(peek_id(&record).unwrap(), *view.id());
        assert_eq!(peek_sig(&record).unwrap(), *view.sig());
        assert_eq!(peek_created_at(&record).unwrap(), view.created_at());

        // Lazy tags agree with the JSON view, first values included.
        assert_eq!(view.tag_count(), event.tags().len());
        for (bin, json) in view.tags().zip(event.tags().iter()) {
            assert_eq!(bin.len(), json.iter().count());
            for (b, j) in bin.iter().zip(json.iter()) {
                assert!(b.eq_str(&j.value()));
            }
        }
        assert_eq!(view.content(), event.content().value());
        count += 1;
    }
    assert_eq!(count, 1001);
}

#[test]
fn signatures_verify_from_the_view() {
    // Every 10th event keeps debug-build test time low; the bench checks all.
    for record in records().iter().step_by(10) {
        EventView::decode(record).unwrap().verify().unwrap();
    }
}

#[test]
fn raw_size_is_at_most_two_thirds_of_json() {
    let json: usize = lines().map(str::len).sum();
    let binary: usize = records().iter().map(Vec::len).sum();
    assert!(binary * 100 <= json * 66, "{binary} vs {json}");
}

#[test]
fn every_truncation_is_an_error() {
    for record in records() {
        for end in 0..record.len() {
            assert!(
                EventView::decode(&record[..end]).is_err(),
                "accepted a record cut at {end}"
            );
        }
    }
}

/// xorshift32, the generator binostr uses for its garbage test.
fn xorshift(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

#[test]
fn deterministic_garbage_never_panics() {
    let mut state = 0x9e37_79b9u32;
    let mut accepted = 0;
    for len in 0..512 {
        for variant in 0..4 {
            let mut bytes: Vec<u8> = (0..len).map(|_| xorshift(&mut state) as u8).collect();
            // Also try garbage behind a valid form byte, where decoding goes deeper.
            if variant >= 2 && !bytes.is_empty() {
                bytes[0] = 0x01;
            }
            if EventView::decode(&bytes).is_ok() {
                accepted += 1;
            }
        }
    }
    assert_eq!(accepted, 0);
}

#[test]
fn single_bit_flips_never_go_unnoticed() {
    let records = records();
    // Large records add time, not coverage: their structure repeats.
    let small = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.len() <= 16 * 1024);
    for (index, record) in small.step_by(5) {
        let original = EventView::decode(record).unwrap();
        let original_json = original.to_json();
        // All bits of small records; a deterministic spread over large ones.
        let bits = record.len() * 8;
        let step = (bits / 2048).max(1);
        for bit in (0..bits).step_by(step) {
            let mut flipped = record.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let Ok(view) = EventView::decode(&flipped) else {
                continue;
            };
            // Canonical: the accepted bytes are the only encoding of what they decode to.
            assert_eq!(
                encode_event(&view.to_event()),
                flipped,
                "record {index} bit {bit}"
            );
            assert_ne!(view.to_json(), original_json, "record {index} bit {bit}");
            // Any change is caught by the id check, or it is in the signature.
            assert!(
                view.verify_id().is_err() || view.sig() != original.sig(),
                "record {index} bit {bit} passed the id check"
            );
        }
    }
}

#[test]
fn limits_are_enforced() {
    let records = records();
    let big = records
        .iter()
        .max_by_key(|r| EventView::decode(r).unwrap().tag_count())
        .unwrap();
    let view = EventView::decode(big).unwrap();
    assert!(view.tag_count() > 6000);
    let tight = Limits {
        max_tags: view.tag_count() - 1,
        ..Limits::DEFAULT
    };
    assert_eq!(EventView::decode_with(big, &tight), Err(Error::TooManyTags));
    let small = Limits {
        max_record_bytes: big.len() - 1,
        ..Limits::DEFAULT
    };
    assert_eq!(
        EventView::decode_with(big, &small),
        Err(Error::RecordTooLarge)
    );
    let longest = records
        .iter()
        .max_by_key(|r| EventView::decode(r).unwrap().content().len())
        .unwrap();
    let content = EventView::decode(longest).unwrap().content().len();
    let short = Limits {
        max_string_bytes: content - 1,
        ..Limits::DEFAULT
    };
    assert_eq!(
        EventView::decode_with(longest, &short),
        Err(Error::StringTooLarge)
    );
}

#[test]
fn streams_and_dictionary_compression_round_trip_on_held_out_events() {
    let records = records();
    // Disjoint split by the low bit of the first id byte.
    let (train, test): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) = records
        .iter()
        .partition(|r| peek_id(r).unwrap().as_bytes()[0] & 1 == 0);
    let samples: Vec<_> = train
        .iter()
        .map(|r| (peek_kind_and_pubkey(r).unwrap().0, r.as_slice()))
        .collect();
    let options = TrainOptions {
        level: 3,
        ..TrainOptions::default()
    };
    let set = DictSet::train(&samples, &options).unwrap();
    assert!(
        set.dictionaries().len() > 1,
        "per-kind dictionaries were trained"
    );
    let set = DictSet::from_bytes(&set.to_bytes()).unwrap();

    let mut compressor = RecordCompressor::new(&set).unwrap();
    let mut stream = Vec::new();
    let mut stored = Vec::new();
    let (mut raw_total, mut stored_total) = (0, 0);
    for record in &test {
        stored.clear();
        compressor.compress_into(record, &mut stored).unwrap();
        raw_total += record.len();
        stored_total += stored.len();
        frame::push_frame(&mut stream, &stored);
    }
    assert!(stored_total < raw_total);

    let mut decompressor = RecordDecompressor::new(Some(&set)).unwrap();
    let mut reader = frame::FrameReader::new(&stream[..], Limits::DEFAULT.max_record_bytes);
    for record in &test {
        let stored = reader.next_frame().unwrap().unwrap().to_vec();
        let back = decompressor.record(&stored, &Limits::DEFAULT).unwrap();
        assert_eq!(back, record.as_slice());
    }
    assert!(reader.next_frame().unwrap().is_none());

    // The same file read at another level compresses records that the
    // set at its own level reads back.
    let faster = DictSet::from_bytes_at_level(&set.to_bytes(), 1).unwrap();
    assert_eq!((faster.level(), set.level()), (1, 3));
    let mut fast = RecordCompressor::new(&faster).unwrap();
    for record in &test {
        stored.clear();
        fast.compress_into(record, &mut stored).unwrap();
        let back = decompressor.record(&stored, &Limits::DEFAULT).unwrap();
        assert_eq!(back, record.as_slice());
    }

    // Without the set, dictionary records are refused by id, not misread.
    let mut bare = RecordDecompressor::new(None).unwrap();
    let mut any_dict = false;
    for record in &test {
        stored.clear();
        compressor.compress_into(record, &mut stored).unwrap();
        if stored[0] == nostrwire_wire::COMPRESSED_V1 {
            any_dict = true;
            assert_eq!(
                bare.record(&stored, &Limits::DEFAULT),
                Err(Error::UnknownDictionary)
            );
            // Every truncation of a compressed record is refused.
            for end in 1..stored.len() {
                assert!(decompressor
                    .record(&stored[..end], &Limits::DEFAULT)
                    .is_err());
            }
        }
    }
    assert!(any_dict);
}
