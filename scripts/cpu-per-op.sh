#!/usr/bin/env bash
# Where a relay's CPU goes per operation, by thread role: runs one nostrwire
# relay on a fresh data directory, drives it with nostr-bench (the tool of
# scripts/compare-relays.sh, not written here), and reads every thread's
# user and system time and context switches from /proc before and after.
#
#   scripts/cpu-per-op.sh [--bin PATH] [--config relay.toml] [--test event|req]
#                         [--connections N] [--seconds S] [--threads T]
#                         [--rounds R] [--port P] [--empty]
#
# --test event (default): nostr-bench event. --test req: the relay is first
# seeded with compare-relays' 10,000 hashtag events (`nostrwire load
# --replay`, not timed), then nostr-bench req --limit 10. Figures are per
# operation nostr-bench completed (as compare-relays counts them), one line
# per thread role (ingest-0 and ingest-1 are "ingest"), then the total.
# --empty skips the seeding: REQs that match nothing measure the REQ's
# round trip alone (frames, parse, plan, EOSE, CLOSE).
#
# A relay that refuses before verifying (policy.kinds_deny = [1] in the
# config) measures the round trip alone: WebSocket frames, parse, OK.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${NOSTRWIRE_BIN:-$ROOT/target/release/nostrwire}
CONFIG=""
TEST=event
CONNS=1000
SECONDS_PER_RUN=20
THREADS=1
ROUNDS=1
PORT=7796
SEED=yes
PEERS_DIR=${PEERS_DIR:-$HOME/.cache/nostrwire-peers}
NOSTR_BENCH=${NOSTR_BENCH:-$PEERS_DIR/bin/nostr-bench}

while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BIN=$2; shift 2 ;;
        --config) CONFIG=$2; shift 2 ;;
        --test) TEST=$2; shift 2 ;;
        --connections) CONNS=$2; shift 2 ;;
        --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        --empty) SEED=no; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
case "$TEST" in event|req) ;; *) echo "--test is event or req" >&2; exit 2 ;; esac
[ -x "$BIN" ] || { echo "no relay binary at $BIN (cargo build --release)" >&2; exit 1; }
[ -x "$NOSTR_BENCH" ] || {
    echo "nostr-bench not found at $NOSTR_BENCH: scripts/compare-relays.sh installs it" >&2
    exit 1
}
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    echo "port $PORT is in use: pass --port" >&2
    exit 1
fi

work=$(mktemp -d)
relay_pid=""
cleanup() {
    [ -z "$relay_pid" ] || kill -INT "$relay_pid" 2>/dev/null || true
    [ -z "$relay_pid" ] || wait "$relay_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ -z "$CONFIG" ]; then
    # As compare-relays runs ours under nostr-bench: no per-address
    # connection limit (1,000 clients from 127.0.0.1), no challenge on
    # connect (nostr-bench would read it as the answer to its first EVENT).
    CONFIG="$work/relay.toml"
    printf '[rate]\nconnections_per_ip = 0\n[auth]\nchallenge_on_connect = false\n' >"$CONFIG"
fi
if [ "$TEST" = req ] && [ "$SEED" = yes ]; then
    (cd "$ROOT" && cargo build --release --locked -q -p nostrwire-loadgen --example nostr_bench_seed)
    "${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/nostr_bench_seed" \
        --per-tag 10 --newest "$(date +%s)" >"$work/seed.jsonl"
fi
source "$ROOT/scripts/lib/bench-lock.sh"
bench_lock

# "role user_ticks system_ticks voluntary involuntary" for each thread.
threads_now() {
    local t comm
    for t in /proc/"$1"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        # Fields after the parenthesised name: utime is the 12th, stime the 13th.
        read -r -a stat <<<"$(sed 's/.*) //' "$t/stat" 2>/dev/null)" || continue
        # A thread that ended meanwhile (the allocator's trim) has no figures.
        [ "${#stat[@]}" -gt 12 ] || continue
        echo "$comm ${stat[11]} ${stat[12]} $(awk '/^voluntary_ctxt/ {v=$2} /^nonvoluntary_ctxt/ {n=$2} END {print v, n}' "$t/status")"
    done
}

echo "# $TEST, $CONNS connections, $SECONDS_PER_RUN s, nostr-bench -t $THREADS; $(nproc) cores, $(uname -r); $("$BIN" --version 2>/dev/null || echo nostrwire)"
for round in $(seq "$ROUNDS"); do
    rm -rf "$work/data"
    "$BIN" relay --config "$CONFIG" --listen "127.0.0.1:$PORT" --data "$work/data" \
        >"$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.1
    done
    extra=()
    if [ "$TEST" = req ] && [ "$SEED" = yes ]; then
        "$BIN" load --relay "ws://127.0.0.1:$PORT" --scenario publish --replay "$work/seed.jsonl" \
            --count 10000 --connections 100 --duration 300 --timeout 10 --rounds 1 --quiet \
            >"$work/seed.txt" 2>&1 || { echo "seeding failed: $(tail -3 "$work/seed.txt")" >&2; exit 1; }
    fi
    [ "$TEST" = req ] && extra=(--limit 10)
    threads_now "$relay_pid" >"$work/before"
    timeout "$((SECONDS_PER_RUN + 60))" "$NOSTR_BENCH" "$TEST" "ws://127.0.0.1:$PORT" \
        -c "$CONNS" -r "$CONNS" -k "$SECONDS_PER_RUN" -t "$THREADS" "${extra[@]}" --json \
        >"$work/bench.out" 2>"$work/bench.err" || true
    threads_now "$relay_pid" >"$work/after"
    kill -INT "$relay_pid"
    wait "$relay_pid" 2>/dev/null || true
    relay_pid=""
    python3 - "$work/before" "$work/after" "$work/bench.out" "$(getconf CLK_TCK)" "$round" <<'PY'
import collections, json, re, sys
before, after, bench, tck, rnd = sys.argv[1:]
tck = int(tck)
lines = [json.loads(l) for l in open(bench, errors="replace") if l.startswith("{")]
if not lines:
    sys.exit(f"round {rnd}: nostr-bench printed nothing")
stats = lines[-1]["message_stats"]
ops, errors = stats["complete"], stats["error"]
if not ops:
    sys.exit(f"round {rnd}: no operation completed")

def load(path):
    roles = collections.defaultdict(lambda: [0, 0, 0, 0])
    for line in open(path):
        name, *values = line.split()
        role = re.sub(r"[-0-9]+$", "", name)
        for i, v in enumerate(values):
            roles[role][i] += int(v)
    return roles

a, b = load(before), load(after)
print(f"round {rnd}: {ops} operations, {errors} errors")
print(f"  {'role':16} {'user µs':>8} {'sys µs':>8} {'vol cs':>7} {'invol cs':>8}   (per operation)")
total = [0.0, 0.0]
for role in sorted(b):
    d = [b[role][i] - a[role][i] for i in range(4)]
    user, system = d[0] * 1e6 / tck / ops, d[1] * 1e6 / tck / ops
    if user + system < 0.05:
        continue
    total[0] += user
    total[1] += system
    print(f"  {role:16} {user:8.1f} {system:8.1f} {d[2] / ops:7.2f} {d[3] / ops:8.2f}")
print(f"  {'total':16} {total[0]:8.1f} {total[1]:8.1f}   = {sum(total):.1f} µs per operation")
PY
done
