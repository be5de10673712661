#!/usr/bin/env bash
# Disk bytes per stored event, for a database fed through the relay.
#
# Starts `nostrwire relay` on a fresh data directory (defaults, or --config),
# publishes generated events with `nostrwire load --scenario publish`, waits
# for the trailing indexes to catch up, stops the relay (SIGTERM), then
# compares both LMDB files (`data.mdb`, `search/data.mdb`) with the canonical
# JSON of the events kept (`nostrwire export`, one line each, newlines not
# counted). Prints one line per figure and, when `mdb_stat` is installed,
# leaves its per-table output next to the data.
#
# All traffic stays on 127.0.0.1; the load stops after --count events or
# --duration seconds.
#
# Usage: scripts/disk-relay-fed.sh [--count N] [--connections N] [--duration S]
#            [--config FILE] [--dir DIR] [--port P]
#   Environment: NOSTRWIRE_BIN (a built nostrwire binary; default: build
#   target/release/nostrwire).
#
# The generated events take new prose, encrypted payloads and `e` ids rather
# than copies of the corpus (crates/loadgen/src/renew.rs), so trained
# dictionaries cannot memorise them; add `[storage]` `auto_dictionaries = 0`
# to a --config file for the figure without dictionaries, `[search]`
# `enabled = false` for the event store alone.
set -euo pipefail
cd "$(dirname "$0")/.."

count=500000
connections=1000
duration=300
config=""
dir=""
port=7899
while [ $# -gt 0 ]; do
    case "$1" in
        --count) count=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --config) config=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

NW=${NOSTRWIRE_BIN:-}
if [ -z "$NW" ]; then
    cargo build --release --locked -q
    NW=target/release/nostrwire
fi
source scripts/lib/bench-lock.sh
bench_lock
[ -n "$dir" ] || dir=$(mktemp -d)
data="$dir/db"
if [ -e "$data" ]; then
    echo "$data exists: give an empty --dir" >&2
    exit 2
fi
mkdir -p "$dir"

relay_args=(relay --listen "127.0.0.1:$port" --data "$data")
[ -z "$config" ] || relay_args+=(--config "$config")
"$NW" "${relay_args[@]}" 2>"$dir/relay.log" &
relay=$!
trap 'kill "$relay" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

"$NW" load --relay "ws://127.0.0.1:$port" --scenario publish \
    --connections "$connections" --count "$count" --duration "$duration" \
    --quiet --markdown "$dir/load.md" | tee "$dir/load.txt"

# shellcheck source=scripts/lib/indexes.sh
. scripts/lib/indexes.sh
wait_for_indexes "http://127.0.0.1:$port"
kill -TERM "$relay"
wait "$relay" || true
trap - EXIT

main=$(stat -c %s "$data/data.mdb")
search=$(stat -c %s "$data/search/data.mdb" 2>/dev/null || echo 0)
read -r events json < <("$NW" export --data "$data" | LC_ALL=C awk '{n++; b+=length($0)} END{print n+0, b+0}')
if command -v mdb_stat >/dev/null; then
    mdb_stat -a "$data" >"$dir/mdb_stat-main.txt"
    [ ! -d "$data/search" ] || mdb_stat -a "$data/search" >"$dir/mdb_stat-search.txt"
fi
echo "events kept:        $events"
echo "JSON of those:      $json bytes"
echo "data.mdb:           $main bytes"
echo "search/data.mdb:    $search bytes"
awk -v m="$main" -v s="$search" -v j="$json" 'BEGIN{ if (j > 0) {
    printf "both files / JSON:  %.4f\n", (m + s) / j
    printf "data.mdb / JSON:    %.4f (the event store)\n", m / j
    printf "search / JSON:      %.4f (the NIP-50 index)\n", s / j } }'
echo "data and reports in $dir"
