//! Compiles libsecp256k1 (`vendor/libsecp256k1/`, release 0.4.1 as vendored
//! by the `secp256k1-sys` 0.10.1 crate) with the batch shim the WebAssembly
//! verifier uses (`crates/verify-wasm/c/shim.c`), for the host.
//!
//! The same program links `secp256k1-sys`, which defines every public
//! symbol of the library under the prefix `rustsecp256k1_v0_10_0_`. So the
//! sources are copied into `OUT_DIR` with that prefix replaced by
//! `nostrwire_secp256k1_`: two copies of the library, no clashing symbol.
//! The field and scalar code is the host's fastest (5x52 limbs with 128-bit
//! products where the compiler has them); `ECMULT_WINDOW_SIZE` is the
//! largest table the vendored `precomputed_ecmult.c` holds.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

const SECP256K1: &str = "../../vendor/libsecp256k1";
const SHIM: &str = "../verify-wasm/c/shim.c";
const VENDORED_PREFIX: &str = "rustsecp256k1_v0_10_0_";
const PREFIX: &str = "nostrwire_secp256k1_";
const WINDOW: u32 = 12;

fn main() {
    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-changed={SECP256K1}");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("secp256k1");
    for dir in ["src", "include"] {
        copy_renamed(&Path::new(SECP256K1).join(dir), &out.join(dir));
    }
    copy_file_renamed(Path::new(SHIM), &out.join("shim.c"));
    cc::Build::new()
        .include(&out)
        .include(out.join("include"))
        .include(out.join("src"))
        .file(out.join("shim.c"))
        .file(out.join("src/precomputed_ecmult.c"))
        .define("SECP256K1_API", Some(""))
        .define("ENABLE_MODULE_SCHNORRSIG", Some("1"))
        .define("ENABLE_MODULE_EXTRAKEYS", Some("1"))
        .define("USE_EXTERNAL_DEFAULT_CALLBACKS", Some("1"))
        .define("ECMULT_WINDOW_SIZE", Some(WINDOW.to_string().as_str()))
        // Signing tables are never used (verification only).
        .define("ECMULT_GEN_PREC_BITS", Some("2"))
        .flag_if_supported("-Wno-unused-function")
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(3)
        .compile("secp256k1_nostrwire_native");
}

/// Copies the C sources under `from` to `to`, renaming the symbol prefix.
fn copy_renamed(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create OUT_DIR copy");
    for entry in fs::read_dir(from).expect("read vendored libsecp256k1") {
        let path = entry.expect("directory entry").path();
        let target = to.join(path.file_name().expect("file name"));
        if path.is_dir() {
            copy_renamed(&path, &target);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("c" | "h")) {
            copy_file_renamed(&path, &target);
        }
    }
}

fn copy_file_renamed(from: &Path, to: &Path) {
    let text = fs::read_to_string(from).expect("read C source");
    let renamed = text.replace(VENDORED_PREFIX, PREFIX);
    // Rewritten only when it changed, so the C is not rebuilt for nothing.
    if fs::read_to_string(to).ok().as_deref() != Some(renamed.as_str()) {
        fs::write(to, renamed).expect("write renamed C source");
    }
}
