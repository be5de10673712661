#!/usr/bin/env bash
# `nostrwire delete --filter` on a large database while the relay serves:
# removes exactly what a scan finds, and what REQs see meanwhile.
#
#   scripts/bench-delete.sh [--events N] [--filter JSON] [--out DIR]
#
# 1. generates N signed events (`nostrwire generate`, 1,000 authors; default
#    1,000,000) and imports them into a fresh database;
# 2. scans the filter offline (default: every reaction, `{"kinds":[7]}`;
#    the query probe publishes only kind 1111, which no generated event
#    has and the checks leave out) for the ids that must go, and every
#    other generated id, which must stay;
# 3. starts the relay with one admin key and measures REQ latency with
#    `nostrwire load --scenario query` (3,000 queries of six shapes, 20
#    connections) while it is idle, three times;
# 4. runs `nostrwire delete --filter … --yes --admin-key …` (NIP-86
#    `deleteevents` through the relay's one writer) and the same query
#    probe in a loop until the deletion ends;
# 5. stops the relay and checks by scans that exactly the matching ids are
#    gone and every other one is there.
# Prints a table (p99 of the slowest query shape per probe run, idle and
# during the deletion) and writes it with the raw figures to DIR (default
# bench-runs/<date>-delete). NOSTRWIRE_BIN names the binary (default: the
# release build, built if absent). The admin key's public half is derived
# with nostr-tools from js/node_modules (`npm ci` in js/ first).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

events=1000000
filter='{"kinds":[7]}'
out="bench-runs/$(date -u +%F)-delete"
port=${DELETE_PORT:-7931}
while [ $# -gt 0 ]; do
    case "$1" in
        --events) events=$2; shift 2 ;;
        --filter) filter=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-delete: unknown argument: $1" >&2; exit 2 ;;
    esac
done

bin=${NOSTRWIRE_BIN:-$ROOT/target/release/nostrwire}
[ -x "$bin" ] || cargo build --release --locked -p nostrwire
[ -d js/node_modules/nostr-tools ] || { echo "bench-delete: run npm ci in js/ first" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
relay_pid=""
cleanup() {
    [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench-delete: $*" >&2; }

secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$secret" >"$work/admin.key"
admin=$(cd js && node -e "const {getPublicKey}=require('nostr-tools/pure'); console.log(getPublicKey(Buffer.from(process.argv[1],'hex')))" "$secret")

printf '1111\t1\n' >"$work/probe-kinds.tsv"
log "generating $events events"
"$bin" generate --count "$events" --authors 1000 --seed 5 -o "$work/events.jsonl" 2>/dev/null
log "importing"
"$bin" import --data "$work/data" "$work/events.jsonl" >"$work/import.txt" 2>&1
rm "$work/events.jsonl"

ids() { # filter → sorted ids of the stored events it matches, the probe's left out
    "$bin" scan --data "$work/data" --filter "$1" | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["kind"] != 1111:
        print(e["id"])' | sort
}
log "scanning what must go and what must stay"
ids "$filter" >"$work/gone.txt"
ids '{}' >"$work/all.txt"
comm -23 "$work/all.txt" "$work/gone.txt" >"$work/stay.txt"
matching=$(wc -l <"$work/gone.txt")
total=$(wc -l <"$work/all.txt")
log "$total stored, $matching match $filter"

cat >"$work/relay.toml" <<EOF
[admin]
pubkeys = ["$admin"]
[rate]
connections_per_ip = 0
EOF
"$bin" relay --config "$work/relay.toml" --listen "127.0.0.1:$port" --data "$work/data" >"$work/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

probe() { # tag → "p99 of the slowest query shape" (ms), report kept
    local report="$work/probe-$1.json"
    "$bin" load --relay "ws://127.0.0.1:$port" --scenario query --count 3000 --connections 20 \
        --rounds 1 --seed "$RANDOM" --kind-mix "$work/probe-kinds.tsv" --report "$report" >/dev/null 2>&1 || true
    python3 - "$report" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("nan"); sys.exit()
ops = d["totals"][0]["ops"]
print(max(v["latency_ms"]["p99"] for k, v in ops.items() if k.startswith("query:")))
PY
}

idle=()
for i in 1 2 3; do idle+=("$(probe "idle-$i")"); done
log "idle p99: ${idle[*]} ms"

start=$(date +%s.%N)
"$bin" delete --data "$work/data" --relay "http://127.0.0.1:$port" --filter "$filter" --yes \
    --admin-key "$work/admin.key" >"$work/delete.txt" 2>&1 &
delete_pid=$!
during=()
while kill -0 "$delete_pid" 2>/dev/null; do
    during+=("$(probe "during-${#during[@]}")")
done
wait "$delete_pid" || { log "delete failed: $(tail -3 "$work/delete.txt")"; exit 1; }
seconds=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
log "deleted in $seconds s; p99 meanwhile: ${during[*]} ms"

kill -INT "$relay_pid"
wait "$relay_pid" 2>/dev/null || true
relay_pid=""
ids "$filter" >"$work/gone-after.txt"
ids '{}' >"$work/all-after.txt"
left=$(wc -l <"$work/gone-after.txt")
if [ "$left" -eq 0 ] && cmp -s "$work/all-after.txt" "$work/stay.txt"; then
    exact="yes: the $matching matching events are gone and the other $((total - matching)) are all there"
else
    exact="NO: $left matching left; the rest differs from before by $(comm -3 "$work/all-after.txt" "$work/stay.txt" | wc -l) ids"
fi
log "exact: $exact"

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
max() { printf '%s\n' "$@" | sort -g | tail -1; }
{
    echo "host: $(nproc) cores, $(uname -sr); $("$bin" --version); load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "events: $total stored, $matching matching $filter"
    echo "delete: $seconds s ($(tail -1 "$work/delete.txt"))"
    echo "exact: $exact"
    echo "REQ p99 (ms, slowest of six query shapes, 3,000 queries per probe):"
    echo "  idle:   ${idle[*]} (median $(median "${idle[@]}"))"
    echo "  during: ${during[*]:-none} (median $(median "${during[@]:-nan}"), max $(max "${during[@]:-nan}"))"
} | tee "$out/summary.txt"
cp "$work/delete.txt" "$out/delete.txt"
[ "$left" -eq 0 ] && cmp -s "$work/all-after.txt" "$work/stay.txt"
