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

fn scratch() -> Vec<u8> {
    vec![0; SCRATCH_BYTES]
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
        verify_events(&input, &mut verdicts, &mut cache, &mut scratch()),
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
            verify_events(&input, &mut verdicts, &mut cache, &mut scratch()),
            Ok(0),
            "{field} spoiled"
        );
    }
    // A buffer that does not hold what it claims.
    assert_eq!(
        verify_events(
            &input[..input.len() - 1],
            &mut verdicts,
            &mut cache,
            &mut scratch()
        ),
        Err(Malformed)
    );
    assert_eq!(
        verify_events(&input, &mut verdicts[1..], &mut cache, &mut scratch()),
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

fn reference(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

/// Bytes that differ at every position and between calls.
fn message(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ seed.wrapping_mul(131) ^ (i >> 8)) as u8)
        .collect()
}

#[test]
fn sha256_of_every_length_to_300_and_around_block_boundaries() {
    let mut lengths: Vec<usize> = (0..=300).collect();
    for b in [512, 1024, 4096, 65536] {
        lengths.extend(b - 9..=b + 9);
    }
    for &len in &lengths {
        let m = message(len, len);
        assert_eq!(sha256::digest(&m), reference(&m), "length {len}");
        // Written in pieces of every size up to 70, as the serializer does.
        let pieces: Vec<usize> = if len > 5000 {
            vec![1, 63, 64, 65, 4097]
        } else {
            (1..=70).collect()
        };
        for piece in pieces {
            let mut h = sha256::Sha256::new();
            for c in m.chunks(piece) {
                h.update(c);
            }
            assert_eq!(h.finish(), reference(&m), "length {len}, pieces of {piece}");
        }
        let mut h = hash::Hasher::new();
        for c in m.chunks(7) {
            hash::Sink::put(&mut h, c);
        }
        assert_eq!(h.finish(), reference(&m), "length {len} through the hasher");
    }
}

/// The packed input of `sha256_many`.
fn packed(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut input = Vec::new();
    for m in messages {
        input.extend((m.len() as u32).to_le_bytes());
        input.extend(m);
    }
    input
}

fn check_many(messages: &[Vec<u8>]) {
    let mut digests = vec![0u8; 32 * messages.len()];
    assert_eq!(
        sha256_many(&packed(messages), &mut digests),
        Ok(messages.len())
    );
    for (i, (m, d)) in messages.iter().zip(digests.chunks_exact(32)).enumerate() {
        assert_eq!(
            d,
            reference(m),
            "message {i} of {}, {} bytes",
            messages.len(),
            m.len()
        );
    }
}

#[test]
fn four_lane_sha256_agrees_with_the_reference() {
    // Every length to 300 in one call: the lanes refill at every boundary.
    check_many(&(0..=300).map(|n| message(n, n)).collect::<Vec<_>>());
    // Every count from 0 to 9 of lengths around the one- and two-block
    // boundaries, in every rotation, so each lane ends a message first.
    for count in 0..=9 {
        for shift in 0..count.max(1) {
            let messages: Vec<Vec<u8>> = (0..count)
                .map(|i| {
                    let len = [0, 55, 56, 63, 64, 65, 119, 120, 128][(i + shift) % 9];
                    message(len, i + shift)
                })
                .collect();
            check_many(&messages);
        }
    }
    // One long message among short ones (the scalar finish), and lengths
    // that are all equal.
    let mut mixed: Vec<Vec<u8>> = (0..7).map(|i| message(40 + i, i)).collect();
    mixed.insert(3, message(70_000, 99));
    check_many(&mixed);
    check_many(&(0..12).map(|i| message(200, i)).collect::<Vec<_>>());
    // More messages than one call of the four-lane hasher takes.
    check_many(&(0..600).map(|i| message(i % 150, i)).collect::<Vec<_>>());
    // A buffer that does not hold what it claims.
    let input = packed(&[message(10, 0)]);
    assert_eq!(
        sha256_many(&input[..input.len() - 1], &mut [0; 32]),
        Err(Malformed)
    );
    assert_eq!(sha256_many(&input, &mut [0; 64]), Err(Malformed));
    assert_eq!(sha256_many(&input, &mut [0; 31]), Err(Malformed));
}

#[test]
fn every_scratch_size_gives_the_same_verdicts() {
    // Serializations wait in the scratch buffer to be hashed together; one
    // that does not fit the rest of it sends the waiting ones first, one
    // that does not fit at all is hashed as it is written.
    let events = &corpus()[..300];
    let mut input = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let mut e = e.clone();
        // Every fifth event spoiled, so valid and invalid ones share groups.
        if i % 5 == 0 {
            e["content"] = Value::String(format!("{} ", e["content"].as_str().unwrap()));
        }
        pack(&e, &mut input);
    }
    let expect: Vec<u8> = (0..events.len()).map(|i| u8::from(i % 5 != 0)).collect();
    for size in [0, 1, 300, 1000, 4096, 20_000, SCRATCH_BYTES] {
        let mut cache = KeyCache::new();
        let mut verdicts = vec![9u8; events.len()];
        let valid = verify_events(&input, &mut verdicts, &mut cache, &mut vec![0; size]);
        assert_eq!(
            valid,
            Ok(expect.iter().filter(|&&v| v == 1).count()),
            "scratch {size}"
        );
        assert_eq!(verdicts, expect, "scratch {size}");
    }

    // The same for nwb records: the wire vectors, valid and invalid, mixed.
    let mut records = Vec::new();
    let mut expect = Vec::new();
    for (file, ok) in [("valid", 1u8), ("invalid", 0)] {
        let v: Value =
            serde_json::from_str(&read(&format!("../../vectors/wire/{file}.json"))).unwrap();
        for c in v["cases"].as_array().unwrap() {
            let rec = unhex(c["hex"].as_str().unwrap());
            records.extend((rec.len() as u32).to_le_bytes());
            records.extend(rec);
            expect.push(ok);
        }
    }
    for size in [0, 1, 200, 1000, SCRATCH_BYTES] {
        let mut verdicts = vec![9u8; expect.len()];
        let valid = verify_records(
            &records,
            &mut verdicts,
            &mut KeyCache::new(),
            &mut vec![0; size],
        );
        assert_eq!(
            valid,
            Ok(expect.iter().filter(|&&v| v == 1).count()),
            "scratch {size}"
        );
        assert_eq!(verdicts, expect, "scratch {size}");
    }
}

#[test]
fn strings_are_escaped_as_json_stringify_does_at_every_offset() {
    let mut specials: Vec<String> = (0u8..0x20).map(|b| char::from(b).to_string()).collect();
    specials.extend(["\"", "\\", " ", "\u{7f}", "é", "日", "😀"].map(String::from));
    for special in &specials {
        for at in 0..=40 {
            let s = format!("{}{special}{}", "a".repeat(at), "b".repeat(40 - at));
            let mut out = vec![0u8; 1000];
            let mut buf = hash::Buf::new(&mut out);
            hash::Sink::json_str(&mut buf, s.as_bytes());
            let (len, full) = (buf.len, buf.full);
            assert!(!full);
            assert_eq!(
                std::str::from_utf8(&out[..len]).unwrap(),
                serde_json::to_string(&s).unwrap(),
                "{special:?} at {at}"
            );
        }
    }
}

#[test]
fn hex_of_every_length_to_100() {
    for n in 0..=100 {
        let bytes = message(n, n);
        let mut out = vec![0u8; 2 * n];
        hash::hex_into(&bytes, &mut out);
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(std::str::from_utf8(&out).unwrap(), want, "{n} bytes");
    }
}
