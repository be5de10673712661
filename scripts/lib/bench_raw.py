#!/usr/bin/env python3
"""A benchmark run's raw per-round files, kept as one file: DIR/raw.jsonl.gz.

Usage: scripts/lib/bench_raw.py pack DIR     # the raw files of DIR into DIR/raw.jsonl.gz
       scripts/lib/bench_raw.py unpack DIR   # and back, byte for byte, where they were
       scripts/lib/bench_raw.py list DIR     # what the archive holds

A run keeps its README, its reports (`*.md`) and charts (`*.svg`) as files;
everything else under DIR (per-round outputs, reports in JSON, relay
configurations, logs) is raw data. `pack` writes it as JSON Lines, one line
per file in path order (`{"path", "mode", "text"}`, or `"base64"` for bytes
that are not UTF-8), gzip-compressed with no timestamp, so packing the same
files again gives the same bytes; then it removes the packed files.
`unpack` restores them with their modes, and refuses to overwrite a file that
differs from the archive's copy.
"""

import base64
import gzip
import json
import os
import sys
from pathlib import Path

ARCHIVE = "raw.jsonl.gz"
KEPT = {".md", ".svg"}


def raw_files(run: Path) -> list:
    return sorted(
        p
        for p in run.rglob("*")
        if p.is_file() and p.suffix not in KEPT and p.name != ARCHIVE
    )


def pack(run: Path) -> None:
    files = raw_files(run)
    if not files:
        sys.exit(f"{run}: no raw files to pack")
    archive = run / ARCHIVE
    if archive.exists():
        sys.exit(f"{archive} exists: unpack it first")
    lines = []
    for p in files:
        data = p.read_bytes()
        rec = {"path": p.relative_to(run).as_posix(), "mode": p.stat().st_mode & 0o777}
        try:
            rec["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            rec["base64"] = base64.b64encode(data).decode("ascii")
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    with open(archive, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0, filename="") as z:
            z.write("".join(lines).encode("utf-8"))
    for p in files:
        p.unlink()
    for d in sorted((d for d in run.rglob("*") if d.is_dir()), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    print(f"{archive}: {len(files)} files, {archive.stat().st_size} bytes")


def records(run: Path):
    with gzip.open(run / ARCHIVE, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if "text" in rec:
                data = rec["text"].encode("utf-8")
            else:
                data = base64.b64decode(rec["base64"])
            path = Path(rec["path"])
            if path.is_absolute() or ".." in path.parts:
                sys.exit(f"{run / ARCHIVE}: refusing path {rec['path']}")
            yield path, rec["mode"], data


def unpack(run: Path) -> None:
    n = 0
    for path, mode, data in records(run):
        dest = run / path
        if dest.exists() and dest.read_bytes() != data:
            sys.exit(f"{dest} differs from the archive's copy: not overwritten")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        os.chmod(dest, mode)
        n += 1
    print(f"{run / ARCHIVE}: {n} files restored")


def list_(run: Path) -> None:
    for path, _, data in records(run):
        print(f"{len(data):>10}  {path.as_posix()}")


def main(argv):
    if len(argv) != 2 or argv[0] not in ("pack", "unpack", "list"):
        sys.exit(__doc__.split("\n\n")[1])
    run = Path(argv[1])
    if not run.is_dir():
        sys.exit(f"{run}: not a directory")
    {"pack": pack, "unpack": unpack, "list": list_}[argv[0]](run)


if __name__ == "__main__":
    main(sys.argv[1:])
