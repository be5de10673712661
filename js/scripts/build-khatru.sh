#!/usr/bin/env bash
# Builds the plain khatru relay the multi-relay tests and the pool benchmark
# read from (test/khatru-relay: khatru v0.19.0, eventstore v0.16.2, go-nostr
# v0.51.8, from the Go module proxy) into test-output/khatru-relay. Needs Go
# (1.24 or later); prints why and exits 0 without it, and the tests that
# need khatru are then skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
    echo "build-khatru.sh: no Go toolchain; the khatru tests are skipped" >&2
    exit 0
fi
out=test-output/khatru-relay
mkdir -p test-output
if [ -x "$out" ] && [ -z "$(find test/khatru-relay -newer "$out" -type f)" ]; then
    exit 0
fi
(cd test/khatru-relay && nice -n 10 go build -o "../../$out" .)
echo "khatru relay: $out"
