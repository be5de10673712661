#!/usr/bin/env bash
# Compare nostrwire's relay with peer relays under `nostrwire load` and under
# rnostr's nostr-bench, side by side.
#
# Installs the peers from the package registries (pinned versions), starts each
# on its own loopback port with a fresh data directory and rate limits lifted,
# runs the chosen scenarios against all of them in interleaved rounds
# (ours first: every ratio is relative to ours), stops them, and writes
# bench-runs/<date>-<machine>/relays.{md,json,svg} plus peers.md (versions,
# configs, durability). Then nostr-bench (pinned, installed beside the peers)
# runs `event` and `req` against each relay alone on a fresh data directory,
# in alternating rounds, with the relay's CPU time read from /proc around each
# run; nostr-bench.{md,jsonl} hold its figures and headline.md puts both
# tools' figures side by side (events/s, µs relay CPU per event, REQs/s,
# µs relay CPU per REQ, bytes returned per REQ, ratio ours / best peer).
# `nostrwire bench headline` writes headline.md from relays.json,
# nostr-bench.jsonl and names.tsv (each URL and its relay), with the rules
# (ratios only from rounds without timeouts, only where the work was equal)
# in crates/loadgen/src/headline/; scripts/lib/nostr_bench_md.py writes
# nostr-bench.md; both can be written again from the run's files.
#
# All traffic stays on 127.0.0.1. Every run is bounded by --count events and
# --duration seconds per scenario and round (nostr-bench: --bench-seconds per
# run), and stops by itself.
#
# Usage: scripts/compare-relays.sh [--peers LIST] [--scenarios LIST] [--count N]
#            [--duration S] [--rounds R] [--connections N] [--timeout S]
#            [--out DIR] [--no-ours] [--install-only] [--disk]
#            [--attack-seconds S] [--abuse-args "FLAGS"]
#            [--bench-tests LIST] [--bench-seconds S] [--bench-rounds R]
#            [--bench-threads T] [--no-nostr-bench] [--no-load]
#   --timeout is how long the load tester waits for any one answer (default 5 s):
#   a relay that leaves some events unanswered (rnostr does, for a few corpus
#   follow lists) stalls that connection for this long each time.
#   --disk stops every relay after the run (SIGTERM; ours once its trailing
#   indexes are written) and adds disk.md: each data directory's size after
#   the same events, and the JSON of the events ours kept (`nostrwire export`).
#   Abuse scenarios (`abuse` for all, or `abuse-slow-readers`, …) run apart:
#   one relay at a time on a fresh data directory, one attack at a time; a
#   relay an attack leaves down or unresponsive is recorded as such and
#   restarted (same data directory) for the next attack. They write
#   abuse.{txt,md,json} and abuse/<relay>-<attack>.{txt,json}.
#   --attack-seconds is each attack's length; --abuse-args passes more
#   `nostrwire load` flags (e.g. "--idle-flood 2000 --probe-rate 20").
#   nostr-bench: --bench-tests (default event-c20,event-c1000,req-c1000) names
#   each run as TOOL-cCONNECTIONS; --bench-seconds is each run's length
#   (nostr-bench -k, default 15); --bench-rounds (default: --rounds, at least
#   2; fewer only when given); --bench-threads is nostr-bench's -t (default
#   1); --req-limit the limit of its REQs (default 10). --no-nostr-bench
#   skips it, --no-load skips the `nostrwire load` part. `query` always runs
#   first (fresh data: every relay serves the same events).
#   LIST is comma-separated. Peers: khatru-lmdb, khatru-badger, nostr-rs-relay, rnostr.
#   Environment: PEERS_DIR (installed peers, default ~/.cache/nostrwire-peers);
#   NOSTRWIRE_BIN (a built nostrwire binary; default: build target/release/nostrwire);
#   NOSTR_BENCH_SEED_BIN (the nostr_bench_seed example; default: built beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

peers="khatru-lmdb,khatru-badger,nostr-rs-relay,rnostr"
scenarios="query,publish,publish-open,mixed,fanout"
count=5000
duration=20
rounds=3
connections=8
timeout=5
out=""
ours=1
install_only=0
disk=0
attack_seconds=15
abuse_args=""
bench_tests="event-c20,event-c1000,req-c1000"
bench_seconds=15
bench_rounds=""
bench_threads=1
req_limit=10
nostr_bench=1
load=1
nb_per_tag=10
while [ $# -gt 0 ]; do
    case "$1" in
        --peers) peers=$2; shift 2 ;;
        --scenarios) scenarios=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --no-ours) ours=0; shift ;;
        --install-only) install_only=1; shift ;;
        --disk) disk=1; shift ;;
        --attack-seconds) attack_seconds=$2; shift 2 ;;
        --abuse-args) abuse_args=$2; shift 2 ;;
        --bench-tests) bench_tests=$2; shift 2 ;;
        --bench-seconds) bench_seconds=$2; shift 2 ;;
        --bench-rounds) bench_rounds=$2; shift 2 ;;
        --bench-threads) bench_threads=$2; shift 2 ;;
        --req-limit) req_limit=$2; shift 2 ;;
        --no-nostr-bench) nostr_bench=0; shift ;;
        --no-load) load=0; shift ;;
        -h|--help) sed -n '2,50p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

