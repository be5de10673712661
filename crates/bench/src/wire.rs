//! The nwb binary format against the `notepack` crate and JSON, in one run:
//! sizes (raw and zstd with per-kind dictionaries on a held-out split) and
//! ns/event for encode, decode, selective reads, id, validated ingest and
//! bare signature verification.

use std::hint::black_box;

use nostrwire_event::{Event, EventRef, PreimageFields, SignedFields};
use nostrwire_wire::compress::{DictSet, RecordCompressor, RecordDecompressor, TrainOptions};
use nostrwire_wire::{
    encode_event_into, encode_json_event_into, peek_kind_and_pubkey, EventView, Limits,
};
use secp256k1::{schnorr, XOnlyPublicKey, SECP256K1};

use crate::host::{Fingerprint, Host};
use crate::stats::{time_pass, Summary};

/// Options of a run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Timed samples per measurement (each sample is one pass over the corpus).
    pub samples: usize,
    /// zstd level for compressed sizes.
    pub level: i32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            samples: 15,
            level: 19,
        }
    }
}

/// Byte totals over the corpus and over the held-out half.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sizes {
    /// Compact JSON, all events.
    pub json: usize,
    /// nwb records, all events.
    pub nwb: usize,
    /// notepack, all events.
    pub notepack: usize,
    /// Events in the training half (dictionaries are trained on it).
    pub train_events: usize,
    /// Events in the held-out half (sizes below are measured on it).
    pub held_out_events: usize,
    /// Compact JSON of the held-out events.
    pub held_out_json: usize,
    /// nwb records of the held-out events.
    pub held_out_nwb: usize,
    /// Stored nwb records (compressed when smaller), per-kind dictionaries plus fallback.
    pub held_out_nwb_zstd_per_kind: usize,
    /// Stored nwb records with the fallback dictionary only.
    pub held_out_nwb_zstd_one_dict: usize,
    /// Stored nwb records, zstd without a dictionary.
    pub held_out_nwb_zstd_no_dict: usize,
    /// JSON, zstd per event with one dictionary trained on the training JSON.
    pub held_out_json_zstd_one_dict: usize,
    /// Dictionaries in the per-kind set.
    pub per_kind_dictionaries: usize,
}

/// One measured cell.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell {
    /// Stage name.
    pub stage: &'static str,
    /// Implementation name.
    pub implementation: &'static str,
    /// Timing summary, ns/event.
    pub summary: Summary,
}

/// Everything a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Machine and toolchain.
    pub host: Host,
    /// The corpus file.
    pub corpus: Fingerprint,
    /// Events in the corpus.
    pub events: usize,
    /// zstd level used for compressed sizes.
    pub zstd_level: i32,
    /// Sizes.
    pub sizes: Sizes,
    /// Timings.
    pub cells: Vec<Cell>,
    /// Ingest and bare verification per kind (median ns/event), with the
    /// kind's share of real traffic used for the weighted ratio.
    pub by_kind: Vec<KindCost>,
}

/// Per-kind validated-ingest cost.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindCost {
    /// Kind.
    pub kind: u16,
    /// Events of this kind in the corpus.
    pub events: usize,
    /// Share of this kind in real traffic (weights of [`TRAFFIC_KIND_COUNTS`]).
    pub traffic_share: f64,
    /// Median ns/event of decode + id + signature.
    pub ingest_ns: f64,
    /// Median ns/event of bare verification.
    pub bare_verify_ns: f64,
}

/// Event counts per kind in a 50,000-event relay capture (binostr's corpus
/// audit), for the kinds of the bundled corpus: the corpus is stratified
/// (100 events per kind), so network-like averages reweight by these.
pub const TRAFFIC_KIND_COUNTS: [(u16, u32); 10] = [
    (0, 2573),
    (1, 21120),
    (3, 2849),
    (5, 949),
    (6, 512),
    (7, 5954),
    (1059, 1751),
    (9735, 780),
    (10002, 2135),
    (30023, 404),
];

/// Our format.
pub const NWB: &str = "nwb";
/// The notepack crate.
pub const NOTEPACK: &str = "notepack";
/// The JSON codec of nostrwire-event.
pub const JSON: &str = "json";
/// libsecp256k1 alone.
pub const SECP: &str = "libsecp256k1";

