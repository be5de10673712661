//! One benchmark run: correctness checks, sizes, timings, per-kind figures.

use std::collections::BTreeMap;

use nostrwire_bench::host::{Fingerprint, Host};
use nostrwire_bench::stats::{time_pass, Summary};
use nostrwire_event::Event;

use crate::compress::{self, Dict, Level, PerEvent};
use crate::formats::{self, Format, Selective};
use crate::{check, corpus};

/// Kinds every report lists, present in the corpus or not.
pub const REPORT_KINDS: [u16; 10] = [0, 1, 3, 5, 6, 7, 1059, 9735, 10002, 30023];

/// binostr's corpus seed ("BINOSTR\x01"), reused for the split.
pub const DEFAULT_SEED: u64 = 0x4249_4e4f_5354_5201;

/// Timed stages in report order: (key, description).
pub const STAGES: [(&str, &str); 6] = [
    ("encode", "owned `Event` -> bytes (hex compaction included)"),
    ("decode", "bytes -> owned model (the format's own checks)"),
    (
        "decode_id",
        "decode + recompute the id (from a borrowed view where the API has one)",
    ),
    ("validated", "decode + id + BIP-340 signature: full ingest"),
    ("batch_encode", "all events -> one native batch (per event)"),
    (
        "batch_decode",
        "one native batch -> owned models (per event)",
    ),
];

/// Options of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Options {
    /// Timed samples per measurement (one pass over the corpus each).
    pub samples: usize,
    /// Passes per sample for selective reads (they are a few ns each).
    pub select_repeat: usize,
    /// zstd level for every compressed size.
    pub level: Level,
    /// Largest trained dictionary, bytes.
    pub dict_bytes: usize,
    /// Fewest training events of a kind for a per-kind dictionary.
    pub min_kind_samples: usize,
    /// Seed of the train / held-out split.
    pub seed: u64,
    /// Whether this is a `--quick` run.
    pub quick: bool,
}

impl Options {
    /// The full run.
    pub fn full() -> Options {
        Options {
            samples: 15,
            select_repeat: 32,
            level: 3,
            dict_bytes: 64 * 1024,
            min_kind_samples: 16,
            seed: DEFAULT_SEED,
            quick: false,
        }
    }

    /// `--quick`: fewer samples, same sizes.
    pub fn quick() -> Options {
        Options {
            samples: 3,
            select_repeat: 8,
            quick: true,
            ..Options::full()
        }
    }
}

/// Sizes of one format, bytes.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Sizes {
    /// Mean record size over all events.
    pub raw_mean: f64,
    /// Sum of record sizes over all events.
    pub raw_total: usize,
    /// All records with 4-byte lengths, zstd (standard frame) as one stream.
    pub framed_zstd_stream: usize,
    /// The same stream, gzip level 6.
    pub framed_gzip_stream: usize,
    /// Native batch of all events, uncompressed.
    pub batch_bytes: usize,
    /// Mean raw record size over the held-out events.
    pub held_out_raw_mean: f64,
    /// Mean per-event zstd size, no dictionary, held-out events.
    pub zstd_mean: f64,
    /// Mean per-event zstd size with one dictionary trained on the training split.
    pub dict_mean: f64,
    /// Mean per-event zstd size with per-kind dictionaries (fallback: the one dictionary).
    pub dict_per_kind_mean: f64,
    /// Size of the one dictionary.
    pub dict_size: usize,
    /// Number of per-kind dictionaries trained.
    pub per_kind_dicts: usize,
    /// µs to prepare the one dictionary for compression (CDict), once.
    pub dict_encoder_load_us: f64,
    /// µs to prepare it for decompression (DDict), once.
    pub dict_decoder_load_us: f64,
}

/// A timed stage of one format.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Timing {
    /// Stage key (see [`STAGES`]) or `select: <path>`.
    pub stage: String,
    /// ns/event.
    pub summary: Summary,
}

/// Selective read result of one path.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SelectiveResult {
    /// Path and contract.
    pub path: Selective,
    /// ns/event.
    pub summary: Summary,
}

/// One format's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FormatResult {
    /// Table name.
    pub name: &'static str,
    /// Crate used.
    pub crate_name: &'static str,
    /// Layout used.
    pub profile: &'static str,
    /// Sizes.
    pub sizes: Sizes,
    /// Timings of [`STAGES`].
    pub timings: Vec<Timing>,
    /// Selective reads (zero-copy formats only).
    pub selective: Vec<SelectiveResult>,
    /// Network-weighted figures (kind mix weights over the corpus kinds).
    pub weighted: Weighted,
}

/// Figures averaged with the network kind mix.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Weighted {
    /// Raw bytes/event.
    pub raw_mean: f64,
    /// Held-out bytes/event with per-kind dictionaries.
    pub dict_per_kind_mean: f64,
    /// Decode to owned, ns/event.
    pub decode_ns: f64,
    /// Validated ingest, ns/event.
    pub validated_ns: f64,
}

