# Sourced by the scripts that start servers on loopback:
#   wait_port PORT    wait (up to 10 s) until something listens on 127.0.0.1:PORT
#   started PID       remember a server this script started
#   stop PID          SIGTERM it, wait for it, forget it
#   stop_started      stop every server still remembered (for an EXIT trap)
# Only the processes the script itself started are ever signalled, by id.
procs_started=()

wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    return 1
}

started() {
    procs_started+=("$1")
}

stop() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    local left=() p
    for p in "${procs_started[@]}"; do [ "$p" = "$1" ] || left+=("$p"); done
    procs_started=("${left[@]}")
}

stop_started() {
    local p
    for p in "${procs_started[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    procs_started=()
}
