#!/usr/bin/env bash
# Compare nostrwire's relay with peer relays under `nostrwire load`, side by side.
#
# Installs the peers from the package registries (pinned versions), starts each
# on its own loopback port with a fresh data directory and rate limits lifted,
# runs the chosen scenarios against all of them in interleaved rounds
# (ours first: every ratio is relative to ours), stops them, and writes
# bench-runs/<date>-<machine>/relays.{md,json,svg} plus peers.md (versions,
# configs, durability).
#
# All traffic stays on 127.0.0.1. Every run is bounded by --count events and
# --duration seconds per scenario and round, and stops by itself.
#
# Usage: scripts/compare-relays.sh [--peers LIST] [--scenarios LIST] [--count N]
#            [--duration S] [--rounds R] [--connections N] [--timeout S]
#            [--out DIR] [--no-ours] [--install-only] [--disk]
#   --timeout is how long the load tester waits for any one answer (default 5 s):
#   a relay that leaves some events unanswered (rnostr does, for a few corpus
#   follow lists) stalls that connection for this long each time.
#   --disk stops every relay after the run (SIGTERM; ours once its trailing
#   indexes are written) and adds disk.md: each data directory's size after
#   the same events, and the JSON of the events ours kept (`nostrwire export`).
#   LIST is comma-separated. Peers: khatru-lmdb, khatru-badger, nostr-rs-relay, rnostr.
#   Environment: PEERS_DIR (installed peers, default ~/.cache/nostrwire-peers);
#   NOSTRWIRE_BIN (a built nostrwire binary; default: build target/release/nostrwire).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

peers="khatru-lmdb,khatru-badger,nostr-rs-relay,rnostr"
scenarios="publish,publish-open,query,mixed,fanout"
count=5000
duration=20
rounds=3
connections=8
timeout=5
out=""
ours=1
install_only=0
disk=0
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
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

# Pinned peer versions (see docs/bench-methodology.md).
KHATRU_VERSION=v0.19.0
EVENTSTORE_VERSION=v0.16.2
GO_NOSTR_VERSION=v0.51.8
SONIC_VERSION=v1.15.5
NOSTR_RS_RELAY_VERSION=0.8.12
RNOSTR_VERSION=0.4.8

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

wait_port() {
    local port=$1 name=$2
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
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
    local bin="$NW"
    local data="$work/ours"
    mkdir -p "$data"
    "$bin" relay --listen "127.0.0.1:$port" --data "$data" >"$work/ours.log" 2>&1 &
    pids+=($!)
    wait_port "$port" nostrwire || return 1
    urls+=("ws://127.0.0.1:$port")
    names+=("nostrwire")
    describe+=("| nostrwire | $("$NW" --version) (tree at $(git rev-parse --short HEAD)) | \`nostrwire relay --listen 127.0.0.1:$port --data DIR\`, default config (\`nostrwire relay --print-config\`) | $("$NW" relay --print-config | grep -m1 '^durability' || echo 'see the config') |")
    port=$((port + 1))
}

start_peer() {
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
    if ! wait_port "$port" "$peer"; then
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
    exit 0
fi

NW=${NOSTRWIRE_BIN:-}
if [ -z "$NW" ]; then
    log "building nostrwire (release)"
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --locked -q -p nostrwire
    NW="$ROOT/target/release/nostrwire"
fi
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