/// One kind's figures for one format.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindCell {
    /// Format name.
    pub format: &'static str,
    /// Mean raw bytes/event of this kind.
    pub raw_mean: f64,
    /// Mean held-out bytes/event with the per-kind dictionaries.
    pub dict_per_kind_mean: f64,
    /// Median decode-to-owned ns/event.
    pub decode_ns: f64,
    /// Median validated-ingest ns/event.
    pub validated_ns: f64,
}

/// One kind's row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KindRow {
    /// Kind.
    pub kind: u16,
    /// Events of this kind in the corpus (0: absent).
    pub events: usize,
    /// Held-out events of this kind.
    pub held_out: usize,
    /// Share in the network kind mix, normalized over the corpus kinds.
    pub weight: f64,
    /// One cell per format (empty when the kind is absent).
    pub cells: Vec<KindCell>,
}

/// Allocation counts of one format (from a separate process).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Allocs {
    /// Format name.
    pub format: String,
    /// Allocations per encode.
    pub encode_allocs: f64,
    /// Bytes allocated per encode.
    pub encode_bytes: f64,
    /// Allocations per decode to owned.
    pub decode_allocs: f64,
    /// Bytes allocated per decode to owned.
    pub decode_bytes: f64,
}

/// Everything a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Results {
    /// Machine, toolchain, crate versions.
    pub host: Host,
    /// Versions of the format crates (from Cargo.lock at build time).
    pub format_crates: Vec<(String, String)>,
    /// The corpus file.
    pub corpus: Fingerprint,
    /// Events in the corpus.
    pub events: usize,
    /// Options of the run.
    pub options: Options,
    /// Training split size.
    pub train_events: usize,
    /// Held-out split size.
    pub held_out_events: usize,
    /// Kind mix used for weighting (kind, share as given).
    pub kind_mix: Vec<(u16, f64)>,
    /// Per format.
    pub formats: Vec<FormatResult>,
    /// Per kind.
    pub kinds: Vec<KindRow>,
    /// Allocation counts, when measured.
    pub allocs: Option<Vec<Allocs>>,
    /// Wall time of the run, seconds.
    pub seconds: f64,
}

/// Progress callback: (phase, done, total).
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize);

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether an event is in the training split: a seeded hash of its id.
pub fn is_train(event: &Event, seed: u64) -> bool {
    let id = event.id.as_bytes();
    let head = u64::from_le_bytes(id[..8].try_into().expect("8 bytes"));
    splitmix(seed ^ head) & 1 == 0
}

fn mean(total: usize, n: usize) -> f64 {
    total as f64 / n.max(1) as f64
}

