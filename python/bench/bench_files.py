"""Reading a 1M-event dump with a NIP-01 filter, no verification.

nostrwire `scan` over JSON Lines and over nwb against an orjson line loop
with the same filter written by hand in Python, and against zstd-compressed
lines (a dictionary trained on the dump, `zstandard`) read the same way.
The dump is `nostrwire generate --count 1000000` (real kind mix, corpus
tags and contents, 100 authors), made once in the data directory.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys

import orjson
import zstandard

import nostrwire as nw
from common import DATA, REPO, host, interleaved, nostrwire_bin, save, summary

COUNT = 1_000_000


def prepare():
    DATA.mkdir(parents=True, exist_ok=True)
    jsonl = DATA / "1m.jsonl"
    if not jsonl.exists():
        subprocess.run([str(nostrwire_bin()), "generate", "--count", str(COUNT), "--newest", "1790000000",
                        "-o", str(jsonl)], check=True, cwd=REPO)
    nwb = DATA / "1m.nwb"
    if not nwb.exists():
        nw.nwb.write(nwb, nw.scan(jsonl))
    zst, dict_path = DATA / "1m.jsonl.zst-frames", DATA / "1m.zdict"
    if not zst.exists():
        with open(jsonl, "rb") as f:
            samples = [line for _, line in zip(range(20_000), f)]
        zdict = zstandard.train_dictionary(112_640, samples)
        dict_path.write_bytes(zdict.as_bytes())
        cctx = zstandard.ZstdCompressor(level=3, dict_data=zdict)
        with open(jsonl, "rb") as f, open(zst, "wb") as out:
            for line in f:
                body = cctx.compress(line.rstrip(b"\n"))
                out.write(len(body).to_bytes(4, "little") + body)
    return jsonl, nwb, zst, dict_path


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    jsonl, nwb, zst, dict_path = prepare()
    # The filter: three authors' kind-1 notes (a few thousand of 1M events).
    authors = []
    for e in nw.scan(jsonl, {"kinds": [1]}):
        if e.pubkey not in authors:
            authors.append(e.pubkey)
        if len(authors) == 3:
            break
    flt = {"kinds": [1], "authors": authors}
    kinds, pubkeys = {1}, set(authors)

    def orjson_loop():
        out = []
        with open(jsonl, "rb") as f:
            for line in f:
                d = orjson.loads(line)
                if d["kind"] in kinds and d["pubkey"] in pubkeys:
                    out.append(d)
        return out

    zdict = zstandard.ZstdCompressionDict(dict_path.read_bytes())

    def zstd_loop():
        out = []
        dctx = zstandard.ZstdDecompressor(dict_data=zdict)
        with open(zst, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            pos, end = 0, len(m)
            while pos < end:
                n = int.from_bytes(m[pos:pos + 4], "little")
                d = orjson.loads(dctx.decompress(m[pos + 4:pos + 4 + n]))
                pos += 4 + n
                if d["kind"] in kinds and d["pubkey"] in pubkeys:
                    out.append(d)
        return out

    def scan(path, threads):
        return lambda: list(nw.scan(path, flt, threads=threads))

    expected = sorted(d["id"] for d in orjson_loop())
    assert expected and sorted(e.id for e in nw.scan(nwb, flt)) == expected
    assert sorted(d["id"] for d in zstd_loop()) == expected
    cases = {
        "orjson line loop (JSON Lines)": orjson_loop,
        "zstandard+dictionary, orjson (per-line frames)": zstd_loop,
        "nostrwire scan JSON Lines, 1 thread": scan(jsonl, 1),
        "nostrwire scan JSON Lines, 2 threads": scan(jsonl, 2),
        "nostrwire scan nwb, 1 thread": scan(nwb, 1),
        "nostrwire scan nwb, 2 threads": scan(nwb, 2),
    }
    times = interleaved(cases, rounds)
    result = {
        "bench": "files", "events": COUNT, "matched": len(expected), "filter": flt, "rounds": rounds,
        "bytes": {"jsonl": os.path.getsize(jsonl), "nwb": os.path.getsize(nwb),
                  "zstd_frames": os.path.getsize(zst), "zstd_dictionary": os.path.getsize(dict_path)},
        "host": host(), "cases": summary(times, COUNT),
    }
    print(save("files", result))
    for name, s in result["cases"].items():
        print(f"{name:48s} {s['median_s']:7.2f} s  ({s['median_per_item_us']:.2f} µs/event)")


if __name__ == "__main__":
    main()
