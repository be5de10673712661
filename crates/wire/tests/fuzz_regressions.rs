//! Inputs the fuzz targets once failed on, kept in `fuzz/regressions/<target>/`
//! and replayed through each target's property on every `cargo test`.

use std::path::Path;

#[path = "support/roundtrip.rs"]
mod roundtrip;

/// Every file of `fuzz/regressions/<target>/`, with its name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn roundtrip_regressions_hold() {
    let inputs = inputs("roundtrip");
    assert!(!inputs.is_empty());
    for (name, data) in inputs {
        eprintln!("roundtrip/{name}");
        roundtrip::check(&data);
    }
}

#[test]
fn decode_no_panic_regressions_hold() {
    use nostrwire_wire::compress::DictSet;
    use nostrwire_wire::{EventView, Limits};
    let inputs = inputs("decode_no_panic");
    assert!(!inputs.is_empty());
    for (name, data) in inputs {
        eprintln!("decode_no_panic/{name}");
        let _ = EventView::decode_with(&data, &Limits::DEFAULT);
        // A set file naming a level past MAX_SET_LEVEL (here 24) once
        // prepared dictionaries of hundreds of megabytes each.
        if name.starts_with("dict-set-") {
            assert!(DictSet::from_bytes(&data).is_err(), "{name}");
        } else {
            let _ = DictSet::from_bytes(&data);
        }
    }
}
