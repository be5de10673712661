//! Golden transport frames in `vectors/wire/transport.json`: the generator
//! (run the ignored test `regenerate_transport_vectors` to rewrite the
//! file) and the checks every build runs. The JS package's tests read the
//! same file.

use std::path::PathBuf;

use nostrwire_event::{Keys, Kind, Tag, Timestamp, UnsignedEvent};
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor};
use nostrwire_wire::transport::{
    self, decode_client_v2, decode_relay_v2, BatchBuilder, ClientFrame, RelayFrame,
};
use nostrwire_wire::{encode_event, varint, Error, Limits};
use serde_json::{json, Value};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors/wire/transport.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn record(seed: u64, content: &str) -> Vec<u8> {
    let keys = Keys::derive(0x7632, seed);
    let event = UnsignedEvent::new(
        &keys,
        Timestamp::new(1_760_000_000 + seed).unwrap(),
        Kind(1),
        vec![Tag::from_strs(&["t", "nostrwire"])],
        content,
    )
    .sign(&keys);
    encode_event(&event)
}

/// A record compressed without a dictionary (id 0), as a store without a
/// set keeps it.
fn compressed(record: &[u8]) -> Vec<u8> {
    let set = DictSet::new(3, Vec::new()).unwrap();
    let mut c = RecordCompressor::new(&set).unwrap();
    let mut out = Vec::new();
    c.compress_into(record, &mut out).unwrap();
    assert_eq!(out[..2], [0x81, 0x00], "compressed without a dictionary");
    out
}

fn batch(sub: &str, records: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new(sub, transport::BATCH_TARGET_BYTES);
    for r in records {
        b.push(r);
    }
    b.finish()
}

