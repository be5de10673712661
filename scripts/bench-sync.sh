#!/usr/bin/env bash
# `nostrwire sync` beside `strfry sync` between the same data, same machine,
# same run.
#   scripts/bench-sync.sh [--out DIR] [--sizes "10000 100000"] [--runs 3]
# STRFRY (environment) is the path of a strfry binary; this script does not
# build it (https://github.com/hoytech/strfry, see its README).
# For each size N, `nostrwire generate` writes N + N/100 signed events; side
# A (the syncing database) lacks every 101st of them, side B (the relay)
# another 101st: each side holds N events, 1% of which the other lacks. Both
# sides are imported into a nostrwire database and a strfry database. Then,
# for each direction (both, down) and run, on fresh copies of both sides:
#   strfry      `strfry sync` of strfry A with a strfry relay on B
#   nostrwire   `nostrwire sync` of nostrwire A with a nostrwire relay on B
#   nostrwire→strfry  `nostrwire sync` of nostrwire A with the strfry relay on B
# Each sync goes through scripts/lib/count_proxy.py (bytes both ways, counted
# on the sockets alike for every client); scripts/lib/measure.py gives its
# wall time, CPU time (user + system), peak RSS and peak anonymous RSS (the
# process's own memory, without the database pages it maps). Afterwards
# the ids of both sides are compared (both: equal; down: B within A).
# Writes runs.tsv and table.md to DIR (default bench-runs/<date>-sync).
# NOSTRWIRE_BIN names the nostrwire binary (else the release build is
# made); BENCH_PORT moves the first port (default 7850).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/bench-lock.sh
. scripts/lib/procs.sh
. scripts/lib/strfry.sh

log() { echo "bench-sync: $*" >&2; }

out="bench-runs/$(date -u +%F)-sync"
sizes="10000 100000"
runs=3
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --sizes) sizes="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
done
strfry="${STRFRY:-}"
if [ -z "$strfry" ] || [ ! -x "$strfry" ]; then
    log "set STRFRY to a strfry binary (https://github.com/hoytech/strfry)"
    exit 2
fi
strfry="$(realpath "$strfry")"
nostrwire="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ -z "${NOSTRWIRE_BIN:-}" ]; then
    nice -n 10 cargo build --release --locked -q -p nostrwire
fi
nostrwire="$(realpath "$nostrwire")"
port="${BENCH_PORT:-7850}"
mkdir -p "$out"
out="$(realpath "$out")"

work="$(mktemp -d /tmp/bench-sync.XXXXXX)"
cleanup() {
    stop_started
    rm -rf "$work"
}
trap cleanup EXIT

ids_of() { # KIND DIR -> sorted ids on stdout
    case "$1" in
        nostrwire) "$nostrwire" export --data "$2" ;;
        strfry) "$strfry" --config="$2.conf" scan '{}' 2>/dev/null ;;
    esac | python3 -c 'import sys, json
for line in sys.stdin:
    line = line.strip()
    if line: print(json.loads(line)["id"])' | sort
}

bench_lock
log "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'size\tdir\tclient\trelay\trun\twall_s\tcpu_s\tpeak_rss_kib\tpeak_anon_kib\tbytes_to_relay\tbytes_from_relay\tids_ok\n' > "$out/runs.tsv"