/// Stages in report order, with what each one does.
pub const STAGES: [(&str, &str); 12] = [
    ("encode", "parsed event -> bytes (nwb from the JSON view and from Event; notepack from NoteBuf)"),
    ("decode_view", "bytes -> structurally verified view (nwb: EventView, all canonical checks)"),
    ("decode_full", "bytes -> owned event (nwb: EventView::to_event; notepack: Note + tags/content materialized)"),
    ("select_kind_pubkey", "read kind and pubkey from undecoded bytes, warm (64 passes per sample)"),
    ("select_kind_pubkey_cold", "the same, one pass per sample: mostly cache misses"),
    ("id_from_view", "decode + recompute the id (nwb: from the binary view; json: parse + id)"),
    ("id_floor", "SHA-256 of the precomputed canonical preimage alone (the floor of any id check)"),
    ("ingest", "decode + id check + signature check"),
    ("bare_verify", "BIP-340 verification of the (id, pubkey, sig) triples alone"),
    ("compress", "record -> stored record, per-kind dictionaries"),
    ("decompress", "stored record -> record, per-kind dictionaries"),
    ("decompress_decode", "stored record -> verified view"),
];

type Pass<'a> = (&'static str, &'static str, Box<dyn Fn() + 'a>);

/// Passes over the corpus per sample for the selective reads, so that they are
/// timed warm (as a relay reads a record it just received), not as cache misses.
const SELECT_REPEAT: usize = 64;

/// Full decode of a notepack record into owned parts (the comparison for
/// "decode to owned"); returns a value that depends on every field.
fn notepack_full(bytes: &[u8]) -> usize {
    let note = notepack::NoteParser::new(bytes)
        .into_note()
        .expect("valid notepack");
    let mut tags_iter = note.tags.clone();
    let mut tags: Vec<Vec<String>> = Vec::with_capacity(tags_iter.len() as usize);
    while let Some(elements) = tags_iter.next_tag().expect("valid tags") {
        let mut tag = Vec::with_capacity(elements.remaining() as usize);
        for element in elements {
            tag.push(match element.expect("valid element") {
                notepack::StringType::Str(s) => s.to_owned(),
                notepack::StringType::Bytes(b) => nostrwire_event::hex::encode(b),
            });
        }
        tags.push(tag);
    }
    let owned = (
        *note.id,
        *note.pubkey,
        *note.sig,
        note.created_at,
        note.kind,
        tags,
        note.content.to_owned(),
    );
    black_box(&owned);
    owned.5.len() + owned.6.len()
}

/// notepack's own selective path: its field parser, stopped after the kind.
fn notepack_kind_pubkey(bytes: &[u8]) -> (u64, [u8; 32]) {
    let mut pubkey = [0u8; 32];
    for field in notepack::NoteParser::new(bytes) {
        match field.expect("valid notepack") {
            notepack::ParsedField::Pubkey(p) => pubkey.copy_from_slice(p),
            notepack::ParsedField::Kind(k) => return (k, pubkey),
            _ => {}
        }
    }
    unreachable!("a notepack record has a kind")
}

fn bare_verify(id: &[u8; 32], pubkey: &[u8; 32], sig: &[u8; 64]) -> bool {
    let Ok(key) = XOnlyPublicKey::from_byte_array(pubkey) else {
        return false;
    };
    let sig = schnorr::Signature::from_byte_array(*sig);
    SECP256K1.verify_schnorr(&sig, id, &key).is_ok()
}

fn to_notebuf(e: &Event) -> notepack::NoteBuf {
    notepack::NoteBuf {
        id: e.id.to_hex(),
        pubkey: e.pubkey.to_hex(),
        created_at: e.created_at.as_u64(),
        kind: e.kind.as_u16() as u64,
        tags: e.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
        content: e.content.clone(),
        sig: e.sig.to_hex(),
    }
}

