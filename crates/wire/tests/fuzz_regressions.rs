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