for n in $sizes; do
    total=$((n + n / 100))
    log "size $n: generating $total events"
    # Only events both relays store as given (scripts/lib/sync_data.py).
    "$nostrwire" generate --count $((total * 3 / 2)) --seed 46 --authors "$total" \
        --newest 1795000000 -o "$work/gen.jsonl"
    python3 scripts/lib/sync_data.py "$total" < "$work/gen.jsonl" > "$work/all.jsonl"
    awk 'NR % 101 != 1' "$work/all.jsonl" > "$work/a.jsonl"
    awk 'NR % 101 != 51' "$work/all.jsonl" > "$work/b.jsonl"
    for side in a b; do
        rm -rf "$work/nw-$side" "$work/sf-$side"
        "$nostrwire" import --data "$work/nw-$side" "$work/$side.jsonl" > /dev/null 2>&1
        strfry_conf "$work/sf-$side" 0
        "$strfry" --config="$work/sf-$side.conf" import < "$work/$side.jsonl" > /dev/null 2>&1
    done
    log "size $n: nostrwire A $(ids_of nostrwire "$work/nw-a" | wc -l), B $(ids_of nostrwire "$work/nw-b" | wc -l); strfry A $(ids_of strfry "$work/sf-a" | wc -l), B $(ids_of strfry "$work/sf-b" | wc -l) events"
    for dir in both down; do
        for run in $(seq "$runs"); do
            for pair in "strfry strfry" "nostrwire nostrwire" "nostrwire strfry"; do
                set -- $pair
                client=$1 relay=$2
                rp=$port pp=$((port + 1))
                prefix=$([ "$client" = nostrwire ] && echo nw || echo sf)
                rprefix=$([ "$relay" = nostrwire ] && echo nw || echo sf)
                rm -rf "$work/run-a" "$work/run-b" "$work/run-a.conf" "$work/run-b.conf"
                cp -a "$work/$prefix-a" "$work/run-a"
                cp -a "$work/$rprefix-b" "$work/run-b"
                [ "$client" = strfry ] && strfry_conf "$work/run-a" 0
                if [ "$relay" = strfry ]; then
                    strfry_conf "$work/run-b" "$rp"
                    "$strfry" --config="$work/run-b.conf" relay > "$work/relay.log" 2>&1 &
                else
                    "$nostrwire" relay --listen "127.0.0.1:$rp" --data "$work/run-b" \
                        > "$work/relay.log" 2>&1 &
                fi
                relay_pid=$!
                started "$relay_pid"
                wait_port "$rp"
                python3 scripts/lib/count_proxy.py "$pp" "$rp" "$work/bytes.json" &
                proxy_pid=$!
                started "$proxy_pid"
                wait_port "$pp"
                url="ws://127.0.0.1:$pp"
                if [ "$client" = strfry ]; then
                    cmd=("$strfry" --config="$work/run-a.conf" sync "$url" --dir "$dir")
                else
                    cmd=("$nostrwire" sync "$url" --dir "$dir" --data "$work/run-a")
                fi
                python3 scripts/lib/measure.py "$work/time" -- "${cmd[@]}" > "$work/sync.out" 2> "$work/sync.err" \
                    || { log "sync failed: ${cmd[*]}"; cat "$work/sync.err" >&2; exit 1; }
                sleep 0.3
                stop "$proxy_pid"
                stop "$relay_pid"
                read -r wall rss user sys anon < "$work/time"
                cpu=$(python3 -c "print(round($user + $sys, 2))")
                read -r to from < <(python3 -c 'import json, sys
b = json.load(open(sys.argv[1])); print(b["to_target"], b["from_target"])' "$work/bytes.json")
                ids_of "$client" "$work/run-a" > "$work/ids-a"
                ids_of "$relay" "$work/run-b" > "$work/ids-b"
                if [ "$dir" = both ]; then
                    cmp -s "$work/ids-a" "$work/ids-b" && ok=yes || ok=no
                else
                    [ -z "$(comm -13 "$work/ids-a" "$work/ids-b")" ] && ok=yes || ok=no
                fi
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$dir" "$client" "$relay" \
                    "$run" "$wall" "$cpu" "$rss" "$anon" "$to" "$from" "$ok" >> "$out/runs.tsv"
                log "size $n $dir run $run: $client sync with $relay relay: ${wall} s, ${cpu} s CPU, ${rss} KiB RSS (${anon} KiB anonymous), $to B up, $from B down, ids $ok"
                [ "$run" = 1 ] && cp "$work/sync.out" "$out/last-$client-$relay-$dir-$n.out" && \
                    tail -3 "$work/sync.err" >> "$out/last-$client-$relay-$dir-$n.out"
                [ "$ok" = yes ] || { log "ids differ after the sync"; exit 1; }
            done
        done
    done
done
python3 scripts/lib/bench_sync_table.py "$out/runs.tsv" > "$out/table.md"
cat "$out/table.md"
