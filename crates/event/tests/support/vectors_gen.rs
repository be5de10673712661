//! Builds the shared event vectors (`vectors/event/*.json`) from code, signing
//! valid cases with fixed keys so every vector is a real event.
//!
//! `tests/vectors.rs` checks that the checked-in files equal this output;
//! run it with `NOSTRWIRE_BLESS=1` to rewrite them after a deliberate change.

use nostrwire_event::{
    EventId, Keys, Kind, PreimageFields, PublicKey, SignedFields, Tag, Timestamp, UnsignedEvent,
};
use serde_json::{json, Value};

const ID_A: &str = "29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a";

fn keys(i: u64) -> Keys {
    Keys::derive(0x7665_6374_6f72, i)
}

fn sign(
    i: u64,
    created_at: u64,
    kind: u16,
    tags: &[&[&str]],
    content: &str,
) -> nostrwire_event::Event {
    let keys = keys(i);
    UnsignedEvent::new(
        &keys,
        Timestamp::new(created_at).expect("in range"),
        Kind(kind),
        tags.iter().map(|t| Tag::from_strs(t)).collect(),
        content,
    )
    .sign(&keys)
}

fn valid(name: &str, note: &str, event: &nostrwire_event::Event, input: Option<String>) -> Value {
    let canonical = event.to_json();
    json!({
        "name": name,
        "note": note,
        "json": input.unwrap_or_else(|| canonical.clone()),
        "id": event.id.to_hex(),
        "canonical": canonical,
    })
}

