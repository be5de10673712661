//! A `--quick`-like run of the whole pipeline on a small sample writes every
//! output file, with every format, kind and target present.

use nostrwire_bench_formats::{allocs, corpus, formats, run, write_outputs};

#[test]
fn quick_run_on_a_sample_writes_the_report() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/real-events.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    // Every 12th event: all ten kinds, still enough for per-kind training to fall back.
    let sample: String = text.lines().step_by(12).map(|l| format!("{l}\n")).collect();
    let mix = corpus::parse_kind_mix("1\t42.24\n7\t11.91\n4\t8.60\n").unwrap();
    let options = run::Options {
        samples: 2,
        select_repeat: 1,
        ..run::Options::quick()
    };
    let mut calls = 0;
    let mut results =
        run::run(sample.as_bytes(), &mix, &options, &mut |_, _, _| calls += 1).unwrap();
    assert!(calls > 0);
    let events = corpus::parse(sample.as_bytes()).unwrap();
    results.allocs = Some(allocs::count(&events).unwrap());
    assert_eq!(results.formats.len(), formats::all().len());
    assert_eq!(results.train_events + results.held_out_events, events.len());

    let dir = std::env::temp_dir().join(format!("nostrwire-formats-smoke-{}", std::process::id()));
    let paths = write_outputs(&results, &dir).unwrap();
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for f in formats::all() {
        assert!(report.contains(f.name()), "{} missing", f.name());
    }
    for kind in run::REPORT_KINDS {
        assert!(
            report.contains(&format!("| {kind} |")),
            "kind {kind} missing"
        );
    }
    assert!(report.contains("## Targets of issue 5"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert!(json["targets"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(json["host"]["rustc"].is_string());
    for p in &paths {
        assert!(std::fs::metadata(p).unwrap().len() > 0, "{}", p.display());
    }
    let svg = std::fs::read_to_string(dir.join("size-vs-decode.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("nwb"));
    std::fs::remove_dir_all(&dir).unwrap();
}
