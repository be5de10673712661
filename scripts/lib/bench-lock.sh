# Sourced by the benchmark scripts: one measurement on this machine at a time.
#   bench_lock   take the machine-wide benchmark lock (waiting, and saying so,
#                while another benchmark holds it); held until this shell and
#                whatever it execs exit.
# The lock file is $NOSTRWIRE_BENCH_LOCK (default /tmp/nostrwire-bench.lock).
# A script run by a script that holds the lock does not take it again.
# Builds stay outside the lock: only the timed part should hold it.
bench_lock() {
    [ -n "${NOSTRWIRE_BENCH_LOCKED:-}" ] && return 0
    local file="${NOSTRWIRE_BENCH_LOCK:-/tmp/nostrwire-bench.lock}"
    exec 9>>"$file"
    if ! flock -n 9; then
        echo "waiting for another benchmark to finish ($file)" >&2
        flock 9
    fi
    export NOSTRWIRE_BENCH_LOCKED=1
    echo "benchmark lock taken; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}
