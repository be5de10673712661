//! Compiles libsecp256k1 (`vendor/libsecp256k1/` at the repository root, release 0.4.1 as vendored by the
//! `secp256k1-sys` 0.10.1 crate, its symbols prefixed `rustsecp256k1_v0_10_0_`)
//! with the shim in `c/shim.c`, for the host or for `wasm32-unknown-unknown`.
//!
//! Two settings, chosen by measurement (js/README.md, "The WebAssembly
//! verifier"), can be overridden for that measurement:
//! - `NOSTRWIRE_VERIFY_FIELD`: `10x26` (default; `USE_FORCE_WIDEMUL_INT64`,
//!   32×32→64-bit multiplies, which wasm has) or `5x52` (64×64→128-bit
//!   multiplies, calls to `__multi3` in wasm32);
//! - `NOSTRWIRE_VERIFY_WINDOW`: the `ecmult` window for multiples of G, 2 to
//!   the largest table in `vendor/libsecp256k1/src/precomputed_ecmult.c`;
//! - `NOSTRWIRE_VERIFY_CSIMD=0`: the C compiled without `-msimd128`, which
//!   it otherwise gets whenever the Rust side is built with SIMD128 (clang
//!   then vectorizes some of it; the module needs SIMD128 anyway).
//!
//! Then zstd's decompressor (`vendor/zstd/`, v1.5.7, decompression only) with
//! `c/zstd_shim.c`, every symbol renamed `nw_…` (`c/zstd_prefix.h`), for
//! `src/zstd.rs`. Two settings, chosen by measurement (README.md, "zstd"),
//! can be overridden for that measurement:
//! - `NOSTRWIRE_ZSTD_OPT`: the C optimization level, `s` (default) or `3`;
//! - `NOSTRWIRE_ZSTD_HUF`: `x1` (default: only the single-symbol Huffman
//!   decoder, `HUF_FORCE_DECOMPRESS_X1`), `x2` (only the double-symbol one)
//!   or `both` (zstd picks per block).

use std::env;
use std::path::{Path, PathBuf};

/// The vendored C libraries (upstream code, each with its `VENDORED.md`).
const SECP256K1: &str = "../../vendor/libsecp256k1";
const ZSTD: &str = "../../vendor/zstd";

/// The window the package ships: see the measurements in js/README.md.
const DEFAULT_WINDOW: u32 = 10;

fn main() {
    println!("cargo:rerun-if-changed=c/shim.c");
    println!("cargo:rerun-if-changed=../../vendor/libsecp256k1");
    println!("cargo:rerun-if-changed=wasm-sysroot");
    println!("cargo:rerun-if-env-changed=NOSTRWIRE_VERIFY_FIELD");
    println!("cargo:rerun-if-env-changed=NOSTRWIRE_VERIFY_WINDOW");
    println!("cargo:rerun-if-env-changed=NOSTRWIRE_VERIFY_CSIMD");
    println!("cargo:rerun-if-changed=c/zstd_shim.c");
    println!("cargo:rerun-if-changed=c/zstd_entropy_common.c");
    println!("cargo:rerun-if-changed=../../vendor/zstd");
    println!("cargo:rerun-if-changed=c/zstd_prefix.h");
    println!("cargo:rerun-if-env-changed=NOSTRWIRE_ZSTD_OPT");
    println!("cargo:rerun-if-env-changed=NOSTRWIRE_ZSTD_HUF");

    let field = env::var("NOSTRWIRE_VERIFY_FIELD").unwrap_or_else(|_| "10x26".into());
    let window: u32 = match env::var("NOSTRWIRE_VERIFY_WINDOW") {
        Ok(w) => w.parse().expect("NOSTRWIRE_VERIFY_WINDOW is a number"),
        Err(_) => DEFAULT_WINDOW,
    };
    let wasm = env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32");

    let mut build = cc::Build::new();
    wasm_setup(&mut build, wasm);
    build
        .include(SECP256K1)
        .include(format!("{SECP256K1}/include"))
        .include(format!("{SECP256K1}/src"))
        .file("c/shim.c")
        .file(format!("{SECP256K1}/src/precomputed_ecmult.c"))
        .define("SECP256K1_API", Some(""))
        .define("ENABLE_MODULE_SCHNORRSIG", Some("1"))
        .define("ENABLE_MODULE_EXTRAKEYS", Some("1"))
        .define("USE_EXTERNAL_DEFAULT_CALLBACKS", Some("1"))
        .define("ECMULT_WINDOW_SIZE", Some(window.to_string().as_str()))
        // Signing tables are never used (verification only); 2 is the
        // smallest setting.
        .define("ECMULT_GEN_PREC_BITS", Some("2"))
        .flag_if_supported("-Wno-unused-function")
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(3);
    match field.as_str() {
        "10x26" => {
            build.define("USE_FORCE_WIDEMUL_INT64", Some("1"));
        }
        "5x52" => {}
        other => panic!("NOSTRWIRE_VERIFY_FIELD must be 10x26 or 5x52, not {other}"),
    }
    build.compile("secp256k1_nostrwire");
    zstd(wasm);
}

