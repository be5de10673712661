//! The decoder against the `zstd` crate (libzstd built by `zstd-sys`) on
//! the vectors and on events of the real corpus compressed with a set
//! trained from it; hostile frames and set files.

use super::*;
use zstd::zstd_safe::{DParameter, FrameFormat};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");
const VECTORS: &str = include_str!("../../../vectors/wire/compressed.json");

fn memory_for(set: Option<&[u8]>) -> Vec<u64> {
    vec![0u64; Zstd::memory_needed(set).unwrap().div_ceil(8)]
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// libzstd's reading of a magicless frame, with the dictionary `dict`.
fn reference(dict: &[u8], frame: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut d = zstd::bulk::Decompressor::with_dictionary(dict).unwrap();
    d.set_parameter(DParameter::Format(FrameFormat::Magicless))
        .unwrap();
    d.decompress(frame, size).ok()
}

/// Dictionaries trained with libzstd on half the corpus's events (one per
/// kind with enough of them, and a fallback), their set file, and the other
/// half compressed as §11 frames: `(dictionary id, frame, event)`.
struct Corpus {
    file: Vec<u8>,
    dictionaries: Vec<(u32, Vec<u8>)>,
    frames: Vec<(u32, Vec<u8>, Vec<u8>)>,
}

impl Corpus {
    fn dictionary(&self, id: u32) -> &[u8] {
        &self.dictionaries.iter().find(|d| d.0 == id).unwrap().1
    }
}

fn corpus() -> Corpus {
    let events: Vec<(u64, &[u8])> = CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["kind"].as_u64().unwrap(), l.as_bytes())
        })
        .collect();
    let (train, test): (Vec<_>, Vec<_>) = events.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let mut kinds = std::collections::BTreeMap::<u64, Vec<&[u8]>>::new();
    for (_, (kind, event)) in &train {
        kinds.entry(*kind).or_default().push(event);
    }
    let all: Vec<&[u8]> = train.iter().map(|(_, (_, e))| *e).collect();
    let mut dictionaries = vec![(
        1u32,
        0u64,
        zstd::dict::from_samples(&all, 32 * 1024).unwrap(),
    )];
    for (kind, samples) in kinds.iter().filter(|(_, s)| s.len() >= 16) {
        let id = dictionaries.len() as u32 + 1;
        let dict = zstd::dict::from_samples(samples, 16 * 1024).unwrap();
        dictionaries.push((id, kind + 1, dict));
    }
    assert!(dictionaries.len() > 2, "per-kind dictionaries");
    let entries: Vec<(u64, u64, &[u8])> = dictionaries
        .iter()
        .map(|(id, selector, d)| (u64::from(*id), *selector, &d[..]))
        .collect();
    let file = set_file(3, &entries);
    let frames = test
        .iter()
        .map(|(_, (kind, event))| {
            let (id, _, dict) = dictionaries
                .iter()
                .find(|d| d.1 == kind + 1)
                .unwrap_or(&dictionaries[0]);
            (*id, compress(dict, event), event.to_vec())
        })
        .collect();
    Corpus {
        file,
        dictionaries: dictionaries.into_iter().map(|(i, _, d)| (i, d)).collect(),
        frames,
    }
}

/// A §11 frame: magicless, no checksum, dictionary id or content size.
pub(crate) fn compress(dict: &[u8], data: &[u8]) -> Vec<u8> {
    use zstd::zstd_safe::CParameter;
    let mut c = zstd::bulk::Compressor::with_dictionary(3, dict).unwrap();
    for p in [
        CParameter::Format(FrameFormat::Magicless),
        CParameter::ChecksumFlag(false),
        CParameter::DictIdFlag(false),
        CParameter::ContentSizeFlag(false),
    ] {
        c.set_parameter(p).unwrap();
    }
    c.compress(data).unwrap()
}

