#!/usr/bin/env bash
# Compare nostrwire's relay with peer relays under `nostrwire load` and under
# rnostr's nostr-bench, side by side.
#
# Installs the peers and nostr-bench from the package registries (pinned
# versions) into $PEERS_DIR, builds nostrwire, then runs
# `nostrwire bench relays` with the flags given (the rounds, the rules and
# the reports are there, in crates/loadgen/src/relays/; see
# `nostrwire bench relays --help` and docs/bench-methodology.md). Its run
# directory holds relays.{md,json,svg,txt}, nostr-bench.{md,jsonl},
# headline.md, peers.md, names.tsv, writer.txt, and disk.md / abuse.{md,json,txt} when
# asked for.
#
# Usage: scripts/compare-relays.sh [--install-only] [FLAGS of nostrwire bench relays]
#   --install-only installs the peers named by --peers (default: all) and,
#   unless --no-nostr-bench, nostr-bench; then stops.
#   Every other flag goes to `nostrwire bench relays` as given: --peers,
#   --scenarios, --count, --duration, --rounds, --connections, --timeout,
#   --out, --no-ours, --disk, --attack-seconds, --abuse-args, --bench-tests,
#   --bench-seconds, --bench-rounds, --bench-threads, --req-limit,
#   --per-tag, --no-nostr-bench, --no-load, --kind-mix, --corpus.
#   Peers: khatru-lmdb, khatru-badger, nostr-rs-relay, rnostr.
#   Environment: PEERS_DIR (installed peers, default ~/.cache/nostrwire-peers);
#   NOSTRWIRE_BIN (a built nostrwire binary; default: build target/release/nostrwire).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

peers="khatru-lmdb,khatru-badger,nostr-rs-relay,rnostr"
install_only=0
nostr_bench=1
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        --install-only) install_only=1; shift ;;
        --peers)
            [ $# -ge 2 ] || { echo "compare-relays: --peers needs a value" >&2; exit 2; }
            peers=$2; pass+=("$1" "$2"); shift 2 ;;
        --peers=*) peers=${1#--peers=}; pass+=("$1"); shift ;;
        --no-nostr-bench) nostr_bench=0; pass+=("$1"); shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) pass+=("$1"); shift ;;
    esac
done

# Pinned peer versions (docs/bench-methodology.md); nostrwire bench relays
# names the same ones in its peers.md (a unit test checks that they agree).
KHATRU_VERSION=v0.19.0
EVENTSTORE_VERSION=v0.16.2
GO_NOSTR_VERSION=v0.51.8
SONIC_VERSION=v1.15.5
NOSTR_RS_RELAY_VERSION=0.8.12
RNOSTR_VERSION=0.4.8
NOSTR_BENCH_VERSION=0.4.0

PEERS_DIR=${PEERS_DIR:-$HOME/.cache/nostrwire-peers}
export PEERS_DIR
mkdir -p "$PEERS_DIR/bin"

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

IFS=',' read -r -a peer_list <<<"$peers"
for p in "${peer_list[@]}"; do
    case "$p" in
        khatru-*) install_khatru ;;
        nostr-rs-relay) install_nostr_rs_relay ;;
        rnostr) install_rnostr ;;
        *) log "unknown peer $p"; false ;;
    esac || log "could not install $p"
done
[ "$nostr_bench" = 0 ] || install_nostr_bench || log "could not install nostr-bench"
[ "$install_only" = 0 ] || exit 0

NW=${NOSTRWIRE_BIN:-}
if [ -z "$NW" ]; then
    log "building nostrwire (release)"
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release --locked -q -p nostrwire
    NW="${CARGO_TARGET_DIR:-$ROOT/target}/release/nostrwire"
fi
# The benchmark lock is taken by nostrwire bench relays, after the builds.
exec "$NW" bench relays "${pass[@]}"
