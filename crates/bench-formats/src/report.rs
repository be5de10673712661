//! The markdown report: binostr-like tables with the best value of each
//! column (or, in per-kind tables, each row) in bold, and the targets.

use std::fmt::Write;

use crate::run::{FormatResult, Results, STAGES};

/// The name of our format in the tables.
pub const NWB: &str = "nwb";

fn best_min(values: &[Option<f64>]) -> Option<f64> {
    values
        .iter()
        .flatten()
        .copied()
        .fold(None, |b, v| Some(b.map_or(v, |b: f64| b.min(v))))
}

fn cell(v: Option<f64>, best: Option<f64>, digits: usize) -> String {
    match v {
        None => "n/a".into(),
        Some(v) => {
            let s = format!("{v:.digits$}");
            if best.is_some_and(|b| v <= b) {
                format!("**{s}**")
            } else {
                s
            }
        }
    }
}

fn ci(f: &FormatResult, stage: &str) -> Option<(f64, f64)> {
    f.timings
        .iter()
        .find(|t| t.stage == stage)
        .map(|t| (t.summary.median_ns, t.summary.ci95_ns))
}

/// Best selective-read time of a format (its fastest path), if any.
pub fn best_selective(f: &FormatResult) -> Option<f64> {
    f.selective
        .iter()
        .map(|s| s.summary.median_ns)
        .fold(None, |b, v| Some(b.map_or(v, |b: f64| b.min(v))))
}

/// One target row: metric, nwb's value, the best value and its format, nwb's rank, met.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Target {
    /// What is compared.
    pub metric: String,
    /// The target.
    pub goal: &'static str,
    /// nwb's value.
    pub nwb: f64,
    /// Best value of any format.
    pub best: f64,
    /// Format with the best value.
    pub best_format: String,
    /// nwb's rank (1 = first).
    pub rank: usize,
    /// nwb / best.
    pub ratio: f64,
    /// Whether the target is met.
    pub met: bool,
}

