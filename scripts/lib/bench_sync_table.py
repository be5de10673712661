#!/usr/bin/env python3
"""The table of scripts/bench-sync.sh: medians per size, direction and
client/relay pair from runs.tsv, with ratios to `strfry sync` against the
strfry relay of the same size and direction.

    bench_sync_table.py runs.tsv > table.md
"""

import csv
import statistics
import sys
from collections import defaultdict


def main(path):
    rows = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows[(int(r["size"]), r["dir"], r["client"], r["relay"])].append(r)
    med = {}
    for key, rs in rows.items():
        med[key] = {
            "wall": statistics.median(float(r["wall_s"]) for r in rs),
            "cpu": statistics.median(float(r["cpu_s"]) for r in rs),
            "rss": statistics.median(int(r["peak_rss_kib"]) for r in rs) / 1024,
            "anon": statistics.median(int(r["peak_anon_kib"]) for r in rs) / 1024,
            "bytes": statistics.median(
                int(r["bytes_to_relay"]) + int(r["bytes_from_relay"]) for r in rs
            ),
            "runs": len(rs),
            "ok": all(r["ids_ok"] == "yes" for r in rs),
        }
    print(
        "| events per side | dir | client → relay | runs | wall s (median) | × strfry "
        "| client CPU s | × strfry | bytes on the wire | × strfry | peak RSS MiB | × strfry "
        "| peak anonymous MiB | × strfry | ids match |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(med, key=lambda k: (k[0], k[1], k[2] != "strfry", k[3] != "nostrwire")):
        size, direction, client, relay = key
        m = med[key]
        base = med.get((size, direction, "strfry", "strfry"))
        ratio = lambda a, b: f"{a / b:.2f}×" if base and b else "–"
        print(
            f"| {size:,} | {direction} | {client} → {relay} | {m['runs']} | {m['wall']:.2f} "
            f"| {ratio(m['wall'], base['wall'] if base else 0)} | {m['cpu']:.2f} "
            f"| {ratio(m['cpu'], base['cpu'] if base else 0)} | {m['bytes']:,.0f} "
            f"| {ratio(m['bytes'], base['bytes'] if base else 0)} | {m['rss']:.1f} "
            f"| {ratio(m['rss'], base['rss'] if base else 0)} | {m['anon']:.1f} "
            f"| {ratio(m['anon'], base['anon'] if base else 0)} | {'yes' if m['ok'] else 'NO'} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
