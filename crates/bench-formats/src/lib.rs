//! `nostrwire bench formats`: nwb against JSON, CBOR, MessagePack, Protobuf,
//! FlatBuffers, Cap'n Proto, notepack, bincode, postcard, Avro and BSON on a
//! real corpus, each with the same semantic rules.
//!
//! Competitor crates are compiled only here, and the CLI links this crate only
//! with its `bench-formats` feature.

pub mod allocs;
pub mod charts;
pub mod check;
pub mod compress;
pub mod corpus;
pub mod formats;
pub mod model;
pub mod report;
pub mod run;

/// Resolved versions of the format crates, from Cargo.lock at build time.
pub fn versions() -> Vec<(String, String)> {
    env!("NOSTRWIRE_FORMAT_CRATES")
        .split(',')
        .filter_map(|s| s.split_once('='))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Writes `results.json`, `report.md`, `size-vs-decode.svg` and
/// `per-kind-sizes.svg` into `dir` (created if missing); returns the paths.
pub fn write_outputs(
    results: &run::Results,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut value = serde_json::to_value(results)?;
    value["targets"] = serde_json::to_value(report::targets(results))?;
    let paths = [
        dir.join("results.json"),
        dir.join("report.md"),
        dir.join("size-vs-decode.svg"),
        dir.join("per-kind-sizes.svg"),
    ];
    std::fs::write(&paths[0], serde_json::to_string_pretty(&value)? + "\n")?;
    std::fs::write(&paths[1], report::markdown(results))?;
    charts::size_vs_decode(results, &paths[2])?;
    charts::per_kind_sizes(results, &paths[3])?;
    Ok(paths.to_vec())
}
