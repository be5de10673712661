#!/usr/bin/env bash
# The Python package's CI: lint the PyO3 crate, build the abi3 wheel, run the
# pytest suite against a real relay on the oldest and the default Python,
# and import the same wheel on every Python from 3.9 to 3.13.
#
# Needs: cargo, python3 with venv, the pyenv Pythons 3.9–3.13, PyPI, and the
# relay binary (NOSTRWIRE_BIN, default: the release build of the workspace).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
export NOSTRWIRE_BIN="${NOSTRWIRE_BIN:-$CARGO_TARGET_DIR/release/nostrwire}"
# The tests run from python/: a path relative to where this was called
# from (.ci/run calls it from the repository root) is made absolute.
case "$NOSTRWIRE_BIN" in
    /*) ;;
    *) NOSTRWIRE_BIN="$PWD/$NOSTRWIRE_BIN" ;;
esac
case "$CARGO_TARGET_DIR" in
    /*) ;;
    *) CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
esac
[ -x "$NOSTRWIRE_BIN" ] || { echo "relay binary $NOSTRWIRE_BIN not found: cargo build --release first" >&2; exit 1; }
start=$SECONDS

# The crate is outside the Cargo workspace (its own lock file), so the
# workspace's fmt and clippy gates do not see it: they run here. Not
# --locked: a dependency added to crates/event or crates/wire enters this
# lock file here rather than failing the run; everything already in it
# stays pinned.
echo "== python: cargo fmt --check, cargo clippy"
cargo fmt --manifest-path "$here/Cargo.toml" -- --check
cargo clippy --manifest-path "$here/Cargo.toml" --all-targets -- -D warnings

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Tools pinned; the package's own dependency (websockets) comes with the wheel.
echo "== python: build venv (maturin, pytest from PyPI)"
python3 -m venv "$work/build"
"$work/build/bin/pip" install -q --disable-pip-version-check maturin==1.16.0

# The wheel stays in $CARGO_TARGET_DIR/wheels/ (only the one built now), where
# scripts/interop-matrix.sh takes it instead of building it again.
echo "== python: maturin build --release (abi3 wheel)"
rm -f "$CARGO_TARGET_DIR"/wheels/nostrwire-*.whl
"$work/build/bin/maturin" build --release -m "$here/Cargo.toml" -o "$CARGO_TARGET_DIR/wheels" -q
wheel="$(ls "$CARGO_TARGET_DIR"/wheels/nostrwire-*-abi3-*.whl)"
echo "built $(basename "$wheel")"

# Pythons 3.9–3.13 (pyenv's, else on PATH): one wheel for all of them.
find_python() {
    local v="$1" root
    root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for p in "$root"/versions/"$v".*/bin/python"$v"; do
        [ -x "$p" ] && { echo "$p"; return; }
    done
    command -v "python$v" || true
}

for v in 3.9 3.10 3.11 3.12 3.13; do
    py="$(find_python "$v")"
    [ -n "$py" ] || { echo "Python $v not found (pyenv install $v)" >&2; exit 1; }
    venv="$work/py$v"
    "$py" -m venv "$venv"
    if [ "$v" = 3.9 ] || [ "$v" = "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" ]; then
        echo "== python $v: pytest"
        "$venv/bin/pip" install -q --disable-pip-version-check "$wheel" pytest==9.2.0 2>/dev/null \
            || "$venv/bin/pip" install -q --disable-pip-version-check "$wheel" "pytest>=8,<9"
        (cd "$here" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
    else
        echo "== python $v: import and verify the corpus"
        "$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
        "$venv/bin/python" - "$repo/testdata/real-events.jsonl" <<'PY'
import sys
import nostrwire as nw
lines = [l for l in open(sys.argv[1], "rb").read().splitlines() if l.strip()]
assert all(nw.verify_many(lines)) and len(lines) == 1001
assert sum(1 for _ in nw.scan(sys.argv[1], {"kinds": [1]}, verify=True)) == 100
print(f"nostrwire {nw.__version__} on Python {sys.version.split()[0]}: ok")
PY
    fi
done
echo "== python: done in $((SECONDS - start)) s"
