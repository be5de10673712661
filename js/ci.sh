#!/usr/bin/env bash
# The js/ package's CI: installs what it needs (npm ci, Chromium when
# missing; for the WebAssembly verifier, Rust's wasm32 target and Debian's
# clang and lld when missing), builds (the verifier from crates/verify-wasm
# in about 10 s from an empty target directory), type-checks and runs every
# JavaScript test: vectors, the corpus through Rust and back, the verifier
# against noble and the Rust codec, the Relay client against live relays in
# Node, and the same in headless Chromium together with the relay's web page;
# the pool against nostr-tools' pool tests and against a nostrwire relay and
# khatru at once (khatru is built from the Go module proxy where Go is
# installed; without Go those tests are skipped).
#   NOSTRWIRE_BIN=target/release/nostrwire js/ci.sh
# NOSTRWIRE_BIN (relative to the repository root, or absolute) must be a
# built `nostrwire`; the default is target/release/nostrwire.
set -euo pipefail
cd "$(dirname "$0")"
export NOSTRWIRE_BIN="${NOSTRWIRE_BIN:-target/release/nostrwire}"
case "$NOSTRWIRE_BIN" in
    /*) bin="$NOSTRWIRE_BIN" ;;
    *) bin="../$NOSTRWIRE_BIN" ;;
esac
if [ ! -x "$bin" ]; then
    echo "js/ci.sh: no nostrwire binary at $NOSTRWIRE_BIN (cargo build --release -p nostrwire)" >&2
    exit 1
fi
command -v npm >/dev/null || { echo "js/ci.sh: npm is required" >&2; exit 1; }

echo "== js: install"
scripts/install-chromium.sh
npm ci --no-audit --no-fund --silent

echo "== js: build and type-check"
node scripts/build.mjs
scripts/build-khatru.sh   # the pool's tests read from khatru too (needs Go)
npx tsc --noEmit -p .

echo "== js: tests (Node and headless Chromium)"
node --test --test-concurrency=1 test/*.test.mjs
