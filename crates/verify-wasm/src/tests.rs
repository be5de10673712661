use super::*;
use serde_json::Value;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn sha256_state_has_the_layout_of_libsecp256k1() {
    // SAFETY: a pure function of the C side.
    assert_eq!(
        unsafe { hash::nw_sha256_size() },
        core::mem::size_of::<hash::Sha256>()
    );
}

#[test]
fn bip340_vectors() {
    let csv = read("tests/bip340-vectors.csv");
    let mut cache = KeyCache::new();
    let mut n = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let mut item = unhex(f[2]);
        item.extend(unhex(f[4]));
        item.extend(unhex(f[5]));
        let mut v = [9u8];
        verify_signatures(&item, &mut v, &mut cache).unwrap();
        assert_eq!(v[0] == 1, f[6] == "TRUE", "vector {}: {}", f[0], f[7]);
        n += 1;
    }
    assert_eq!(n, 15);
    assert_eq!(
        verify_signatures(&[0; 127], &mut [0], &mut cache),
        Err(Malformed)
    );
}

/// The packed layout of the crate docs, as js/src/verify-wasm.ts writes it.
fn pack(e: &Value, out: &mut Vec<u8>) {
    let mut entry = Vec::new();
    for k in ["id", "pubkey", "sig"] {
        entry.extend(e[k].as_str().unwrap().as_bytes());
    }
    entry.extend(e["created_at"].as_f64().unwrap().to_le_bytes());
    entry.extend(e["kind"].as_f64().unwrap().to_le_bytes());
    let tags = e["tags"].as_array().unwrap();
    entry.extend((tags.len() as u32).to_le_bytes());
    for t in tags {
        let t = t.as_array().unwrap();
        entry.extend((t.len() as u32).to_le_bytes());
        for s in t {
            let s = s.as_str().unwrap().as_bytes();
            entry.extend((s.len() as u32).to_le_bytes());
            entry.extend(s);
        }
    }
    let c = e["content"].as_str().unwrap().as_bytes();
    entry.extend((c.len() as u32).to_le_bytes());
    entry.extend(c);
    out.extend((entry.len() as u32).to_le_bytes());
    out.extend(entry);
}

fn corpus() -> Vec<Value> {
    read("../../testdata/real-events.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn corpus_events_verify_and_spoiled_ones_do_not() {
    let events = corpus();
    let mut cache = KeyCache::new();
    let mut input = Vec::new();
    for e in &events {
        pack(e, &mut input);
    }
    let mut verdicts = vec![0u8; events.len()];
    assert_eq!(
        verify_events(&input, &mut verdicts, &mut cache),
        Ok(events.len())
    );

    type Spoiler = (&'static str, fn(&str) -> String);
    let spoil: [Spoiler; 5] = [
        ("id", |s| {
            format!("{}{}", &s[..63], if s.ends_with('0') { '1' } else { '0' })
        }),
        ("id", |s| s.to_uppercase()),
        ("pubkey", |s| {
            format!("{}{}", if s.starts_with('0') { '1' } else { '0' }, &s[1..])
        }),
        ("sig", |s| {
            format!("{}{}", &s[..127], if s.ends_with('0') { '1' } else { '0' })
        }),
        ("content", |s| s.to_string() + " "),
    ];
    for (field, f) in spoil {
        let mut input = Vec::new();
        for e in &events {
            let mut e = e.clone();
            let v = f(e[field].as_str().unwrap());
            e[field] = Value::String(v);
            pack(&e, &mut input);
        }
        assert_eq!(
            verify_events(&input, &mut verdicts, &mut cache),
            Ok(0),
            "{field} spoiled"
        );
    }
    // A buffer that does not hold what it claims.
    assert_eq!(
        verify_events(&input[..input.len() - 1], &mut verdicts, &mut cache),
        Err(Malformed)
    );
    assert_eq!(
        verify_events(&input, &mut verdicts[1..], &mut cache),
        Err(Malformed)
    );
}

#[test]
fn wire_vectors_verify_as_records_and_invalid_records_do_not() {
    let mut cache = KeyCache::new();
    let valid: Value = serde_json::from_str(&read("../../vectors/wire/valid.json")).unwrap();
    let cases = valid["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let rec = unhex(c["hex"].as_str().unwrap());
        assert!(verify_record(&rec, &mut cache), "{}", c["name"]);
        // No proper prefix of a record is one.
        for n in 0..rec.len() {
            assert!(
                !verify_record(&rec[..n], &mut cache),
                "{} cut to {n}",
                c["name"]
            );
        }
    }
    let invalid: Value = serde_json::from_str(&read("../../vectors/wire/invalid.json")).unwrap();
    for c in invalid["cases"].as_array().unwrap() {
        assert!(
            !verify_record(&unhex(c["hex"].as_str().unwrap()), &mut cache),
            "{}",
            c["name"]
        );
    }
}
