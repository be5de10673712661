#!/usr/bin/env bash
# deploy/ as an operator installs it, checked through wss://.
#
#   scripts/deploy-check.sh    # NOSTRWIRE_BIN=path/to/nostrwire picks the binary,
#                              # PROXIES=nginx or PROXIES=caddy one proxy, KEEP=1 keeps the files
#
# Installs nginx, Caddy, certbot, pebble (a test ACME server) and openssl
# from Debian when missing, makes a throwaway certificate authority for
# pebble's own address, and runs pebble as the certificate authority of
# relay.nostrwire.test (which pebble's DNS and the test clients resolve to
# 127.0.0.1). For each proxy: starts the relay with the unit's ExecStart and
# deploy/relay.toml, gets the certificate as docs/deploy.md does (certbot
# through Debian's default nginx site, or Caddy by itself), runs the proxy
# with deploy/nginx.conf or deploy/Caddyfile (only the name, ports and
# paths substituted), runs the client
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

echo "== deploy-check: nginx, Caddy, certbot, pebble and openssl from Debian"
missing=()
for tool in nginx caddy certbot pebble openssl; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), caddy $(caddy version | cut -d' ' -f1), $(certbot --version 2>&1)," \
    "pebble $(dpkg-query -W -f '${Version}' pebble 2>/dev/null), $(openssl version | cut -d' ' -f1-2)"

echo "== deploy-check: clients (nostr-tools, ws, the JS package)"
if [ ! -f js/dist/index.js ]; then
    (cd js && npm ci --no-audit --no-fund --silent && node scripts/build.mjs >/dev/null)
fi
(cd scripts/deploy-check && npm install --no-package-lock --no-audit --no-fund --silent)

work=$(mktemp -d)
chmod 0755 "$work"
relay_pid= proxy_pid= publisher= acme_pids=
cleanup() {
    for pid in $relay_pid $proxy_pid $publisher $acme_pids; do kill "$pid" 2>/dev/null || true; done
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

# The proxies take these ports in turn; pebble validates on them.
http_port=$(free_port)
proxy_port=$(free_port)
public="wss://$name:$proxy_port"

echo "== deploy-check: pebble, the certificate authority of $name"
tls="$work/tls"
mkdir -p "$tls"
# A throwaway authority for pebble's own HTTPS address, which certbot and
# Caddy check.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=nostrwire deploy-check CA" -keyout "$tls/ca.key" -out "$tls/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/acme.key" -out "$tls/acme.csr" 2>/dev/null
openssl x509 -req -in "$tls/acme.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 2 -out "$tls/acme.pem" 2>/dev/null \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n')
acme_port=$(free_port)
acme_admin=$(free_port)
dns_port=$(free_port)
printf '{"pebble": {"listenAddress": "127.0.0.1:%s", "managementListenAddress": "127.0.0.1:%s",
  "certificate": "%s", "privateKey": "%s", "httpPort": %s, "tlsPort": %s,
  "ocspResponderURL": "", "externalAccountBindingRequired": false}}\n' \
    "$acme_port" "$acme_admin" "$tls/acme.pem" "$tls/acme.key" "$http_port" "$proxy_port" >"$tls/pebble.json"
# pebble's DNS answers 127.0.0.1 for every name, and no IPv6.
pebble-challtestsrv -defaultIPv4 127.0.0.1 -defaultIPv6 "" -dns01 "127.0.0.1:$dns_port" -http01 "" \
    -https01 "" -tlsalpn01 "" -management "127.0.0.1:$(free_port)" >"$tls/dns.log" 2>&1 &
acme_pids=$!
PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 pebble -config "$tls/pebble.json" \
    -dnsserver "127.0.0.1:$dns_port" >"$tls/pebble.log" 2>&1 &
acme_pids="$acme_pids $!"
acme="https://127.0.0.1:$acme_port/dir"
for _ in $(seq 100); do
    curl -sf -o /dev/null --cacert "$tls/ca.pem" "$acme" && break
    sleep 0.1
done
# pebble makes a new root at each start: the clients trust this one.
curl -sf --cacert "$tls/ca.pem" "https://127.0.0.1:$acme_admin/roots/0" >"$tls/root.pem"
export NODE_EXTRA_CA_CERTS="$tls/root.pem"

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

