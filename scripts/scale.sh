#!/usr/bin/env bash
# How the relay's throughput grows with cores: pins the relay to 1, 2, 4, …
# cores with taskset, drives it with nostr-bench (rnostr's load tool) on the
# other cores, and prints events/s, relay CPU µs per event, REQs/s and relay
# CPU µs per REQ for each core count; rnostr (another LMDB relay) the same way
# beside ours when given, and the host's REQ floor with --floor.
#
#   scripts/scale.sh [--bin PATH] [--label NAME] [--rnostr PATH] [--floor]
#                    [--cores "1 2 4 8"] [--seconds S] [--connections N]
#                    [--tests "event req"] [--rnostr-tests "req"] [--split N]
#                    [--out DIR] [--port P]
#
# --bin: our relay (default target/release/nostrwire; also the publisher
#   that seeds the REQ test). Several relays: repeat --bin and --label
#   (--label before its --bin).
# --rnostr: rnostr's binary, measured the same way (its own configuration,
#   as `nostrwire bench relays` runs it), by default for REQs only
#   (--rnostr-tests "event req" for both).
# --floor: also runs the REQ test against the floor_relay example
#   (`--req` mode: answers each of nostr-bench's REQs with the seed's events
#   rendered in advance, no storage, no signature checks), pinned as the
#   relay, as the relay label `floor`: what nostr-bench itself can do on
#   these cores, and the socket + parse floor of relay CPU per REQ. A table
#   then gives each relay's REQs/s as a ratio to the floor's.
# --split N: at the largest core count, also run the REQ test from N
#   nostr-bench processes at once, each on its share of the load cores
#   (a cap inside the relay shows as N processes getting what one gets).
# --out: keeps each run's nostr-bench output, the relay's per-thread CPU
#   and results.tsv there.
#
# The relay gets cores 0..c-1. The load gets the top `max cores` cores when
# the machine has twice as many as the largest count (16 cores: relay on
# 0-7 at most, nostr-bench on 8-15 for every row, as in issue 47), else the
# cores the relay does not use, else (2 cores, relay on both) all of them.
# nostr-bench runs with one thread per load core and --connections
# connections (default 1,000). REQ: the relay is first seeded with the
# 10,000 hashtag events of crates/loadgen/examples/nostr_bench_seed.rs
# (`nostrwire load --replay`, not timed; the floor reads the same file at
# start), then `nostr-bench req --limit 10`.
# Relay CPU is the process's user + system time over the timed part
# (/proc/PID/stat), per operation nostr-bench completed.
#
# Tools: NOSTR_BENCH (default $PEERS_DIR/bin/nostr-bench), SEED_BIN (the
# nostr_bench_seed example) and FLOOR_BIN (the floor_relay example), each
# built when absent, PEERS_DIR as for scripts/compare-relays.sh, which
# installs nostr-bench and rnostr.
set -euo pipefail
ROOT=${SCALE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
PEERS_DIR=${PEERS_DIR:-$HOME/.cache/nostrwire-peers}
NOSTR_BENCH=${NOSTR_BENCH:-$PEERS_DIR/bin/nostr-bench}
SEED_BIN=${SEED_BIN:-}
FLOOR_BIN=${FLOOR_BIN:-}
FLOOR=0
BINS=()
LABELS=()
label=""
RNOSTR=""
CORES="1 2 4 8"
SECS=8
CONNS=1000
TESTS="event req"
RNOSTR_TESTS="req"
SPLIT=0
OUT=""
PORT=7840

while [ $# -gt 0 ]; do
    case "$1" in
        --bin) BINS+=("$2"); LABELS+=("${label:-ours}"); label=""; shift 2 ;;
        --label) label=$2; shift 2 ;;
        --rnostr) RNOSTR=$2; shift 2 ;;
        --floor) FLOOR=1; shift ;;
        --cores) CORES=$2; shift 2 ;;
        --seconds) SECS=$2; shift 2 ;;
        --connections) CONNS=$2; shift 2 ;;
        --tests) TESTS=$2; shift 2 ;;
        --rnostr-tests) RNOSTR_TESTS=$2; shift 2 ;;
        --split) SPLIT=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
