#!/usr/bin/env python3
"""The abuse table of a run kept as JSON Lines: one `nostrwire load --report`
JSON per line, each with a "label" (what was measured: the relay binary, the
attack's sizes) added. Prints a Markdown table.

    python3 scripts/lib/abuse_rows.py bench-runs/RUN/raw.jsonl > bench-runs/RUN/report.md
"""
import json
import sys


def mib(kib):
    return f"{kib / 1024:.0f}" if kib is not None else "–"


def main(path):
    print("| run | attack | peak anon MiB | anon before → 60 s after, MiB | probe OK p99 ms | EOSE p99 ms | live p99 ms | acked lost | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    with open(path, encoding="utf-8") as f:
        for line in f:
            report = json.loads(line)
            for total in report["totals"]:
                a = total["abuse"]
                m = total.get("metrics", {})
                print(
                    f"| {report['label']} | {a['attack']} | {a['peak_rss_anon_mib']:.0f} "
                    f"| {mib(m.get('relay_rss_anon_before_kib'))} → {mib(m.get('relay_rss_anon_after_kib'))} "
                    f"| {a['probe_ok_p99_ms']:.0f} | {a['probe_eose_p99_ms']:.0f} "
                    f"| {a['live_delivery_p99_ms']:.0f} | {a['acked_lost']} of {a['acked']} | {a['verdict']} |"
                )


if __name__ == "__main__":
    main(sys.argv[1])
