#!/usr/bin/env bash
# A relay cluster on this machine (docs/cluster.md): three NATS servers
# (JetStream, clustered on loopback) and three relay nodes.
#   scripts/cluster.sh up   [--dir DIR]   start them; return once every node accepts
#                                         writes, printing each node's ws:// URL
#   scripts/cluster.sh down [--dir DIR]   stop them (the data stays in DIR)
#   scripts/cluster.sh status [--dir DIR] nostrwire cluster status
# DIR defaults to ./cluster-data. Installs nats-server (Go module proxy) when
# it is missing; builds the release binary unless NOSTRWIRE_BIN names one.
# Ports: NATS clients 4222-4224 (routes 6222-6224), relays 7781-7783;
# NATS_PORT, ROUTE_PORT and RELAY_PORT move the first of each; UP_TIMEOUT
# (seconds, default 120) bounds the wait for the nodes to join the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

action="${1:-}"
shift || true
dir=./cluster-data
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) dir="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
nats_port="${NATS_PORT:-4222}"
route_port="${ROUTE_PORT:-6222}"
relay_port="${RELAY_PORT:-7781}"
NATS_VERSION=v2.15.2

nats_server() {
    if command -v nats-server >/dev/null 2>&1; then
        command -v nats-server
        return
    fi
    local gobin
    gobin="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
    if [ ! -x "$gobin/nats-server" ]; then
        command -v go >/dev/null || { echo "nats-server is missing and go is not installed" >&2; exit 1; }
        echo "installing nats-server $NATS_VERSION into $gobin" >&2
        go install "github.com/nats-io/nats-server/v2@$NATS_VERSION" >&2
    fi
    echo "$gobin/nats-server"
}

nostrwire_bin() {
    local bin="${NOSTRWIRE_BIN:-target/release/nostrwire}"
    if [ -z "${NOSTRWIRE_BIN:-}" ]; then
        nice -n 10 cargo build --release --locked -q -p nostrwire >&2
    fi
    echo "$bin"
}

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    return 1
}

nats_urls() {
    local urls=()
    for i in 0 1 2; do urls+=("\"nats://127.0.0.1:$((nats_port + i))\""); done
    local IFS=,
    echo "[${urls[*]}]"
}

up() {
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local nats bin routes="" i
    nats="$(nats_server)"
    bin="$(nostrwire_bin)"
    for i in 0 1 2; do routes+="nats-route://127.0.0.1:$((route_port + i)),"; done
    routes="${routes%,}"
    for i in 1 2 3; do
        mkdir -p "$dir/nats$i"
        cat >"$dir/nats$i.conf" <<EOF
server_name: nats$i
listen: 127.0.0.1:$((nats_port + i - 1))
jetstream { store_dir: "$dir/nats$i" }
cluster {
  name: nostrwire
  listen: 127.0.0.1:$((route_port + i - 1))
  routes: [$routes]
}
EOF
        "$nats" -c "$dir/nats$i.conf" >"$dir/nats$i.log" 2>&1 &
        echo $! >"$dir/nats$i.pid"
    done
    for i in 0 1 2; do wait_port $((nats_port + i)); done
    for i in 1 2 3; do
        cat >"$dir/relay$i.toml" <<EOF
[relay]
listen = "127.0.0.1:$((relay_port + i - 1))"
data = "$dir/relay$i"

[cluster]
enabled = true
urls = $(nats_urls)
node = "relay$i"
EOF
        "$bin" relay --config "$dir/relay$i.toml" >"$dir/relay$i.log" 2>&1 &
        echo $! >"$dir/relay$i.pid"
    done
    for i in 0 1 2; do wait_port $((relay_port + i)); done
    wait_writable
}

# A node's nostrwire_cluster_connected gauge (GET /metrics): 1 once it is
# connected to NATS and the stream exists, which is when it takes writes.
connected() {
    local line
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    while IFS= read -r line <&3; do
        if [[ $line =~ ^nostrwire_cluster_connected(\{[^}]*\})?\ 1 ]]; then
            exec 3<&-
            return 0
        fi
    done
    exec 3<&-
    return 1
}

# Waits until every node takes writes: the NATS servers elect their
# JetStream leader and the stream is created first, which takes seconds.
wait_writable() {
    local start=$SECONDS timeout="${UP_TIMEOUT:-120}" i ready
    echo "waiting for the nodes to join the cluster (up to ${timeout} s)" >&2
    while :; do
        ready=0
        for i in 1 2 3; do
            if ! kill -0 "$(cat "$dir/relay$i.pid")" 2>/dev/null; then
                echo "relay$i exited; the end of $dir/relay$i.log:" >&2
                tail -n 5 "$dir/relay$i.log" >&2
                exit 1
            fi
            connected $((relay_port + i - 1)) 2>/dev/null && ready=$((ready + 1))
        done
        [ "$ready" -eq 3 ] && break
        if [ $((SECONDS - start)) -ge "$timeout" ]; then
            echo "after ${timeout} s, $ready of 3 nodes take writes; see $dir/relay*.log and $dir/nats*.log" >&2
            exit 1
        fi
        sleep 0.2
    done
    echo "every node takes writes, $((SECONDS - start)) s after the relays listened:" >&2
    for i in 0 1 2; do echo "ws://127.0.0.1:$((relay_port + i))"; done
}

down() {
    local pid name
    for name in relay1 relay2 relay3 nats1 nats2 nats3; do
        [ -f "$dir/$name.pid" ] || continue
        pid="$(cat "$dir/$name.pid")"
        if kill -TERM "$pid" 2>/dev/null; then
            for _ in $(seq 100); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/$name.pid"
    done
    echo "stopped (data kept in $dir)"
}

case "$action" in
    up) up ;;
    down) down ;;
    status) "$(nostrwire_bin)" cluster status --config "$dir/relay1.toml" ;;
    *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