fn generate() -> Value {
    let small = record(1, "hello");
    let long = record(
        2,
        &"nostr is a protocol; nostrwire is its wire. ".repeat(20),
    );
    let packed = compressed(&long);
    let hash = [0xc0u8; 32];
    let mut valid = Vec::new();
    let mut add =
        |name: &str, description: &str, direction: &str, frame: Vec<u8>, expect: Value| {
            valid.push(json!({
                "name": name,
                "description": description,
                "direction": direction,
                "hex": hex(&frame),
                "expect": expect,
            }));
        };
    let mut f = Vec::new();
    transport::write_dictionary_set(&mut f, None);
    add(
        "dictionary_set_none",
        "the relay compresses with no set (sent when a v2 connection opens)",
        "relay",
        f.clone(),
        json!({"type": "dictionary_set", "set": null}),
    );
    f.clear();
    transport::write_dictionary_set(&mut f, Some(&hash));
    add(
        "dictionary_set",
        "the relay's current set, by the SHA-256 of its file",
        "relay",
        f.clone(),
        json!({"type": "dictionary_set", "set": hex(&hash)}),
    );
    f.clear();
    transport::write_hold(&mut f, &[hash]);
    add(
        "hold_one",
        "the client holds the relay's set",
        "client",
        f.clone(),
        json!({"type": "hold", "sets": [hex(&hash)]}),
    );
    f.clear();
    transport::write_hold(&mut f, &[]);
    add(
        "hold_none",
        "the client withdraws what it said it holds",
        "client",
        f.clone(),
        json!({"type": "hold", "sets": []}),
    );
    let records = |rs: &[&[u8]]| {
        rs.iter()
            .map(|r| {
                let raw = if r[0] == 0x81 {
                    RecordDecompressor::new(None)
                        .unwrap()
                        .record(r, &Limits::default())
                        .unwrap()
                        .to_vec()
                } else {
                    r.to_vec()
                };
                match raw == **r {
                    true => json!({"stored": hex(r)}),
                    false => json!({"stored": hex(r), "record": hex(&raw)}),
                }
            })
            .collect::<Vec<_>>()
    };
    add(
        "batch_one_raw",
        "one uncompressed record",
        "relay",
        batch("s", &[&small]),
        json!({"type": "batch", "subscription_id": "s", "count": 1, "records": records(&[&small])}),
    );
    add(
        "batch_mixed",
        "a record compressed without a dictionary (decompresses to `record`), then an uncompressed one",
        "relay",
        batch("feed", &[&packed, &small]),
        json!({"type": "batch", "subscription_id": "feed", "count": 2, "records": records(&[&packed, &small])}),
    );
    let many: Vec<&[u8]> = (0..130).map(|_| &small[..]).collect();
    add(
        "batch_two_byte_count",
        "130 copies of one record (listed once): the count takes two varint bytes",
        "relay",
        batch("s", &many),
        json!({"type": "batch", "subscription_id": "s", "count": 130, "records": records(&many[..1])}),
    );
    let mut eose = Vec::new();
    transport::write_eose(&mut eose, "feed");
    add(
        "eose",
        "EOSE, as in version 1",
        "relay",
        eose,
        json!({"type": "eose", "subscription_id": "feed"}),
    );

    let mut invalid = Vec::new();
    let mut bad = |name: &str, direction: &str, frame: Vec<u8>, error: Error| {
        invalid.push(json!({
            "name": name,
            "direction": direction,
            "hex": hex(&frame),
            "error": error.as_str(),
        }));
    };
    let mut huge = vec![transport::BATCH, 1, b's'];
    varint::push(&mut huge, 1 << 40);
    bad("batch_count_huge", "relay", huge, Error::TooManyRecords);
    bad(
        "batch_count_past_bytes",
        "relay",
        vec![transport::BATCH, 1, b's', 3, 4, 0x81, 0, 1, 0],
        Error::TooManyRecords,
    );
    bad(
        "batch_empty",
        "relay",
        vec![transport::BATCH, 1, b's', 0],
        Error::Truncated,
    );
    let mut claim = vec![transport::BATCH, 1, b's', 1];
    varint::push(&mut claim, 1 << 30);
    claim.extend_from_slice(&[0; 5]);
    bad(
        "batch_record_length_huge",
        "relay",
        claim,
        Error::RecordTooLarge,
    );
    let mut bomb = vec![0x81, 0x00];
    varint::push(&mut bomb, 1 << 30);
    bomb.push(0);
    let mut frame = vec![transport::BATCH, 1, b's', 1, bomb.len() as u8];
    frame.extend_from_slice(&bomb);
    bad(
        "batch_decompressed_size_huge",
        "relay",
        frame,
        Error::RecordTooLarge,
    );
    bad(
        "batch_trailing",
        "relay",
        [&batch("s", &[&small])[..], &[0]].concat(),
        Error::TrailingBytes,
    );
    bad(
        "batch_unknown_form",
        "relay",
        vec![transport::BATCH, 1, b's', 1, 4, 0x02, 0, 1, 0],
        Error::BadVersion,
    );
    bad(
        "batch_no_subscription",
        "relay",
        vec![transport::BATCH, 0, 1, 4, 0x81, 0, 1, 0],
        Error::BadSubscriptionId,
    );
    bad(
        "dictionary_set_short",
        "relay",
        vec![transport::DICTIONARY_SET, 1, 2, 3],
        Error::BadDictionaryHash,
    );
    bad(
        "dictionary_set_two",
        "relay",
        [&[transport::DICTIONARY_SET][..], &[1; 64]].concat(),
        Error::BadDictionaryHash,
    );
    let mut single = Vec::new();
    transport::write_relay_event(&mut single, "s", &small);
    bad("v1_event_on_v2", "relay", single, Error::UnknownMessage);
    bad(
        "hold_partial",
        "client",
        [&[transport::HOLD][..], &[1; 33]].concat(),
        Error::BadDictionaryHash,
    );
    bad(
        "hold_too_many",
        "client",
        [&[transport::HOLD][..], &[1; 32 * 9]].concat(),
        Error::BadDictionaryHash,
    );
    bad(
        "batch_from_client",
        "client",
        batch("s", &[&small]),
        Error::UnknownMessage,
    );
    json!({
        "schema": 1,
        "format": "nostrwire-transport",
        "version": 2,
        "limits": {
            "max_batch_records": transport::BatchLimits::default().max_records,
            "max_batch_frame_bytes": transport::BatchLimits::default().max_frame_bytes,
            "max_record_bytes": Limits::default().max_record_bytes,
        },
        "valid": valid,
        "invalid": invalid,
    })
}

