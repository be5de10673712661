//! Records the compiler version and competitor crate versions for reports.

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NOSTRWIRE_RUSTC_VERSION={version}");

    // Versions actually resolved, read from the workspace lock file.
    let lock_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock_path}");
    let lock = std::fs::read_to_string(lock_path).unwrap_or_default();
    let wanted = ["nostr", "secp256k1", "serde_json", "sha2"];
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
    println!("cargo:rustc-env=NOSTRWIRE_BENCH_CRATES={}", found.join(","));
}
