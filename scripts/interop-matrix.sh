#!/usr/bin/env bash
# The interop matrix (tests/interop/README.md): relays {nostrwire, khatru
# with the Go nostrwire.v2 handler} x clients {the js/ package in Node, the
# python/ package, the Go package, the load tester's Rust client} x
# transports {NIP-01 JSON, nostrwire.v2}, every cell on a fresh relay,
# checked against the expected answers and against the other cells. Prints
# the matrix; exits non-zero when a cell fails or cannot run.
#
#   scripts/interop-matrix.sh [--allow-missing] [--only node/khatru] [--jobs N]
#
# Reuses what is already built and builds only what is missing:
#   NOSTRWIRE_BIN    the relay (default: target/release/nostrwire; built if absent)
#   NOSTRWIRE_WHEEL  the Python package's abi3 wheel (default: the one python/ci.sh
#                    left in target/wheels/; else built here as python/ci.sh builds it)
#   js/dist          the js/ package (npm ci and its build when absent or older than js/src)
#   Go               go/cmd/nostrwire-interop and go/examples/khatru-v2, built with
#                    `go build` (its cache makes a rebuild a no-op)
#   Rust             the load tester's example client, `cargo build --example` (debug;
#                    `cargo test --workspace` has built it already)
# Scratch files, relay logs and the JSON result: target/interop-matrix/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$repo/$target" ;; esac
work="$target/interop-matrix"
mkdir -p "$work/bin"
start=$SECONDS

bin="${NOSTRWIRE_BIN:-$target/release/nostrwire}"
case "$bin" in /*) ;; *) bin="$repo/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "== matrix: cargo build --release -p nostrwire"
    cargo build --release --locked -p nostrwire
fi

echo "== matrix: the Rust client (crates/loadgen/examples/interop_client.rs)"
cargo build --locked -q -p nostrwire-loadgen --example interop_client
rust_client="$target/debug/examples/interop_client"

echo "== matrix: the js/ package"
command -v node >/dev/null || { echo "node is required" >&2; exit 1; }
if [ ! -d js/node_modules ]; then
    (cd js && npm ci --no-audit --no-fund --silent)
fi
if [ ! -f js/dist/index.js ] || [ -n "$(find js/src -newer js/dist/index.js -print -quit)" ]; then
    (cd js && node scripts/build.mjs)
fi

echo "== matrix: the python/ package"
wheel="${NOSTRWIRE_WHEEL:-}"
if [ -z "$wheel" ]; then
    wheel="$(ls -t "$target"/wheels/nostrwire-*-abi3-*.whl 2>/dev/null | head -n 1 || true)"
fi
if [ -z "$wheel" ]; then
    # The build python/ci.sh does (same pinned maturin), into target/wheels.
    python3 -m venv "$work/build-venv"
    "$work/build-venv/bin/pip" install -q --disable-pip-version-check maturin==1.16.0
    CARGO_TARGET_DIR="$target" "$work/build-venv/bin/maturin" build --release \
        -m python/Cargo.toml -o "$target/wheels" -q
    wheel="$(ls -t "$target"/wheels/nostrwire-*-abi3-*.whl | head -n 1)"
fi
stamp="$(sha256sum "$wheel" | cut -c1-16)"
if [ "$(cat "$work/venv/.wheel" 2>/dev/null || true)" != "$stamp" ]; then
    rm -rf "$work/venv"
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install -q --disable-pip-version-check "$wheel"
    echo "$stamp" >"$work/venv/.wheel"
fi
echo "wheel: $(basename "$wheel")"

echo "== matrix: Go (go/cmd/nostrwire-interop, go/examples/khatru-v2)"
go_client=""
khatru=""
command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
if [ -d go/cmd/nostrwire-interop ] || [ -d go/examples/khatru-v2 ]; then
    command -v go >/dev/null || { echo "go is required for the Go cells" >&2; exit 1; }
fi
if [ -d go/cmd/nostrwire-interop ]; then
    (cd go && go build -o "$work/bin/nostrwire-interop" ./cmd/nostrwire-interop)
    go_client="$work/bin/nostrwire-interop"
fi
if [ -d go/examples/khatru-v2 ]; then
    (cd go && go build -o "$work/bin/khatru-v2" ./examples/khatru-v2)
    khatru="$work/bin/khatru-v2"
fi
echo "== matrix: ready in $((SECONDS - start)) s"

python3 tests/interop/matrix/matrix.py \
    --nostrwire "$bin" \
    --khatru "$khatru" \
    --adapter "node=node $repo/tests/interop/matrix/clients/node.mjs" \
    --adapter "python=$work/venv/bin/python $repo/tests/interop/matrix/clients/python_client.py" \
    --adapter "go=$go_client" \
    --adapter "rust=$rust_client" \
    --work "$work/run" \
    --json "$work/matrix.json" \
    "$@"
