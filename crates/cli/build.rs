//! Whether the cluster tests (`tests/cluster.rs`) can run here: `cfg(nats_server)`
//! when a `nats-server` is found where `tests/cluster_support` looks for it
//! (`$NATS_SERVER`, `PATH`, `~/go/bin`), and in CI (`CI=true`), where a
//! missing one must fail them. Without it they are ignored, with the reason,
//! so `cargo test` counts them as such instead of passing them.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-check-cfg=cfg(nats_server)");
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["NATS_SERVER", "PATH", "HOME", "CI"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    match nats_server() {
        Some(path) => {
            // Its removal is noticed too.
            println!("cargo:rerun-if-changed={}", path.display());
            println!("cargo:rustc-cfg=nats_server");
        }
        None if std::env::var("CI").as_deref() == Ok("true") => {
            println!("cargo:rustc-cfg=nats_server");
        }
        None => {}
    }
}

fn nats_server() -> Option<PathBuf> {
    std::env::var_os("NATS_SERVER")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("nats-server"))
                .collect::<Vec<_>>()
        }))
        .chain(std::env::var_os("HOME").map(|h| Path::new(&h).join("go/bin/nats-server")))
        .find(|candidate| candidate.is_file())
}