[ ${#BINS[@]} -gt 0 ] || { BINS=("$ROOT/target/release/nostrwire"); LABELS=(ours); }
for b in "${BINS[@]}"; do
    [ -x "$b" ] || { echo "no relay binary at $b (cargo build --release)" >&2; exit 1; }
done
[ -x "$NOSTR_BENCH" ] || {
    echo "nostr-bench not found at $NOSTR_BENCH (NOSTR_BENCH=...; scripts/compare-relays.sh --install-only installs it)" >&2
    exit 1
}
[ -z "$RNOSTR" ] || [ -x "$RNOSTR" ] || { echo "no rnostr at $RNOSTR" >&2; exit 1; }
command -v taskset >/dev/null || { echo "taskset (util-linux) is needed" >&2; exit 1; }

NPROC=$(nproc)
MAXC=0
for c in $CORES; do
    [ "$c" -le "$NPROC" ] || { echo "--cores: $c is more than the $NPROC cores here" >&2; exit 2; }
    [ "$c" -gt "$MAXC" ] && MAXC=$c
done

work=$(mktemp -d)
OUT=${OUT:-$work/out}
mkdir -p "$OUT"
relay_pid=""
cleanup() {
    if [ -n "$relay_pid" ]; then
        kill -INT "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The tests the floor runs: REQ only, when the relays run it.
FLOOR_TESTS=""
[ "$FLOOR" = 1 ] && [[ " $TESTS " == *" req "* ]] && FLOOR_TESTS=req
[ "$FLOOR" = 0 ] || [ -n "$FLOOR_TESTS" ] || echo "--floor: the floor is for REQs, and --tests has no req" >&2
if [ -n "$FLOOR_TESTS" ] && [ -z "$FLOOR_BIN" ]; then
    (cd "$ROOT" && cargo build --release --locked -q -p nostrwire-loadgen --example floor_relay)
    FLOOR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/floor_relay"
fi
[ -z "$FLOOR_TESTS" ] || [ -x "$FLOOR_BIN" ] || { echo "no floor_relay at $FLOOR_BIN" >&2; exit 1; }

if [[ " $TESTS " == *" req "* ]] || { [ -n "$RNOSTR" ] && [[ " $RNOSTR_TESTS " == *" req "* ]]; }; then
    if [ -z "$SEED_BIN" ]; then
        (cd "$ROOT" && cargo build --release --locked -q -p nostrwire-loadgen --example nostr_bench_seed)
        SEED_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/nostr_bench_seed"
    fi
    "$SEED_BIN" --per-tag 10 --newest "$(date +%s)" >"$work/seed.jsonl"
fi
if [ -f "$ROOT/scripts/lib/bench-lock.sh" ]; then
    source "$ROOT/scripts/lib/bench-lock.sh"
    bench_lock
fi

# "first-last" core list helpers.
relay_cores() { echo "0-$(($1 - 1))"; }
load_cores() {
    local c=$1
    if [ "$NPROC" -ge $((2 * MAXC)) ]; then
        echo "$((NPROC - MAXC))-$((NPROC - 1))"
    elif [ "$c" -lt "$NPROC" ]; then
        echo "$c-$((NPROC - 1))"
    else
        echo "0-$((NPROC - 1))"
    fi
}
count_cores() { local a=${1%-*} b=${1#*-}; echo $((b - a + 1)); }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
threads_now() {
    local t comm
    for t in /proc/"$1"/task/*; do
        comm=$(cat "$t/comm" 2>/dev/null) || continue
        read -r -a stat <<<"$(sed 's/.*) //' "$t/stat" 2>/dev/null)" || continue
        [ "${#stat[@]}" -gt 12 ] || continue
        echo "$comm ${stat[11]} ${stat[12]}"
    done
}
wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "relay did not listen on $PORT" >&2
    return 1
}

start_relay() { # kind bin cores
    local kind=$1 bin=$2 cores=$3
    rm -rf "$work/data"
    mkdir -p "$work/data"
    case "$kind" in
        rnostr)
            printf '[information]\nname = "rnostr bench"\n[data]\npath = "%s/db"\n[network]\nhost = "127.0.0.1"\nport = %s\n[thread]\nhttp = 0\nreader = 0\n[limitation]\nmax_message_length = 1048576\nmax_subscriptions = 100\nmax_filters = 10\nmax_limit = 5000\nmax_event_tags = 10000\nmax_event_time_older_than_now = 315360000\nmax_event_time_newer_than_now = 900\n[rate_limiter]\nenabled = false\n' \
                "$work/data" "$PORT" >"$work/rnostr.toml"
            taskset -c "$cores" "$bin" relay -c "$work/rnostr.toml" >"$work/relay.log" 2>&1 &
            ;;
        floor)
            # Serves the seed file itself (no seeding through the socket),
            # one worker per core it is pinned to.
            taskset -c "$cores" "$bin" --req "$work/seed.jsonl" --listen "127.0.0.1:$PORT" \
                --seconds "$((SECS + 120))" >"$work/relay.log" 2>&1 &
            ;;
        *)
            # As compare-relays runs ours under nostr-bench: no per-address
            # connection limit, no challenge on connect.
            printf '[rate]\nconnections_per_ip = 0\n[auth]\nchallenge_on_connect = false\n' >"$work/relay.toml"
            taskset -c "$cores" "$bin" relay --config "$work/relay.toml" \
                --listen "127.0.0.1:$PORT" --data "$work/data/nw" >"$work/relay.log" 2>&1 &
            ;;
    esac
    relay_pid=$!
    wait_port
}

stop_relay() {
    kill -INT "$relay_pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$relay_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$relay_pid" 2>/dev/null || true
    wait "$relay_pid" 2>/dev/null || true
    relay_pid=""
}

seed() { # publisher bin, load cores
    (cd "$ROOT" && taskset -c "$2" "$1" load --relay "ws://127.0.0.1:$PORT" --scenario publish --replay "$work/seed.jsonl" \
        --count 10000 --connections 1000 --duration 300 --timeout 10 --rounds 1 --quiet \
        >"$work/seed.txt" 2>&1) || { echo "seeding failed: $(tail -3 "$work/seed.txt")" >&2; return 1; }
}

# One timed nostr-bench run (or N at once on shares of the load cores);
# prints "ops cpu_ticks".
bench() { # test cores processes tag
    local test=$1 cores=$2 procs=$3 tag=$4 extra=() pids=() first=${2%-*} n
    n=$(count_cores "$cores")
    [ "$test" = req ] && extra=(--limit 10)
    threads_now "$relay_pid" >"$work/before"
    local t0 i share from
    t0=$(cpu_ticks "$relay_pid")
    share=$((n / procs))
    [ "$share" -ge 1 ] || share=1
    for i in $(seq 0 $((procs - 1))); do
        from=$((first + (i * share) % n))
        timeout "$((SECS + 60))" taskset -c "$from-$((from + share - 1))" "$NOSTR_BENCH" "$test" \
            "ws://127.0.0.1:$PORT" -c "$((CONNS / procs))" -r "$((CONNS / procs))" -k "$SECS" \
            -t "$share" "${extra[@]}" --json >"$OUT/$tag.$i.jsonl" 2>"$work/bench.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    local t1
    t1=$(cpu_ticks "$relay_pid")
    threads_now "$relay_pid" >"$work/after"
    python3 - "$work/before" "$work/after" "$(getconf CLK_TCK)" >"$OUT/$tag.threads.txt" <<'PY' || true
import collections, re, sys
def load(p):
    r = collections.defaultdict(lambda: [0, 0])
    for line in open(p):
        name, u, s = line.split()
        role = re.sub(r"[-0-9]+$", "", name)
        r[role][0] += int(u); r[role][1] += int(s)
    return r
a, b = load(sys.argv[1]), load(sys.argv[2]); tck = int(sys.argv[3])
for role in sorted(b):
    d = sum(b[role]) - sum(a[role])
    if d:
        print(f"{role} {d / tck:.2f}")
PY
    local ops=0 o
    for i in $(seq 0 $((procs - 1))); do
        o=$(python3 -c 'import json,sys
lines=[json.loads(l) for l in open(sys.argv[1], errors="replace") if l.startswith("{")]
print(lines[-1]["message_stats"]["complete"] if lines else 0)' "$OUT/$tag.$i.jsonl")
        ops=$((ops + o))
    done
    echo "$ops $((t1 - t0))"
}

TCK=$(getconf CLK_TCK)
row() { # label cores test ops ticks procs
    python3 - "$@" "$SECS" "$TCK" <<'PY'
import sys
label, cores, test, ops, ticks, procs, secs, tck = sys.argv[1:]
ops, ticks, secs, tck = int(ops), int(ticks), float(secs), int(tck)
rate = ops / secs
cpu = ticks / tck * 1e6 / ops if ops else float("nan")
print(f"{label}\t{cores}\t{test}\t{procs}\t{rate:.0f}\t{cpu:.0f}\t{ticks / tck / secs:.2f}")
PY
}

echo "# scale: $NPROC cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# nostr-bench: $CONNS connections, $SECS s per test; relay on cores 0..c-1, load on $(load_cores 1) (c=1)"
printf 'relay\tcores\ttest\tprocs\tops/s\tµs/op\trelay cores busy\n' | tee "$OUT/results.tsv"
run_relay() { # label kind bin tests
    local label=$1 kind=$2 bin=$3 tests=$4 c test rc lc r
    for c in $CORES; do
        rc=$(relay_cores "$c")
        lc=$(load_cores "$c")
        for test in $tests; do
            start_relay "$kind" "$bin" "$rc"
            if [ "$test" = req ] && [ "$kind" != floor ]; then seed "${BINS[0]}" "$lc"; fi
            r=$(bench "$test" "$lc" 1 "$label.$c.$test")
            row "$label" "$c" "$test" $r 1 | tee -a "$OUT/results.tsv"
            if [ "$test" = req ] && [ "$SPLIT" -gt 1 ] && [ "$c" = "$MAXC" ]; then
                r=$(bench "$test" "$lc" "$SPLIT" "$label.$c.$test.split")
                row "$label" "$c" "$test" $r "$SPLIT" | tee -a "$OUT/results.tsv"
            fi
            cp "$work/relay.log" "$OUT/$label.$c.$test.log" 2>/dev/null || true
            stop_relay
        done
    done
}
for i in "${!BINS[@]}"; do
    run_relay "${LABELS[$i]}" ours "${BINS[$i]}" "$TESTS"
done
[ -z "$RNOSTR" ] || run_relay rnostr rnostr "$RNOSTR" "$RNOSTR_TESTS"
[ -z "$FLOOR_TESTS" ] || run_relay floor floor "$FLOOR_BIN" "$FLOOR_TESTS"

# The table of issue 47, one per relay.
python3 - "$OUT/results.tsv" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
by = collections.OrderedDict()
for label, cores, test, procs, rate, cpu, busy in rows:
    key = (label, int(cores))
    by.setdefault(label, collections.OrderedDict()).setdefault(int(cores), {})[(test, procs)] = (int(rate), cpu, busy)
def fmt(n):
    return f"{n:,}"
base = {}
for label, cores in by.items():
    print(f"\n{label}\n")
    print("| relay cores | events/s | relay CPU µs per event | REQs/s (limit 10) | relay CPU µs per REQ | relay cores busy (event / req) |")
    print("|---|---|---|---|---|---|")
    for c, t in cores.items():
        e = t.get(("event", "1")); q = t.get(("req", "1"))
        cell = lambda x, i: (fmt(x[0]) if i == 0 else x[i]) if x else "–"
        print(f"| {c} | {cell(e, 0)} | {cell(e, 1)} | {cell(q, 0)} | {cell(q, 1)} | {e[2] if e else '–'} / {q[2] if q else '–'} |")
        for (test, procs), v in t.items():
            if procs != "1":
                print(f"| {c} ({procs} nostr-bench processes) | | | {fmt(v[0])} | {v[1]} | – / {v[2]} |")
    cs = sorted(cores)
    if len(cs) > 1:
        lo, hi = cs[0], cs[-1]
        for test, name in (("event", "events"), ("req", "REQs")):
            a = cores[lo].get((test, "1")); b = cores[hi].get((test, "1"))
            if a and b and a[0]:
                print(f"\n{name}: {hi} cores / {lo} core = {b[0] / a[0]:.2f}x", end="")
        print()

# Against the floor: each relay's REQs/s and relay CPU per REQ as a ratio to
# the floor's at the same core count.
floor = by.get("floor")
others = [label for label in by if label != "floor"]
if floor and others:
    print("\nREQs against the floor (floor_relay --req, same cores, same nostr-bench): rate, and relay CPU µs per REQ, as a ratio to the floor's\n")
    print("| relay cores | floor REQs/s | floor µs per REQ | " + " | ".join(f"{l} REQs/s | {l} µs per REQ" for l in others) + " |")
    print("|---|---|---|" + "---|---|" * len(others))
    for c, t in floor.items():
        f = t.get(("req", "1"))
        if not f:
            continue
        cells = []
        for label in others:
            q = by[label].get(c, {}).get(("req", "1"))
            if not q:
                cells += ["–", "–"]
                continue
            rate = f"{fmt(q[0])} ({q[0] / f[0]:.2f}x)" if f[0] else fmt(q[0])
            try:
                cpu = f"{q[1]} ({float(q[1]) / float(f[1]):.2f}x)"
            except (ValueError, ZeroDivisionError):
                cpu = q[1]
            cells += [rate, cpu]
        print(f"| {c} | {fmt(f[0])} | {f[1]} | " + " | ".join(cells) + " |")
PY
