#!/usr/bin/env bash
# Browser benchmark: a REQ returning 1,000 and 10,000 events, timed in
# headless Chromium for nostr-tools (noble, nostr-wasm) and the js/ package
# (JSON, nostrwire.v1), with and without permessage-deflate, and in the same
# rounds each verifier alone on the same events in memory (the floor).
#   scripts/bench-browser.sh [--out DIR] [--rounds N] [--only i,j,k --no-floor] [--sizes 1000]
# Builds the release binary and the js/ package, installs Chromium if it is
# missing, and writes results.json, report.md and chart.svg to DIR
# (default bench-runs/<date>-browser).
#   scripts/bench-browser.sh --pool [--out DIR] [--rounds N] [--sizes 1000,10000] [--rows f0,p2] [--profile]
# The pool rows instead (js/bench/bench-pool.mjs): three relays at once
# (nostrwire with v2, nostrwire JSON-only, khatru, built by
# js/scripts/build-khatru.sh), nostr-tools' pool with nostr-wasm against the
# package's, and the floor (raw WebSockets counting each relay's messages
# to EOSE); README.md and results.json in DIR (default
# bench-runs/<date>-pool). --profile: one CPU-profiled run per pool row,
# summed up by function in DIR/profile-<row>.md.
set -euo pipefail
case " $* " in *" -h "*|*" --help "*) sed -n '2,16p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
export NOSTRWIRE_BIN="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ "$NOSTRWIRE_BIN" = target/release/nostrwire ]; then
    nice -n 10 cargo build --release --locked -p nostrwire
fi
js/scripts/install-chromium.sh
(cd js && npm ci --no-audit --no-fund --silent && node scripts/build.mjs)
source scripts/lib/bench-lock.sh
case " $* " in
    *" --pool "*)
        js/scripts/build-khatru.sh
        [ -x js/test-output/khatru-relay ] || { echo "bench-browser.sh: --pool needs Go for the khatru relay" >&2; exit 1; }
        bench_lock
        exec node js/bench/bench-pool.mjs "$@" ;;
esac
bench_lock
exec node js/bench/bench-browser.mjs "$@"
