"""Shared by the benchmarks: interleaved rounds, medians, the host."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("NOSTRWIRE_BENCH_DATA", REPO / "python" / "bench" / "data"))


def nostrwire_bin() -> Path:
    explicit = os.environ.get("NOSTRWIRE_BIN")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "nostrwire"


def host() -> Dict[str, object]:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("nostrwire", "orjson", "coincurve", "nostr_sdk", "websockets", "zstandard"):
        try:
            mod = __import__(pkg)
            versions[pkg] = getattr(mod, "__version__", None) or _dist_version(pkg)
        except ImportError:
            versions[pkg] = None
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "load_average_at_end": load_average(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "rustc": rustc,
        "packages": versions,
    }


def _dist_version(pkg: str):
    from importlib.metadata import PackageNotFoundError, version

    for name in (pkg, pkg.replace("_", "-")):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def interleaved(cases: Dict[str, Callable[[], object]], rounds: int) -> Dict[str, List[tuple]]:
    """Runs every case once per round, in the same order, and returns the
    wall-clock and CPU seconds (this process, all its threads) of each run:
    rounds spread the machine's noise over all cases alike."""
    times: Dict[str, List[tuple]] = {name: [] for name in cases}
    for r in range(rounds):
        for name, fn in cases.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            times[name].append((time.perf_counter() - t, time.process_time() - c))
        print(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {times[n][-1][0]:.3f}s" for n in cases), file=sys.stderr, flush=True)
    return times


def summary(times: Dict[str, List[tuple]], per: int) -> Dict[str, Dict[str, object]]:
    """Median and best wall time of each case, and the median CPU time,
    per item (`per` items a run)."""
    out: Dict[str, Dict[str, object]] = {}
    for name, runs in times.items():
        wall = [w for w, _ in runs]
        cpu = [c for _, c in runs]
        out[name] = {
            "median_s": statistics.median(wall),
            "best_s": min(wall),
            "median_per_item_us": statistics.median(wall) / per * 1e6,
            "best_per_item_us": min(wall) / per * 1e6,
            "median_cpu_per_item_us": statistics.median(cpu) / per * 1e6,
            "runs_wall_s": wall,
            "runs_cpu_s": cpu,
        }
    return out


def load_average() -> List[float]:
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return []


def save(name: str, result: Dict[str, object]) -> Path:
    out = DATA / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return out
