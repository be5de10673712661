"""Turns the three raw result files into one `results.json` and the
Markdown tables of `report.md` (ratios computed here, never typed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from common import DATA


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×"


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA
    runs = {name: json.loads((DATA / f"{name}.json").read_text()) for name in ("events", "files", "relay")}
    (out_dir / "results.json").write_text(json.dumps(runs, indent=1))
    lines = []
    ev = runs["events"]["cases"]
    floor = ev["libsecp256k1 bare (coincurve verify)"]
    hand = ev["orjson+hashlib+coincurve"]
    sdk = ev["nostr-sdk Event.from_json+verify"]
    lines += [
        f"## Parse + id + verify, per event ({runs['events']['events']:,} real events, "
        f"{runs['events']['rounds']} interleaved rounds)",
        "",
        "| | median µs/event | best µs/event | CPU µs/event | vs bare libsecp256k1 (best) | "
        "speed-up vs orjson+hashlib+coincurve (median / best) | speed-up vs nostr-sdk (median / best) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in ev.items():
        lines.append(
            f"| {name} | {s['median_per_item_us']:.1f} | {s['best_per_item_us']:.1f} | "
            f"{s['median_cpu_per_item_us']:.1f} | {ratio(s['best_s'], floor['best_s'])} | "
            f"{ratio(hand['median_s'], s['median_s'])} / {ratio(hand['best_s'], s['best_s'])} | "
            f"{ratio(sdk['median_s'], s['median_s'])} / {ratio(sdk['best_s'], s['best_s'])} |"
        )
    fl = runs["files"]
    base = fl["cases"]["orjson line loop (JSON Lines)"]
    b = fl["bytes"]
    lines += [
        "",
        f"## Reading a {fl['events']:,}-event dump with a filter, no verification "
        f"({fl['rounds']} interleaved rounds)",
        "",
        f"Filter: {json.dumps(fl['filter'])[:60]}… ({fl['matched']:,} matches). "
        f"Files: JSON Lines {b['jsonl'] / 1e9:.2f} GB, nwb {b['nwb'] / 1e9:.2f} GB, "
        f"zstd frames {b['zstd_frames'] / 1e9:.2f} GB (+ {b['zstd_dictionary'] / 1e3:.0f} KB dictionary); "
        "all in the page cache.",
        "",
        "| | median s | best s | CPU s | µs/event (median) | speed-up vs the orjson loop (median / best) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in fl["cases"].items():
        cpu = s["median_cpu_per_item_us"] * fl["events"] / 1e6
        lines.append(
            f"| {name} | {s['median_s']:.2f} | {s['best_s']:.2f} | {cpu:.2f} | "
            f"{s['median_per_item_us']:.2f} | {ratio(base['median_s'], s['median_s'])} / "
            f"{ratio(base['best_s'], s['best_s'])} |"
        )
    rl = runs["relay"]
    base = rl["cases"]["websockets+orjson+coincurve"]
    lines += [
        "",
        f"## A {rl['events']:,}-event REQ to EOSE from a local relay, every event verified "
        f"({rl['rounds']} interleaved rounds)",
        "",
        "| | median s | best s | client CPU s | events received | speed-up vs websockets+orjson+coincurve "
        "(median / best) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in rl["cases"].items():
        cpu = s["median_cpu_per_item_us"] * rl["events"] / 1e6
        got = ", ".join(f"{n:,}" for n in rl.get("received", {}).get(name, []))
        lines.append(
            f"| {name} | {s['median_s']:.3f} | {s['best_s']:.3f} | {cpu:.3f} | {got} | "
            f"{ratio(base['median_s'], s['median_s'])} / {ratio(base['best_s'], s['best_s'])} |"
        )
    h = runs["events"]["host"]
    lines += [
        "",
        f"Host: {h['cpu']}, {h['cores']} cores, {h['platform']}; Python {h['python']}; {h['rustc']}; "
        + ", ".join(f"{k} {v}" for k, v in h["packages"].items())
        + f". Load average at the end of each part: events {runs['events']['host']['load_average_at_end']}, "
        f"files {runs['files']['host']['load_average_at_end']}, relay {runs['relay']['host']['load_average_at_end']}.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