#[test]
fn vectors_decompress_or_fail_as_specified() {
    let vectors: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
    let mut memory = memory_for(None);
    let mut zstd = Zstd::new(&mut memory, None).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let bytes = unhex(case["hex"].as_str().unwrap());
        let c = parse_record(&bytes).unwrap();
        let mut out = vec![0; c.size];
        let got = zstd.decompress(c.dictionary, c.frame, &mut out);
        match case["record"].as_str() {
            Some(record) => {
                assert_eq!(got, Ok(()), "{name}");
                assert_eq!(out, unhex(record), "{name}");
                assert_eq!(reference(&[], c.frame, c.size).unwrap(), out);
            }
            None => assert_eq!(case["error"], "decompress", "{name}: {got:?}"),
        }
        if case["error"] == "decompress" {
            assert!(got.is_err(), "{name}");
        }
    }
}

#[test]
fn corpus_frames_decompress_as_libzstd_does() {
    let corpus = corpus();
    let mut memory = memory_for(Some(&corpus.file));
    let mut zstd = Zstd::new(&mut memory, Some(&corpus.file)).unwrap();
    assert_eq!(zstd.dictionaries(), corpus.dictionaries.len());
    assert_eq!(zstd.level(), Some(3));
    let mut used = std::collections::BTreeSet::new();
    for (id, frame, event) in &corpus.frames {
        used.insert(*id);
        let mut out = vec![0; event.len()];
        zstd.decompress(*id, frame, &mut out).unwrap();
        assert_eq!(&out, event);
        let libzstd = reference(corpus.dictionary(*id), frame, event.len());
        assert_eq!(libzstd.as_ref(), Some(&out));
        // The same event without a dictionary.
        let plain = compress(&[], event);
        out.fill(0);
        zstd.decompress(0, &plain, &mut out).unwrap();
        assert_eq!(&out, event);
    }
    assert!(corpus.frames.len() > 400);
    assert!(used.len() > 2, "{used:?}");
    // A raw-content dictionary (no zstd magic) works as libzstd's does.
    let raw = &corpus.frames[0].2[..200];
    let file = set_file(5, &[(42, 0, raw)]);
    let mut memory = memory_for(Some(&file));
    let mut zstd = Zstd::new(&mut memory, Some(&file)).unwrap();
    for (_, _, event) in corpus.frames.iter().take(50) {
        let frame = compress(raw, event);
        let mut out = vec![0; event.len()];
        zstd.decompress(42, &frame, &mut out).unwrap();
        assert_eq!(&out, event);
    }
}

#[test]
fn hostile_frames_are_errors_never_panics() {
    let corpus = corpus();
    let mut memory = memory_for(Some(&corpus.file));
    let mut zstd = Zstd::new(&mut memory, Some(&corpus.file)).unwrap();
    let mut refused = 0;
    for (id, frame, event) in corpus.frames.iter().take(30) {
        let dict = corpus.dictionary(*id);
        let size = event.len();
        let mut out = vec![0; size];
        // Every truncation.
        for end in 0..frame.len() {
            let got = zstd.decompress(*id, &frame[..end], &mut out);
            assert!(got.is_err(), "truncated to {end}");
        }
        // A byte after the frame.
        let mut longer = frame.to_vec();
        longer.push(0);
        assert_eq!(
            zstd.decompress(*id, &longer, &mut out),
            Err(ZstdError::Malformed)
        );
        // Sizes other than R.
        let mut more = vec![0; size + 1];
        assert_eq!(
            zstd.decompress(*id, frame, &mut more),
            Err(ZstdError::WrongSize)
        );
        let mut less = vec![0; size - 1];
        assert_eq!(
            zstd.decompress(*id, frame, &mut less),
            Err(ZstdError::WrongSize)
        );
        // Every single-bit flip: an error, or what libzstd reads too.
        let mut frame = frame.to_vec();
        for bit in 0..frame.len() * 8 {
            frame[bit / 8] ^= 1 << (bit % 8);
            match zstd.decompress(*id, &frame, &mut out) {
                Ok(()) => assert_eq!(reference(dict, &frame, size).as_ref(), Some(&out)),
                Err(_) => refused += 1,
            }
            frame[bit / 8] ^= 1 << (bit % 8);
        }
    }
    assert!(refused > 1000, "{refused} flips refused");
}