/// Runs the benchmark on a JSON Lines corpus of valid signed events.
pub fn run(
    corpus: &[u8],
    options: &Options,
    mut progress: impl FnMut(usize, usize),
) -> anyhow::Result<Report> {
    let lines: Vec<&[u8]> = corpus
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let refs: Vec<EventRef<'_>> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| EventRef::parse(l).map_err(|e| anyhow::anyhow!("corpus line {}: {e}", i + 1)))
        .collect::<anyhow::Result<_>>()?;
    let n = refs.len();
    anyhow::ensure!(n > 0, "empty corpus");
    let owned: Vec<Event> = refs.iter().map(|e| e.to_event()).collect();
    let json: Vec<String> = refs.iter().map(|e| e.to_json()).collect();
    let records: Vec<Vec<u8>> = refs
        .iter()
        .map(|e| {
            let mut out = Vec::new();
            encode_json_event_into(e, &mut out);
            out
        })
        .collect();
    let notebufs: Vec<notepack::NoteBuf> = owned.iter().map(to_notebuf).collect();
    let packed: Vec<Vec<u8>> = notebufs
        .iter()
        .map(|nb| notepack::pack_note(nb).map_err(|e| anyhow::anyhow!("notepack: {e}")))
        .collect::<anyhow::Result<_>>()?;

    // Correctness before speed: every record round-trips and verifies.
    for (i, record) in records.iter().enumerate() {
        let view =
            EventView::decode(record).map_err(|e| anyhow::anyhow!("event {}: {e}", i + 1))?;
        anyhow::ensure!(
            view.to_json() == json[i],
            "event {}: JSON round trip differs",
            i + 1
        );
        view.verify()
            .map_err(|e| anyhow::anyhow!("event {}: {e}", i + 1))?;
    }

    // Held-out split: the low bit of the id's first byte (disjoint, reproducible).
    let train: Vec<usize> = (0..n)
        .filter(|&i| owned[i].id.as_bytes()[0] & 1 == 0)
        .collect();
    let test: Vec<usize> = (0..n)
        .filter(|&i| owned[i].id.as_bytes()[0] & 1 == 1)
        .collect();
    let samples: Vec<_> = train
        .iter()
        .map(|&i| (owned[i].kind, records[i].as_slice()))
        .collect();
    let train_options = TrainOptions {
        level: options.level,
        ..TrainOptions::default()
    };
    let per_kind = DictSet::train(&samples, &train_options)?;
    let one_dict = DictSet::train(
        &samples,
        &TrainOptions {
            per_kind: false,
            ..train_options
        },
    )?;
    let no_dict = DictSet::new(options.level, Vec::new())?;
    let stored_total = |set: &DictSet| -> anyhow::Result<usize> {
        let mut c = RecordCompressor::new(set)?;
        let mut out = Vec::new();
        for &i in &test {
            c.compress_into(&records[i], &mut out)?;
        }
        Ok(out.len())
    };
    let json_dict = {
        let train_json: Vec<&[u8]> = train.iter().map(|&i| json[i].as_bytes()).collect();
        // Trained as the nwb dictionaries are, so the trainer is not what differs.
        let dict =
            nostrwire_wire::compress::train_dictionary(&train_json, train_options.max_dict_bytes)?;
        let prepared = zstd::dict::EncoderDictionary::copy(&dict, options.level);
        let mut c = zstd::bulk::Compressor::with_prepared_dictionary(&prepared)?;
        let mut total = 0;
        for &i in &test {
            total += c.compress(json[i].as_bytes())?.len();
        }
        total
    };
    let sizes = Sizes {
        json: json.iter().map(String::len).sum(),
        nwb: records.iter().map(Vec::len).sum(),
        notepack: packed.iter().map(Vec::len).sum(),
        train_events: train.len(),
        held_out_events: test.len(),
        held_out_json: test.iter().map(|&i| json[i].len()).sum(),
        held_out_nwb: test.iter().map(|&i| records[i].len()).sum(),
        held_out_nwb_zstd_per_kind: stored_total(&per_kind)?,
        held_out_nwb_zstd_one_dict: stored_total(&one_dict)?,
        held_out_nwb_zstd_no_dict: stored_total(&no_dict)?,
        held_out_json_zstd_one_dict: json_dict,
        per_kind_dictionaries: per_kind.dictionaries().len(),
    };

    let triples: Vec<([u8; 32], [u8; 32], [u8; 64])> = owned
        .iter()
        .map(|e| (*e.id.as_bytes(), *e.pubkey.as_bytes(), *e.sig.as_bytes()))
        .collect();
    let stored: Vec<Vec<u8>> = {
        let mut c = RecordCompressor::new(&per_kind)?;
        records
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                c.compress_into(r, &mut out).map(|_| out)
            })
            .collect::<std::io::Result<_>>()?
    };

    let preimages: Vec<Vec<u8>> = owned
        .iter()
        .map(|e| {
            let mut out = Vec::new();
            e.write_preimage(&mut out);
            out
        })
        .collect();
    let limits = Limits::DEFAULT;
    let passes: Vec<Pass<'_>> = vec![
        (
            "encode",
            "nwb (JSON view)",
            Box::new(|| {
                let mut out = Vec::new();
                for e in &refs {
                    out.clear();
                    encode_json_event_into(e, &mut out);
                    black_box(&out);
                }
            }),
        ),
        (
            "encode",
            "nwb (Event)",
            Box::new(|| {
                let mut out = Vec::new();
                for e in &owned {
                    out.clear();
                    encode_event_into(e, &mut out);
                    black_box(&out);
                }
            }),
        ),
        (
            "encode",
            NOTEPACK,
            Box::new(|| {
                for nb in &notebufs {
                    black_box(notepack::pack_note(nb).expect("valid"));
                }
            }),
        ),
        (
            "decode_view",
            NWB,
            Box::new(|| {
                for r in &records {
                    black_box(EventView::decode_with(r, &limits).expect("valid"));
                }
            }),
        ),
        (
            "decode_full",
            NWB,
            Box::new(|| {
                for r in &records {
                    black_box(
                        EventView::decode_with(r, &limits)
                            .expect("valid")
                            .to_event(),
                    );
                }
            }),
        ),
        (
            "decode_full",
            NOTEPACK,
            Box::new(|| {
                for p in &packed {
                    black_box(notepack_full(p));
                }
            }),
        ),
        (
            "select_kind_pubkey",
            NWB,
            Box::new(|| {
                for _ in 0..SELECT_REPEAT {
                    for r in &records {
                        black_box(peek_kind_and_pubkey(black_box(r)).expect("valid"));
                    }
                }
            }),
        ),
        (
            "select_kind_pubkey",
            NOTEPACK,
            Box::new(|| {
                for _ in 0..SELECT_REPEAT {
                    for p in &packed {
                        black_box(notepack_kind_pubkey(black_box(p)));
                    }
                }
            }),
        ),
        (
            "select_kind_pubkey_cold",
            NWB,
            Box::new(|| {
                for r in &records {
                    black_box(peek_kind_and_pubkey(black_box(r)).expect("valid"));
                }
            }),
        ),
        (
            "select_kind_pubkey_cold",
            NOTEPACK,
            Box::new(|| {
                for p in &packed {
                    black_box(notepack_kind_pubkey(black_box(p)));
                }
            }),
        ),
        (
            "id_from_view",
            NWB,
            Box::new(|| {
                for r in &records {
                    black_box(
                        EventView::decode_with(r, &limits)
                            .expect("valid")
                            .compute_id(),
                    );
                }
            }),
        ),
        (
            "id_from_view",
            JSON,
            Box::new(|| {
                for l in &lines {
                    black_box(EventRef::parse(l).expect("valid").compute_id());
                }
            }),
        ),
        (
            "id_floor",
            "sha2",
            Box::new(|| {
                for p in &preimages {
                    black_box(<sha2::Sha256 as sha2::Digest>::digest(p));
                }
            }),
        ),
        (
            "ingest",
            NWB,
            Box::new(|| {
                for r in &records {
                    let view = EventView::decode_with(r, &limits).expect("valid");
                    assert!(view.verify().is_ok());
                }
            }),
        ),
        (
            "bare_verify",
            SECP,
            Box::new(|| {
                for (id, pk, sig) in &triples {
                    assert!(bare_verify(id, pk, sig));
                }
            }),
        ),
        (
            "compress",
            NWB,
            Box::new(|| {
                let mut c = RecordCompressor::new(&per_kind).expect("context");
                let mut out = Vec::new();
                for r in &records {
                    out.clear();
                    c.compress_into(r, &mut out).expect("compress");
                    black_box(&out);
                }
            }),
        ),
        (
            "decompress",
            NWB,
            Box::new(|| {
                let mut d = RecordDecompressor::new(Some(&per_kind)).expect("context");
                for s in &stored {
                    black_box(d.record(s, &limits).expect("valid").len());
                }
            }),
        ),
        (
            "decompress_decode",
            NWB,
            Box::new(|| {
                let mut d = RecordDecompressor::new(Some(&per_kind)).expect("context");
                for s in &stored {
                    let record = d.record(s, &limits).expect("valid");
                    black_box(EventView::decode_with(record, &limits).expect("valid"));
                }
            }),
        ),
    ];

    // Warm up once, then interleave samples across all passes.
    for (_, _, pass) in &passes {
        pass();
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(options.samples); passes.len()];
    for sample in 0..options.samples {
        progress(sample, options.samples);
        for (i, (_, _, pass)) in passes.iter().enumerate() {
            let items = if passes[i].0 == "select_kind_pubkey" {
                n * SELECT_REPEAT
            } else {
                n
            };
            times[i].push(time_pass(items, pass));
        }
    }
    progress(options.samples, options.samples);

    // Per kind: ingest and bare verification, interleaved per sample.
    let mut kinds: Vec<u16> = owned.iter().map(|e| e.kind.as_u16()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let traffic_total: u32 = TRAFFIC_KIND_COUNTS
        .iter()
        .filter(|(k, _)| kinds.contains(k))
        .map(|(_, c)| c)
        .sum();
    let mut by_kind = Vec::new();
    for kind in kinds {
        let members: Vec<usize> = (0..n).filter(|&i| owned[i].kind.as_u16() == kind).collect();
        let (mut ingest, mut bare) = (Vec::new(), Vec::new());
        for _ in 0..options.samples {
            ingest.push(time_pass(members.len(), || {
                for &i in &members {
                    let view = EventView::decode_with(&records[i], &limits).expect("valid");
                    assert!(view.verify().is_ok());
                }
            }));
            bare.push(time_pass(members.len(), || {
                for &i in &members {
                    let (id, pk, sig) = &triples[i];
                    assert!(bare_verify(id, pk, sig));
                }
            }));
        }
        let count = TRAFFIC_KIND_COUNTS
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, c)| *c);
        by_kind.push(KindCost {
            kind,
            events: members.len(),
            traffic_share: count as f64 / traffic_total.max(1) as f64,
            ingest_ns: Summary::from_samples(&ingest).median_ns,
            bare_verify_ns: Summary::from_samples(&bare).median_ns,
        });
    }

    let cells = passes
        .iter()
        .zip(&times)
        .map(|((stage, implementation, _), t)| Cell {
            stage,
            implementation,
            summary: Summary::from_samples(t),
        })
        .collect();

    Ok(Report {
        host: Host::detect(),
        corpus: Fingerprint::of(corpus),
        events: n,
        zstd_level: options.level,
        sizes,
        cells,
        by_kind,
    })
}

