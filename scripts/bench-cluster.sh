#!/usr/bin/env bash
# Cluster benchmark (docs/cluster.md): a single relay against a cluster of
# three relays on three NATS servers, all on this machine.
#   scripts/bench-cluster.sh [--out DIR]
# Writes to DIR (default bench-runs/<date>-cluster) one JSON file per
# measurement and summary.md:
#   publish: EVENTS notes over 12 connections (spread over the nodes), 16
#     unanswered EVENTs each; events/s and the CPU seconds of every relay
#     and NATS server during the run (/proc), hence CPU per event;
#   latency: a publisher on node 1 at 1,000 events/s for 10 s, a live
#     subscriber on node 3: time from EVENT to the subscriber;
#   publish-node1: the same with every connection on node 1, which splits
#     a node's CPU per event into applying (nodes 2, 3) and taking a
#     client's event (node 1 less the others); per-thread CPU (writer,
#     ingest, cluster, ...) from /proc/PID/task;
#   lag: each node's nostrwire_cluster_lag sampled during the publish run;
#   catch-up: node 3 stopped while CATCHUP events are published, then
#     restarted: events it applied per second until it has them all.
# EVENTS (default 30000) and CATCHUP (default 50000) set the sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
out="bench-runs/$(date -u +%F)-cluster"
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
events="${EVENTS:-30000}"
catchup="${CATCHUP:-50000}"
mkdir -p "$out"
nice -n 10 cargo build --release --locked -q -p nostrwire -p nostrwire-relay --example cluster_bench
source scripts/lib/bench-lock.sh
bench_lock
export NOSTRWIRE_BIN=target/release/nostrwire
bench=target/release/examples/cluster_bench
work="$(mktemp -d)"
single=""
cleanup() {
    [ -n "$single" ] && kill "$single" 2>/dev/null || true
    scripts/cluster.sh down --dir "$work/cluster" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
metric() { # PORT NAME NODE
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="nostrwire_cluster_$2{node=\"$3\"}" '$1 == m { print $2 }'
}

echo "== single relay"
port=17790
"$NOSTRWIRE_BIN" relay --listen "127.0.0.1:$port" --data "$work/single" 2>"$work/single.log" &
single=$!
wait_port $port
"$bench" publish "ws://127.0.0.1:$port" "$events" 12 16 "$single" | tee "$out/single-publish.json"
"$bench" latency "ws://127.0.0.1:$port" "ws://127.0.0.1:$port" 1000 10 | tee "$out/single-latency.json"
kill -TERM "$single"
wait "$single" || true
single=""

echo "== cluster: three NATS servers, three relays"
NATS_PORT=14222 ROUTE_PORT=16222 RELAY_PORT=17781 scripts/cluster.sh up --dir "$work/cluster"
c="$work/cluster"
for i in 1 2 3; do
    for _ in $(seq 300); do
        [ "$(metric $((17780 + i)) connected relay$i)" = 1 ] && break
        sleep 0.2
    done
done
pids="$(cat "$c"/relay1.pid),$(cat "$c"/relay2.pid),$(cat "$c"/relay3.pid),$(cat "$c"/nats1.pid),$(cat "$c"/nats2.pid),$(cat "$c"/nats3.pid)"
echo "pids relay1..3,nats1..3: $pids" | tee "$out/cluster-pids.txt"
urls="ws://127.0.0.1:17781,ws://127.0.0.1:17782,ws://127.0.0.1:17783"
(
    while :; do
        line="$(date +%s.%N)"
        for i in 1 2 3; do line+=" $(metric $((17780 + i)) lag relay$i)"; done
        echo "$line"
        sleep 0.2
    done
) >"$out/cluster-lag.tsv" &
sampler=$!
"$bench" publish "$urls" "$events" 12 16 "$pids" | tee "$out/cluster-publish.json"
kill "$sampler"
# Every client on node 1: nodes 2 and 3 only apply, node 1 also takes the
# clients' events (parse, verify, publish).
"$bench" publish ws://127.0.0.1:17781 "$events" 12 16 "$pids" | tee "$out/cluster-publish-node1.json"
"$bench" latency ws://127.0.0.1:17781 ws://127.0.0.1:17783 1000 10 | tee "$out/cluster-latency.json"

echo "== catch-up: node 3 stopped while $catchup events are published, then restarted"
kill -TERM "$(cat "$c/relay3.pid")"
while kill -0 "$(cat "$c/relay3.pid")" 2>/dev/null; do sleep 0.1; done
before="$(metric 17781 applied_sequence relay1)"
"$bench" publish "ws://127.0.0.1:17781,ws://127.0.0.1:17782" "$catchup" 8 16 "$(cat "$c/relay1.pid")" >"$out/catchup-publish.json"
sleep 1.5
target="$(metric 17781 applied_sequence relay1)"
start="$(date +%s.%N)"
"$NOSTRWIRE_BIN" relay --config "$c/relay3.toml" >"$c/relay3.log" 2>&1 &
echo $! >"$c/relay3.pid"
wait_port 17783
while :; do
    applied="$(metric 17783 applied_sequence relay3)"
    [ -n "$applied" ] && [ "$applied" -ge "$target" ] && break
    sleep 0.05
done
end="$(date +%s.%N)"
# utime + stime of the restarted node so far: startup and applying.
ticks="$(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$(cat "$c/relay3.pid")/stat")"
python3 - "$before" "$target" "$start" "$end" "$ticks" "$(getconf CLK_TCK)" >"$out/catchup.json" <<'EOF'
import json, sys
before, target, start, end = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cpu = float(sys.argv[5]) / float(sys.argv[6])
seconds = end - start
print(json.dumps({"events": target - before, "seconds_from_start": round(seconds, 3),
                  "events_per_second": round((target - before) / seconds),
                  "relay3_cpu_seconds": round(cpu, 3),
                  "cpu_us_per_event": round(1e6 * cpu / max(1, target - before), 1)}))
EOF
cat "$out/catchup.json"
scripts/cluster.sh down --dir "$c" >/dev/null

python3 scripts/lib/cluster_summary.py "$out" | tee "$out/summary.md"
