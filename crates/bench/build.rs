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

    // Versions actually resolved, read from the workspace lock file. When the
    // lock holds several versions of a crate, this crate's own dependency
    // entry ("name version") says which one is measured.
    let lock_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock_path}");
    let lock = std::fs::read_to_string(lock_path).unwrap_or_default();
    let wanted = ["nostr", "secp256k1", "serde_json", "sha2"];
    let mut versions: Vec<(String, String)> = Vec::new();
    let mut own_deps: Vec<String> = Vec::new();
    for package in lock.split("[[package]]") {
        let field = |key: &str| {
            package.lines().find_map(|l| {
                l.strip_prefix(key)
                    .map(|v| v.trim_matches(|c| c == '"' || c == ' ').to_string())
            })
        };
        let (Some(name), Some(version)) = (field("name = "), field("version = ")) else {
            continue;
        };
        if name == env!("CARGO_PKG_NAME") {
            own_deps = package
                .lines()
                .filter_map(|l| l.trim().strip_prefix('"'))
                .map(|l| l.trim_end_matches(['"', ',']).to_string())
                .collect();
        }
        versions.push((name, version));
    }
    let mut found = Vec::new();
    for name in wanted {
        let pinned = own_deps
            .iter()
            .find_map(|d| d.strip_prefix(name).and_then(|v| v.strip_prefix(' ')));
        for (n, v) in &versions {
            if n == name && pinned.is_none_or(|p| p == v) {
                found.push(format!("{n}={v}"));
            }
        }
    }
    found.sort();
    found.dedup();
    println!("cargo:rustc-env=NOSTRWIRE_BENCH_CRATES={}", found.join(","));
}
