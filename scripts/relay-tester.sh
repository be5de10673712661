#!/usr/bin/env bash
# NIP-01 conformance: mikedilger/relay-tester against fresh, empty relays.
#   scripts/relay-tester.sh [--out DIR] [RELAY_TESTER]
# RELAY_TESTER (the argument, else the environment variable) is the path of
# a relay-tester binary; its `generate-keypair` must sit beside it. The
# suite runs twice, each time against a new relay on a temporary database
# listening on 127.0.0.1 (per-address connection limit off, since the suite
# reconnects often):
#   default       the relay's defaults: the NIP-42 challenge is sent on connect
#   no-challenge  auth.challenge_on_connect = false: the challenge comes only
#                 before an `auth-required:` answer
# Writes <pass>.jsonl (one line per test, relay-tester's --script output),
# <pass>-relay.log and summary.md to DIR (default
# bench-runs/<date>-relay-tester). Exits 1 when a required test fails.
# Builds the release binary unless NOSTRWIRE_BIN names one; RELAY_PORT moves
# the first port tried (default 7790).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "relay-tester: $*" >&2; }

out="bench-runs/$(date -u +%F)-relay-tester"
tester="${RELAY_TESTER:-}"
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) log "unknown argument: $1"; exit 2 ;;
        *) tester="$1"; shift ;;
    esac
done

if [ -z "$tester" ] || [ ! -x "$tester" ]; then
    cat >&2 <<'EOF'
relay-tester: no relay-tester binary (give its path, or set RELAY_TESTER).
It is not on crates.io: it depends on nostr-types by git revision, so it is
built from source (about 10 minutes on 2 cores):
  git clone https://github.com/mikedilger/relay-tester
  cd relay-tester && git checkout 3276f71 && cargo build --release --locked
  RELAY_TESTER=$PWD/target/release/relay-tester scripts/relay-tester.sh
Without access to GitHub, see bench-runs/2026-11-27-relay-tester/README.md
for building it from local copies of its git dependencies.
EOF
    exit 2
fi
keygen="$(dirname "$tester")/generate-keypair"
[ -x "$keygen" ] || { log "no generate-keypair beside $tester"; exit 2; }

nostrwire="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ -z "${NOSTRWIRE_BIN:-}" ]; then
    nice -n 10 cargo build --release --locked -q -p nostrwire
fi

work="$(mktemp -d)"
relay_pid=""
cleanup() {
    if [ -n "$relay_pid" ]; then
        kill "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Two made-up users, new for each run (the suite needs their secret keys).
nsec() { "$keygen" | sed -n 's/^PRIVATE: *//p'; }
key1="$(nsec)"
key2="$(nsec)"
[ -n "$key1" ] && [ -n "$key2" ] || { log "generate-keypair printed no PRIVATE: line"; exit 1; }

mkdir -p "$out"
port="${RELAY_PORT:-7790}"

# run_pass NAME [TOML LINES...]: one relay, one run of the suite.
run_pass() {
    local name=$1
    shift
    while port_in_use "$port"; do port=$((port + 1)); done
    local config="$work/$name.toml"
    {
        echo "[relay]"
        echo "listen = \"127.0.0.1:$port\""
        echo "data = \"$work/$name-data\""
        echo "[rate]"
        echo "connections_per_ip = 0"
        for line in "$@"; do echo "$line"; done
    } >"$config"
    NO_COLOR=1 "$nostrwire" relay --config "$config" >"$out/$name-relay.log" 2>&1 &
    relay_pid=$!
    local up=0
    for _ in $(seq 1 100); do
        kill -0 "$relay_pid" 2>/dev/null || break
        if port_in_use "$port"; then up=1; break; fi
        sleep 0.1
    done
    if [ "$up" -ne 1 ]; then
        log "the relay did not open port $port; see $out/$name-relay.log"
        exit 1
    fi
    log "$name: ws://127.0.0.1:$port/ ($(cat /proc/loadavg | cut -d' ' -f1-3) load)"
    "$tester" --script "ws://127.0.0.1:$port/" "$key1" "$key2" >"$out/$name.jsonl"
    kill "$relay_pid"
    wait "$relay_pid" || true
    relay_pid=""
}

run_pass default
run_pass no-challenge "[auth]" "challenge_on_connect = false"

python3 scripts/lib/relay_tester_summary.py "$out" default no-challenge >"$out/summary.md"
cat "$out/summary.md"
if grep -q '^required failures: [1-9]' "$out/summary.md"; then
    exit 1
fi