/// No C library on wasm32-unknown-unknown: the few headers the C asks for
/// (`wasm-sysroot/`), and LLVM's archiver (GNU ar cannot index wasm objects).
fn wasm_setup(build: &mut cc::Build, wasm: bool) {
    if !wasm {
        return;
    }
    build
        .include("wasm-sysroot")
        .flag("-mbulk-memory")
        .flag("-fno-builtin-printf");
    let simd =
        env::var("CARGO_CFG_TARGET_FEATURE").is_ok_and(|f| f.split(',').any(|f| f == "simd128"));
    if simd && env::var("NOSTRWIRE_VERIFY_CSIMD").as_deref() != Ok("0") {
        build.flag("-msimd128");
    }
    if env::var_os("AR_wasm32_unknown_unknown").is_none() && env::var_os("AR").is_none() {
        if let Some(ar) = llvm_ar() {
            build.archiver(ar);
        }
    }
}

/// zstd's decompressor without its legacy formats, error strings, tracing,
/// assembly or allocator (`c/zstd_shim.c` replaces it with one that never
/// allocates).
fn zstd(wasm: bool) {
    let mut build = cc::Build::new();
    wasm_setup(&mut build, wasm);
    build
        .include(ZSTD)
        .include(format!("{ZSTD}/common"))
        .flag("-include")
        .flag(Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("c/zstd_prefix.h"))
        .define("ZSTD_LEGACY_SUPPORT", Some("0"))
        .define("ZSTD_STRIP_ERROR_STRINGS", None)
        .define("DEBUGLEVEL", Some("0"))
        .define("ZSTD_DISABLE_ASM", None)
        .define("ZSTD_TRACE", Some("0"))
        .define("XXH_NAMESPACE", Some("NW_ZSTD_"))
        .define("XXH_NO_STDLIB", None)
        .file("c/zstd_shim.c")
        .file("c/zstd_entropy_common.c");
    for f in [
        "common/error_private.c",
        "common/fse_decompress.c",
        "common/xxhash.c",
        "decompress/huf_decompress.c",
        "decompress/zstd_ddict.c",
        "decompress/zstd_decompress.c",
        "decompress/zstd_decompress_block.c",
    ] {
        build.file(Path::new(ZSTD).join(f));
    }
    match env::var("NOSTRWIRE_ZSTD_OPT").as_deref() {
        Err(_) | Ok("s") => {
            build.opt_level_str("s");
        }
        Ok("3") => {
            build.opt_level(3);
        }
        Ok(other) => panic!("NOSTRWIRE_ZSTD_OPT must be 3 or s, not {other}"),
    }
    match env::var("NOSTRWIRE_ZSTD_HUF").as_deref() {
        Ok("both") => {}
        Err(_) | Ok("x1") => {
            build.define("HUF_FORCE_DECOMPRESS_X1", None);
        }
        Ok("x2") => {
            build.define("HUF_FORCE_DECOMPRESS_X2", None);
        }
        Ok(other) => panic!("NOSTRWIRE_ZSTD_HUF must be both, x1 or x2, not {other}"),
    }
    build.compile("zstd_nostrwire");
}

/// LLVM's archiver: on PATH, or where Debian's clang package puts it.
fn llvm_ar() -> Option<PathBuf> {
    let path = env::var_os("PATH").unwrap_or_default();
    for dir in env::split_paths(&path) {
        for name in ["llvm-ar", "llvm-ar-14", "llvm-ar-15", "llvm-ar-16"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    [
        "/usr/lib/llvm-14/bin/llvm-ar",
        "/usr/lib/llvm-15/bin/llvm-ar",
        "/usr/lib/llvm-16/bin/llvm-ar",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.is_file())
    .map(Path::to_path_buf)
}