# Abuse scenarios run apart from the others (see the usage above).
ABUSE_ATTACKS="abuse-slow-readers abuse-idle-flood abuse-oversized-subs abuse-deflate-bomb abuse-quadratic-json abuse-hostile-search abuse-deletion-undo abuse-auth-relayed abuse-spread-slow-readers abuse-spread-oversized-subs abuse-spread-heavy-queries"
normal=()
attacks=()
IFS=',' read -r -a scenario_list <<<"$scenarios"
for sc in "${scenario_list[@]}"; do
    case "$sc" in
        abuse) read -r -a all_attacks <<<"$ABUSE_ATTACKS"; attacks+=("${all_attacks[@]}") ;;
        abuse-*) attacks+=("$sc") ;;
        *) normal+=("$sc") ;;
    esac
done
# `query` runs first, on the fresh data directories: every relay then holds
# the same seeded events when it is asked. After a publishing scenario, a
# relay that could not take all --count events within --duration would hold
# fewer, and answer with less.
ordered=()
for sc in "${normal[@]}"; do [ "$sc" != query ] || ordered+=(query); done
for sc in "${normal[@]}"; do [ "$sc" = query ] || ordered+=("$sc"); done
if [ "${#ordered[@]}" -gt 0 ] && [ "${ordered[*]}" != "${normal[*]}" ]; then
    echo "compare-relays: query runs first (on fresh data, so every relay serves the same events)" >&2
fi
normal=("${ordered[@]}")
scenarios=$(IFS=','; echo "${normal[*]}")

# Pinned peer versions (see docs/bench-methodology.md).
KHATRU_VERSION=v0.19.0
EVENTSTORE_VERSION=v0.16.2
GO_NOSTR_VERSION=v0.51.8
SONIC_VERSION=v1.15.5
NOSTR_RS_RELAY_VERSION=0.8.12
RNOSTR_VERSION=0.4.8
NOSTR_BENCH_VERSION=0.4.0

PEERS_DIR=${PEERS_DIR:-$HOME/.cache/nostrwire-peers}
mkdir -p "$PEERS_DIR/bin"
machine=$(hostname -s 2>/dev/null || cat /proc/sys/kernel/hostname)
[ -n "$out" ] || out="bench-runs/$(date -u +%Y-%m-%d)-$machine"
[ "$install_only" = 1 ] || mkdir -p "$out"
work=$(mktemp -d /tmp/nostrwire-compare.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

log() { echo "compare-relays: $*" >&2; }

install_khatru() {
    [ -x "$PEERS_DIR/bin/khatru-bench" ] && return 0
    command -v go >/dev/null || { log "go not found: skipping khatru"; return 1; }
    local dir="$PEERS_DIR/khatru-src"
    mkdir -p "$dir"
    cat >"$dir/main.go" <<'EOF'
// A minimal khatru relay for benchmarks: one eventstore backend, no policies
// (so no rate limits), listening where -addr says.
package main

import (
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/fiatjaf/eventstore"
	"github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/eventstore/lmdb"
	"github.com/fiatjaf/khatru"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7780", "listen address")
	data := flag.String("data", "", "data directory")
	backend := flag.String("backend", "lmdb", "lmdb or badger")
	flag.Parse()
	if err := os.MkdirAll(*data, 0o755); err != nil {
		log.Fatal(err)
	}
	var db eventstore.Store
	switch *backend {
	case "lmdb":
		db = &lmdb.LMDBBackend{Path: *data}
	case "badger":
		db = &badger.BadgerBackend{Path: *data}
	default:
		log.Fatalf("unknown backend %q", *backend)
	}
	if err := db.Init(); err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	relay := khatru.NewRelay()
	relay.Info.Name = "khatru-" + *backend
	relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
	if c, ok := db.(eventstore.Counter); ok {
		relay.CountEvents = append(relay.CountEvents, c.CountEvents)
	}
	relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)
	log.Printf("khatru-%s on %s", *backend, *addr)
	log.Fatal(http.ListenAndServe(*addr, relay))
}
EOF
    (
        cd "$dir"
        [ -f go.mod ] || go mod init nostrwire.local/khatru-bench >/dev/null 2>&1
        go get "github.com/fiatjaf/khatru@$KHATRU_VERSION" \
            "github.com/fiatjaf/eventstore@$EVENTSTORE_VERSION" \
            "github.com/nbd-wtf/go-nostr@$GO_NOSTR_VERSION" \
            "github.com/bytedance/sonic@$SONIC_VERSION"
        go mod tidy
        CGO_ENABLED=1 go build -o "$PEERS_DIR/bin/khatru-bench" .
    )
}