fn sizes_of(
    records: &[Vec<u8>],
    events: &[Event],
    train: &[usize],
    test: &[usize],
    batch: usize,
    options: &Options,
    by_kind: &mut BTreeMap<u16, (usize, usize)>,
) -> anyhow::Result<Sizes> {
    let all: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let stream = compress::framed(&all);
    let train_records: Vec<&[u8]> = train.iter().map(|&i| records[i].as_slice()).collect();
    let dict = Dict::train(&train_records, options.dict_bytes, options.level)?;
    let mut kind_dicts: BTreeMap<u16, Dict> = BTreeMap::new();
    let mut kinds: Vec<u16> = train.iter().map(|&i| events[i].kind.as_u16()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for kind in kinds {
        let samples: Vec<&[u8]> = train
            .iter()
            .filter(|&&i| events[i].kind.as_u16() == kind)
            .map(|&i| records[i].as_slice())
            .collect();
        if samples.len() >= options.min_kind_samples {
            // Too little data for zstd's trainer falls back to the one dictionary.
            if let Ok(d) = Dict::train(&samples, options.dict_bytes, options.level) {
                kind_dicts.insert(kind, d);
            }
        }
    }
    let mut plain = PerEvent::new(None, options.level)?;
    let mut one = PerEvent::new(Some(&dict), options.level)?;
    let mut per_kind: BTreeMap<u16, PerEvent<'_>> = kind_dicts
        .iter()
        .map(|(&k, d)| PerEvent::new(Some(d), options.level).map(|c| (k, c)))
        .collect::<anyhow::Result<_>>()?;
    let (mut z, mut zd, mut zk, mut raw) = (0, 0, 0, 0);
    for &i in test {
        let r = &records[i];
        raw += r.len();
        z += plain.size(r)?;
        zd += one.size(r)?;
        let kind = events[i].kind.as_u16();
        let k = match per_kind.get_mut(&kind) {
            Some(c) => c.size(r)?,
            None => one.size(r)?,
        };
        zk += k;
        let entry = by_kind.entry(kind).or_default();
        entry.0 += k;
        entry.1 += 1;
    }
    let n = test.len();
    Ok(Sizes {
        raw_mean: mean(records.iter().map(Vec::len).sum(), records.len()),
        raw_total: records.iter().map(Vec::len).sum(),
        framed_zstd_stream: compress::zstd_stream(&stream, options.level)?,
        framed_gzip_stream: compress::gzip_stream(&stream)?,
        batch_bytes: batch,
        held_out_raw_mean: mean(raw, n),
        zstd_mean: mean(z, n),
        dict_mean: mean(zd, n),
        dict_per_kind_mean: mean(zk, n),
        dict_size: dict.raw.len(),
        per_kind_dicts: kind_dicts.len(),
        dict_encoder_load_us: dict.encoder_load_us,
        dict_decoder_load_us: dict.decoder_load_us,
    })
}

/// Runs the benchmark. `kind_mix` weights the per-kind figures.
pub fn run(
    corpus_bytes: &[u8],
    kind_mix: &[(u16, f64)],
    options: &Options,
    progress: Progress<'_>,
) -> anyhow::Result<Results> {
    let started = std::time::Instant::now();
    let events = corpus::parse(corpus_bytes)?;
    let n = events.len();
    let formats = formats::all();

    // Correctness first: any failure ends the run.
    let mut records: Vec<Vec<Vec<u8>>> = Vec::new();
    for (i, f) in formats.iter().enumerate() {
        progress("round trip + validation", i, formats.len());
        let r = check::round_trip(f.as_ref(), &events)?;
        check::validate_all(f.as_ref(), &r)?;
        records.push(r);
    }

    let train: Vec<usize> = (0..n)
        .filter(|&i| is_train(&events[i], options.seed))
        .collect();
    let test: Vec<usize> = (0..n)
        .filter(|&i| !is_train(&events[i], options.seed))
        .collect();
    anyhow::ensure!(
        !train.is_empty() && !test.is_empty(),
        "corpus too small to split"
    );

    let batches: Vec<Vec<u8>> = formats
        .iter()
        .map(|f| {
            let mut out = Vec::new();
            f.encode_batch(&events, &mut out);
            out
        })
        .collect();

    let mut sizes = Vec::new();
    let mut kind_dict_sizes: Vec<BTreeMap<u16, (usize, usize)>> = Vec::new();
    for (i, f) in formats.iter().enumerate() {
        progress("sizes and dictionaries", i, formats.len());
        let mut by_kind = BTreeMap::new();
        let s = sizes_of(
            &records[i],
            &events,
            &train,
            &test,
            batches[i].len(),
            options,
            &mut by_kind,
        )
        .map_err(|e| anyhow::anyhow!("{}: sizes: {e:#}", f.name()))?;
        sizes.push(s);
        kind_dict_sizes.push(by_kind);
    }

    // Timings: warm up once, then interleave every (format, stage) per sample.
    type Pass<'a> = (usize, String, usize, Box<dyn Fn() + 'a>);
    let mut passes: Vec<Pass<'_>> = Vec::new();
    for (fi, f) in formats.iter().enumerate() {
        let f: &dyn Format = f.as_ref();
        let recs = &records[fi];
        let evs = &events;
        let batch = &batches[fi];
        passes.push((fi, "encode".into(), n, Box::new(move || f.pass_encode(evs))));
        passes.push((
            fi,
            "decode".into(),
            n,
            Box::new(move || f.pass_decode(recs)),
        ));
        passes.push((
            fi,
            "decode_id".into(),
            n,
            Box::new(move || f.pass_decode_id(recs)),
        ));
        passes.push((
            fi,
            "validated".into(),
            n,
            Box::new(move || f.pass_validate(recs)),
        ));
        passes.push((
            fi,
            "batch_encode".into(),
            n,
            Box::new(move || {
                let mut out = Vec::new();
                f.encode_batch(evs, &mut out);
                std::hint::black_box(out);
            }),
        ));
        passes.push((
            fi,
            "batch_decode".into(),
            n,
            Box::new(move || {
                std::hint::black_box(f.decode_batch(batch).expect("checked"));
            }),
        ));
        for (p, s) in f.selective().iter().enumerate() {
            let repeat = options.select_repeat;
            passes.push((
                fi,
                format!("select: {}", s.path),
                n * repeat,
                Box::new(move || {
                    for _ in 0..repeat {
                        f.pass_select(p, recs);
                    }
                }),
            ));
        }
    }
    for (i, (_, _, _, pass)) in passes.iter().enumerate() {
        progress("warm-up", i, passes.len());
        pass();
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(options.samples); passes.len()];
    for sample in 0..options.samples {
        progress("timing samples", sample, options.samples);
        for (i, (_, _, items, pass)) in passes.iter().enumerate() {
            times[i].push(time_pass(*items, pass));
        }
    }

    // Per kind: decode and validated ingest, interleaved across formats.
    let mut corpus_kinds: Vec<u16> = events.iter().map(|e| e.kind.as_u16()).collect();
    corpus_kinds.sort_unstable();
    corpus_kinds.dedup();
    let mut kind_list: Vec<u16> = REPORT_KINDS.to_vec();
    kind_list.extend(corpus_kinds.iter().filter(|k| !REPORT_KINDS.contains(k)));
    let mix_total: f64 = kind_mix
        .iter()
        .filter(|(k, _)| corpus_kinds.contains(k))
        .map(|(_, w)| w)
        .sum();
    let weight_of = |kind: u16| -> f64 {
        let w = kind_mix
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0.0, |(_, w)| *w);
        if mix_total > 0.0 && corpus_kinds.contains(&kind) {
            w / mix_total
        } else {
            0.0
        }
    };
    let mut kinds = Vec::new();
    for (ki, &kind) in kind_list.iter().enumerate() {
        progress("per kind", ki, kind_list.len());
        let members: Vec<usize> = (0..n)
            .filter(|&i| events[i].kind.as_u16() == kind)
            .collect();
        let held_out = test
            .iter()
            .filter(|&&i| events[i].kind.as_u16() == kind)
            .count();
        let mut cells = Vec::new();
        if !members.is_empty() {
            let mut dec: Vec<Vec<f64>> = vec![Vec::new(); formats.len()];
            let mut val: Vec<Vec<f64>> = vec![Vec::new(); formats.len()];
            let subsets: Vec<Vec<Vec<u8>>> = records
                .iter()
                .map(|r| members.iter().map(|&i| r[i].clone()).collect())
                .collect();
            for _ in 0..options.samples {
                for (fi, f) in formats.iter().enumerate() {
                    dec[fi].push(time_pass(members.len(), || f.pass_decode(&subsets[fi])));
                    val[fi].push(time_pass(members.len(), || f.pass_validate(&subsets[fi])));
                }
            }
            for (fi, f) in formats.iter().enumerate() {
                let raw: usize = members.iter().map(|&i| records[fi][i].len()).sum();
                let (dict, count) = kind_dict_sizes[fi].get(&kind).copied().unwrap_or((0, 0));
                cells.push(KindCell {
                    format: f.name(),
                    raw_mean: mean(raw, members.len()),
                    dict_per_kind_mean: mean(dict, count),
                    decode_ns: Summary::from_samples(&dec[fi]).median_ns,
                    validated_ns: Summary::from_samples(&val[fi]).median_ns,
                });
            }
        }
        kinds.push(KindRow {
            kind,
            events: members.len(),
            held_out,
            weight: weight_of(kind),
            cells,
        });
    }
    progress("per kind", kind_list.len(), kind_list.len());

    let mut results_formats = Vec::new();
    for (fi, f) in formats.iter().enumerate() {
        let mut timings = Vec::new();
        let mut selective = Vec::new();
        for (pi, (pf, stage, _, _)) in passes.iter().enumerate() {
            if *pf != fi {
                continue;
            }
            let summary = Summary::from_samples(&times[pi]);
            match stage.strip_prefix("select: ") {
                Some(path) => selective.push(SelectiveResult {
                    path: *f
                        .selective()
                        .iter()
                        .find(|s| s.path == path)
                        .expect("registered path"),
                    summary,
                }),
                None => timings.push(Timing {
                    stage: stage.clone(),
                    summary,
                }),
            }
        }
        let weighted = |pick: fn(&KindCell) -> f64| -> f64 {
            kinds
                .iter()
                .filter(|k| !k.cells.is_empty())
                .map(|k| k.weight * pick(&k.cells[fi]))
                .sum()
        };
        results_formats.push(FormatResult {
            name: f.name(),
            crate_name: f.crate_name(),
            profile: f.profile(),
            sizes: sizes[fi].clone(),
            timings,
            selective,
            weighted: Weighted {
                raw_mean: weighted(|c| c.raw_mean),
                dict_per_kind_mean: weighted(|c| c.dict_per_kind_mean),
                decode_ns: weighted(|c| c.decode_ns),
                validated_ns: weighted(|c| c.validated_ns),
            },
        });
    }

    Ok(Results {
        host: Host::detect(),
        format_crates: crate::versions(),
        corpus: Fingerprint::of(corpus_bytes),
        events: n,
        options: options.clone(),
        train_events: train.len(),
        held_out_events: test.len(),
        kind_mix: kind_mix.to_vec(),
        formats: results_formats,
        kinds,
        allocs: None,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl FormatResult {
    /// Median ns/event of a stage.
    pub fn median(&self, stage: &str) -> Option<f64> {
        self.timings
            .iter()
            .find(|t| t.stage == stage)
            .map(|t| t.summary.median_ns)
    }
}
