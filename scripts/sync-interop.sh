#!/usr/bin/env bash
# `nostrwire sync` against other relays' NIP-77: up, both, down and through
# a running nostrwire relay (--local), each checked by ids on both sides.
#   scripts/sync-interop.sh [--out DIR] [--count N]
# Peers, each started empty on 127.0.0.1:
#   nostrwire  a second nostrwire relay (always; CI runs the same cases in
#              crates/cli/tests/sync.rs)
#   strfry     STRFRY (environment) names a strfry binary; this script does
#              not build it (https://github.com/hoytech/strfry, its README);
#              skipped, and said so, without it
#   khatru     scripts/sync-interop/khatru-relay (khatru v0.19.0 with
#              Negentropy on, go-nostr v0.51.12, in memory), built with Go
#              from the module proxy into target/sync-interop/; skipped
#              without Go
# Data: `nostrwire generate --count N` (default 3000) events split into
# overlapping sets A, B, C (each lacks a different fifth). Per peer:
#   up     database B  --dir up    -> the peer's ids = B's
#   both   database A  --dir both  -> A's ids = the peer's (A ∪ B)
#   down   database C  --dir down  -> C holds every id of the peer
#   local  database C' served by a nostrwire relay, synced with --local
#          --dir both              -> the relay's ids = the peer's
# The peer's ids are read with REQs by scripts/sync-interop/relay_ids.mjs
# (Node's WebSocket; no nostrwire code), a database's with `nostrwire
# export`. Writes summary.md and each sync's output to DIR (default
# target/sync-interop/<date>). Exits 1 when a check fails. NOSTRWIRE_BIN
# names the nostrwire binary (else the release build is made); BENCH_PORT
# moves the first port (default 7870).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
. scripts/lib/procs.sh
. scripts/lib/strfry.sh

log() { echo "sync-interop: $*" >&2; }

out="target/sync-interop/$(date -u +%F)"
count=3000
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --count) count="$2"; shift 2 ;;
        -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) log "unknown argument: $1"; exit 2 ;;
    esac
done
nostrwire="${NOSTRWIRE_BIN:-target/release/nostrwire}"
if [ -z "${NOSTRWIRE_BIN:-}" ]; then
    nice -n 10 cargo build --release --locked -q -p nostrwire
fi
nostrwire="$(realpath "$nostrwire")"
node --experimental-websocket -e 'WebSocket' 2>/dev/null \
    || { log "needs Node 20.10 or later (its WebSocket reads the peers' ids)"; exit 2; }
peers=(nostrwire)
if [ -n "${STRFRY:-}" ] && [ -x "$STRFRY" ]; then
    strfry="$(realpath "$STRFRY")"
    peers+=(strfry)
else
    log "no STRFRY binary given: strfry skipped"
fi
khatru=target/sync-interop/khatru-relay
if command -v go >/dev/null; then
    mkdir -p target/sync-interop
    if [ ! -x "$khatru" ] || [ -n "$(find scripts/sync-interop/khatru-relay -newer "$khatru" -type f)" ]; then
        (cd scripts/sync-interop/khatru-relay && nice -n 10 go build -o "../../../$khatru" .)
    fi
    peers+=(khatru)
else
    log "no Go toolchain: khatru skipped"
fi
port="${BENCH_PORT:-7870}"
mkdir -p "$out"
out="$(realpath "$out")"
work="$(mktemp -d /tmp/sync-interop.XXXXXX)"
cleanup() {
    stop_started
    rm -rf "$work"
}
trap cleanup EXIT

db_ids() { "$nostrwire" export --data "$1" | grep -o '"id":"[0-9a-f]*"' | cut -d'"' -f4 | sort; }
relay_ids() { node --experimental-websocket scripts/sync-interop/relay_ids.mjs "$1" | sort; }

import() { # NAME AWK-CONDITION
    awk "$2" "$work/all.jsonl" > "$work/$1.jsonl"
    "$nostrwire" import --data "$work/$1" "$work/$1.jsonl" > /dev/null 2>&1
}

