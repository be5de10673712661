//! Golden vectors in `vectors/wire/`: the generator (run the ignored test
//! `regenerate_vectors` to rewrite the files) and the checks every build runs.

use std::path::PathBuf;

use nostrwire_event::{Event, EventRef, Keys, Kind, SignedFields, Tag, Timestamp, UnsignedEvent};
use nostrwire_wire::compress::RecordDecompressor;
use nostrwire_wire::{
    encode_event, encode_json_event, varint, Error, EventView, Limits, COMPRESSED_V1,
    OFF_CREATED_AT, OFF_ID, OFF_KIND, OFF_PUBKEY, OFF_SIG, PREFIX_LEN,
};
use serde_json::{json, Value};
use zstd::zstd_safe::{CParameter, FrameFormat};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors/wire")
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

fn signed(seed: u64, created_at: u64, kind: u16, tags: &[&[&str]], content: &str) -> Event {
    let keys = Keys::derive(0x6e7762, seed);
    let tags = tags.iter().map(|t| Tag::from_strs(t)).collect();
    UnsignedEvent::new(
        &keys,
        Timestamp::new(created_at).unwrap(),
        Kind(kind),
        tags,
        content,
    )
    .sign(&keys)
}

const P1: &str = "364ff74823ba9819d6b4da381b20bbce8e31e2abf5fbe298db62064aa8be7b73";
const E1: &str = "29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a";

/// Valid cases: (name, description, event, optional non-canonical JSON spelling of it).
fn valid_cases() -> Vec<(&'static str, &'static str, Event, Option<String>)> {
    let mut cases = vec![
        (
            "minimal",
            "no tags, empty content: the 142-byte minimum",
            signed(1, 1_700_000_000, 1, &[], ""),
            None,
        ),
        (
            "note_with_references",
            "e and p tags with 64-hex values (dedicated 32-byte form), relay URL and marker as text",
            signed(
                2,
                1_758_667_457,
                1,
                &[&["e", E1, "wss://relay.example.com", "root"], &["p", P1], &["t", "nostr"]],
                "gm nostr",
            ),
            None,
        ),
        (
            "hex_compaction_edges",
            "uppercase and mixed case stay text, empty is text, odd length is text, any even lowercase hex is bytes",
            signed(
                3,
                1_700_000_001,
                30023,
                &[&["custom", "DEADBEEF", "deadbeef", "DeadBeef", "", "00", "abc", "0", "a0b", "1758782731"]],
                "",
            ),
            None,
        ),
        (
            "hex_lengths",
            "hex values of 1, 31, 33 and 64 bytes use the general form; 32 bytes the dedicated one",
            signed(
                4,
                1_700_000_002,
                1,
                &[&[
                    "x",
                    "ff",
                    &"ab".repeat(31),
                    &"cd".repeat(32),
                    &"ef".repeat(33),
                    &"01".repeat(64),
                ]],
                "",
            ),
            None,
        ),
        (
            "tag_names",
            "one-byte names use the short form (including a control character); others are elements, hex names included",
            signed(
                5,
                1_700_000_003,
                1,
                &[&["p"], &["\u{1}", "ctl"], &["é", "two-byte name"], &["ab", "hex name"], &["", "empty name"], &["pp"]],
                "",
            ),
            None,
        ),
        (
            "escapes",
            "strings are stored unescaped; output re-escapes canonically",
            signed(
                6,
                1_700_000_004,
                1,
                &[&["q", "quote\" backslash\\ /slash"], &["c", "\u{0}\u{1f}\u{7f}\t\n"]],
                "line\nquote\" backslash\\ tab\t nul\u{0} é 😀 \u{2028} /",
            ),
            None,
        ),
        (
            "extremes",
            "kind 65535, created_at 2^53-1, multi-byte varints: 64-element tag, 200-byte value, 300-byte content",
            signed(
                7,
                (1 << 53) - 1,
                65535,
                &[&["many"; 64], &["long", &"x".repeat(200)]],
                &"y".repeat(300),
            ),
            None,
        ),
    ];
    // A non-canonical JSON spelling encodes to the same record as the canonical one.
    let spelled = signed(8, 1_700_000_005, 1, &[&["t", "é/"]], "é/\n");
    let input = spelled
        .to_json()
        .replace("é/", "\\u00e9\\/")
        .replace("\\n", "\\u000a");
    cases.push((
        "non_canonical_json_input",
        "`\\u00e9`, `\\/` and `\\u000a` in the input spell the same values as the canonical JSON",
        spelled,
        Some(input),
    ));
    cases
}