certbot_() {
    REQUESTS_CA_BUNDLE="$tls/ca.pem" certbot "$@" --server "$acme" --config-dir "$dir/letsencrypt" \
        --work-dir "$dir/letsencrypt/work" --logs-dir "$dir/letsencrypt/logs" >>"$dir/certbot.log" 2>&1 \
        || { fail "$proxy: certbot $1: $(tail -5 "$dir/certbot.log")"; return 1; }
}

start_nginx() {
    mkdir -p "$dir/nginx" "$dir/sites-available" "$dir/sites-enabled" "$dir/www"
    # What Debian's /etc/nginx/nginx.conf gives the sites, in this directory.
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
    include $dir/sites-enabled/*;
}
EOF
    # Debian's default site as apt installs it: port 80, /var/www/html.
    local site="$dir/sites-available/default"
    cp /etc/nginx/sites-available/default "$site"
    subst "$site" "listen 80 default_server;" "listen 127.0.0.1:$http_port default_server;"
    subst "$site" "listen [::]:80 default_server;" ""
    subst "$site" "root /var/www/html;" "root $dir/www;"
    ln -s ../sites-available/default "$dir/sites-enabled/default"
    nginx -t -q -p "$dir/nginx" -c "$dir/nginx.conf"
    nginx -p "$dir/nginx" -c "$dir/nginx.conf" &
    proxy_pid=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$http_port/" && break; sleep 0.05; done

    # docs/deploy.md, step 4: the certificate through the default site, then
    # the relay's site in its place.
    certbot_ certonly --webroot -w "$dir/www" -d "$name" -m you@example.com --agree-tos --no-eff-email -n || return 0
    site="$dir/sites-available/nostrwire"
    cp deploy/nginx.conf "$site"
    subst "$site" "/etc/letsencrypt/" "$dir/letsencrypt/"
    subst "$site" "relay.example.com" "$name"
    subst "$site" "root /var/www/html;" "root $dir/www;"
    subst "$site" "listen 443 ssl;" "listen 127.0.0.1:$proxy_port ssl;"
    subst "$site" "listen 80;" "listen 127.0.0.1:$http_port;"
    subst "$site" "listen [::]:443 ssl;" ""
    subst "$site" "listen [::]:80;" ""
    subst "$site" "http://127.0.0.1:7777" "http://127.0.0.1:$relay_port"
    ln -s ../sites-available/nostrwire "$dir/sites-enabled/nostrwire"
    rm "$dir/sites-enabled/default"
    nginx -t -q -p "$dir/nginx" -c "$dir/nginx.conf"
    reload_nginx
    # The renewal hook of docs/deploy.md, with this nginx's reload.
    mkdir -p "$dir/letsencrypt/renewal-hooks/deploy"
    printf '#!/bin/sh\nnginx -p %s -c %s -s reload\n' "$dir/nginx" "$dir/nginx.conf" \
        >"$dir/letsencrypt/renewal-hooks/deploy/nginx"
    chmod +x "$dir/letsencrypt/renewal-hooks/deploy/nginx"
}

start_caddy() {
    {
        # Test-only global options: ports, state directory, admin API, and
        # pebble in place of Let's Encrypt.
        printf '{\n\tadmin 127.0.0.1:%s\n\thttp_port %s\n\thttps_port %s\n\tstorage file_system %s\n' \
            "$admin_port" "$http_port" "$proxy_port" "$dir/caddy"
        printf '\tacme_ca %s\n\tacme_ca_root %s\n\temail you@example.com\n}\n\n' "$acme" "$tls/ca.pem"
        cat deploy/Caddyfile
    } >"$dir/Caddyfile"
    subst "$dir/Caddyfile" "relay.example.com {" "$name {
	bind 127.0.0.1"
    subst "$dir/Caddyfile" "reverse_proxy 127.0.0.1:7777" "reverse_proxy 127.0.0.1:$relay_port"
    caddy validate --adapter caddyfile --config "$dir/Caddyfile" >"$dir/caddy.log" 2>&1 \
        || { cat "$dir/caddy.log"; exit 1; }
    HOME="$dir" XDG_DATA_HOME="$dir/caddy" XDG_CONFIG_HOME="$dir/caddy" \
        caddy run --adapter caddyfile --config "$dir/Caddyfile" >>"$dir/caddy.log" 2>&1 &
    proxy_pid=$!
}

# The serial number of the certificate the proxy serves.
served_serial() {
    openssl s_client -connect "127.0.0.1:$proxy_port" -servername "$name" </dev/null 2>/dev/null \
        | openssl x509 -noout -serial 2>/dev/null
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
    admin_port=$(free_port)

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
    # Caddy gets its certificate after it starts.
    for _ in $(seq 300); do
        curl -sf -o /dev/null --cacert "$tls/root.pem" --resolve "$name:$proxy_port:127.0.0.1" \
            -H 'Accept: application/nostr+json' "https://$name:$proxy_port/" && break
        sleep 0.1
    done
    issuer=$(openssl s_client -connect "127.0.0.1:$proxy_port" -servername "$name" </dev/null 2>/dev/null \
        | openssl x509 -noout -issuer 2>/dev/null || true)
    case "$issuer" in
        *[Pp]ebble*) ok "$proxy: the certificate for $name came from the ACME server ($issuer)" ;;
        *) fail "$proxy: no certificate from the ACME server is served (${issuer:-none})" ;;
    esac

    # nginx's reload swaps its sites asynchronously: the default site may
    # still answer plain HTTP for a moment.
    for _ in $(seq 30); do
        redirect=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' --resolve "$name:$http_port:127.0.0.1" "http://$name:$http_port/x")
        case "$redirect" in 30[18]\ *) break ;; esac
        sleep 0.1
    done
    case "$redirect" in
        30[18]\ https://"$name"*/x) ok "$proxy: plain HTTP is redirected to https ($redirect)" ;;
        *) fail "$proxy: plain HTTP answered '$redirect', not a redirect to https" ;;
    esac

    # The three curl commands of docs/deploy.md, "From outside".
    outside() { curl -s --cacert "$tls/root.pem" --resolve "$name:$proxy_port:127.0.0.1" "$@" || true; }
    nip11=$(outside -H 'Accept: application/nostr+json' "https://$name:$proxy_port/")
    metrics=$(outside -o /dev/null -w '%{http_code}' "https://$name:$proxy_port/metrics")
    upgrade=$(outside -si --http1.1 --max-time 3 -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
        -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
        -H 'Sec-WebSocket-Protocol: nostrwire.v1' "https://$name:$proxy_port/" | tr -d '\r\0')
    if [[ $nip11 == *'"supported_nips"'* && $metrics == 404 && $upgrade == 'HTTP/1.1 101 '* ]] \
        && grep -qix 'sec-websocket-protocol: nostrwire.v1' <<<"$upgrade"; then
        ok "$proxy: the guide's curl commands: NIP-11, /metrics $metrics, $(head -1 <<<"$upgrade") with nostrwire.v1"
    else
        fail "$proxy: the guide's curl commands: NIP-11 '${nip11:0:80}', /metrics $metrics, '$(head -3 <<<"$upgrade")'"
    fi

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

    if [ "$proxy" = nginx ]; then
        # certbot's renewal goes through the site's acme-challenge location,
        # and its deploy hook makes nginx serve the new certificate.
        old_serial=$(served_serial)
        if certbot_ renew --force-renewal --no-random-sleep-on-renew; then
            for _ in $(seq 50); do [ "$(served_serial)" != "$old_serial" ] && break; sleep 0.1; done
            new_serial=$(served_serial)
            if [ -n "$new_serial" ] && [ "$new_serial" != "$old_serial" ]; then
                ok "$proxy: certbot renew through the site and its deploy hook: nginx serves the new certificate (${old_serial#serial=} → ${new_serial#serial=})"
            else
                fail "$proxy: after certbot renew nginx still serves ${old_serial:-nothing}"
            fi
        fi
    fi
    relay_pid=
    kill "$proxy_pid"
    wait "$proxy_pid" || true
    proxy_pid=
    echo "   $proxy: $((SECONDS - proxy_started)) s"
done

echo "deploy-check: $((SECONDS - started)) s"
echo "deploy-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