# same NAME FILE1 FILE2: equal sorted id lists; else the ids on one side
# only go to DIR/NAME.diff (comm -3).
same() {
    comm -3 "$2" "$3" > "$out/$1.diff"
    [ ! -s "$out/$1.diff" ] && rm -f "$out/$1.diff"
}

failures=0
check() { # PEER CASE DESCRIPTION RESULT(yes/no)
    printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >> "$out/summary.md"
    log "$1 $2: $3: $4"
    [ "$4" = yes ] || failures=$((failures + 1))
}

run_sync() { # PEER CASE ARGS...
    local peer=$1 case=$2
    shift 2
    "$nostrwire" sync "$@" > "$out/$peer-$case.out" 2>&1 \
        || { log "sync failed:"; cat "$out/$peer-$case.out" >&2; return 1; }
}

# Only events every peer stores as given (scripts/lib/sync_data.py).
"$nostrwire" generate --count "$count" --seed 77 --authors "$count" -o "$work/gen.jsonl"
python3 scripts/lib/sync_data.py < "$work/gen.jsonl" > "$work/all.jsonl"
{
    echo "# nostrwire sync against other relays ($(date -u '+%F %H:%M UTC'))"
    echo
    echo "$("$nostrwire" --version), $(wc -l < "$work/all.jsonl") generated events"
    echo
    echo '| peer | case | check | ok |'
    echo '|---|---|---|---|'
} > "$out/summary.md"

for peer in "${peers[@]}"; do
    rm -rf "$work"/{a,b,c,d,peer,peer.conf}
    import a 'NR % 5 != 1'
    import b 'NR % 5 != 2'
    import c 'NR % 5 != 3'
    import d 'NR % 5 != 4'
    p=$port
    case "$peer" in
        nostrwire) "$nostrwire" relay --listen "127.0.0.1:$p" --data "$work/peer" > "$out/$peer-relay.log" 2>&1 & ;;
        strfry)
            strfry_conf "$work/peer" "$p"
            "$strfry" --config="$work/peer.conf" relay > "$out/$peer-relay.log" 2>&1 & ;;
        khatru) "$khatru" "127.0.0.1:$p" > "$out/$peer-relay.log" 2>&1 & ;;
    esac
    peer_pid=$!
    started "$peer_pid"
    wait_port "$p"
    url="ws://127.0.0.1:$p"

    run_sync "$peer" up "$url" --dir up --data "$work/b"
    same "$peer-up" <(db_ids "$work/b") <(relay_ids "$url") && ok=yes || ok=no
    check "$peer" up "the peer's ids = B's ($(db_ids "$work/b" | wc -l))" "$ok"

    run_sync "$peer" both "$url" --dir both --data "$work/a"
    same "$peer-both" <(db_ids "$work/a") <(relay_ids "$url") && ok=yes || ok=no
    check "$peer" both "A's ids = the peer's ($(relay_ids "$url" | wc -l))" "$ok"

    run_sync "$peer" down "$url" --dir down --data "$work/c"
    [ -z "$(comm -13 <(db_ids "$work/c") <(relay_ids "$url"))" ] && ok=yes || ok=no
    check "$peer" down "C holds every id of the peer" "$ok"

    lp=$((port + 1))
    "$nostrwire" relay --listen "127.0.0.1:$lp" --data "$work/d" > "$out/$peer-local-relay.log" 2>&1 &
    local_pid=$!
    started "$local_pid"
    wait_port "$lp"
    run_sync "$peer" local "$url" --dir both --data "$work/d" --local "ws://127.0.0.1:$lp"
    same "$peer-local" <(relay_ids "ws://127.0.0.1:$lp") <(relay_ids "$url") && ok=yes || ok=no
    check "$peer" local "through a running nostrwire relay: its ids = the peer's" "$ok"
    stop "$local_pid"
    stop "$peer_pid"
done
cat "$out/summary.md"
[ "$failures" = 0 ] || { log "$failures checks failed"; exit 1; }
