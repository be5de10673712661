#!/usr/bin/env bash
# khatru's CPU per REQ and socket bytes, nostrwire.v2 (go/khatruv2) against
# NIP-01 JSON, same relay process, same REQ, interleaved rounds.
#   scripts/bench-khatru.sh [--out DIR] [--rounds N] [--reqs 100,20] [--cold-reqs 4,1]
# The relay is go/examples/khatru-v2 (khatru v0.19 on LMDB) holding the
# corpus plus 24,000 generated events (seed 7), with a dictionary set
# trained by `nostrwire dict train --per-kind` on 10,000 other generated
# events (seed 8). The REQ is {"kinds":[1,6,7],"limit":N} for N = 1,000 and
# 10,000. Phase "cold", once per round: a fresh relay on an empty LMDB,
# the events published to it over JSON (so the handler builds each record
# as khatru saves the event), then REQs that each take a distinct window
# of created_at (--cold-reqs per size), so no measured REQ serves an event
# any REQ served before, over either transport. Phase "warm": one relay,
# the same REQ repeated (--reqs per size). Writes results.jsonl and
# summary.md to DIR (default bench-runs/<date>-khatru-v2).
set -euo pipefail
case " $* " in *" -h "*|*" --help "*) sed -n '2,16p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT="bench-runs/$(date -u +%Y-%m-%d)-khatru-v2"
ROUNDS=5
REQS=100,20
COLD_REQS=4,1
PORT=${PORT:-7843}
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --reqs) REQS=$2; shift 2 ;;
        --cold-reqs) COLD_REQS=$2; shift 2 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
export PATH="$PATH:/usr/local/go/bin"
BIN="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ "$BIN" = target/release/nostrwire ] && [ ! -x "$BIN" ]; then
    nice -n 10 cargo build --release --locked -p nostrwire
fi
WORK=$(mktemp -d)
RELAY_PID=""
cleanup() {
    [ -n "$RELAY_PID" ] && kill "$RELAY_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
(cd go && go build -o "$WORK/khatru-v2" ./examples/khatru-v2 && go build -o "$WORK/bench" ./examples/khatru-v2/bench)
"$BIN" generate --count 24000 --seed 7 --out "$WORK/generated.jsonl" 2>/dev/null
"$BIN" generate --count 10000 --seed 8 --out "$WORK/train.jsonl" 2>/dev/null
"$BIN" dict train --per-kind --level 3 --corpus "$WORK/train.jsonl" -o "$WORK/set.nwbd" >/dev/null
mkdir -p "$OUT"

start_relay() {
    rm -f "$WORK/relay.log" # else the last relay's line may be read as this one's
    "$WORK/khatru-v2" -listen "127.0.0.1:$PORT" -data "$WORK/db" -dictionaries "$WORK/set.nwbd" "$@" 2>"$WORK/relay.log" &
    RELAY_PID=$!
    for _ in $(seq 100); do
        grep -qs "listening on" "$WORK/relay.log" && return 0
        sleep 0.1
    done
    echo "relay did not start" >&2; cat "$WORK/relay.log" >&2; exit 1
}
stop_relay() {
    kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true; RELAY_PID=""
}

EVENTS=$WORK/events.jsonl
cat testdata/real-events.jsonl "$WORK/generated.jsonl" > "$EVENTS"

source scripts/lib/bench-lock.sh
bench_lock
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$OUT/results.jsonl"
for round in $(seq "$ROUNDS"); do
    rm -rf "$WORK/db"
    start_relay -max-limit 1000000
    "$WORK/bench" -relay "ws://127.0.0.1:$PORT" -sizes "" -load "$EVENTS"
    "$WORK/bench" -relay "ws://127.0.0.1:$PORT" -pid "$RELAY_PID" -rounds 1 -reqs "$COLD_REQS" -cold \
        | sed "s/^{/{\"phase\":\"cold\",/; s/\"round\":1,/\"round\":$round,/" >> "$OUT/results.jsonl"
    stop_relay
done
start_relay
"$WORK/bench" -relay "ws://127.0.0.1:$PORT" -pid "$RELAY_PID" -rounds "$ROUNDS" -reqs "$REQS" \
    | sed 's/^{/{"phase":"warm",/' >> "$OUT/results.jsonl"
stop_relay
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/results.jsonl" "$LOAD_START" "$LOAD_END" > "$OUT/summary.md" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
print(f"load average at start {sys.argv[2]}, at end {sys.argv[3]}\n")
print("| phase | events | transport | socket bytes / REQ | vs JSON | relay CPU / REQ (ms) | vs JSON | wall / REQ (ms) |")
print("|---|---|---|---|---|---|---|---|")
for phase in ("cold", "warm"):
    for size in sorted({r["size"] for r in rows}):
        cell = lambda t: [r for r in rows if r["phase"] == phase and r["size"] == size and r["transport"] == t]
        j = cell("json")
        jb, jc = med([r["socket_bytes_per_req"] for r in j]), med([r["relay_cpu_ms_per_req"] for r in j])
        for t in ("json", "v2"):
            c = cell(t)
            b, cpu = med([r["socket_bytes_per_req"] for r in c]), med([r["relay_cpu_ms_per_req"] for r in c])
            wall = med([r["wall_ms_per_req"] for r in c])
            lo, hi = min(r["relay_cpu_ms_per_req"] for r in c), max(r["relay_cpu_ms_per_req"] for r in c)
            print(f"| {phase} | {c[0]['events_per_req']:,} | {t} | {b:,.0f} | {b/jb:.3f}x | {cpu:.1f} ({lo:.1f}-{hi:.1f}) | {cpu/jc:.2f}x | {wall:.1f} |")
EOF
cat "$OUT/summary.md"
