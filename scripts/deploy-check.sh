#!/usr/bin/env bash
# deploy/ as an operator installs it, checked through wss://.
#
#   scripts/deploy-check.sh    # NOSTRWIRE_BIN=path/to/nostrwire picks the binary,
#                              # PROXIES=nginx or PROXIES=caddy one proxy, KEEP=1 keeps the files
#
# Installs nginx, Caddy and openssl from Debian when missing, makes a
# throwaway certificate authority and a certificate for relay.nostrwire.test
# (resolved to 127.0.0.1 by the test clients only), and for each proxy:
# starts the relay with the unit's ExecStart and deploy/relay.toml, the
# proxy with deploy/nginx.conf or deploy/Caddyfile (only the name, ports,
# paths and, for Caddy, the certificate substituted), runs the client
# checks of scripts/deploy-check/check.mjs through wss://, reloads through
# the unit's ExecReload, takes a backup with `nostrwire compact` while
# publishing, stops the relay with the unit's KillSignal, and restarts it on
# its data and on the restored backup, counting acknowledged events.
# systemd itself is not running here: the unit is checked by
# `systemd-analyze verify`, and its ExecStart, ExecReload, Environment,
# LimitNOFILE and KillSignal are applied by this script, with the relay
# running as the user nobody in place of nostrwire.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$SECONDS
name=relay.nostrwire.test

