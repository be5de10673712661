#!/usr/bin/env python3
"""nostr-bench.md from nostr-bench.jsonl (scripts/compare-relays.sh writes both).

Usage: scripts/lib/nostr_bench_md.py RUN/nostr-bench.jsonl > RUN/nostr-bench.md
"""
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("# nostr-bench runs")
print()
print("One line per run: the relay alone on a fresh data directory. tps: median of nostr-bench's")
print("2-second rates while every connection was sending; relay CPU: utime + stime from /proc")
print("around the run (handshakes included); µs per op: that CPU over the operations nostr-bench")
print("counted as answered. mean ms: nostr-bench's mean time from a request to its answer (whole")
print("milliseconds). greeting: what the relay sent on connect before the client spoke.")
print("bytes and events per REQ: the equal-work check before `req` (100 of nostr-bench's hashtags,")
print("one REQ at a time; bytes of the event messages returned). seeded: events of the seed file")
print("the relay accepted.")
print()
print("| round | test | relay | greeting | tps | mean ms | answered | failed | relay CPU s | µs CPU / op | bytes / REQ | events / REQ | seeded | notes |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
def f(v, d=0):
    return "–" if v is None else f"{v:,.{d}f}"
for x in recs:
    notes = []
    if x.get("error"):
        notes.append(x["error"])
    if x.get("connect_errors"):
        notes.append(f"{x['connect_errors']} connections refused")
    if x.get("connections_lost"):
        notes.append(f"{x['connections_lost']} connections lost")
    if not x.get("relay_up", True):
        notes.append("relay exited")
    print(f"| {x['round']} | {x['test']} | {x['relay']} | {x.get('greeting')} | {f(x.get('tps'))} | {f(x.get('avg_ms'))} | "
          f"{f(x.get('complete'))} | {f(x.get('errors'))} | {f(x.get('relay_cpu_s'), 2)} | "
          f"{f(x.get('cpu_us_per_op'))} | {f(x.get('bytes_per_req'))} | {f(x.get('events_per_req'), 1)} | "
          f"{f(x.get('seeded'))} | {'; '.join(notes)} |")
