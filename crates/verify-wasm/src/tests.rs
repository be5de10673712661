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
    // All fifteen in one batch: the same verdicts.
    let mut all = Vec::new();
    let mut expect = Vec::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        all.extend(unhex(f[2]));
        all.extend(unhex(f[4]));
        all.extend(unhex(f[5]));
        expect.push(u8::from(f[6] == "TRUE"));
    }
    let mut verdicts = [9u8; 15];
    verify_signatures(&all, &mut verdicts, &mut KeyCache::new()).unwrap();
    assert_eq!(verdicts[..], expect[..]);
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

/// The group order n.
const N_HEX: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";

/// `x += d` on 32-byte big-endian numbers, modulo 2^256; the carry out.
fn add_be(x: &mut [u8], d: &[u8]) -> bool {
    let mut carry = 0u16;
    for i in (0..32).rev() {
        let v = u16::from(x[i]) + u16::from(d[i]) + carry;
        x[i] = v as u8;
        carry = v >> 8;
    }
    carry == 1
}

/// `x = (x + d) mod n` for `x, d < n`.
fn add_mod_n(x: &mut [u8], d: &[u8; 32]) {
    let n = unhex(N_HEX);
    let carry = add_be(x, d);
    if carry || x[..] >= n[..] {
        // − n ≡ + (2^256 − n) modulo 2^256.
        let mut minus_n = [0u8; 32];
        for (m, b) in minus_n.iter_mut().zip(&n) {
            *m = !b;
        }
        add_be(&mut minus_n, &{
            let mut one = [0u8; 32];
            one[31] = 1;
            one
        });
        add_be(x, &minus_n);
    }
}

/// Signature items (key, id, signature) of the corpus's events.
fn signature_items() -> Vec<Vec<u8>> {
    corpus()
        .iter()
        .map(|e| {
            let mut item = unhex(e["pubkey"].as_str().unwrap());
            item.extend(unhex(e["id"].as_str().unwrap()));
            item.extend(unhex(e["sig"].as_str().unwrap()));
            item
        })
        .collect()
}

#[test]
fn batches_give_the_verdicts_of_single_checks() {
    // The model: each signature checked alone. Spoiled signatures of many
    // kinds sit at every position of batches of every size, among keys
    // that repeat.
    const P: &str = "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f";
    let items = signature_items();
    type Spoiler = fn(&mut [u8]);
    let spoilers: [Spoiler; 7] = [
        |i| i[127] ^= 1,                               // s off by a bit
        |i| i[95] ^= 1,                                // r off by a bit (often not on the curve)
        |i| i[64..96].copy_from_slice(&unhex(P)),      // r = p
        |i| i[96..128].copy_from_slice(&unhex(N_HEX)), // s = n
        |i| i[32] ^= 0x80,                             // another message
        |i| i[64..96].fill(0),                         // r = 0
        |i| i[..32].copy_from_slice(&[0xff; 32]),      // a key off the curve
    ];
    let mut input = Vec::new();
    let mut expect = Vec::new();
    let mut model_cache = KeyCache::new();
    for (n, item) in items.iter().cycle().take(3_000).enumerate() {
        let mut item = item.clone();
        // Runs of valid items between spoiled ones of varying spacing.
        if n % 37 == 0 || n % 61 == 5 || n % 97 == 11 {
            spoilers[n % spoilers.len()](&mut item);
        }
        expect.push(u8::from(verify_signature_alone(&mut model_cache, &item)));
        input.extend(item);
    }
    assert!(expect.iter().filter(|&&v| v == 0).count() > 100);
    for count in [1, 2, 3, 31, 63, 64, 65, 127, 128, 1_000, 3_000] {
        let mut verdicts = vec![9u8; count];
        let valid = verify_signatures(&input[..128 * count], &mut verdicts, &mut KeyCache::new());
        assert_eq!(verdicts, expect[..count], "{count} items");
        assert_eq!(
            valid,
            Ok(expect[..count].iter().filter(|&&v| v == 1).count())
        );
    }
}

