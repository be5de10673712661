#!/usr/bin/env bash
# The Go module's CI: go vet, a gofmt check and go test ./... (the client
# and interop tests against the relay: NOSTRWIRE_BIN, else the release build
# of the workspace; skipped, with a message, when neither exists).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
export PATH="$PATH:/usr/local/go/bin"
if [ -z "${NOSTRWIRE_BIN:-}" ] && [ -x "$repo/target/release/nostrwire" ]; then
    export NOSTRWIRE_BIN="$repo/target/release/nostrwire"
fi
case "${NOSTRWIRE_BIN:-}" in
    ""|/*) ;;
    *) NOSTRWIRE_BIN="$PWD/$NOSTRWIRE_BIN" ;;
esac
cd "$here"
go vet ./...
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
    echo "gofmt: these files need formatting:" >&2
    echo "$unformatted" >&2
    exit 1
fi
go test -count=1 ./...
# One decompressor shared by goroutines, under the race detector (the
# client's own tests are not run with -race: go-nostr v0.51.8, which they
# compare against, races between Close and ConnectWithTLS).
go test -count=1 -race -run 'TestDecompressorSharedByGoroutines' ./nwb/