#[test]
#[ignore = "rewrites vectors/wire/transport.json"]
fn regenerate_transport_vectors() {
    let text = serde_json::to_string_pretty(&generate()).unwrap() + "\n";
    std::fs::write(path(), text).unwrap();
}

fn file() -> Value {
    serde_json::from_str(&std::fs::read_to_string(path()).unwrap()).unwrap()
}

#[test]
fn valid_frames_decode_and_encode_to_their_bytes() {
    let limits = Limits::default();
    let file = file();
    let cases = file["valid"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        let expect = &case["expect"];
        let encoded = match case["direction"].as_str().unwrap() {
            "relay" => match decode_relay_v2(&bytes, &limits).unwrap() {
                RelayFrame::DictionarySet(set) => {
                    assert_eq!(expect["type"], "dictionary_set", "{name}");
                    assert_eq!(
                        set.map(|h| hex(&h)),
                        expect["set"].as_str().map(String::from)
                    );
                    let mut f = Vec::new();
                    transport::write_dictionary_set(&mut f, set.as_ref());
                    f
                }
                RelayFrame::Batch {
                    subscription_id,
                    records,
                } => {
                    assert_eq!(expect["type"], "batch", "{name}");
                    assert_eq!(subscription_id, expect["subscription_id"], "{name}");
                    // `records` lists the first records (all, unless the
                    // case repeats one); `record`, when present, is what a
                    // compressed one decompresses to.
                    let want = expect["records"].as_array().unwrap();
                    assert_eq!(records.len() as u64, expect["count"], "{name}");
                    let mut d = RecordDecompressor::new(None).unwrap();
                    let mut b = BatchBuilder::new(subscription_id, usize::MAX);
                    for (i, got) in records.records().enumerate() {
                        let want = &want[i.min(want.len() - 1)];
                        assert_eq!(hex(got), want["stored"], "{name}");
                        let plain = want.get("record").unwrap_or(&want["stored"]);
                        assert_eq!(hex(d.record(got, &limits).unwrap()), *plain, "{name}");
                        b.push(got);
                    }
                    b.finish()
                }
                RelayFrame::Eose(s) => {
                    assert_eq!(expect["type"], "eose", "{name}");
                    assert_eq!(s, expect["subscription_id"]);
                    let mut f = Vec::new();
                    transport::write_eose(&mut f, s);
                    f
                }
                other => panic!("{name}: {other:?}"),
            },
            _ => match decode_client_v2(&bytes, &limits).unwrap() {
                ClientFrame::Hold(sets) => {
                    assert_eq!(expect["type"], "hold", "{name}");
                    let names: Vec<String> = sets.iter().map(|h| hex(h)).collect();
                    assert_eq!(json!(names), expect["sets"], "{name}");
                    let mut f = Vec::new();
                    transport::write_hold(&mut f, &sets);
                    f
                }
                other => panic!("{name}: {other:?}"),
            },
        };
        assert_eq!(hex(&encoded), hex(&bytes), "{name}: encoding");
    }
}

#[test]
fn invalid_frames_fail_with_their_error() {
    let limits = Limits::default();
    let file = file();
    let cases = file["invalid"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        let got = match case["direction"].as_str().unwrap() {
            "relay" => decode_relay_v2(&bytes, &limits).map(|_| ()),
            _ => decode_client_v2(&bytes, &limits).map(|_| ()),
        };
        let want = Error::from_name(case["error"].as_str().unwrap()).unwrap();
        assert_eq!(got, Err(want), "{name}");
    }
}

#[test]
fn the_file_is_what_the_generator_writes() {
    // zstd output may differ between library versions; the frames above
    // are checked by decoding, and this catches an edited file.
    let generated = generate();
    let file = file();
    assert_eq!(generated["invalid"], file["invalid"]);
    assert_eq!(generated["limits"], file["limits"]);
    assert_eq!(
        generated["valid"].as_array().unwrap().len(),
        file["valid"].as_array().unwrap().len()
    );
}
