//! The shared event vectors in `vectors/event/`: every valid case parses,
//! verifies, has the expected id and re-serializes canonically; every invalid
//! case fails with its expected error kind.

mod support;

use std::path::PathBuf;

use nostrwire_event::{ErrorKind, EventRef, Kind, KindClass, Limits, SignedFields};
use serde_json::Value;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vectors/event")
}

fn load(name: &str) -> Vec<Value> {
    let path = vectors_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn input(case: &Value) -> Vec<u8> {
    if let Some(hex) = case["json_hex"].as_str() {
        let mut out = Vec::new();
        nostrwire_event::hex::decode_into(hex.as_bytes(), &mut out).unwrap();
        out
    } else {
        case["json"].as_str().unwrap().as_bytes().to_vec()
    }
}

fn limits(case: &Value) -> Limits {
    let mut limits = Limits::DEFAULT;
    if let Some(map) = case["limits"].as_object() {
        for (k, v) in map {
            let v = v.as_u64().unwrap() as usize;
            match k.as_str() {
                "max_event_bytes" => limits.max_event_bytes = v,
                "max_tags" => limits.max_tags = v,
                other => panic!("unknown limit {other}"),
            }
        }
    }
    limits
}

#[test]
fn valid_vectors() {
    let cases = load("valid.json");
    assert!(cases.len() >= 20);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let bytes = input(case);
        let event = EventRef::parse_with(&bytes, &limits(case))
            .unwrap_or_else(|e| panic!("{name}: {e} ({})", case["note"]));
        event.verify().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(event.id().to_hex(), case["id"].as_str().unwrap(), "{name}");
        assert_eq!(
            event.to_json(),
            case["canonical"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            event.to_event().to_json(),
            case["canonical"].as_str().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn invalid_vectors() {
    let cases = load("invalid.json");
    let mut kinds = std::collections::HashSet::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let expected = ErrorKind::from_name(case["error"].as_str().unwrap())
            .unwrap_or_else(|| panic!("{name}: unknown error kind"));
        let bytes = input(case);
        let got = EventRef::parse_with(&bytes, &limits(case)).and_then(|e| e.verify());
        match got {
            Ok(()) => panic!("{name}: accepted ({})", case["note"]),
            Err(e) => assert_eq!(e.kind(), expected, "{name}: {e}"),
        }
        kinds.insert(expected);
    }
    assert!(
        kinds.len() >= 20,
        "invalid vectors cover {} kinds",
        kinds.len()
    );
}

#[test]
fn vectors_are_up_to_date() {
    let generated = [
        ("valid.json", support::vectors_gen::valid_vectors()),
        ("invalid.json", support::vectors_gen::invalid_vectors()),
    ];
    for (file, cases) in generated {
        let text = serde_json::to_string_pretty(&sorted_keys(Value::Array(cases))).unwrap() + "\n";
        let path = vectors_dir().join(file);
        if std::env::var_os("NOSTRWIRE_BLESS").is_some() {
            std::fs::create_dir_all(vectors_dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == text,
            "{} is stale; rerun with NOSTRWIRE_BLESS=1",
            path.display()
        );
    }
}

/// Rebuilds every object with its keys in sorted order, so the blessed text is
/// the same whether or not another crate in the build turns on serde_json's
/// `preserve_order`.
fn sorted_keys(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted_keys(v)))
                    .collect(),
            )
        }
        other => other,
    }
}

#[test]
fn kind_classes() {
    assert_eq!(Kind(0).class(), KindClass::Replaceable);
    assert_eq!(Kind(3).class(), KindClass::Replaceable);
    assert_eq!(Kind(41).class(), KindClass::Regular);
    assert_eq!(Kind(9999).class(), KindClass::Regular);
    assert_eq!(Kind(10000).class(), KindClass::Replaceable);
    assert_eq!(Kind(19999).class(), KindClass::Replaceable);
    assert_eq!(Kind(20000).class(), KindClass::Ephemeral);
    assert_eq!(Kind(29999).class(), KindClass::Ephemeral);
    assert_eq!(Kind(30000).class(), KindClass::Addressable);
    assert_eq!(Kind(39999).class(), KindClass::Addressable);
    assert_eq!(Kind(40000).class(), KindClass::Regular);
    assert_eq!(Kind(65535).class(), KindClass::Regular);
}
