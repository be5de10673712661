"""summary.md of scripts/bench-cluster.sh: tables from the JSON files of a
run, and the projection for 16-core hosts computed from them."""

import json
import statistics
import sys

out = sys.argv[1]


def load(name):
    with open(f"{out}/{name}") as f:
        return json.load(f)


single = load("single-publish.json")
spread = load("cluster-publish.json")
node1 = load("cluster-publish-node1.json")
single_lat = load("single-latency.json")
cluster_lat = load("cluster-latency.json")
catch = load("catchup.json")
with open(f"{out}/cluster-pids.txt") as f:
    pids = f.read().split(": ")[1].strip().split(",")
names = ["relay1", "relay2", "relay3", "nats1", "nats2", "nats3"]


def us(run, pid):
    return 1e6 * run["cpu_seconds"][pid] / run["accepted"]


def thread_us(run, pid, role):
    return 1e6 * run["thread_seconds"][pid].get(role, 0.0) / run["accepted"]


single_pid = list(single["cpu_seconds"])[0]
single_us = us(single, single_pid)

print("## Publishing: events/s and CPU per event")
print()
print("| run | events/s | " + " | ".join(names) + " |")
print("|---|---:|" + "---:|" * len(names))
print(f"| single relay | {single['events_per_second']} | {single_us:.1f} |" + " |" * (len(names) - 1))
for label, run in [("cluster, clients on all nodes", spread), ("cluster, clients on node 1", node1)]:
    cells = " | ".join(f"{us(run, p):.1f}" for p in pids)
    print(f"| {label} | {run['events_per_second']} | {cells} |")
print()
print(
    "CPU µs per event acknowledged (utime + stime from /proc, whole process). "
    "Relay nodes against the single relay, clients on all nodes: "
    + ", ".join(f"{n} {us(spread, p) / single_us:.2f}×" for n, p in zip(names[:3], pids[:3]))
    + "."
)
print()
roles = sorted(
    {r for p in pids[:3] for r in node1["thread_seconds"][p]}
    | {r for p in pids[:3] for r in spread["thread_seconds"][p]}
    | set(single["thread_seconds"][single_pid])
)
header = ["single relay"] + [f"{n}, all nodes" for n in names[:3]] + [f"{n}, node 1" for n in names[:3]]
print("| thread role, µs per event | " + " | ".join(header) + " |")
print("|---|" + "---:|" * len(header))
for role in roles:
    cells = [thread_us(single, single_pid, role)]
    cells += [thread_us(spread, p, role) for p in pids[:3]]
    cells += [thread_us(node1, p, role) for p in pids[:3]]
    print(f"| {role} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
print()

print("## Live delivery at 1,000 events/s")
print()
print("| from → to | received | p50 ms | p90 ms | p99 ms | max ms |")
print("|---|---:|---:|---:|---:|---:|")
for label, lat in [("single relay (same node)", single_lat), ("cluster, node 1 → node 3", cluster_lat)]:
    print(
        f"| {label} | {lat['received']}/{lat['sent']} | {lat['p50_ms']} | {lat['p90_ms']} "
        f"| {lat['p99_ms']} | {lat['max_ms']} |"
    )
with open(f"{out}/cluster-lag.tsv") as f:
    lags = [[int(v) for v in line.split()[1:] if v.isdigit()] for line in f]
flat = [v for row in lags for v in row]
if flat:
    print()
    print(
        f"Replication lag while clients on all nodes publish ({len(lags)} samples of each node's "
        f"nostrwire_cluster_lag, 200 ms apart): mean {statistics.mean(flat):.0f}, max {max(flat)} messages."
    )
print()
print("## Catch-up")
print()
print(
    f"A restarted node applied {catch['events']} events in {catch['seconds_from_start']} s from its start "
    f"(process start included): {catch['events_per_second']} events/s, "
    f"{catch['cpu_us_per_event']} CPU µs per event."
)
print()

print("## Projection: 16-core hosts, one relay node per host, NATS on three hosts of its own")
print()
apply_us = statistics.mean([us(node1, p) for p in pids[1:3]])
take_us = us(node1, pids[0]) - apply_us
writer_us = max(thread_us(spread, p, "writer") for p in pids[:3])
nats_us = max(us(spread, p) for p in pids[3:])
print(
    f"- Applying an event (nodes 2 and 3 while every client is on node 1): {apply_us:.1f} µs; "
    f"taking a client's event (node 1 less that): {take_us:.1f} µs. A node with 1/N of the "
    f"clients spends {apply_us:.1f} + {take_us:.1f}/N µs per event."
)
print(
    f"- The one writer thread: {writer_us:.1f} µs per event (the busiest node, clients on all nodes): "
    f"a serial ceiling of {1e6 / writer_us:,.0f} events/s on any host."
)
print(
    f"- The busiest NATS server: {nats_us:.1f} µs per event with 3 consumers; counted ×N/3 for N "
    "consumers, on one core (one stream is one Raft group) as the conservative bound."
)
print()
print(
    "| nodes | relay µs per event per node | relay CPU ceiling (16 cores) | writer ceiling "
    "| NATS leader, one core | projected writes/s | connections, REQs, subscribers |"
)
print("|---:|---:|---:|---:|---:|---:|---|")
single_writer_us = thread_us(single, single_pid, "writer")
single_caps = (16e6 / single_us, 1e6 / single_writer_us)
print(
    f"| single relay | {single_us:.1f} | {single_caps[0]:,.0f} | {single_caps[1]:,.0f} | — "
    f"| {min(single_caps):,.0f} | one node |"
)
for n in (3, 10):
    node_us = apply_us + take_us / n
    cpu_cap = 16e6 / node_us
    writer_cap = 1e6 / writer_us
    nats_cap = 1e6 / (nats_us * n / 3)
    writes = min(cpu_cap, writer_cap, nats_cap)
    print(
        f"| {n} | {node_us:.1f} | {cpu_cap:,.0f} | {writer_cap:,.0f} | {nats_cap:,.0f} "
        f"| {writes:,.0f} | ×{n} of one node |"
    )