install_nostr_rs_relay() {
    [ -x "$PEERS_DIR/bin/nostr-rs-relay" ] && return 0
    if ! command -v protoc >/dev/null; then
        log "installing protobuf-compiler (nostr-rs-relay needs protoc)"
        apt-get install -y -q protobuf-compiler >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler >/dev/null; } ||
            { log "no protoc: skipping nostr-rs-relay"; return 1; }
    fi
    # Not --locked: its lockfile pins a `time` release that no longer compiles.
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo install nostr-rs-relay \
        --version "$NOSTR_RS_RELAY_VERSION" --root "$PEERS_DIR" -q
}

install_rnostr() {
    [ -x "$PEERS_DIR/bin/rnostr" ] && return 0
    # DOCS_RS=1 keeps its search dependency's build script from downloading dictionaries.
    DOCS_RS=1 CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo install rnostr \
        --version "$RNOSTR_VERSION" --locked --root "$PEERS_DIR" -q
}

install_nostr_bench() {
    [ -x "$PEERS_DIR/bin/nostr-bench" ] && return 0
    # Not --locked: its lockfile pins a `time` release that no longer compiles.
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo install nostr-bench \
        --version "$NOSTR_BENCH_VERSION" --root "$PEERS_DIR" -q
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Moves $port past ports something else already listens on (another
# relay on this machine would otherwise answer in place of ours).
free_port() {
    while port_in_use "$port"; do
        log "port $port is in use by another process: trying $((port + 1))"
        port=$((port + 1))
    done
}

# Waits for relay $2 (process $3) to listen on port $1.
wait_port() {
    local port=$1 name=$2 pid=$3
    for _ in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "$name exited before opening port $port"
            return 1
        fi
        if port_in_use "$port"; then
            return 0
        fi
        sleep 0.1
    done
    log "$name did not open port $port"
    return 1
}

urls=()
names=()
describe=()
port=7790

start_ours() {
    free_port
    local bin="$NW"
    local data="$work/ours"
    mkdir -p "$data"
    # Throughput runs open up to thousands of connections from 127.0.0.1,
    # which the default per-address limit (32) would refuse: like the peers,
    # which have no such limit, nostrwire gets none for them. Equal work: the
    # peers serve every kind to anyone, so ours lifts its NIP-42 read
    # restriction (kinds 4 and 1059 by default) and every relay answers the
    # same queries with the same events. No AUTH challenge on connect: a
    # client that does not speak NIP-42 (nostr-bench) would take it for the
    # answer to its first message; with nothing restricted, none is sent at
    # all (a tree without the setting always sends it: the greeting check
    # before each nostr-bench run shows it). The abuse scenarios keep every
    # default (their attacker has an address of its own).
    local config="$work/ours.toml"
    local changed="\`connections_per_ip = 0\` and \`restricted_kinds = []\`"
    if [[ ${ABUSE_RUN:-0} == 1 ]]; then
        : >"$config"
    else
        printf '[rate]\nconnections_per_ip = 0\n\n[auth]\nrestricted_kinds = []\n' >"$config"
        if "$bin" relay --print-config 2>/dev/null | grep -q '^challenge_on_connect'; then
            printf 'challenge_on_connect = false\n' >>"$config"
            changed="\`connections_per_ip = 0\`, \`restricted_kinds = []\` and \`challenge_on_connect = false\`"
        fi
    fi
    "$bin" relay --config "$config" --listen "127.0.0.1:$port" --data "$data" >"$work/ours.log" 2>&1 &
    pids+=($!)
    wait_port "$port" nostrwire "$!" || { tail -n 5 "$work/ours.log" >&2; return 1; }
    urls+=("ws://127.0.0.1:$port")
    names+=("nostrwire")
    describe+=("| nostrwire | $("$NW" --version) (tree at $(git rev-parse --short HEAD)) | \`nostrwire relay --listen 127.0.0.1:$port --data DIR\`, default config (\`nostrwire relay --print-config\`) except $changed outside the abuse scenarios | $("$NW" relay --print-config | grep -m1 '^durability' || echo 'see the config') |")
    port=$((port + 1))
}

start_peer() {
    free_port
    local peer=$1 data="$work/$1"
    mkdir -p "$data"
    case "$peer" in
        khatru-lmdb|khatru-badger)
            install_khatru || return 1
            local backend=${peer#khatru-}
            "$PEERS_DIR/bin/khatru-bench" -addr "127.0.0.1:$port" -data "$data" -backend "$backend" \
                >"$work/$peer.log" 2>&1 &
            pids+=($!)
            describe+=("| $peer | khatru $KHATRU_VERSION, eventstore $EVENTSTORE_VERSION ($backend), go-nostr $GO_NOSTR_VERSION | no policies (no rate limits), MaxMessageSize default 512,000 | eventstore's $backend backend with its default options |")
            ;;
        nostr-rs-relay)
            install_nostr_rs_relay || return 1
            cat >"$data/config.toml" <<EOF
[info]
relay_url = "ws://127.0.0.1:$port/"
name = "nostr-rs-relay bench"
[database]
data_directory = "$data"
[network]
address = "127.0.0.1"
port = $port
[limits]
max_event_bytes = 1048576
max_ws_message_bytes = 1048576
max_ws_frame_bytes = 1048576
[authorization]
nip42_auth = false
[verified_users]
mode = "disabled"
EOF
            "$PEERS_DIR/bin/nostr-rs-relay" --config "$data/config.toml" --db "$data" >"$work/$peer.log" 2>&1 &
            pids+=($!)
            describe+=("| nostr-rs-relay | $NOSTR_RS_RELAY_VERSION (crates.io) | limits raised to 1 MiB, messages_per_sec/subscriptions_per_min unset (unlimited), NIP-42 off, verified users off | SQLite, one transaction per event (WAL) |")
            ;;
        rnostr)
            install_rnostr || return 1
            cat >"$data/rnostr.toml" <<EOF
[information]
name = "rnostr bench"
[data]
path = "$data/db"
[network]
host = "127.0.0.1"
port = $port
[thread]
http = 0
reader = 0
[limitation]
max_message_length = 1048576
max_subscriptions = 100
max_filters = 10
max_limit = 5000
max_event_tags = 10000
max_event_time_older_than_now = 315360000
max_event_time_newer_than_now = 900
[rate_limiter]
enabled = false
EOF
            "$PEERS_DIR/bin/rnostr" relay -c "$data/rnostr.toml" >"$work/$peer.log" 2>&1 &
            pids+=($!)
            describe+=("| rnostr | $RNOSTR_VERSION (crates.io) | rate limiter off, message limit 1 MiB, max_limit 5000 | LMDB; writer commits every 100 ms (hard-coded) |")
            ;;
        *) log "unknown peer $peer"; return 1 ;;
    esac
    if ! wait_port "$port" "$peer" "${pids[${#pids[@]}-1]}"; then
        tail -n 5 "$work/$peer.log" >&2 || true
        unset 'describe[${#describe[@]}-1]'
        return 1
    fi
    urls+=("ws://127.0.0.1:$port")
    names+=("$peer")
    port=$((port + 1))
}