/// The targets, evaluated on `r`.
pub fn targets(r: &Results) -> Vec<Target> {
    type Pick = fn(&FormatResult) -> Option<f64>;
    let rows: [(&str, &'static str, Pick); 10] = [
        ("raw size (B/event)", "first", |f| Some(f.sizes.raw_mean)),
        (
            "held-out per-event zstd, per-kind dictionaries (B/event)",
            "first",
            |f| Some(f.sizes.dict_per_kind_mean),
        ),
        (
            "held-out per-event zstd, one dictionary (B/event)",
            "first",
            |f| Some(f.sizes.dict_mean),
        ),
        ("validated ingest (ns/event)", "first", |f| {
            f.median("validated")
        }),
        ("encode (ns/event)", "within 5% of first", |f| {
            f.median("encode")
        }),
        ("decode to owned (ns/event)", "within 5% of first", |f| {
            f.median("decode")
        }),
        ("decode + id (ns/event)", "within 5% of first", |f| {
            f.median("decode_id")
        }),
        (
            "selective kind+pubkey (ns/event)",
            "within 5% of first",
            best_selective,
        ),
        ("batch encode (ns/event)", "within 5% of first", |f| {
            f.median("batch_encode")
        }),
        ("batch decode (ns/event)", "within 5% of first", |f| {
            f.median("batch_decode")
        }),
    ];
    let mut out = Vec::new();
    for (metric, goal, pick) in rows {
        let mut values: Vec<(f64, &str)> = r
            .formats
            .iter()
            .filter_map(|f| pick(f).map(|v| (v, f.name)))
            .collect();
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(&(nwb, _)) = values.iter().find(|(_, n)| *n == NWB) else {
            continue;
        };
        let (best, best_format) = values[0];
        let rank = 1 + values.iter().filter(|(v, _)| *v < nwb).count();
        let ratio = nwb / best;
        let met = if goal == "first" {
            rank == 1
        } else {
            ratio <= 1.05
        };
        out.push(Target {
            metric: metric.into(),
            goal,
            nwb,
            best,
            best_format: best_format.into(),
            rank,
            ratio,
            met,
        });
    }
    out
}

/// Renders the report.
pub fn markdown(r: &Results) -> String {
    let mut t = String::new();
    let json_raw = r.formats.first().map_or(1.0, |f| f.sizes.raw_mean.max(1.0));
    let _ = writeln!(t, "# Format benchmark: `nostrwire bench formats`\n");
    let _ = writeln!(
        t,
        "Host: {}.  \nFormat crates: {}.  \nCorpus: {} events, {} bytes, SHA-256 `{}`.  \n\
         Split (seed `{:#x}`): {} training events (dictionaries), {} held out (dictionary sizes).  \n\
         zstd level {} everywhere; dictionaries at most {} B.  \n\
         Timings: ns/event, median of {} interleaved samples (± half-width of the 95% CI of the mean){}.  \n\
         Run time {:.0} s. Methodology: `docs/bench-methodology.md` (Formats).\n",
        r.host.summary_line(),
        r.format_crates
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        r.events,
        r.corpus.bytes,
        r.corpus.sha256,
        r.options.seed,
        r.train_events,
        r.held_out_events,
        r.options.level,
        r.options.dict_bytes,
        r.options.samples,
        if r.options.quick { ", **--quick run**" } else { "" },
        r.seconds,
    );

    // Sizes.
    let _ = writeln!(t, "## Size (bytes; best in bold)\n");
    let _ = writeln!(
        t,
        "| Format | Bytes/event | % of JSON | Zstd stream | Gzip stream | Zstd/event | Dict/event | Per-kind dict/event | Weighted bytes | Weighted dict |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    type SizePick = fn(&FormatResult) -> f64;
    let cols: [(SizePick, usize); 9] = [
        (|f| f.sizes.raw_mean, 1),
        (|f| f.sizes.raw_mean, 1),
        (|f| f.sizes.framed_zstd_stream as f64, 0),
        (|f| f.sizes.framed_gzip_stream as f64, 0),
        (|f| f.sizes.zstd_mean, 1),
        (|f| f.sizes.dict_mean, 1),
        (|f| f.sizes.dict_per_kind_mean, 1),
        (|f| f.weighted.raw_mean, 1),
        (|f| f.weighted.dict_per_kind_mean, 1),
    ];
    let bests: Vec<Option<f64>> = cols
        .iter()
        .map(|(pick, _)| best_min(&r.formats.iter().map(|f| Some(pick(f))).collect::<Vec<_>>()))
        .collect();
    for f in &r.formats {
        let mut row = format!("| {} ", f.name);
        for (i, (pick, digits)) in cols.iter().enumerate() {
            let v = pick(f);
            let s = if i == 1 {
                cell(
                    Some(100.0 * v / json_raw),
                    bests[1].map(|b| 100.0 * b / json_raw),
                    1,
                )
            } else {
                cell(Some(v), bests[i], *digits)
            };
            let _ = write!(row, "| {s} ");
        }
        let _ = writeln!(t, "{row}|");
    }
    let _ = writeln!(
        t,
        "\nZstd/Gzip stream: all {} records behind 4-byte big-endian lengths, compressed as one \
         stream. Zstd/event and the dictionary columns: each held-out record compressed alone \
         (magicless frame, no checksum, no dictionary id, no content size, for every format), \
         mean over the held-out split; dictionaries trained on the training split only. \
         Weighted: per-kind means weighted by the network kind mix over the kinds in the corpus.\n",
        r.events
    );

    // Speed.
    let _ = writeln!(t, "## Speed (ns/event; best in bold)\n");
    let mut header = String::from("| Format |");
    let mut rule = String::from("|---|");
    for (stage, _) in STAGES {
        let _ = write!(header, " {stage} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(t, "{header} weighted validated |\n{rule}---:|");
    let stage_bests: Vec<Option<f64>> = STAGES
        .iter()
        .map(|(s, _)| best_min(&r.formats.iter().map(|f| f.median(s)).collect::<Vec<_>>()))
        .collect();
    let wv_best = best_min(
        &r.formats
            .iter()
            .map(|f| Some(f.weighted.validated_ns))
            .collect::<Vec<_>>(),
    );
    for f in &r.formats {
        let mut row = format!("| {} ", f.name);
        for (i, (stage, _)) in STAGES.iter().enumerate() {
            let s = match ci(f, stage) {
                Some((m, c)) => format!("{} ±{c:.0}", cell(Some(m), stage_bests[i], 0)),
                None => "n/a".into(),
            };
            let _ = write!(row, "| {s} ");
        }
        let _ = writeln!(
            t,
            "{row}| {} |",
            cell(Some(f.weighted.validated_ns), wv_best, 0)
        );
    }
    let _ = writeln!(t);
    for (stage, what) in STAGES {
        let _ = writeln!(t, "- `{stage}`: {what}");
    }
    let _ = writeln!(t);

    // Selective.
    let _ = writeln!(t, "## Selective read of kind + pubkey (zero-copy paths)\n");
    let _ = writeln!(t, "| Format | Path | ns/event | What it verifies |");
    let _ = writeln!(t, "|---|---|---:|---|");
    let sel_best = best_min(
        &r.formats
            .iter()
            .flat_map(|f| f.selective.iter().map(|s| Some(s.summary.median_ns)))
            .collect::<Vec<_>>(),
    );
    for f in &r.formats {
        for s in &f.selective {
            let _ = writeln!(
                t,
                "| {} | {} | {} ±{:.1} | {} |",
                f.name,
                s.path.path,
                cell(Some(s.summary.median_ns), sel_best, 1),
                s.summary.ci95_ns,
                s.path.contract
            );
        }
    }
    let without: Vec<&str> = r
        .formats
        .iter()
        .filter(|f| f.selective.is_empty())
        .map(|f| f.name)
        .collect();
    let _ = writeln!(
        t,
        "\nNo selective path (not zero-copy; a read means a full decode): {}.\n",
        without.join(", ")
    );

    // Allocations.
    if let Some(allocs) = &r.allocs {
        let _ = writeln!(t, "## Allocations (counted in a separate process)\n");
        let _ = writeln!(
            t,
            "| Format | Encode allocs | Encode bytes | Decode allocs | Decode bytes |"
        );
        let _ = writeln!(t, "|---|---:|---:|---:|---:|");
        type AllocPick = fn(&crate::run::Allocs) -> f64;
        let cols: [AllocPick; 4] = [
            |a| a.encode_allocs,
            |a| a.encode_bytes,
            |a| a.decode_allocs,
            |a| a.decode_bytes,
        ];
        let bests: Vec<Option<f64>> = cols
            .iter()
            .map(|p| best_min(&allocs.iter().map(|a| Some(p(a))).collect::<Vec<_>>()))
            .collect();
        for a in allocs {
            let cells: Vec<String> = cols
                .iter()
                .zip(&bests)
                .map(|(p, b)| cell(Some(p(a)), *b, 1))
                .collect();
            let _ = writeln!(t, "| {} | {} |", a.format, cells.join(" | "));
        }
        let _ = writeln!(
            t,
            "\nPer event; encode into a fresh `Vec`, decode to the owned model.\n"
        );
    }

    // Per kind.
    let names: Vec<&str> = r.formats.iter().map(|f| f.name).collect();
    type KindPick = fn(&crate::run::KindCell) -> f64;
    let tables: [(&str, KindPick, usize); 3] = [
        ("raw bytes/event", |c| c.raw_mean, 0),
        (
            "held-out bytes/event, per-kind dictionaries",
            |c| c.dict_per_kind_mean,
            0,
        ),
        ("validated ingest, ns/event (median)", |c| c.validated_ns, 0),
    ];
    for (title, pick, digits) in tables {
        let _ = writeln!(t, "## Per kind: {title} (best in each row in bold)\n");
        let _ = writeln!(t, "| Kind | Events | Weight | {} |", names.join(" | "));
        let _ = writeln!(t, "|---:|---:|---:|{}", "---:|".repeat(names.len()));
        for k in &r.kinds {
            if k.cells.is_empty() {
                let _ = writeln!(
                    t,
                    "| {} | 0 | | absent from the corpus{} |",
                    k.kind,
                    " |".repeat(names.len() - 1)
                );
                continue;
            }
            let best = best_min(&k.cells.iter().map(|c| Some(pick(c))).collect::<Vec<_>>());
            let cells: Vec<String> = k
                .cells
                .iter()
                .map(|c| cell(Some(pick(c)), best, digits))
                .collect();
            let _ = writeln!(
                t,
                "| {} | {} | {:.1}% | {} |",
                k.kind,
                k.events,
                100.0 * k.weight,
                cells.join(" | ")
            );
        }
        let _ = writeln!(t);
    }

    // Dictionaries.
    let _ = writeln!(t, "## Dictionaries (trained once, reused)\n");
    let _ = writeln!(
        t,
        "| Format | Dictionary bytes | Per-kind dictionaries | Prepare for compression (µs) | Prepare for decompression (µs) |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|");
    for f in &r.formats {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.0} | {:.0} |",
            f.name,
            f.sizes.dict_size,
            f.sizes.per_kind_dicts,
            f.sizes.dict_encoder_load_us,
            f.sizes.dict_decoder_load_us
        );
    }
    let _ = writeln!(
        t,
        "\nLoading is paid once per process, never per record; it is not in any per-event figure.\n"
    );

    // Targets.
    let _ = writeln!(t, "## Targets of issue 5 (nwb)\n");
    let _ = writeln!(
        t,
        "| Metric | Goal | nwb | Best | Best format | nwb rank | nwb / best | Met |"
    );
    let _ = writeln!(t, "|---|---|---:|---:|---|---:|---:|---|");
    for g in targets(r) {
        let _ = writeln!(
            t,
            "| {} | {} | {:.1} | {:.1} | {} | {} | {:.3} | {} |",
            g.metric,
            g.goal,
            g.nwb,
            g.best,
            g.best_format,
            g.rank,
            g.ratio,
            if g.met { "yes" } else { "**no**" }
        );
    }

    // Profiles.
    let _ = writeln!(t, "\n## Profiles\n");
    let _ = writeln!(t, "| Format | Crate | Layout |");
    let _ = writeln!(t, "|---|---|---|");
    for f in &r.formats {
        let _ = writeln!(t, "| {} | {} | {} |", f.name, f.crate_name, f.profile);
    }
    let _ = writeln!(
        t,
        "\nAll formats carry id, pubkey and sig as bytes where the format has bytes. Tag values \
         that are lowercase hex of even length and at least 8 characters are stored as bytes \
         (binostr's rule); nwb and notepack apply their own rule (any even length). Every format \
         decoded every event back to the same id before anything was timed."
    );
    t
}