#[test]
fn random_blocks_are_errors_or_what_libzstd_reads() {
    // Well-formed frame and block headers around random compressed-block
    // bodies, so that zstd's own parsing (literals, Huffman and FSE tables,
    // sequences, offsets into the dictionary) meets the garbage.
    let corpus = corpus();
    let mut memory = memory_for(Some(&corpus.file));
    let mut zstd = Zstd::new(&mut memory, Some(&corpus.file)).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut ok, mut refused) = (0, 0);
    let mut codes = std::collections::BTreeSet::new();
    for _ in 0..20_000 {
        let body_len = (next() % 300) as usize;
        let size = 1 + (next() % 255) as usize;
        let id = (next() % (corpus.dictionaries.len() as u64 + 1)) as u32;
        // Single segment, a one-byte content size, then one last block.
        let header = (body_len as u32) << 3 | 2 << 1 | 1;
        let mut frame = vec![0x20, size as u8];
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        if next() % 2 == 0 {
            // Raw literals first (a one-byte header), so that half the
            // blocks reach the sequences section.
            let literals = (next() % 32) as usize;
            frame.push((literals as u8) << 3);
            frame.extend((0..literals).map(|_| next() as u8));
            let header = ((body_len + 1 + literals) as u32) << 3 | 2 << 1 | 1;
            frame[2..5].copy_from_slice(&header.to_le_bytes()[..3]);
        }
        frame.extend((0..body_len).map(|_| next() as u8));
        let mut out = vec![0; size];
        match zstd.decompress(id, &frame, &mut out) {
            Ok(()) => {
                let dict = if id == 0 {
                    &[][..]
                } else {
                    corpus.dictionary(id)
                };
                assert_eq!(reference(dict, &frame, size).as_ref(), Some(&out));
                ok += 1;
            }
            Err(e) => {
                codes.insert(format!("{e:?}"));
                refused += 1;
            }
        }
    }
    // zstd itself refused them for several reasons, not only the frame walk.
    assert!(
        codes.len() > 3,
        "{ok} decoded, {refused} refused: {codes:?}"
    );
}

#[test]
fn unknown_dictionary_ids_are_their_own_error() {
    let corpus = corpus();
    let (id, frame, event) = &corpus.frames[0];
    let mut out = vec![0; event.len()];
    let unknown = corpus.dictionaries.len() as u32 + 1;
    let mut memory = memory_for(Some(&corpus.file));
    let mut zstd = Zstd::new(&mut memory, Some(&corpus.file)).unwrap();
    assert_eq!(
        zstd.decompress(unknown, frame, &mut out),
        Err(ZstdError::UnknownDictionary(unknown))
    );
    let mut memory = memory_for(None);
    let mut none = Zstd::new(&mut memory, None).unwrap();
    assert_eq!(
        none.decompress(*id, frame, &mut out),
        Err(ZstdError::UnknownDictionary(*id))
    );
}

#[test]
fn records_with_bad_envelopes_are_refused() {
    for bad in [
        &[][..],
        &[0x01, 0, 1][..],
        &[0x81][..],
        &[0x81, 0][..],
        &[0x81, 0x80, 0][..],
        &[0x81, 0, 0x80][..],
        &[0x81, 0x80, 0x80, 0x80, 0x80, 0x10, 0][..],
        &[0x81, 0, 0x81, 0x80, 0x80, 0x08][..],
    ] {
        assert_eq!(parse_record(bad), Err(ZstdError::BadRecord), "{bad:?}");
    }
    let c = parse_record(&[0x81, 5, 0x80, 0x01, 9]).unwrap();
    assert_eq!((c.dictionary, c.size, c.frame), (5, 128, &[9][..]));
}