fn pct(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

impl Report {
    /// The cell of a stage and implementation.
    pub fn cell(&self, stage: &str, implementation: &str) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.stage == stage && c.implementation == implementation)
    }

    fn median(&self, stage: &str, implementation: &str) -> f64 {
        self.cell(stage, implementation)
            .map_or(f64::NAN, |c| c.summary.median_ns)
    }

    /// Ingest / bare verification with kinds weighted by their share of real
    /// traffic (`None` if no corpus kind has a known share).
    pub fn traffic_weighted_ingest_ratio(&self) -> Option<f64> {
        let weighted = |f: fn(&KindCost) -> f64| {
            self.by_kind
                .iter()
                .map(|k| k.traffic_share * f(k))
                .sum::<f64>()
        };
        let bare = weighted(|k| k.bare_verify_ns);
        (bare > 0.0).then(|| weighted(|k| k.ingest_ns) / bare)
    }

    /// The targets: (name, measured value, target, met).
    pub fn targets(&self) -> Vec<(&'static str, f64, &'static str, bool)> {
        let s = &self.sizes;
        let raw_vs_json = pct(s.nwb, s.json);
        let raw_vs_np = pct(s.nwb, s.notepack);
        let zstd = pct(s.held_out_nwb_zstd_per_kind, s.held_out_json);
        let decode = self.median("decode_full", NOTEPACK) / self.median("decode_view", NWB);
        let select = self.median("select_kind_pubkey", NWB);
        let ingest = self.median("ingest", NWB) / self.median("bare_verify", SECP);
        vec![
            (
                "raw size, % of notepack",
                raw_vs_np,
                "<= 100",
                raw_vs_np <= 100.0,
            ),
            (
                "raw size, % of compact JSON",
                raw_vs_json,
                "<= 66",
                raw_vs_json <= 66.0,
            ),
            (
                "notepack full decode / nwb decode_view (x)",
                decode,
                ">= 2",
                decode >= 2.0,
            ),
            (
                "selective kind+pubkey (ns/event)",
                select,
                "< 20",
                select < 20.0,
            ),
            (
                "zstd per-kind dicts, held out, % of JSON",
                zstd,
                "<= 45",
                zstd <= 45.0,
            ),
            (
                "ingest / bare verify (x)",
                ingest,
                "<= 1.05",
                ingest <= 1.05,
            ),
        ]
    }

    /// A plain-text report.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut t = String::new();
        let s = &self.sizes;
        let _ = writeln!(t, "host:   {}", self.host.summary_line());
        let _ = writeln!(
            t,
            "corpus: {} events, {} bytes, sha256 {}",
            self.events, self.corpus.bytes, self.corpus.sha256
        );
        let _ = writeln!(t, "\nsizes (all {} events)", self.events);
        for (name, bytes) in [
            ("compact JSON", s.json),
            ("nwb", s.nwb),
            ("notepack", s.notepack),
        ] {
            let _ = writeln!(
                t,
                "  {name:<40} {bytes:>10} B  {:>6.2}% of JSON  {:>7.1} B/event",
                pct(bytes, s.json),
                bytes as f64 / self.events as f64
            );
        }
        let _ = writeln!(
            t,
            "\nheld-out sizes (zstd level {}, trained on {} events, measured on {} others; {} dictionaries per kind+fallback)",
            self.zstd_level, s.train_events, s.held_out_events, s.per_kind_dictionaries
        );
        for (name, bytes) in [
            ("compact JSON", s.held_out_json),
            ("nwb raw", s.held_out_nwb),
            (
                "nwb + zstd, per-kind dictionaries",
                s.held_out_nwb_zstd_per_kind,
            ),
            ("nwb + zstd, one dictionary", s.held_out_nwb_zstd_one_dict),
            ("nwb + zstd, no dictionary", s.held_out_nwb_zstd_no_dict),
            ("JSON + zstd, one dictionary", s.held_out_json_zstd_one_dict),
        ] {
            let _ = writeln!(
                t,
                "  {name:<40} {bytes:>10} B  {:>6.2}% of JSON",
                pct(bytes, s.held_out_json)
            );
        }
        let _ = writeln!(
            t,
            "\nns/event (median of {} passes, ±95% CI of the mean)",
            self.cells.first().map_or(0, |c| c.summary.samples)
        );
        for (stage, what) in STAGES {
            let _ = writeln!(t, "  {stage}: {what}");
            for c in self.cells.iter().filter(|c| c.stage == stage) {
                let _ = writeln!(
                    t,
                    "    {:<20} {:>12.1}  ±{:.1}",
                    c.implementation, c.summary.median_ns, c.summary.ci95_ns
                );
            }
        }
        let _ = writeln!(
            t,
            "\ningest by kind (median ns/event; share = kind's share of real traffic)"
        );
        for k in &self.by_kind {
            let _ = writeln!(
                t,
                "  kind {:<6} {:>4} events  share {:>5.1}%  ingest {:>9.1}  bare {:>9.1}  ratio {:.3}",
                k.kind,
                k.events,
                100.0 * k.traffic_share,
                k.ingest_ns,
                k.bare_verify_ns,
                k.ingest_ns / k.bare_verify_ns
            );
        }
        if let Some(r) = self.traffic_weighted_ingest_ratio() {
            let _ = writeln!(t, "  traffic-weighted ingest / bare verify: {r:.3}");
        }
        let _ = writeln!(t, "\ntargets");
        for (name, value, target, met) in self.targets() {
            let _ = writeln!(
                t,
                "  {:<45} {:>9.2}  target {:<8} {}",
                name,
                value,
                target,
                if met { "met" } else { "MISSED" }
            );
        }
        t
    }
}
