#!/usr/bin/env bash
# What the WebAssembly verifier (crates/verify-wasm) needs to build: Rust's
# wasm32-unknown-unknown target, and clang with wasm-ld (Debian's clang and
# lld) to compile libsecp256k1 for it. Installs only what is missing.
set -euo pipefail
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "install-wasm-toolchain: rustup target add wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
fi
need=()
command -v clang >/dev/null || need+=(clang)
command -v wasm-ld >/dev/null || command -v wasm-ld-14 >/dev/null || need+=(lld)
if [ ${#need[@]} -gt 0 ]; then
    echo "install-wasm-toolchain: apt-get install ${need[*]}"
    if [ "$(id -u)" -eq 0 ]; then apt=(apt-get); else apt=(sudo apt-get); fi
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null \
        || { DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi
