#!/usr/bin/env bash
# Verifier benchmark: µs per event for noble, nostr-wasm and this package's
# WebAssembly verifier (and builds of it over field, window and wasm-opt), in
# Node and headless Chromium, beside native libsecp256k1 on the same host.
#   scripts/bench-verify.sh [--out DIR] [--rounds N] [--variants 10x26:8,5x52:4:opt,10x26:10:nosimd,...]
#     [--module NAME=FILE.wasm,...]   (flags and --module: js/bench/verify.mjs)
# Builds the release binary and the js/ package, installs Chromium if it is
# missing, writes results.json and report.md to DIR (default
# bench-runs/<date>-verify).
set -euo pipefail
case " $* " in *" -h "*|*" --help "*) sed -n '2,9p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
export NOSTRWIRE_BIN="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ "$NOSTRWIRE_BIN" = target/release/nostrwire ]; then
    nice -n 10 cargo build --release --locked -p nostrwire
fi
js/scripts/install-chromium.sh
(cd js && npm ci --no-audit --no-fund --silent && node scripts/build.mjs)
# The builds of the verifier the report compares, before the lock.
variants="$(mktemp -d)"
trap 'rm -rf "$variants"' EXIT
nice -n 10 node js/bench/verify.mjs --variant-dir "$variants" --build-only "$@"
source scripts/lib/bench-lock.sh
bench_lock
node --expose-gc js/bench/verify.mjs --variant-dir "$variants" "$@"