/// A set file from `(id, selector, bytes)` entries and a level.
fn set_file(level: u8, entries: &[(u64, u64, &[u8])]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = b"NWBD\x01".to_vec();
    out.push(level);
    varint(&mut out, entries.len() as u64);
    for (id, selector, bytes) in entries {
        varint(&mut out, *id);
        varint(&mut out, *selector);
        varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    out
}

fn load(file: &[u8]) -> Result<usize, ZstdError> {
    let need = Zstd::memory_needed(Some(file))?;
    let mut memory = vec![0u64; need.div_ceil(8)];
    Zstd::new(&mut memory, Some(file)).map(|z| z.dictionaries())
}

#[test]
fn malformed_set_files_are_refused_for_each_rule() {
    let raw: &[u8] = b"raw content dictionary bytes";
    assert_eq!(load(&set_file(3, &[(1, 0, raw), (7, 2, raw)])), Ok(2));
    assert_eq!(load(&set_file(19, &[])), Ok(0));
    let good = set_file(3, &[(1, 0, raw)]);
    let bad = |file: &[u8], why: &'static str| {
        assert_eq!(load(file), Err(ZstdError::BadSet(why)), "{file:?}");
    };
    bad(b"", "no NWBD magic");
    bad(&good[..6], "no NWBD magic");
    let mut magic = good.clone();
    magic[0] = b'X';
    bad(&magic, "no NWBD magic");
    let mut version = good.clone();
    version[4] = 2;
    bad(&version, "unknown set file version");
    bad(&set_file(0, &[]), "level outside 1..19");
    bad(&set_file(20, &[]), "level outside 1..19");
    bad(&set_file(0xff, &[]), "level outside 1..19");
    bad(b"NWBD\x01\x03\x80", "truncated");
    bad(b"NWBD\x01\x03\x80\x00", "overlong varint");
    bad(
        b"NWBD\x01\x03\x80\x80\x80\x80\x80\x80\x80\x10",
        "varint too large",
    );
    bad(b"NWBD\x01\x03\x02\x01\x00\x00", "more entries than bytes");
    bad(
        &set_file(3, &[(0, 0, raw)]),
        "dictionary id outside 1..2^32-1",
    );
    bad(
        &set_file(3, &[(1 << 32, 0, raw)]),
        "dictionary id outside 1..2^32-1",
    );
    bad(&set_file(3, &[(1, 0x10001, raw)]), "kind above 65535");
    assert_eq!(load(&set_file(3, &[(1, 0x10000, raw)])), Ok(1));
    let mut over = b"NWBD\x01\x03\x01\x01\x00".to_vec();
    over.extend_from_slice(&[0x81, 0x80, 0x80, 0x08]); // 16 MiB + 1
    over.extend_from_slice(raw);
    bad(&over, "dictionary over 16 MiB");
    bad(&good[..good.len() - 1], "truncated");
    let mut after = good.clone();
    after.push(0);
    bad(&after, "bytes after the last dictionary");
    bad(
        &set_file(3, &[(1, 0, raw), (1, 2, raw)]),
        "duplicate dictionary id",
    );
    bad(
        &set_file(3, &[(1, 0, raw), (2, 0, raw)]),
        "two dictionaries for one kind, or two fallbacks",
    );
    bad(
        &set_file(3, &[(1, 5, raw), (2, 5, raw)]),
        "two dictionaries for one kind, or two fallbacks",
    );
    // A zstd dictionary (its magic) with malformed entropy tables.
    let mut broken = vec![0x37, 0xa4, 0x30, 0xec, 9, 0, 0, 0];
    broken.extend_from_slice(&[0xff; 64]);
    assert_eq!(
        load(&set_file(3, &[(4, 0, raw), (9, 1, &broken)])),
        Err(ZstdError::BadDictionary(9))
    );
}

#[test]
fn sets_over_the_memory_bound_are_refused_before_preparing() {
    let big = vec![7u8; MAX_DICTIONARY_BYTES];
    let entries: Vec<(u64, u64, &[u8])> = (1..=4).map(|i| (i, i, &big[..])).collect();
    let file = set_file(3, &entries);
    assert!(matches!(
        Zstd::memory_needed(Some(&file)),
        Err(ZstdError::SetTooLarge(n)) if n > MAX_MEMORY_BYTES
    ));
    let mut small = vec![0u64; 16];
    assert!(matches!(
        Zstd::new(&mut small, Some(&set_file(3, &[]))),
        Err(ZstdError::NoMemory(_))
    ));
}
