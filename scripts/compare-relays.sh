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
#            [--attack-seconds S] [--abuse-args "FLAGS"]
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
attack_seconds=15
abuse_args=""
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
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

# Abuse scenarios run apart from the others (see the usage above).
ABUSE_ATTACKS="abuse-slow-readers abuse-idle-flood abuse-oversized-subs abuse-deflate-bomb abuse-quadratic-json abuse-hostile-search abuse-deletion-undo abuse-auth-relayed"
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
scenarios=$(IFS=','; echo "${normal[*]}")

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
    # Throughput runs open up to thousands of connections from 127.0.0.1,
    # which the default per-address limit (32) would refuse: like the peers,
    # which have no such limit, nostrwire gets none for them. The abuse
    # scenarios keep every default (their attacker has an address of its own).
    local config="$work/ours.toml"
    if [[ ${ABUSE_RUN:-0} == 1 ]]; then
        : >"$config"
    else
        printf '[rate]\nconnections_per_ip = 0\n' >"$config"
    fi
    "$bin" relay --config "$config" --listen "127.0.0.1:$port" --data "$data" >"$work/ours.log" 2>&1 &
    pids+=($!)
    wait_port "$port" nostrwire || return 1
    urls+=("ws://127.0.0.1:$port")
    names+=("nostrwire")
    describe+=("| nostrwire | $("$NW" --version) (tree at $(git rev-parse --short HEAD)) | \`nostrwire relay --listen 127.0.0.1:$port --data DIR\`, default config (\`nostrwire relay --print-config\`) except \`connections_per_ip = 0\` outside the abuse scenarios | $("$NW" relay --print-config | grep -m1 '^durability' || echo 'see the config') |")
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

# Abuse scenarios given beside others: after them, every relay stopped first.
if [ "${#attacks[@]}" -gt 0 ]; then
    for pid in "${pids[@]}"; do stop_pid "$pid"; done
    pids=()
    run_abuse
fi
