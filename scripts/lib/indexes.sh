# Shared by the benchmark scripts; source it, do not run it.

# wait_for_indexes HTTP_BASE: nostrwire's time-ordered and search indexes
# trail its commits; waits until both backlogs on HTTP_BASE/metrics are
# empty, or a minute has passed.
wait_for_indexes() {
    local backlog
    for _ in $(seq 120); do
        backlog=$(curl -s "$1/metrics" |
            awk '/^nostrwire_db_(index|search)_backlog_events /{s+=$2} END{print s+0}')
        [ "$backlog" = 0 ] && return 0
        sleep 0.5
    done
}