bin=${NOSTRWIRE_BIN:-${CARGO_TARGET_DIR:-target}/release/nostrwire}
case "$bin" in /*) ;; *) bin="$root/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "== deploy-check: building the release binary"
    cargo build --release --locked -q
fi

echo "== deploy-check: nginx, Caddy and openssl from Debian"
missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v caddy >/dev/null || missing+=(caddy)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), caddy $(caddy version | cut -d' ' -f1), $(openssl version | cut -d' ' -f1-2)"

echo "== deploy-check: clients (nostr-tools, ws, the JS package)"
if [ ! -f js/dist/index.js ]; then
    (cd js && npm ci --no-audit --no-fund --silent && node scripts/build.mjs >/dev/null)
fi
(cd scripts/deploy-check && npm install --no-package-lock --no-audit --no-fund --silent)

work=$(mktemp -d)
chmod 0755 "$work"
relay_pid= proxy_pid= publisher=
cleanup() {
    for pid in $relay_pid $proxy_pid $publisher; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "${KEEP:-}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "not ok - $*"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits until the relay on port $1 answers HTTP.
wait_relay() {
    for _ in $(seq 200); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.05
    done
    echo "no relay answers on 127.0.0.1:$1" >&2
    return 1
}
# Replaces FROM by TO in FILE, failing when FROM is not there: a shipped
# file that changed must change this script too.
subst() {
    grep -qF -- "$2" "$1" || { echo "deploy-check: '$2' not found in $1" >&2; exit 1; }
    FROM="$2" TO="$3" perl -pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g' "$1"
}

echo "== deploy-check: certificate authority and certificate for $name"
tls="$work/tls"
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=nostrwire deploy-check CA" -keyout "$tls/ca.key" -out "$tls/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$tls/privkey.pem" -out "$tls/relay.csr" 2>/dev/null
openssl x509 -req -in "$tls/relay.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 2 -out "$tls/fullchain.pem" 2>/dev/null \
    -extfile <(printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$name")
chmod 644 "$tls"/*.pem
export NODE_EXTRA_CA_CERTS="$tls/ca.pem"

"$bin" dict train --per-kind --corpus testdata/real-events.jsonl -o "$work/dicts.bin" >/dev/null 2>&1

echo "== deploy-check: the systemd unit"
unit=deploy/nostrwire.service
unit_value() { sed -n "s/^$1=//p" "$unit"; }
if command -v systemd-analyze >/dev/null; then
    # verify wants ExecStart's binary where the unit says; check a copy
    # that names this one.
    sed "s#/usr/local/bin/nostrwire#$bin#" "$unit" >"$work/nostrwire.service"
    if out=$(systemd-analyze verify "$work/nostrwire.service" 2>&1) && [ -z "$out" ]; then
        ok "systemd-analyze verify $unit: no findings"
    else
        fail "systemd-analyze verify $unit: $out"
    fi
    exposure=$(systemd-analyze security --offline=true "$work/nostrwire.service" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: //p')
    echo "   systemd-analyze security: exposure ${exposure:-unknown}"
else
    echo "   systemd-analyze not installed: unit not verified"
fi
nofile=$(unit_value LimitNOFILE)
if ! prlimit --nofile="$nofile" -- true 2>/dev/null; then
    echo "   LimitNOFILE=$nofile is above what this machine lets a process raise to; running with $(ulimit -Hn)"
    nofile=$(ulimit -Hn)
fi
kill_signal=$(unit_value KillSignal)
stop_timeout=$(unit_value TimeoutStopSec)
# The unit's user is nostrwire; here the relay runs as nobody, with the
# binary installed as docs/deploy.md installs it.
unit_user=$(unit_value User)
[ "$unit_user" = nostrwire ] || { echo "deploy-check: unexpected User in $unit" >&2; exit 1; }
run_user=nobody
run_group=$(id -gn "$run_user")
install -D -m 0755 "$bin" "$work/bin/nostrwire"
bin=$work/bin/nostrwire
read -ra environment <<<"$(unit_value Environment)"
read -ra exec_start <<<"$(unit_value ExecStart)"
read -ra exec_reload <<<"$(unit_value ExecReload)"
[ "${exec_start[0]}" = /usr/local/bin/nostrwire ] && [ "${exec_start[3]}" = /etc/nostrwire/relay.toml ] \
    || { echo "deploy-check: unexpected ExecStart in $unit" >&2; exit 1; }

# Starts the relay as the unit does (its ExecStart, Environment, LimitNOFILE,
# an unprivileged user), on $dir/relay.toml.
start_relay() {
    local cmd=("${exec_start[@]}")
    cmd[0]=$bin
    cmd[3]=$dir/relay.toml
    env "${environment[@]}" prlimit --nofile="$nofile" -- \
        setpriv --reuid="$run_user" --regid="$run_group" --clear-groups -- "${cmd[@]}" 2>>"$dir/relay.log" &
    relay_pid=$!
    wait_relay "$relay_port"
}
# Stops it as systemd does: KillSignal, then up to TimeoutStopSec.
stop_relay() {
    kill -s "${kill_signal#SIG}" "$relay_pid"
    local waited=0
    while kill -0 "$relay_pid" 2>/dev/null; do
        sleep 0.1
        waited=$((waited + 1))
        [ "$waited" -lt $((${stop_timeout%s} * 10)) ] || { fail "relay did not stop within $stop_timeout"; kill -9 "$relay_pid"; }
    done
    local rc=0
    wait "$relay_pid" || rc=$?
    [ "$rc" = 0 ] || fail "relay exited with $rc on $kill_signal"
}
check() { (cd scripts/deploy-check && node check.mjs "$@"); }

start_nginx() {
    cp deploy/nginx.conf "$dir/site.conf"
    subst "$dir/site.conf" "/etc/letsencrypt/live/relay.example.com" "$tls"
    subst "$dir/site.conf" "relay.example.com" "$name"
    subst "$dir/site.conf" "listen 443 ssl;" "listen 127.0.0.1:$proxy_port ssl;"
    subst "$dir/site.conf" "listen 80;" "listen 127.0.0.1:$http_port;"
    subst "$dir/site.conf" "listen [::]:443 ssl;" ""
    subst "$dir/site.conf" "listen [::]:80;" ""
    subst "$dir/site.conf" "http://127.0.0.1:7777" "http://127.0.0.1:$relay_port"
    mkdir -p "$dir/nginx"
    # What Debian's /etc/nginx/nginx.conf gives the site, in this directory.
    cat >"$dir/nginx.conf" <<EOF
daemon off;
user root;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log;
events {}
http {
    access_log off;
    client_body_temp_path $dir/nginx/body;
    proxy_temp_path $dir/nginx/proxy;
    fastcgi_temp_path $dir/nginx/fastcgi;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    include $dir/site.conf;
}
EOF
    nginx -t -q -p "$dir/nginx" -c "$dir/nginx.conf"
    nginx -p "$dir/nginx" -c "$dir/nginx.conf" &
    proxy_pid=$!
}

start_caddy() {
    {
        # Test-only global options: ports, state directory, admin API.
        printf '{\n\tadmin 127.0.0.1:%s\n\thttp_port %s\n\thttps_port %s\n\tstorage file_system %s\n}\n\n' \
            "$admin_port" "$http_port" "$proxy_port" "$dir/caddy"
        cat deploy/Caddyfile
    } >"$dir/Caddyfile"
    subst "$dir/Caddyfile" "relay.example.com {" \
        "$name {
	tls $tls/fullchain.pem $tls/privkey.pem
	bind 127.0.0.1"
    subst "$dir/Caddyfile" "reverse_proxy 127.0.0.1:7777" "reverse_proxy 127.0.0.1:$relay_port"
    caddy validate --adapter caddyfile --config "$dir/Caddyfile" >"$dir/caddy.log" 2>&1 \
        || { cat "$dir/caddy.log"; exit 1; }
    HOME="$dir" XDG_DATA_HOME="$dir/caddy" XDG_CONFIG_HOME="$dir/caddy" \
        caddy run --adapter caddyfile --config "$dir/Caddyfile" >>"$dir/caddy.log" 2>&1 &
    proxy_pid=$!
}

# Reloads as `systemctl reload nginx` / `systemctl reload caddy` do.
reload_nginx() { nginx -p "$dir/nginx" -c "$dir/nginx.conf" -s reload 2>>"$dir/nginx/error.log"; }
reload_caddy() {
    HOME="$dir" XDG_DATA_HOME="$dir/caddy" XDG_CONFIG_HOME="$dir/caddy" caddy reload --adapter caddyfile \
        --config "$dir/Caddyfile" --address "127.0.0.1:$admin_port" --force >>"$dir/caddy.log" 2>&1
}
# What docs/deploy.md says a reload of each proxy does to open WebSockets.
reload_keeps_nginx="still open"
reload_keeps_caddy="closed"

for proxy in ${PROXIES:-nginx caddy}; do
    proxy_started=$SECONDS
    echo "== deploy-check: $proxy"
    dir="$work/$proxy"
    mkdir -p "$dir"
    relay_port=$(free_port)
    proxy_port=$(free_port)
    http_port=$(free_port)
    admin_port=$(free_port)
    public="wss://$name:$proxy_port"

    cp deploy/relay.toml "$dir/relay.toml"
    subst "$dir/relay.toml" 'listen = "127.0.0.1:7777"' "listen = \"127.0.0.1:$relay_port\""
    subst "$dir/relay.toml" 'data = "/var/lib/nostrwire"' "data = \"$dir/data\""
    subst "$dir/relay.toml" 'url = "wss://relay.example.com"' "url = \"$public\""
    # Test-only: a small per-address limit to reach, pings every 2 s to
    # see through the proxy, a dictionary set for nostrwire.v2 to serve.
    subst "$dir/relay.toml" 'connections_per_ip = 32' 'connections_per_ip = 10'
    printf '\n[websocket]\nping_seconds = 2\n\n[storage]\ndictionaries = "%s"\n' "$work/dicts.bin" >>"$dir/relay.toml"
    "$bin" relay --check-config -c "$dir/relay.toml" >/dev/null
    # What StateDirectory= and docs/deploy.md's backup directory give the user.
    install -d -o "$run_user" -g "$run_group" -m 0750 "$dir/data" "$dir/backups"
    start_relay
    "start_$proxy"
    for _ in $(seq 100); do
        curl -sf -o /dev/null --cacert "$tls/ca.pem" --resolve "$name:$proxy_port:127.0.0.1" \
            -H 'Accept: application/nostr+json' "https://$name:$proxy_port/" && break
        sleep 0.1
    done

    redirect=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' --resolve "$name:$http_port:127.0.0.1" "http://$name:$http_port/x")
    case "$redirect" in
        30[18]\ https://"$name"*/x) ok "$proxy: plain HTTP is redirected to https ($redirect)" ;;
        *) fail "$proxy: plain HTTP answered '$redirect', not a redirect to https" ;;
    esac

    export PROXY=$proxy PUBLIC_URL=$public DIRECT_URL="ws://127.0.0.1:$relay_port" \
        CONNECTIONS_PER_IP=10 PING_SECONDS=2
    out=$(check proxy) || true
    echo "$out" | grep -v ': [0-9]* passed, [0-9]* failed$'
    passed=$((passed + $(echo "$out" | grep -c '^ok - ' || true)))
    failed=$((failed + $(echo "$out" | grep -c '^not ok - ' || true)))
    grep -q ': [0-9]* passed, 0 failed$' <<<"$out" || fail "$proxy: the client checks did not finish"

    hold="$dir/hold.txt"
    : >"$hold"
    (cd scripts/deploy-check && exec node check.mjs hold 3) >"$hold" 2>&1 &
    holder=$!
    until grep -q '^open' "$hold"; do kill -0 "$holder" 2>/dev/null || break; sleep 0.05; done
    "reload_$proxy"
    wait "$holder" || true
    expected_var="reload_keeps_$proxy"
    held=$(tail -1 "$hold")
    if [ "${held%% [0-9]*}" = "${!expected_var}" ]; then
        ok "$proxy: reloading the proxy leaves an open subscription $held, as docs/deploy.md says"
    else
        fail "$proxy: reloading the proxy: $(cat "$hold"), not ${!expected_var} as docs/deploy.md says"
    fi

    # SIGHUP through the unit's ExecReload, after --check-config as docs/deploy.md says.
    subst "$dir/relay.toml" 'name = "relay.example.com"' 'name = "reloaded by deploy-check"'
    "$bin" relay --check-config -c "$dir/relay.toml" >/dev/null
    reload=("${exec_reload[@]//\$MAINPID/$relay_pid}")
    "${reload[@]}"
    reloaded=
    for _ in $(seq 50); do
        check name "reloaded by deploy-check" 2>/dev/null && { reloaded=1; break; }
        sleep 0.1
    done
    if [ -n "$reloaded" ]; then
        ok "$proxy: '${exec_reload[*]}' reloaded the NIP-11 name, seen through wss://"
    else
        fail "$proxy: '${exec_reload[*]}' did not change the NIP-11 name"
    fi

    # A backup while publishing through the proxy, then a stop while publishing.
    acks="$dir/acks.txt"
    (cd scripts/deploy-check && exec node check.mjs publish "$acks") 2>"$dir/publisher.log" &
    publisher=$!
    count() { if [ -f "$acks" ]; then echo $(($(wc -l <"$acks") - 1)); else echo 0; fi; }
    until_acked() {
        until [ "$(count)" -ge "$1" ]; do
            kill -0 "$publisher" 2>/dev/null || { cat "$dir/publisher.log" >&2; exit 1; }
            sleep 0.05
        done
    }
    until_acked 2000
    before_backup=$(count)
    runuser -u "$run_user" -- "$bin" compact -c "$dir/relay.toml" --output "$dir/backups/1" 2>"$dir/compact.log"
    after_backup=$(count)
    until_acked $((after_backup + 1000))
    stop_relay
    wait "$publisher" || fail "$proxy: the publisher failed: $(cat "$dir/publisher.log")"
    publisher=
    total=$(count)
    echo "   $(tail -1 "$dir/compact.log" | cut -d';' -f1)"
    echo "   $(cat "$dir/publisher.log")"

    # Starts the relay, expects the first $1 acknowledged events through the
    # proxy, stops it; $2 says what is checked.
    expect_acked() {
        start_relay
        local got
        if got=$(check has "$acks" "$1" "$public" 2>&1); then ok "$proxy: $2: $got"; else fail "$proxy: $2: $got"; fi
        stop_relay
    }
    # The upgrade steps of docs/deploy.md, with the same binary as the new one.
    install -m 0755 "$bin" "$bin.new"
    "$bin.new" relay --check-config -c "$dir/relay.toml" >/dev/null
    cp "$bin" "$bin.old"
    mv "$bin.new" "$bin"
    expect_acked "$total" "after '$kill_signal' mid-publishing and the upgrade steps, all $total acknowledged events are there"

    # Restore as docs/deploy.md says: the backup's directory in place of the data.
    mv "$dir/data" "$dir/data.old"
    cp -a "$dir/backups/1" "$dir/data"
    chown -R "$run_user:$run_group" "$dir/data"
    expect_acked "$before_backup" "the backup restores every event acknowledged before it began ($before_backup; $after_backup by its end)"
    relay_pid=
    kill "$proxy_pid"
    wait "$proxy_pid" || true
    proxy_pid=
    echo "   $proxy: $((SECONDS - proxy_started)) s"
done

echo "deploy-check: $((SECONDS - started)) s"
echo "deploy-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