/// Valid cases: input JSON, expected id and canonical re-serialization.
pub fn valid_vectors() -> Vec<Value> {
    let mut out = Vec::new();
    let all_c0: String = (0u8..0x20).map(char::from).collect();
    let e = sign(1, 1_700_000_000, 1, &[], &all_c0);
    out.push(valid(
        "c0_controls",
        "Every C0 control: short escapes for \\b \\t \\n \\f \\r, lowercase \\u00xx for the rest.",
        &e,
        None,
    ));
    let e = sign(1, 1_700_000_001, 1, &[&["t", "tab\there"]], "del\u{7f}del");
    out.push(valid(
        "del_verbatim",
        "DEL (0x7F) is written verbatim, never as \\u007f.",
        &e,
        None,
    ));
    let e = sign(1, 1_700_000_002, 1, &[], "line\u{2028}para\u{2029}end");
    out.push(valid(
        "u2028_u2029_verbatim",
        "U+2028 and U+2029 are written verbatim.",
        &e,
        None,
    ));
    let e = sign(
        1,
        1_700_000_003,
        1,
        &[&["r", "https://a.example/?q=1&r=<2>"]],
        "<b>&amp;</b>",
    );
    out.push(valid(
        "html_chars_verbatim",
        "< > & are written verbatim (Go's HTML escaping breaks ids).",
        &e,
        None,
    ));
    let e = sign(
        2,
        1_700_000_004,
        1,
        &[&["r", "https://a.example/x/y"]],
        "a/b/c",
    );
    let escaped_input = e.to_json().replace('/', "\\/");
    out.push(valid(
        "escaped_solidus_input",
        "Input escapes \\/ are decoded; the canonical form writes / verbatim.",
        &e,
        Some(escaped_input),
    ));
    let e = sign(2, 1_700_000_005, 1, &[&["emoji", "😀"]], "astral 😀 𝄞 ok");
    out.push(valid(
        "astral_verbatim",
        "Astral code points are raw UTF-8, never surrogate pairs.",
        &e,
        None,
    ));
    let e = sign(2, 1_700_000_006, 1, &[], "é😀");
    let input = e.to_json().replace("é😀", "\\u00e9\\uD83D\\ude00");
    out.push(valid(
        "unicode_escapes_input",
        "\\u escapes of non-ASCII (either hex case, surrogate pairs) are decoded before hashing.",
        &e,
        Some(input),
    ));
    let e = sign(2, 1_700_000_007, 1, &[], "\u{1f}");
    let input = e.to_json().replace("\\u001f", "\\u001F");
    out.push(valid(
        "uppercase_u_escape_input",
        "An uppercase \\u001F in the input is re-written lowercase.",
        &e,
        Some(input),
    ));
    let e = sign(3, 1_700_000_008, 1, &[], "");
    out.push(valid("empty_content", "Empty content.", &e, None));
    for (name, ts) in [
        ("created_at_zero", 0u64),
        ("created_at_2_31", 1 << 31),
        ("created_at_2_32", 1 << 32),
        ("created_at_max", (1 << 53) - 1),
    ] {
        let e = sign(3, ts, 1, &[], "time");
        out.push(valid(
            name,
            &format!("created_at = {ts} is accepted."),
            &e,
            None,
        ));
    }
    let e = sign(3, 1_700_000_009, 65535, &[], "max kind");
    out.push(valid("kind_65535", "The largest kind.", &e, None));
    let e = sign(
        4,
        1_700_000_010,
        1,
        &[
            &["e", ID_A, "", "mention"],
            &["t", "bitcoin"],
            &["t", "bitcoin"],
        ],
        "x",
    );
    out.push(valid(
        "empty_tag_values_and_duplicates",
        "Empty strings inside tags and duplicate tags are kept as they are.",
        &e,
        None,
    ));
    let e = sign(
        4,
        1_700_000_011,
        1,
        &[&["x", "quote\"back\\slash\nnl"]],
        "tag escapes",
    );
    out.push(valid(
        "tag_escapes",
        "Tags use the same escaping rule as content.",
        &e,
        None,
    ));
    let e = sign(4, 1_700_000_012, 7, &[&["e", ID_A]], "+");
    let canonical = e.to_json();
    let reordered = format!(
        "{{\"sig\":\"{}\",\"content\":\"+\",\"tags\":[[\"e\",\"{ID_A}\"]],\"kind\":7,\"created_at\":1700000012,\"pubkey\":\"{}\",\"id\":\"{}\"}}",
        e.sig, e.pubkey, e.id
    );
    out.push(valid(
        "field_order_free",
        "Field order on the wire is free.",
        &e,
        Some(reordered),
    ));
    let spaced = format!(
        " {{ \"id\" : \"{}\" ,\n \"pubkey\":\"{}\", \"created_at\" : 1700000012 , \"kind\":7,\n\t\"tags\" : [ [ \"e\" , \"{ID_A}\" ] ] , \"content\" : \"+\" , \"sig\":\"{}\" }}\r\n",
        e.id, e.pubkey, e.sig
    );
    out.push(valid(
        "whitespace",
        "Insignificant whitespace is allowed anywhere JSON allows it.",
        &e,
        Some(spaced),
    ));
    let unknown = canonical.replacen(
        '{',
        "{\"relays\":[\"wss://x\",{\"a\":null,\"b\":1.5e3}],\"seen\":true,",
        1,
    );
    out.push(valid(
        "unknown_fields_ignored",
        "Unknown top-level fields are ignored, whatever valid JSON they hold (null and floats included).",
        &e,
        Some(unknown),
    ));
    let e = sign(5, 1_700_000_013, 41, &[], "{\"name\":\"channel\"}");
    out.push(valid(
        "kind_41",
        "Kind 41 is a regular kind (NIP-01 text); its class is pinned in tests.",
        &e,
        None,
    ));
    out
}

fn invalid(name: &str, note: &str, input: String, error: &str) -> Value {
    json!({ "name": name, "note": note, "json": input, "error": error })
}

