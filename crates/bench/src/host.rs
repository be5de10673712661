//! Facts about the machine, toolchain and inputs, recorded with every result.

use sha2::{Digest, Sha256};

/// Where and with what a benchmark ran.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Host {
    /// CPU model name.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Operating system and architecture.
    pub os: String,
    /// `rustc --version` of the compiler that built this binary.
    pub rustc: String,
    /// Whether this binary was built with optimizations.
    pub optimized: bool,
    /// Versions of the competitor crates, from Cargo.lock at build time.
    pub crates: Vec<(String, String)>,
}

impl Host {
    /// Reads the facts of the running machine.
    pub fn detect() -> Host {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Host {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            rustc: env!("NOSTRWIRE_RUSTC_VERSION").to_string(),
            optimized: !cfg!(debug_assertions),
            crates: env!("NOSTRWIRE_BENCH_CRATES")
                .split(',')
                .filter(|s| !s.is_empty())
                .filter_map(|s| s.split_once('='))
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// One line for reports.
    pub fn summary_line(&self) -> String {
        let crates: Vec<String> = self
            .crates
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        format!(
            "{} ({} cores), {}, {}{}; {}",
            self.cpu,
            self.cores,
            self.os,
            self.rustc,
            if self.optimized {
                ""
            } else {
                ", UNOPTIMIZED build"
            },
            crates.join(", ")
        )
    }
}

/// A fingerprint of an input file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Fingerprint {
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: usize,
}

impl Fingerprint {
    /// Fingerprints `data`.
    pub fn of(data: &[u8]) -> Fingerprint {
        Fingerprint {
            sha256: nostrwire_event::hex::encode(&Sha256::digest(data)),
            bytes: data.len(),
        }
    }
}