#[test]
fn a_batch_of_one_key_and_of_one_signature_repeated() {
    let items = signature_items();
    let mut model = KeyCache::new();
    let key = &items[0][..32];
    let same_key: Vec<&Vec<u8>> = items.iter().filter(|i| &i[..32] == key).collect();
    for group in [
        vec![items[0].clone(); 64],
        same_key.iter().map(|i| (*i).clone()).collect(),
    ] {
        let input: Vec<u8> = group.concat();
        let mut verdicts = vec![0u8; group.len()];
        assert_eq!(
            verify_signatures(&input, &mut verdicts, &mut KeyCache::new()),
            Ok(group.len())
        );
        assert!(group.iter().all(|i| verify_signature_alone(&mut model, i)));
    }
}

#[test]
fn invalid_signatures_that_cancel_out_are_caught() {
    // s_1 + d and s_2 − d: the sum of the two equations still holds, so a
    // batch without randomizers would pass both. With them, both fail.
    let items = signature_items();
    let (mut a, mut b) = (items[0].clone(), items[1].clone());
    let mut d = [0u8; 32];
    d[31] = 7;
    let mut minus_d = [0u8; 32];
    minus_d.copy_from_slice(&unhex(N_HEX));
    minus_d[31] -= 7;
    add_mod_n(&mut a[96..128], &d);
    add_mod_n(&mut b[96..128], &minus_d);
    let (a_copy, b_copy) = (a.clone(), b.clone());
    let mut input = a;
    input.extend(&b);
    input.extend(&items[2]);
    let mut verdicts = [9u8; 3];
    assert_eq!(
        verify_signatures(&input, &mut verdicts, &mut KeyCache::new()),
        Ok(1)
    );
    assert_eq!(verdicts, [0, 0, 1]);
    assert!(!batch_accepts(&[a_copy, b_copy]));
}

/// `nw_schnorr_verify_batch` itself, without the one-by-one fallback.
fn batch_accepts(items: &[Vec<u8>]) -> bool {
    let mut cache = KeyCache::new();
    let mut batch = Batch::new();
    for (i, item) in items.iter().enumerate() {
        let signed = Signed {
            pubkey: item[..32].try_into().unwrap(),
            id: item[32..64].try_into().unwrap(),
            sig: item[64..128].try_into().unwrap(),
        };
        batch.push(&mut cache, i, &signed);
    }
    batch.accepts()
}

#[test]
fn valid_batches_pass_the_batch_check_itself() {
    // Without this, a batch check that always failed would pass every
    // other test through the one-by-one fallback.
    let items = signature_items();
    for n in [1, 2, 3, 17, 63, 64] {
        assert!(batch_accepts(&items[..n]), "{n} items");
        assert!(batch_accepts(&items[items.len() - n..]), "last {n} items");
    }
    assert!(batch_accepts(&vec![items[5].clone(); 64]));
    let mut spoiled = items[..64].to_vec();
    spoiled[40][127] ^= 1;
    assert!(!batch_accepts(&spoiled));
}

/// A batch list's records: a varint length and the record each.
fn batch_list(records: &[Vec<u8>]) -> Vec<u8> {
    let mut list = Vec::new();
    for r in records {
        let mut n = r.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            list.push(if n > 0 { b | 0x80 } else { b });
            if n == 0 {
                break;
            }
        }
        list.extend(r);
    }
    list
}

/// Every record of `list` rendered with calls of `cap` bytes of output.
fn render_all(list: &[u8], count: usize, cap: usize) -> Vec<Value> {
    let mut out = vec![0u8; cap];
    let mut scratch = scratch();
    let mut at = 0;
    let mut all = Vec::new();
    while all.len() < count {
        let r = render_records(
            list,
            at,
            count - all.len(),
            &mut out,
            None,
            &mut scratch,
            None,
        )
        .unwrap();
        assert!(r.records > 0, "no progress with {cap} bytes");
        let v: Value = serde_json::from_slice(&out[..r.len]).unwrap();
        assert_eq!(v.as_array().unwrap().len(), r.records);
        all.extend(v.as_array().unwrap().iter().cloned());
        at = r.next;
    }
    assert_eq!(at, list.len());
    all
}

