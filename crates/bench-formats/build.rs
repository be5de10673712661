//! Records the resolved versions of the format crates for reports.

fn main() {
    let lock_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock_path}");
    let lock = std::fs::read_to_string(lock_path).unwrap_or_default();
    let wanted = [
        "apache-avro",
        "bincode",
        "bson",
        "capnp",
        "ciborium",
        "flatbuffers",
        "flate2",
        "notepack",
        "postcard",
        "prost",
        "rmp-serde",
        "serde_json",
        "zstd",
        "zstd-sys",
    ];
    let mut found = Vec::new();
    let mut name = "";
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = \"") {
            name = n.trim_end_matches('"');
        } else if let Some(v) = line.strip_prefix("version = \"") {
            if wanted.contains(&name) {
                found.push(format!("{name}={}", v.trim_end_matches('"')));
            }
        }
    }
    found.sort();
    found.dedup();
    println!(
        "cargo:rustc-env=NOSTRWIRE_FORMAT_CRATES={}",
        found.join(",")
    );
}
