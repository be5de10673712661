#!/usr/bin/env bash
# The Go client's REQ benchmark (issue 44): a 10,000-event REQ, from the REQ
# to the last event decoded and verified, for the Go package's client over
# nostrwire.v2 and over JSON against go-nostr's Relay over JSON, the same
# nostrwire relay, interleaved rounds (go/cmd/bench-req).
#
#   scripts/bench-go-client.sh [--rounds N] [--limit N] [--work DIR] [--out DIR]
#
# The data are those of the browser benchmark (scripts/bench-browser.sh):
# the corpus plus 24,000 generated events (seed 7) in a relay database
# whose dictionary set was trained on 10,000 other generated events
# (seed 8). --work keeps them (a directory with db/ and set.nwbd is used as
# it is). NOSTRWIRE_BIN and BENCH_REQ name prebuilt binaries (else they are
# built). Writes runs.jsonl, summary.txt and host.txt to --out.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=7 limit=10000 work="" out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --limit) limit=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
work=${work:-$(mktemp -d /tmp/bench-go-client.XXXXXX)}
out=${out:-$work/out}
mkdir -p "$work" "$out"
export NOSTRWIRE_BIN="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ "$NOSTRWIRE_BIN" = target/release/nostrwire ] && [ ! -x "$NOSTRWIRE_BIN" ]; then
    nice -n 10 cargo build --release --locked -p nostrwire
fi
bench=${BENCH_REQ:-}
if [ -z "$bench" ]; then
    bench="$work/bench-req"
    (cd go && go build -o "$bench" ./cmd/bench-req)
fi

if [ ! -d "$work/db" ]; then
    "$NOSTRWIRE_BIN" generate --count 24000 --seed 7 --out "$work/generated.jsonl"
    "$NOSTRWIRE_BIN" generate --count 10000 --seed 8 --out "$work/train.jsonl"
    "$NOSTRWIRE_BIN" dict train --per-kind --corpus "$work/train.jsonl" -o "$work/set.nwbd"
    cat testdata/real-events.jsonl "$work/generated.jsonl" > "$work/all.jsonl"
    printf '[storage]\ndictionaries = "%s"\n' "$work/set.nwbd" > "$work/import.toml"
    "$NOSTRWIRE_BIN" import --config "$work/import.toml" --data "$work/db" "$work/all.jsonl" > /dev/null
fi

source scripts/lib/bench-lock.sh
bench_lock
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf '[storage]\ndurability = "none"\ndictionaries = "%s"\n[limits]\nmax_limit = %s\n' "$(realpath "$work/set.nwbd")" "$limit" > "$work/relay.toml"
"$NOSTRWIRE_BIN" relay -c "$work/relay.toml" --listen "127.0.0.1:$port" --data "$work/db" 2> "$out/relay.log" &
relay=$!
trap 'kill $relay 2>/dev/null; wait $relay 2>/dev/null || true' EXIT
for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
done
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
    echo "go: $("$bench" -version 2>/dev/null || go version 2>/dev/null || echo unknown)"
    echo "relay: $("$NOSTRWIRE_BIN" --version)"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/host.txt"
"$bench" --relay "ws://127.0.0.1:$port" --limit "$limit" --rounds "$rounds" > "$out/runs.jsonl" 2> "$out/summary.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/host.txt"
cat "$out/host.txt" "$out/summary.txt"