#[test]
fn records_render_as_their_events_and_invalid_ones_as_null() {
    let mut records = Vec::new();
    let mut expect = Vec::new();
    for file in ["valid", "invalid"] {
        let v: Value =
            serde_json::from_str(&read(&format!("../../vectors/wire/{file}.json"))).unwrap();
        for c in v["cases"].as_array().unwrap() {
            records.push(unhex(c["hex"].as_str().unwrap()));
            expect.push(match c["json"].as_str() {
                Some(json) => serde_json::from_str(json).unwrap(),
                None => Value::Null,
            });
        }
    }
    assert!(expect.iter().filter(|v| v.is_null()).count() >= 20);
    let list = batch_list(&records);
    // Any output size from one record per call to all of them at once; a
    // record too large for an empty output is left to the JS decoder.
    let largest = expect.iter().map(|v| v.to_string().len()).max().unwrap();
    for cap in [6, 300, largest + 2, largest + 100, 5000, 1 << 20] {
        let got = render_all(&list, records.len(), cap);
        for (i, (g, e)) in got.iter().zip(&expect).enumerate() {
            let fits = e.to_string().len() + 2 <= cap;
            assert_eq!(
                g,
                if fits { e } else { &Value::Null },
                "record {i}, output of {cap} bytes"
            );
        }
        // Key order as the JS decoder gives it.
        let mut out = vec![0u8; 1 << 20];
        let r = render_records(&list, 0, 1, &mut out, None, &mut scratch(), None).unwrap();
        assert!(out[..r.len].starts_with(b"[{\"id\":\""));
    }
}

#[test]
fn a_batch_list_that_runs_past_its_end_is_malformed() {
    let list = batch_list(&[vec![1u8; 10]]);
    let mut out = vec![0u8; 100];
    assert_eq!(
        render_records(&list[..5], 0, 1, &mut out, None, &mut scratch(), None),
        Err(Malformed)
    );
    assert_eq!(
        render_records(&list, 0, 1, &mut out[..5], None, &mut scratch(), None),
        Err(Malformed)
    );
    // A record that breaks a rule is null, not an error.
    let r = render_records(&list, 0, 1, &mut out, None, &mut scratch(), None).unwrap();
    assert_eq!(&out[..r.len], b"[null]");
}