if [ "$install_only" = 1 ]; then
    IFS=',' read -r -a peer_list <<<"$peers"
    for p in "${peer_list[@]}"; do
        case "$p" in
            khatru-*) install_khatru ;;
            nostr-rs-relay) install_nostr_rs_relay ;;
            rnostr) install_rnostr ;;
        esac || log "could not install $p"
    done
    [ "$nostr_bench" = 0 ] || install_nostr_bench || log "could not install nostr-bench"
    exit 0
fi

NW=${NOSTRWIRE_BIN:-}
if [ -z "$NW" ]; then
    log "building nostrwire (release)"
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --locked -q -p nostrwire
    NW="$ROOT/target/release/nostrwire"
fi
source "$ROOT/scripts/lib/bench-lock.sh"
bench_lock

# Stops one relay: SIGTERM, then SIGKILL if it has not gone within 10 s
# (a relay wedged by an attack may not shut down).
stop_pid() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    log "pid $pid ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# Starts relay $1 (nostrwire or a peer) on port $2 with the data directory
# it had before (or a new one); sets abuse_url and abuse_pid.
start_one() {
    local name=$1
    port=$2
    if [ "$name" = nostrwire ]; then start_ours; else start_peer "$name"; fi || return 1
    abuse_url=${urls[${#urls[@]}-1]}
    abuse_pid=${pids[${#pids[@]}-1]}
}

run_abuse() {
    # nostrwire with its defaults, per-address limit included (see start_ours).
    local ABUSE_RUN=1
    mkdir -p "$out/abuse"
    local relays=() status_lines=()
    [ "$ours" = 1 ] && relays+=(nostrwire)
    local peer_list=()
    [ -z "$peers" ] || IFS=',' read -r -a peer_list <<<"$peers"
    relays+=("${peer_list[@]}")
    # shellcheck disable=SC2206
    local extra=($abuse_args)
    local rport=7890
    : >"$out/abuse.txt"
    for r in "${relays[@]}"; do
        local dir="$work/$r"
        [ "$r" != nostrwire ] || dir="$work/ours"
        rm -rf "$dir"
        log "abuse: starting $r on a fresh data directory"
        if ! start_one "$r" "$rport"; then
            log "skipping $r"
            continue
        fi
        for a in "${attacks[@]}"; do
            if ! kill -0 "$abuse_pid" 2>/dev/null; then
                log "abuse: $r is not running: restarting it"
                start_one "$r" "$rport" || { log "abuse: $r does not restart"; break; }
            fi
            log "abuse: $a against $r"
            local base="$out/abuse/$r-$a"
            "$NW" load --relay "$abuse_url" --scenario "$a" --rounds 1 \
                --timeout "$timeout" --duration "$duration" --connections "$connections" \
                --attack-seconds "$attack_seconds" "${extra[@]}" --quiet \
                --report "$base.json" >"$base.txt" 2>&1 ||
                log "abuse: $a against $r: nostrwire load failed (see $base.txt)"
            sed "s#$abuse_url#$r#g" "$base.txt" >>"$out/abuse.txt"
            local state=unknown
            [ -f "$base.json" ] && state=$(jq -r '.totals[0].abuse.relay_state // "unknown"' "$base.json")
            if ! kill -0 "$abuse_pid" 2>/dev/null; then
                status_lines+=("- $a: $r exited during the attack; restarted for the next one")
                wait "$abuse_pid" 2>/dev/null || true
                start_one "$r" "$rport" || { log "abuse: $r does not restart"; break; }
            elif [ "$state" != up ]; then
                status_lines+=("- $a: $r $state after the attack; restarted for the next one")
                stop_pid "$abuse_pid"
                start_one "$r" "$rport" || { log "abuse: $r does not restart"; break; }
            fi
        done
        stop_pid "$abuse_pid"
        rport=$((rport + 1))
    done
    # One table over every relay and attack.
    shopt -s nullglob
    local reports=("$out"/abuse/*.json)
    shopt -u nullglob
    [ "${#reports[@]}" -gt 0 ] || { log "abuse: no report written"; return 1; }
    jq -s '[.[] | .totals[] | {relay: .relay} + .abuse + {notes: .notes}]' "${reports[@]}" \
        >"$out/abuse.json"
    {
        echo "# Abuse scenarios"
        echo
        echo "Started by scripts/compare-relays.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ): each relay alone on 127.0.0.1 with a fresh data directory, one attack at a time ($attack_seconds s each${abuse_args:+; $abuse_args}). Method: docs/bench-methodology.md, \"Abuse scenarios\"."
        echo
        echo "| attack | relay | up | peak RSS / anon (+since start) MiB | OK p99 ms | EOSE p99 ms | live p99 ms | acked lost | verdict |"
        echo "|---|---|---|---|---|---|---|---|---|"
        for r in "${relays[@]}"; do
            for a in "${attacks[@]}"; do
                local f="$out/abuse/$r-$a.json"
                [ -f "$f" ] || continue
                jq -r --arg r "$r" '.totals[0].abuse as $x
                    | def ms: if . == null then "–" elif . >= 100 then (. | round | tostring) else ((. * 100 | round) / 100 | tostring) end;
                    "| \($x.attack) | \($r) | \($x.relay_state) | \(if $x.peak_rss_mib == null then "–" else "\($x.peak_rss_mib | round) / \($x.peak_rss_anon_mib | round)\(if $x.rss_anon_before_mib == null then "" else " (+\([$x.peak_rss_anon_mib - $x.rss_anon_before_mib, 0] | max | round))" end)" end) | \($x.probe_ok_p99_ms | ms) | \($x.probe_eose_p99_ms | ms) | \($x.live_delivery_p99_ms | ms) | \(if $x.acked_lost == null then "?" else $x.acked_lost end) of \($x.acked) | \($x.verdict) |"' "$f"
            done
        done
        echo
        printf '%s\n' "${status_lines[@]}"
    } >"$out/abuse.md"
    cat "$out/abuse.md"
}

# ---------------------------------------------------------------------------
# nostr-bench: each relay alone on a fresh data directory, one run at a time.

# What a relay sends on a new WebSocket connection before the client says
# anything (within 1 s): AUTH, other or nothing. A client that takes the
# first text frame for the answer to its first message (nostr-bench does)
# misreads a relay that greets it.
greeting() {
    local port=$1 fd reply="$work/greeting"
    : >"$reply"
    if ! exec {fd}<>"/dev/tcp/127.0.0.1/$port"; then
        echo unknown
        return
    fi
    printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n' "$port" >&"$fd"
    timeout 1 cat <&"$fd" >"$reply" 2>/dev/null || true
    exec {fd}>&-
    if grep -aEq '\[ *"AUTH"' "$reply"; then
        echo AUTH
    elif grep -aq '\["' "$reply"; then
        echo other
    else
        echo nothing
    fi
}

# Equal work for nostr-bench's `req`: asks relay port $1 for 100 of the
# hashtags nostr-bench draws (`{"#t":["nostr-bench-N"],"limit":$2}`, N = 0,
# 10, … 990), one REQ at a time on one WebSocket (TCP_NODELAY), and prints
# the REQs answered with EOSE, the events and the bytes of the event
# messages returned (payloads, frame headers not counted) as JSON.
# nostr-bench's own byte count cannot tell: every connection's last REQ is
# cut off by -k part-way through its answer.
req_check() {
    timeout 60 python3 - "$1" "$2" <<'PY' || echo '{"error": "check failed"}'
import base64, json, os, socket, struct, sys
port, limit = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(65536)
    if not chunk:
        sys.exit(1)
    buf += chunk
head, buf = buf.split(b"\r\n\r\n", 1)
if b" 101 " not in head.split(b"\r\n")[0]:
    sys.exit(1)

def send(text, opcode=0x1):
    data, mask = text.encode() if isinstance(text, str) else text, os.urandom(4)
    n = len(data)
    if n < 126:
        hdr = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        hdr = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

def need(n):
    global buf
    while len(buf) < n:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise EOFError
        buf += chunk

def message():
    global buf
    parts = []
    while True:
        need(2)
        b0, b1 = buf[0], buf[1]
        n, off = b1 & 0x7F, 2
        if n == 126:
            need(4); n = struct.unpack("!H", buf[2:4])[0]; off = 4
        elif n == 127:
            need(10); n = struct.unpack("!Q", buf[2:10])[0]; off = 10
        need(off + n)
        payload, buf = buf[off:off + n], buf[off + n:]
        op = b0 & 0x0F
        if op == 0x9:
            send(payload, 0xA)
            continue
        if op == 0x8:
            raise EOFError
        if op in (0x1, 0x2, 0x0):
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts)

def unescaped_len(raw):
    # Each JSON string escape counted as the UTF-8 bytes of its character
    # (the same rule as `nostrwire load`'s bytes_unescaped).
    n, i = len(raw), 0
    while True:
        j = raw.find(b"\\", i)
        if j < 0 or j + 1 >= len(raw):
            return n
        if raw[j + 1:j + 2] == b"u":
            try:
                cp = int(raw[j + 2:j + 6], 16)
            except ValueError:
                i = j + 2
                continue
            if 0xD800 <= cp < 0xDC00 and raw[j + 6:j + 8] == b"\\u":
                n -= 8
                i = j + 12
            else:
                n -= 6 - (1 if cp < 0x80 else 2 if cp < 0x800 else 3)
                i = j + 6
        else:
            n -= 1
            i = j + 2

reqs = events = size = plain = 0
for i, n in enumerate(range(0, 1000, 10)):
    sub = f"check{i}"
    send(json.dumps(["REQ", sub, {"#t": [f"nostr-bench-{n}"], "limit": limit}]))
    while True:
        raw = message()
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if msg[:2] == ["EVENT", sub]:
            events += 1
            size += len(raw)
            plain += unescaped_len(raw)
        elif msg[:2] == ["EOSE", sub]:
            reqs += 1
            break
        elif msg[:2] == ["CLOSED", sub]:
            break
    send(json.dumps(["CLOSE", sub]))
print(json.dumps({"reqs": reqs, "events": events, "bytes": size, "unescaped": plain}))
PY
}

# utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || true
}

# One nostr-bench run: $2 (event-c20, req-c1000, …) against relay $1 in
# round $3, the relay alone on a fresh data directory. Appends one JSON line
# to $nb_results.
nb_run() {
    local name=$1 test=$2 round=$3
    local tool=${test%%-c*} conns=${test##*-c}
    local dir="$work/$name"
    [ "$name" != nostrwire ] || dir="$work/ours"
    rm -rf "$dir"
    if ! start_one "$name" "$nb_port"; then
        nb_port=$((port + 1))
        log "nostr-bench: $name did not start: skipping $test"
        return 1
    fi
    nb_port=$port
    local url=$abuse_url pid=$abuse_pid
    local base="$out/nostr-bench/$name-$test-r$round"
    local hello seeded=null check=null
    hello=$(greeting "${url##*:}")
    local extra=()
    if [ "$tool" = req ]; then
        # Every relay serves the same events: the seed file, replayed
        # (not timed; a generous timeout, so a slow writer still gets them all).
        "$NW" load --relay "$url" --scenario publish --replay "$nb_seed" \
            --count "$nb_seed_count" --connections 100 --duration 300 \
            --timeout 10 --rounds 1 --quiet \
            --report "$base.seed.json" >"$base.seed.txt" 2>&1 ||
            log "nostr-bench: seeding $name failed (see $base.seed.txt)"
        seeded=$(jq '.totals[0].ops.publish.successes // 0' "$base.seed.json" 2>/dev/null || echo null)
        check=$(req_check "${url##*:}" "$req_limit")
        extra=(--limit "$req_limit")
    fi
    log "nostr-bench: round $round, $name, $tool with $conns connections"
    local t0 t1 up=true
    t0=$(cpu_ticks "$pid")
    timeout "$((bench_seconds + 60))" "$NOSTR_BENCH" "$tool" "$url" -c "$conns" -r "$conns" \
        -k "$bench_seconds" -t "$bench_threads" "${extra[@]}" --json >"$base.out" 2>"$base.err" ||
        log "nostr-bench: $tool against $name ended with an error (see $base.err)"
    t1=$(cpu_ticks "$pid")
    kill -0 "$pid" 2>/dev/null || up=false
    stop_pid "$pid"
    python3 - "$base.out" "$name" "$test" "$tool" "$conns" "$round" "$bench_seconds" \
        "$bench_threads" "$req_limit" "$hello" "$seeded" "${t0:-}" "${t1:-}" "$clk_tck" "$up" "$check" \
        >>"$nb_results" <<'PY'
import json, statistics, sys
(path, relay, test, tool, conns, rnd, secs, threads, limit, hello, seeded,
 t0, t1, tck, up, check) = sys.argv[1:]
lines = []
for line in open(path, errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
secs, limit = int(secs), int(limit)
rec = {"relay": relay, "test": test, "tool": tool, "connections": int(conns),
       "round": int(rnd), "seconds": secs, "threads": int(threads),
       "greeting": hello, "seeded": None if seeded == "null" else int(seeded),
       "relay_up": up == "true"}
cpu = (int(t1) - int(t0)) / int(tck) if t0 and t1 else None
rec["relay_cpu_s"] = cpu
if tool == "req":
    try:
        chk = json.loads(check)
    except ValueError:
        chk = None
    if not isinstance(chk, dict):
        chk = {"error": "check failed"}
    rec["check"] = chk
    if chk.get("reqs"):
        rec["bytes_per_req"] = chk["bytes"] / chk["reqs"]
        rec["unescaped_per_req"] = chk.get("unescaped", chk["bytes"]) / chk["reqs"]
        rec["events_per_req"] = chk["events"] / chk["reqs"]
if not lines:
    rec["error"] = "no output"
    print(json.dumps(rec))
    sys.exit()
last = lines[-1]
m, c = last["message_stats"], last["connect_stats"]
complete, errors = m["complete"], m["error"]
rec["avg_ms"] = m["success_time"]["avg"]
rec.update(complete=complete, errors=errors, successes=complete - errors,
           events=m["event"], size=m["size"], connect_errors=c["error"],
           connections_lost=c["lost"])
# Per-interval rates (nostr-bench prints every 2 s) while every connection
# is sending: after the first 2 s (open, then its 1 s wait) and before the
# first connection's -k ends.
full = [l["tps"] for l in lines[1:]
        if l["elapsed"] - l["last_elapsed"] >= 2000 and l["elapsed"] <= secs * 1000]
rec["tps_intervals"] = full
rec["tps"] = statistics.median(full) if full else (complete - errors) / max(secs - 1, 1)
rec["cpu_us_per_op"] = cpu * 1e6 / complete if cpu is not None and complete else None
print(json.dumps(rec))
PY
}

run_nostr_bench() {
    install_nostr_bench || { log "nostr-bench did not install: skipping it"; return 1; }
    NOSTR_BENCH="$PEERS_DIR/bin/nostr-bench"
    local seed_bin=${NOSTR_BENCH_SEED_BIN:-}
    if [ -z "$seed_bin" ]; then
        log "building the nostr_bench_seed example (release)"
        CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --locked -q \
            -p nostrwire-loadgen --example nostr_bench_seed
        seed_bin="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/nostr_bench_seed"
    fi
    mkdir -p "$out/nostr-bench"
    nb_results="$out/nostr-bench.jsonl"
    : >"$nb_results"
    nb_seed="$work/nostr-bench-seed.jsonl"
    nb_seed_count=$((nb_per_tag * 1000))
    "$seed_bin" --per-tag "$nb_per_tag" --newest "$(date +%s)" >"$nb_seed"
    clk_tck=$(getconf CLK_TCK)
    nb_port=7990
    local relays=() peer_list=() tests=()
    [ "$ours" = 1 ] && relays+=(nostrwire)
    [ -z "$peers" ] || IFS=',' read -r -a peer_list <<<"$peers"
    relays+=("${peer_list[@]}")
    IFS=',' read -r -a tests <<<"$bench_tests"
    # At least two rounds unless asked for fewer (a quick check).
    local nr=$bench_rounds
    if [ -z "$nr" ]; then
        nr=$rounds
        [ "$nr" -ge 2 ] || nr=2
    fi
    local r t name
    # Alternating rounds: every test runs against every relay in turn
    # (A B A B …), so a slow spell of the shared machine falls on all.
    for r in $(seq 1 "$nr"); do
        for t in "${tests[@]}"; do
            for name in "${relays[@]}"; do
                nb_run "$name" "$t" "$r" || true
            done
        done
    done
    python3 "$ROOT/scripts/lib/nostr_bench_md.py" "$nb_results" >"$out/nostr-bench.md"
    log "wrote $out/nostr-bench.md"
}

# headline.md: both tools' figures side by side for each relay.
write_headline() {
    "$NW" bench headline "$out" --names "$out/names.tsv" --per-tag "$nb_per_tag" \
        --connections "$connections" --bench-seconds "$bench_seconds" \
        --bench-threads "$bench_threads" --req-limit "$req_limit" >"$out/headline.md"
    cat "$out/headline.md"
}

if [ "${#normal[@]}" -eq 0 ]; then
    run_abuse
    {
        echo "# Relays in this run"
        echo
        echo "| relay | version | config | durability |"
        echo "|---|---|---|---|"
        printf '%s\n' "${describe[@]}" | awk '!seen[$0]++'
    } >"$out/peers.md"
    exit 0
fi
run_load() {
    if [ "$ours" = 1 ]; then
        start_ours || { log "our relay did not start; see $work/ours.log"; exit 1; }
    fi
    IFS=',' read -r -a peer_list <<<"$peers"
    for p in "${peer_list[@]}"; do
        start_peer "$p" || log "skipping $p"
    done
    if [ "${#urls[@]}" -lt 1 ]; then
        log "no relay running"
        exit 1
    fi
    for i in "${!urls[@]}"; do printf '%s\t%s\n' "${urls[$i]}" "${names[$i]}"; done >"$out/names.tsv"

    {
        echo "# Relays in this run"
        echo
        echo "Started by scripts/compare-relays.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ); every relay on 127.0.0.1 with a fresh data directory."
        echo
        echo "| relay | version | config | durability |"
        echo "|---|---|---|---|"
        printf '%s\n' "${describe[@]}"
        echo
        for i in "${!urls[@]}"; do echo "- ${names[$i]}: ${urls[$i]}"; done
    } >"$out/peers.md"

    compare=()
    if [ "${#urls[@]}" -gt 1 ]; then
        compare=(--compare "${urls[@]:1}")
    fi
    log "running: ${names[*]}"
    "$NW" load --relay "${urls[0]}" "${compare[@]}" \
        --scenario "$scenarios" --count "$count" --duration "$duration" --rounds "$rounds" \
        --connections "$connections" --timeout "$timeout" --quiet \
        --report "$out/relays.json" --markdown "$out/relays.md" --svg "$out/relays.svg" |
        tee "$out/relays.txt"
    log "wrote $out/relays.md"

    # Disk: every relay stopped cleanly, then its data directory measured.
    if [ "$disk" = 1 ]; then
        if [ "$ours" = 1 ]; then
            # shellcheck source=scripts/lib/indexes.sh
            . "$ROOT/scripts/lib/indexes.sh"
            wait_for_indexes "${urls[0]/ws:/http:}"
        fi
        for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
        for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
        pids=()
        {
            echo "# Disk after the run"
            echo
            echo "Each relay's data directory after the same events (\`du -sb\`: bytes of its files; \`du -sk\`: blocks allocated, which is what counts for sparse files such as Badger's preallocated logs), every relay stopped with SIGTERM first."
            echo
            kept_json=""
            if [ "$ours" = 1 ]; then
                read -r kept kept_json < <("$NW" export --data "$work/ours" |
                    LC_ALL=C awk '{n++; b+=length($0)} END{print n+0, b+0}')
                echo "nostrwire kept $kept events: $kept_json bytes of JSON (\`nostrwire export\`, one line each, newlines not counted)."
                echo
            fi
            echo "| relay | bytes | allocated | allocated / nostrwire's kept JSON |"
            echo "|---|---|---|---|"
            for i in "${!names[@]}"; do
                dir="$work/${names[$i]}"
                [ "${names[$i]}" != nostrwire ] || dir="$work/ours"
                bytes=$(du -sb "$dir" | cut -f1)
                alloc=$(( $(du -sk "$dir" | cut -f1) * 1024 ))
                ratio=$(awk -v b="$alloc" -v j="${kept_json:-0}" 'BEGIN{ if (j > 0) printf "%.3f", b / j; else print "—" }')
                echo "| ${names[$i]} | $bytes | $alloc | $ratio |"
            done
        } >"$out/disk.md"
        cat "$out/disk.md"
    fi
    # Every relay stopped: nostr-bench runs each alone.
    for pid in "${pids[@]}"; do stop_pid "$pid"; done
    pids=()
}

if [ "$load" = 1 ]; then
    run_load
fi
if [ "$nostr_bench" = 1 ]; then
    run_nostr_bench || true
fi
if [ "$load" = 1 ] || [ "$nostr_bench" = 1 ]; then
    write_headline
    log "wrote $out/headline.md"
fi
if [ "$load" = 0 ]; then
    {
        echo "# Relays in this run"
        echo
        echo "| relay | version | config | durability |"
        echo "|---|---|---|---|"
        printf '%s\n' "${describe[@]}" | awk '!seen[$0]++'
    } >"$out/peers.md"
fi

# Abuse scenarios given beside others: after them, every relay stopped first.
if [ "${#attacks[@]}" -gt 0 ]; then
    run_abuse
fi