/// Invalid cases: input and the expected error kind (after parse and verify).
pub fn invalid_vectors() -> Vec<Value> {
    let e = sign(6, 1_700_000_100, 1, &[&["p", ID_A]], "hello");
    let good = e.to_json();
    let id = e.id.to_hex();
    let pk = e.pubkey.to_hex();
    let sig = e.sig.to_hex();
    let mut out = vec![
        invalid(
            "duplicate_key",
            "The same key twice (last-wins parsers disagree with first-wins ones).",
            good.replacen(
                "\"content\":\"hello\"",
                "\"content\":\"hello\",\"content\":\"bye\"",
                1,
            ),
            "duplicate_key",
        ),
        invalid(
            "duplicate_unknown_key",
            "Duplicates are rejected among unknown keys too.",
            good.replacen('{', "{\"x\":1,\"x\":2,", 1),
            "duplicate_key",
        ),
        invalid(
            "missing_sig",
            "Every field is required.",
            good.replacen(&format!(",\"sig\":\"{sig}\""), "", 1),
            "missing_field",
        ),
        invalid(
            "created_at_fraction",
            "Numbers must be plain integers.",
            good.replacen("1700000100", "1700000100.0", 1),
            "invalid_number",
        ),
        invalid(
            "created_at_exponent",
            "Exponent forms are rejected.",
            good.replacen("1700000100", "1.7000001e9", 1),
            "invalid_number",
        ),
        invalid(
            "created_at_leading_zero",
            "Leading zeros are rejected.",
            good.replacen("1700000100", "01700000100", 1),
            "invalid_number",
        ),
        invalid(
            "created_at_negative",
            "Negative numbers are rejected.",
            good.replacen("1700000100", "-1", 1),
            "negative_number",
        ),
        invalid(
            "created_at_2_53",
            "created_at above 2^53-1 is out of range.",
            good.replacen("1700000100", "9007199254740992", 1),
            "timestamp_out_of_range",
        ),
        invalid(
            "created_at_u64_overflow",
            "Numbers beyond u64 are out of range, not wrapped.",
            good.replacen("1700000100", "18446744073709551616", 1),
            "timestamp_out_of_range",
        ),
        invalid(
            "kind_65536",
            "Kinds are 0..=65535.",
            good.replacen("\"kind\":1", "\"kind\":65536", 1),
            "kind_out_of_range",
        ),
        invalid(
            "kind_string",
            "Kind must be a number.",
            good.replacen("\"kind\":1", "\"kind\":\"1\"", 1),
            "wrong_type",
        ),
        invalid(
            "uppercase_pubkey",
            "Hex must be lowercase; uppercase is never normalized.",
            good.replacen(&pk, &pk.to_uppercase(), 1),
            "invalid_hex",
        ),
        invalid(
            "short_id",
            "Ids are exactly 64 hex characters.",
            good.replacen(&id, &id[..62], 1),
            "hex_length",
        ),
        invalid(
            "non_hex_sig",
            "Signatures are hex.",
            good.replacen(&sig, &format!("{}zz", &sig[..126]), 1),
            "invalid_hex",
        ),
        invalid(
            "numeric_tag_element",
            "Tag elements must be strings.",
            good.replacen("[\"p\",", "[\"p\",1,", 1),
            "non_string_tag_element",
        ),
        invalid(
            "null_tag_element",
            "null is never a tag element.",
            good.replacen("[\"p\",", "[\"p\",null,", 1),
            "null",
        ),
        invalid(
            "null_tags",
            "tags: null is not an empty list.",
            good.replacen(&format!("[[\"p\",\"{ID_A}\"]]"), "null", 1),
            "null",
        ),
        invalid(
            "null_content",
            "content: null is rejected.",
            good.replacen("\"hello\"", "null", 1),
            "null",
        ),
        invalid(
            "empty_tag",
            "A tag needs at least one element (NIP-01: one or more strings).",
            good.replacen("\"tags\":[", "\"tags\":[[],", 1),
            "empty_tag",
        ),
        invalid(
            "tags_object",
            "tags must be an array.",
            good.replacen(&format!("[[\"p\",\"{ID_A}\"]]"), "{}", 1),
            "wrong_type",
        ),
        invalid(
            "lone_high_surrogate",
            "A lone surrogate cannot be UTF-8.",
            good.replacen("hello", "he\\ud83dllo", 1),
            "lone_surrogate",
        ),
        invalid(
            "lone_low_surrogate",
            "A low surrogate without a high one.",
            good.replacen("hello", "\\ude00", 1),
            "lone_surrogate",
        ),
        invalid(
            "raw_control",
            "Raw control characters are invalid JSON.",
            good.replacen("hello", "he\u{1}llo", 1),
            "unescaped_control",
        ),
        invalid(
            "bad_escape",
            "Only JSON escapes exist.",
            good.replacen("hello", "he\\xllo", 1),
            "invalid_escape",
        ),
        invalid(
            "trailing_garbage",
            "Nothing but whitespace may follow the object.",
            format!("{good} x"),
            "trailing_data",
        ),
        invalid(
            "two_objects",
            "One event per input.",
            format!("{good}{good}"),
            "trailing_data",
        ),
        invalid(
            "truncated",
            "Truncated input.",
            good[..good.len() - 1].to_string(),
            "syntax",
        ),
        invalid(
            "not_an_object",
            "An event is an object.",
            "[]".to_string(),
            "wrong_type",
        ),
        invalid(
            "deep_unknown_field",
            "Unknown fields are bounded in depth.",
            good.replacen(
                '{',
                &format!("{{\"deep\":{}1{},", "[".repeat(40), "]".repeat(40)),
                1,
            ),
            "too_deep",
        ),
        invalid(
            "tampered_content",
            "Changing content breaks the id.",
            good.replacen("hello", "hellO", 1),
            "id_mismatch",
        ),
        invalid(
            "foreign_signature",
            "A signature from another event fails.",
            good.replacen(
                &sig,
                &sign(6, 1_700_000_101, 1, &[], "other").sig.to_hex(),
                1,
            ),
            "invalid_signature",
        ),
    ];
    // A correct id over a pubkey that is not a curve point (x >= p).
    let bogus = PublicKey::from_bytes([0xff; 32]);
    let mut unsigned = UnsignedEvent::new(
        &keys(6),
        Timestamp::new(1_700_000_102).unwrap(),
        Kind(1),
        vec![],
        "x",
    );
    unsigned.pubkey = bogus;
    let bogus_id: EventId = unsigned.compute_id();
    let bogus_event = nostrwire_event::Event {
        id: bogus_id,
        pubkey: bogus,
        created_at: unsigned.created_at,
        kind: unsigned.kind,
        tags: vec![],
        content: "x".into(),
        sig: e.sig,
    };
    out.push(invalid(
        "pubkey_not_on_curve",
        "The id matches but the pubkey is no x-only key.",
        bogus_event.to_json(),
        "invalid_public_key",
    ));
    let mut too_large = invalid(
        "too_large",
        "Size is checked before parsing (limit set to 100 bytes).",
        good.clone(),
        "too_large",
    );
    too_large["limits"] = json!({ "max_event_bytes": 100 });
    out.push(too_large);
    let two_tags = sign(
        6,
        1_700_000_103,
        1,
        &[&["t", "a"], &["t", "b"], &["t", "c"]],
        "",
    );
    let mut too_many = invalid(
        "too_many_tags",
        "Tag count limit (set to 2).",
        two_tags.to_json(),
        "too_many_tags",
    );
    too_many["limits"] = json!({ "max_tags": 2 });
    out.push(too_many);
    let bytes = good.replacen("hello", "he\u{fffd}llo", 1).into_bytes();
    let at = bytes
        .windows(3)
        .position(|w| w == [0xef, 0xbf, 0xbd])
        .expect("marker");
    let mut bytes = bytes;
    bytes.splice(at..at + 3, [0xff]);
    out.push(json!({
        "name": "invalid_utf8",
        "note": "Bytes that are not UTF-8 (given as hex, since JSON text cannot hold them).",
        "json_hex": nostrwire_event::hex::encode(&bytes),
        "error": "invalid_utf8",
    }));
    out
}