/// A compressed record (§11) of `record` with dictionary `id` (`dict`).
fn compress_record(dict: &[u8], record: &[u8], id: u32) -> Vec<u8> {
    let mut out = vec![0x81];
    for mut v in [u64::from(id), record.len() as u64] {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out.extend(crate::zstd::tests::compress(dict, record));
    out
}

#[test]
fn compressed_records_render_as_the_records_inside() {
    let valid: Value = serde_json::from_str(&read("../../vectors/wire/valid.json")).unwrap();
    let raw: Vec<Vec<u8>> = valid["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| unhex(c["hex"].as_str().unwrap()))
        .collect();
    // A raw-content dictionary (any bytes serve) in a set of one, id 7.
    let dict: Vec<u8> = raw.concat();
    let mut set = b"NWBD\x01\x03\x01\x07\x00".to_vec();
    let mut n = dict.len();
    while n >= 0x80 {
        set.push(n as u8 | 0x80);
        n >>= 7;
    }
    set.push(n as u8);
    set.extend(&dict);
    let mut memory = vec![
        0u64;
        crate::zstd::Zstd::memory_needed(Some(&set))
            .unwrap()
            .div_ceil(8)
    ];
    let mut zstd = crate::zstd::Zstd::new(&mut memory, Some(&set)).unwrap();

    let vectors: Value = serde_json::from_str(&read("../../vectors/wire/compressed.json")).unwrap();
    let mut records = Vec::new();
    let mut inside: Vec<Option<Vec<u8>>> = Vec::new();
    for c in vectors["cases"].as_array().unwrap() {
        records.push(unhex(c["hex"].as_str().unwrap()));
        inside.push(c["record"].as_str().map(unhex));
    }
    for r in &raw {
        records.push(compress_record(&dict, r, 7));
        inside.push(Some(r.clone()));
        records.push(compress_record(&[], r, 0));
        inside.push(Some(r.clone()));
        // A dictionary the set lacks: the JavaScript decoder's to report.
        records.push(compress_record(&dict, r, 8));
        inside.push(None);
    }
    let expect: Vec<Value> = inside
        .iter()
        .map(|r| match r {
            Some(r) => render_all(&batch_list(std::slice::from_ref(r)), 1, 1 << 20).remove(0),
            None => Value::Null,
        })
        .collect();
    assert!(expect.iter().filter(|v| !v.is_null()).count() >= 17);
    let list = batch_list(&records);
    let mut out = vec![0u8; 1 << 20];
    let mut kept = vec![0u8; 1 << 20];
    let r = render_records(
        &list,
        0,
        records.len(),
        &mut out,
        Some(&mut kept),
        &mut scratch(),
        Some(&mut zstd),
    )
    .unwrap();
    assert_eq!(r.records, records.len());
    let got: Value = serde_json::from_slice(&out[..r.len]).unwrap();
    assert_eq!(got.as_array().unwrap(), &expect);
    // The records inside, one per event written, for the verifier.
    let mut at = 0;
    let mut want = inside.iter().flatten();
    while at < r.records_len {
        let n = u32::from_le_bytes(kept[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(&kept[at + 4..at + 4 + n], &want.next().unwrap()[..]);
        at += 4 + n;
    }
    assert_eq!(at, r.records_len);
    assert!(want.next().is_none());
    // Too little room for the records: fewer per call, none lost.
    let mut small = vec![0u8; 600];
    let r = render_records(
        &list,
        0,
        records.len(),
        &mut out,
        Some(&mut small),
        &mut scratch(),
        Some(&mut zstd),
    )
    .unwrap();
    assert!(r.records > 0 && r.records < records.len());
    assert!(r.records_len <= 600);
    // Without a decoder every compressed record is left to the JavaScript one.
    let r = render_records(
        &list,
        0,
        records.len(),
        &mut out,
        None,
        &mut scratch(),
        None,
    )
    .unwrap();
    let got: Value = serde_json::from_slice(&out[..r.len]).unwrap();
    assert!(got.as_array().unwrap().iter().all(Value::is_null));
}

#[test]
fn ascii_json_strings_hold_every_character_as_escapes() {
    // Characters at every UTF-8 length and boundary, and every escape, at
    // every offset of a 16-byte block.
    let pieces = [
        "a",
        "\"",
        "\\",
        "\n",
        "\u{1}",
        "\u{1f}",
        "\u{7f}",
        "\u{80}",
        "é",
        "\u{7ff}",
        "\u{800}",
        "日",
        "\u{2028}",
        "\u{fffd}",
        "\u{ffff}",
        "\u{10000}",
        "😀",
        "\u{10ffff}",
    ];
    for p in pieces {
        for pad in 0..20 {
            let text = format!("{}{p}{}", "x".repeat(pad), "y".repeat(pad % 3));
            let mut out = vec![0u8; 1000];
            let mut b = Buf::new(&mut out);
            b.json_str_ascii(text.as_bytes());
            let len = b.len;
            let json = &out[..len];
            assert!(json.is_ascii(), "{text:?}");
            let back: String = serde_json::from_slice(json).unwrap();
            assert_eq!(back, text);
        }
    }
}