/// A 139-byte prefix with recognizable fixed fields.
fn prefix() -> Vec<u8> {
    let mut p = vec![0u8; PREFIX_LEN];
    p[0] = 0x01;
    p[OFF_KIND..OFF_KIND + 2].copy_from_slice(&1u16.to_le_bytes());
    p[OFF_CREATED_AT..OFF_CREATED_AT + 8].copy_from_slice(&1_700_000_000u64.to_le_bytes());
    p[OFF_PUBKEY..OFF_PUBKEY + 32].fill(0x22);
    p[OFF_ID..OFF_ID + 32].fill(0x11);
    p[OFF_SIG..OFF_SIG + 64].fill(0x33);
    p
}

/// A record from a tag block and content, with correct lengths.
fn record(block: &[u8], content: &[u8]) -> Vec<u8> {
    let mut r = prefix();
    varint::push(&mut r, block.len() as u64);
    r.extend_from_slice(block);
    varint::push(&mut r, content.len() as u64);
    r.extend_from_slice(content);
    r
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Invalid cases: (name, description, bytes, expected error).
fn invalid_cases() -> Vec<(&'static str, &'static str, Vec<u8>, Error)> {
    let ok = record(&[0], b"");
    let mut cases = vec![
        ("empty", "no bytes at all", vec![], Error::Truncated),
        (
            "bad_form_byte",
            "first byte 0x02",
            cat(&[&[0x02], &ok[1..]]),
            Error::BadVersion,
        ),
        (
            "compressed_as_event",
            "a compressed record given to the event decoder",
            cat(&[&[0x81], &ok[1..]]),
            Error::BadVersion,
        ),
        (
            "short_prefix",
            "ends inside the fixed prefix",
            ok[..100].to_vec(),
            Error::Truncated,
        ),
        (
            "created_at_above_2_53",
            "created_at = 2^53",
            {
                let mut r = ok.clone();
                r[OFF_CREATED_AT..OFF_CREATED_AT + 8].copy_from_slice(&(1u64 << 53).to_le_bytes());
                r
            },
            Error::TimestampOutOfRange,
        ),
        (
            "overlong_tag_block_length",
            "T = 1 written as 81 00",
            cat(&[&prefix(), &[0x81, 0x00, 0x00, 0x00]]),
            Error::OverlongVarint,
        ),
        (
            "tag_block_past_end",
            "T larger than the rest of the record",
            cat(&[&prefix(), &[0x05, 0x00, 0x00]]),
            Error::Truncated,
        ),
        (
            "tag_block_too_short",
            "T = 0: the tag count lies outside the block",
            cat(&[&prefix(), &[0x00, 0x00, 0x00]]),
            Error::TagBlockMismatch,
        ),
        (
            "tag_block_too_long",
            "T = 2 with one-byte tags: a byte is left in the block",
            cat(&[&prefix(), &[0x02, 0x00, 0x00, 0x00]]),
            Error::TagBlockMismatch,
        ),
        (
            "overlong_tag_count",
            "tag count 0 written as 80 00",
            record(&[0x80, 0x00], b""),
            Error::OverlongVarint,
        ),
        (
            "empty_tag",
            "a tag with E = 0",
            record(&[0x01, 0x00, 0x00], b""),
            Error::EmptyTag,
        ),
        (
            "empty_tag_short_flag",
            "a tag with E = 0 and the short flag",
            record(&[0x01, 0x01, 0x00], b""),
            Error::EmptyTag,
        ),
        (
            "short_name_not_ascii",
            "short-form name byte 0xc3",
            record(&[0x01, 0x03, 0xc3], b""),
            Error::InvalidUtf8,
        ),
        (
            "one_byte_name_long_form",
            "name \"p\" written as a text element",
            record(&[0x01, 0x02, 0x02, b'p'], b""),
            Error::NonCanonicalName,
        ),
        (
            "hex_kept_as_text",
            "value \"ab\" stored as text",
            record(&[0x01, 0x05, b'p', 0x04, b'a', b'b'], b""),
            Error::NonCanonicalHex,
        ),
        (
            "hex32_general_form",
            "a 32-byte hex value with L = 32 instead of the dedicated form",
            record(&cat(&[&[0x01, 0x05, b'p', 0x41], &[0xaa; 32]]), b""),
            Error::NonCanonicalHex,
        ),
        (
            "text_not_utf8",
            "a text element with byte 0xff",
            record(&[0x01, 0x05, b'p', 0x02, 0xff], b""),
            Error::InvalidUtf8,
        ),
        (
            "content_not_utf8",
            "content with a lone continuation byte",
            record(&[0x00], &[b'a', 0x80]),
            Error::InvalidUtf8,
        ),
        (
            "content_past_end",
            "C larger than the rest",
            cat(&[&prefix(), &[0x01, 0x00, 0x02, b'a']]),
            Error::Truncated,
        ),
        (
            "trailing_byte",
            "one byte after the content",
            cat(&[&ok, &[0x00]]),
            Error::TrailingBytes,
        ),
        (
            "content_length_overflow",
            "an 11-byte varint for C",
            cat(&[&prefix(), &[0x01, 0x00], &[0xff; 10], &[0x01]]),
            Error::VarintOverflow,
        ),
        (
            "too_many_tags",
            "20,001 tags announced (default limit 20,000)",
            record(&[0xa1, 0x9c, 0x01], b""),
            Error::TooManyTags,
        ),
        (
            "too_many_tag_count_for_block",
            "3 tags announced in a 2-byte block",
            record(&[0x03, 0x03], b""),
            Error::TagBlockMismatch,
        ),
        (
            "too_many_tag_elements",
            "a tag with E = 1001 (default limit 1,000)",
            record(&[0x01, 0xd2, 0x0f, 0x00], b""),
            Error::TooManyTagElements,
        ),
        (
            "string_too_large",
            "a text element of 1 MiB + 1 announced (default limit 1 MiB)",
            record(&[0x01, 0x05, b'p', 0x82, 0x80, 0x80, 0x01], b""),
            Error::StringTooLarge,
        ),
        (
            "hex_past_block_end",
            "a 32-byte hex element with 3 bytes in the block",
            record(&[0x01, 0x05, b'p', 0x01, 1, 2, 3], b""),
            Error::TagBlockMismatch,
        ),
    ];
    // Every case differs from a valid record in the one way its name says.
    cases.sort_by_key(|c| c.0);
    cases
}

/// A compressed record (§11) without a dictionary, its zstd frame written
/// with or without a content checksum.
fn compressed(record: &[u8], checksum: bool) -> Vec<u8> {
    let mut c = zstd::bulk::Compressor::new(3).unwrap();
    c.set_parameter(CParameter::Format(FrameFormat::Magicless))
        .unwrap();
    c.set_parameter(CParameter::ChecksumFlag(checksum)).unwrap();
    c.set_parameter(CParameter::DictIdFlag(false)).unwrap();
    c.set_parameter(CParameter::ContentSizeFlag(false)).unwrap();
    let mut out = vec![COMPRESSED_V1, 0];
    varint::push(&mut out, record.len() as u64);
    out.extend(c.compress(record).unwrap());
    out
}

/// A compressed record without a dictionary: name, description, bytes,
/// and the record inside or the error.
type CompressedCase = (&'static str, &'static str, Vec<u8>, Result<Vec<u8>, Error>);

fn compressed_cases() -> Vec<CompressedCase> {
    let record = encode_event(&signed(
        11,
        1_700_000_002,
        1,
        &[&["t", "nostr"], &["t", "nostr"]],
        "gm gm gm gm gm gm gm gm gm gm gm gm gm gm gm gm",
    ));
    let plain = compressed(&record, false);
    let checksum = compressed(&record, true);
    // The same frame but for its descriptor's checksum bit and the 4 bytes after it.
    assert_eq!(plain.len() + 4, checksum.len());
    vec![
        (
            "no_dictionary",
            "dictionary id 0: a magicless zstd frame without checksum, dictionary id or content size",
            plain,
            Ok(record.clone()),
        ),
        (
            "checksum_flag",
            "the same frame with a content checksum (correct, but the format has none)",
            checksum,
            Err(Error::Decompress),
        ),
    ]
}

fn build() -> (Value, Value, Value) {
    let valid: Vec<Value> = valid_cases()
        .into_iter()
        .map(|(name, description, event, input)| {
            let mut case = json!({
                "name": name,
                "description": description,
                "json": event.to_json(),
                "hex": hex(&encode_event(&event)),
            });
            if let Some(input) = input {
                case["input"] = Value::String(input);
            }
            case
        })
        .collect();
    let invalid: Vec<Value> = invalid_cases()
        .into_iter()
        .map(|(name, description, bytes, error)| {
            json!({"name": name, "description": description, "hex": hex(&bytes), "error": error.as_str()})
        })
        .collect();
    let compressed: Vec<Value> = compressed_cases()
        .into_iter()
        .map(|(name, description, bytes, inside)| {
            let mut case = json!({"name": name, "description": description, "hex": hex(&bytes)});
            match inside {
                Ok(record) => case["record"] = Value::String(hex(&record)),
                Err(error) => case["error"] = Value::String(error.as_str().into()),
            }
            case
        })
        .collect();
    (
        json!({"schema": 1, "format": "nwb", "version": 1, "cases": valid}),
        json!({"schema": 1, "format": "nwb", "version": 1, "cases": invalid}),
        json!({"schema": 1, "format": "nwb", "version": 1, "cases": compressed}),
    )
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

#[test]
#[ignore = "rewrites vectors/wire; run after an intended format change"]
fn regenerate_vectors() {
    let (valid, invalid, compressed) = build();
    std::fs::write(dir().join("valid.json"), pretty(&valid)).unwrap();
    std::fs::write(dir().join("invalid.json"), pretty(&invalid)).unwrap();
    std::fs::write(dir().join("compressed.json"), pretty(&compressed)).unwrap();
}

fn load(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn files_match_the_generator() {
    let (valid, invalid, compressed) = build();
    assert_eq!(
        load("compressed.json"),
        compressed,
        "vectors/wire/compressed.json is stale"
    );
    assert_eq!(
        load("valid.json"),
        valid,
        "vectors/wire/valid.json is stale"
    );
    assert_eq!(
        load("invalid.json"),
        invalid,
        "vectors/wire/invalid.json is stale"
    );
}

#[test]
fn valid_vectors_encode_decode_and_verify() {
    let file = load("valid.json");
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let json = case["json"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        for input in [Some(json), case["input"].as_str()].into_iter().flatten() {
            let event = EventRef::parse(input.as_bytes()).unwrap();
            assert_eq!(
                hex(&encode_json_event(&event)),
                hex(&bytes),
                "{name}: encoding of {input}"
            );
        }
        let view = EventView::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(view.to_json(), json, "{name}");
        view.verify().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(encode_event(&view.to_event()), bytes, "{name}");
    }
}

#[test]
fn invalid_vectors_fail_with_their_kind() {
    let file = load("invalid.json");
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        let expected = Error::from_name(case["error"].as_str().unwrap()).unwrap();
        assert_eq!(EventView::decode(&bytes).err(), Some(expected), "{name}");
    }
}

#[test]
fn compressed_vectors_give_their_record_or_fail_with_their_kind() {
    let file = load("compressed.json");
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 2);
    let mut reader = RecordDecompressor::new(None).unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        let got = reader
            .record(&bytes, &Limits::default())
            .map(<[u8]>::to_vec);
        match case["record"].as_str() {
            Some(record) => {
                assert_eq!(got.map(|r| hex(&r)), Ok(record.to_owned()), "{name}");
                EventView::decode(&unhex(record)).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            None => {
                let expected = Error::from_name(case["error"].as_str().unwrap()).unwrap();
                assert_eq!(got.err(), Some(expected), "{name}");
            }
        }
    }
}

/// The tag examples of spec §6, byte for byte, as the spec shows them.
#[test]
fn spec_section_6_examples() {
    let spec = std::fs::read_to_string(dir().join("../../spec/nwb.md")).unwrap();
    let cases: [(&[&str], &str, &str); 4] = [
        (&["p", P1], "05 70 01", P1),
        (&["t", "nostr"], "05 74 0a 6e 6f 73 74 72", ""),
        (
            &["custom", "DEADBEEF", "deadbeef"],
            "06 0c 63 75 73 74 6f 6d 10 44 45 41 44 42 45 45 46 09 de ad be ef",
            "",
        ),
        (&["x", "", "00"], "07 78 00 03 00", ""),
    ];
    for (tag, shown, payload) in cases {
        assert!(spec.contains(&format!("`{shown}`")), "spec shows `{shown}`");
        let record = encode_event(&signed(9, 1, 1, &[tag], ""));
        // Prefix, tag block length, tag count 1, the tag, then content length 0.
        let tag_bytes = &record[PREFIX_LEN + 2..record.len() - 1];
        assert_eq!(hex(tag_bytes), shown.replace(' ', "") + payload, "{tag:?}");
    }
}
