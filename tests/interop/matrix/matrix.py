#!/usr/bin/env python3
"""The interop matrix: every client adapter against every relay over every
transport, each cell checked against the expected answers and against the
other cells (tests/interop/README.md; run through scripts/interop-matrix.sh).

The case is built from real signed events of testdata/real-events.jsonl:
what is published, the queries and what each must return, a live
subscription, events spoiled so that a relay must refuse them, and nwb
records spoiled so that a decoder must refuse them with a stable error kind.
Every cell runs on a fresh relay with a fresh database. Python standard
library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

CLIENTS = ("node", "python", "go", "rust")
RELAYS = ("nostrwire", "khatru")
TRANSPORTS = ("json", "v2")
NEGOTIATED = {"json": "json", "v2": "nostrwire.v2"}
# How long one adapter may take for the whole case.
ADAPTER_TIMEOUT_S = 90
# How long a relay may take to be ready.
READY_TIMEOUT_S = 30

# Kinds a relay replaces (NIP-01): one event per key is published, so that
# no relay's choice of which to keep changes an answer.
def replaceable_key(e: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    k = e["kind"]
    if k in (0, 3) or 10000 <= k < 20000:
        return (k, e["pubkey"])
    if 30000 <= k < 40000:
        d = next((t[1] for t in e["tags"] if len(t) >= 2 and t[0] == "d"), "")
        return (k, e["pubkey"], d)
    return None


def publishable(e: Dict[str, Any]) -> bool:
    """Events every relay stores with its default policy: no deletions
    (kind 5 would remove others), no kinds nostrwire keeps for
    authenticated readers (4, 1059), no NIP-40 expiration or NIP-70
    protection, nothing near a relay's size limits."""
    if e["kind"] in (4, 5, 1059) or 20000 <= e["kind"] < 30000:
        return False
    if any(t and t[0] in ("expiration", "-") for t in e["tags"]):
        return False
    return len(json.dumps(e)) < 32 * 1024 and len(e["tags"]) <= 500


# NIP-01 filter matching, for the expected answers.
def matches(f: Dict[str, Any], e: Dict[str, Any]) -> bool:
    if "ids" in f and e["id"] not in f["ids"]:
        return False
    if "authors" in f and e["pubkey"] not in f["authors"]:
        return False
    if "kinds" in f and e["kind"] not in f["kinds"]:
        return False
    if "since" in f and e["created_at"] < f["since"]:
        return False
    if "until" in f and e["created_at"] > f["until"]:
        return False
    for key, values in f.items():
        if key.startswith("#") and len(key) == 2:
            if not any(len(t) >= 2 and t[0] == key[1] and t[1] in values for t in e["tags"]):
                return False
    return True


def answer(f: Dict[str, Any], stored: List[Dict[str, Any]]) -> List[str]:
    """The ids a relay returns for `f`: NIP-01 order (newest first, then
    lowest id), cut at `limit`; sorted for comparison."""
    hits = sorted((e for e in stored if matches(f, e)), key=lambda e: (-e["created_at"], e["id"]))
    if "limit" in f:
        lim = f["limit"]
        if 0 < lim < len(hits) and hits[lim - 1]["created_at"] == hits[lim]["created_at"]:
            raise ValueError(f"limit {lim} cuts a created_at tie: the answer is not fixed")
        hits = hits[:lim]
    return sorted(e["id"] for e in hits)


def flip_hex(s: str, at: int) -> str:
    c = s[at]
    return s[:at] + ("0" if c != "0" else "1") + s[at + 1 :]


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_stream(data: bytes) -> List[bytes]:
    """The records of a length-prefixed nwb stream (spec/nwb.md §10)."""
    records, pos = [], 0
    while pos < len(data):
        n, shift = 0, 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        records.append(data[pos : pos + n])
        pos += n
    return records


def to_nwb(nostrwire: str, events: List[Dict[str, Any]], work: Path, dicts: Optional[Path] = None) -> List[bytes]:
    """Records of `events` as `nostrwire convert --to nwb` writes them (the
    Rust encoder), compressed with `dicts` when given."""
    src = work / "convert-in.jsonl"
    src.write_text("".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in events))
    cmd = [nostrwire, "convert", "--to", "nwb", str(src)]
    if dicts:
        cmd += ["--dict", str(dicts)]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    return read_stream(out)


def hostile_records(nostrwire: str, corpus: List[Dict[str, Any]], work: Path, dicts: Path) -> Tuple[List[Dict[str, str]], Dict[str, str]]:
    """Records of one real note spoiled one way each, with the error kind
    spec/nwb.md §12 gives for each ("" for the intact record)."""
    # A note whose content ends in an ASCII character and whose tag block
    # and content lengths are one-byte varints.
    def fits(e: Dict[str, Any]) -> bool:
        return e["kind"] == 1 and e["content"][-1:].isascii() and e["content"][-1:].isprintable() and len(e["content"].encode()) < 120
    notes = [e for e in corpus if fits(e)]
    note, rec = next((e, r) for e, r in zip(notes, to_nwb(nostrwire, notes, work)) if r[139] < 0x80)
    t = rec[139]
    # A compressed record (form byte 0x81) of the same note, as a relay
    # stores it: the record decoder takes event records only.
    compressed = to_nwb(nostrwire, [note], work, dicts)[0]
    assert compressed[0] == 0x81, "the note compresses with the set"
    big_ts = (1 << 53).to_bytes(8, "little")
    cases = [
        ("intact", rec, ""),
        ("bad_form_byte", b"\x02" + rec[1:], "bad_version"),
        ("compressed_as_event", compressed, "bad_version"),
        ("truncated_prefix", rec[:100], "truncated"),
        ("truncated_content", rec[:-1], "truncated"),
        ("trailing_byte", rec + b"\x00", "trailing_bytes"),
        ("created_at_2_53", rec[:3] + big_ts + rec[11:], "timestamp_out_of_range"),
        ("overlong_tag_block_length", rec[:139] + bytes([t | 0x80, 0]) + rec[140:], "overlong_varint"),
        ("content_not_utf8", rec[:-1] + b"\xff", "invalid_utf8"),
    ]
    return (
        [{"name": n, "hex": r.hex()} for n, r, _ in cases],
        {n: k for n, _, k in cases},
    )


def build_case(nostrwire: str, corpus_path: Path, work: Path) -> Tuple[Dict[str, Any], Dict[str, Any], Path]:
    """Writes the dictionary set and CASE.json; returns the case, what each
    cell must answer, and the set's path."""
    corpus = [json.loads(line) for line in corpus_path.read_text().splitlines() if line.strip()]
    # Published: up to 10 events of each kind, one per replaceable key.
    per_kind: Dict[int, int] = {}
    keys = set()
    publish: List[Dict[str, Any]] = []
    for e in corpus:
        if not publishable(e) or per_kind.get(e["kind"], 0) >= 10:
            continue
        key = replaceable_key(e)
        if key is not None and key in keys:
            continue
        keys.add(key)
        per_kind[e["kind"]] = per_kind.get(e["kind"], 0) + 1
        publish.append(e)
    published_ids = {e["id"] for e in publish}
    published_authors = {e["pubkey"] for e in publish}
    # Live: three notes by authors with nothing published, and one reaction
    # published first that the live filter must keep out.
    rest = [e for e in corpus if e["id"] not in published_ids and publishable(e)]
    live_notes: List[Dict[str, Any]] = []
    for e in rest:
        if e["kind"] == 1 and e["pubkey"] not in published_authors and all(e["pubkey"] != n["pubkey"] for n in live_notes):
            live_notes.append(e)
        if len(live_notes) == 3:
            break
    outsider = next(e for e in rest if e["kind"] == 7 and e["pubkey"] not in {n["pubkey"] for n in live_notes})
    live_filter = {"kinds": [1], "authors": sorted(n["pubkey"] for n in live_notes)}
    live_events = [outsider] + live_notes
    # The dictionary set: trained on corpus events disjoint from the case.
    used = published_ids | {e["id"] for e in live_events}
    train = work / "train.jsonl"
    train.write_text("".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in corpus if e["id"] not in used))
    dicts = work / "dicts.nwbd"
    subprocess.run([nostrwire, "dict", "train", "--per-kind", "--corpus", str(train), "--output", str(dicts)], check=True, capture_output=True)

    # Spoiled events: a relay refuses each with `invalid:`.
    base = [e for e in corpus if e["kind"] == 1 and e["id"] not in used][:3]
    bad_sig = dict(base[0], sig=flip_hex(base[0]["sig"], 127))
    bad_id = dict(base[1], id=flip_hex(base[1]["id"], 63))
    altered = dict(base[2], content=base[2]["content"] + ".")
    invalid = [bad_sig, bad_id, altered]
    # The first published event again at the end: accepted as a duplicate.
    publish_seq = publish + [publish[0]]

    def common_tags(name: str) -> List[str]:
        """The two values of tag `name` that most published events carry."""
        counts: Dict[str, int] = {}
        for e in publish:
            for v in {t[1] for t in e["tags"] if len(t) >= 2 and t[0] == name}:
                counts[v] = counts.get(v, 0) + 1
        return sorted(sorted(counts), key=lambda v: -counts[v])[:2]

    by_author: Dict[str, int] = {}
    for e in publish:
        by_author[e["pubkey"]] = by_author.get(e["pubkey"], 0) + 1
    authors = sorted(by_author, key=lambda a: (-by_author[a], a))
    reactors = list(dict.fromkeys(e["pubkey"] for e in publish if e["kind"] in (6, 7)))
    times = sorted(e["created_at"] for e in publish)
    addressable = next(e for e in publish if 30000 <= e["kind"] < 40000)
    d_value = next(t[1] for t in addressable["tags"] if len(t) >= 2 and t[0] == "d")
    queries = [
        {"name": "notes", "filter": {"kinds": [1]}},
        {"name": "every_kind", "filter": {"kinds": sorted(per_kind)}},
        {"name": "author", "filter": {"authors": [authors[0]]}},
        {"name": "authors_kinds", "filter": {"authors": sorted({authors[0]} | set(reactors[:3])), "kinds": [1, 6, 7]}},
        {"name": "tag_p", "filter": {"#p": common_tags("p")}},
        {"name": "tag_e", "filter": {"#e": common_tags("e")}},
        {"name": "tag_t", "filter": {"#t": common_tags("t")}},
        {"name": "ids", "filter": {"ids": sorted([publish[3]["id"], publish[25]["id"], publish[47]["id"], live_notes[0]["id"], bad_sig["id"]])}},
        {"name": "since_until", "filter": {"since": times[len(times) // 4], "until": times[3 * len(times) // 4]}},
        {"name": "newest_reactions", "filter": {"kinds": [6, 7], "limit": 5}},
        {"name": "address", "filter": {"kinds": [addressable["kind"]], "authors": [addressable["pubkey"]], "#d": [d_value]}},
        {"name": "nothing", "filter": {"kinds": [1], "authors": [live_notes[0]["pubkey"]]}},
    ]
    records, refusal_kinds = hostile_records(nostrwire, corpus, work, dicts)
    case = {
        "publish": publish_seq,
        "invalid": invalid,
        "queries": queries,
        "live": {"filter": live_filter, "events": live_events, "wait_ms": 5000},
        "hostile_records": records,
    }
    seen = set()
    ok = []
    for e in publish_seq:
        if e["id"] in seen:
            # NIP-01 leaves it to the relay whether an accepted duplicate
            # says so (nostrwire does, khatru does not); the clients on one
            # relay must still agree (`agreement`).
            ok.append({"id": e["id"], "accepted": True, "prefix": "duplicate", "or": ""})
        else:
            ok.append({"id": e["id"], "accepted": True, "prefix": ""})
        seen.add(e["id"])
    ok += [{"id": e["id"], "accepted": False, "prefix": "invalid"} for e in invalid]
    expected = {
        "ok": ok,
        "queries": {q["name"]: answer(q["filter"], publish) for q in queries},
        "live": sorted(e["id"] for e in live_events if matches(live_filter, e)),
        "refused": [{"case": n, "refused": bool(k), "kind": k} for n, k in refusal_kinds.items()],
    }
    for name in ("notes", "author", "authors_kinds", "tag_p", "tag_e", "since_until", "ids"):
        assert len(expected["queries"][name]) >= 2, f"query {name} selects too little to tell relays apart"
    assert expected["queries"]["nothing"] == []
    (work / "case.json").write_text(json.dumps(case, ensure_ascii=False, indent=1))
    return case, expected, dicts


# ---------------------------------------------------------------- relays


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """One relay process on a fresh database, stopped by `stop`."""

    def __init__(self, kind: str, cmd: List[str], port: int, log: Path, wants_set: bool) -> None:
        self.kind, self.port, self.log_path = kind, port, log
        self.url = f"ws://127.0.0.1:{port}"
        self.log = open(log, "wb")
        self.ready_line = threading.Event()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.PIPE, start_new_session=True)
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()
        self.wants_set = wants_set

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()
            if b"listening on ws://" in line:
                self.ready_line.set()

    def nip11(self) -> Optional[Dict[str, Any]]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/", headers={"Accept": "application/nostr+json"})
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def wait_ready(self) -> None:
        """Ready: the process runs, answers NIP-11 over HTTP, and (nostrwire)
        names its dictionary set there; khatru's example also says
        `listening on ws://…` on stderr first."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.proc.returncode} (log: {self.log_path})")
            if self.kind == "khatru" and not self.ready_line.is_set():
                time.sleep(0.05)
                continue
            info = self.nip11()
            if info is not None:
                if not self.wants_set or info.get("nostrwire", {}).get("dictionaries"):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} not ready within {READY_TIMEOUT_S} s (log: {self.log_path})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.pump.join(5)
        self.log.close()


def start_relay(kind: str, binaries: Dict[str, Optional[str]], cell_dir: Path, dicts: Path) -> Relay:
    """A ready relay on a fresh database; tried on three ports, since
    another process may take a free port before the relay binds it."""
    for attempt in range(3):
        try:
            return start_relay_on(kind, binaries, cell_dir / f"try{attempt}", dicts, free_port())
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def start_relay_on(kind: str, binaries: Dict[str, Optional[str]], cell_dir: Path, dicts: Path, port: int) -> Relay:
    data = cell_dir / "data"
    data.mkdir(parents=True)
    log = cell_dir / f"{kind}.log"
    if kind in ("nostrwire", "nostrwire-json"):
        config = cell_dir / "relay.toml"
        config.write_text(
            "[relay]\n"
            f'listen = "127.0.0.1:{port}"\n'
            f'data = "{data}"\n'
            "[storage]\n"
            f'dictionaries = "{dicts}"\n'
            # A test database: no fsync per commit.
            'durability = "none"\n'
            # nostrwire-json: a relay that speaks NIP-01 JSON only.
            + ("[websocket]\nbinary = false\n" if kind == "nostrwire-json" else "")
        )
        relay = Relay(kind, [str(binaries["nostrwire"]), "relay", "--config", str(config)], port, log, kind == "nostrwire")
    else:
        cmd = [str(binaries["khatru"]), "-listen", f"127.0.0.1:{port}", "-data", str(data), "-dictionaries", str(dicts)]
        relay = Relay(kind, cmd, port, log, False)
    try:
        relay.wait_ready()
    except Exception:
        relay.stop()
        raise
    return relay


# ---------------------------------------------------------------- cells


def normalize(result: Dict[str, Any]) -> Dict[str, Any]:
    """What cells must agree on: everything but the client's name and the
    transport negotiated."""
    return {
        "ok": [{"id": o.get("id"), "accepted": o.get("accepted"), "prefix": o.get("prefix")} for o in result.get("ok", [])],
        "queries": {k: sorted(v) for k, v in sorted(result.get("queries", {}).items())},
        "live": sorted(result.get("live", [])),
        "refused": sorted(({"case": r.get("case"), "refused": r.get("refused"), "kind": r.get("kind")} for r in result.get("refused", [])), key=lambda r: str(r["case"])),
    }


def differences(client: str, transport: str, result: Dict[str, Any], expected: Dict[str, Any]) -> List[str]:
    """Every way `result` differs from what the cell must answer."""
    out = []
    if result.get("client") != client:
        out.append(f"client is {result.get('client')!r}, not {client!r}")
    if result.get("negotiated") != NEGOTIATED[transport]:
        out.append(f"negotiated {result.get('negotiated')!r}, not {NEGOTIATED[transport]!r}")
    got, want = normalize(result), normalize(expected)
    if len(got["ok"]) != len(want["ok"]):
        out.append(f"{len(got['ok'])} OK verdicts, not {len(want['ok'])}")
    for i, (g, w, e) in enumerate(zip(got["ok"], want["ok"], expected["ok"])):
        if g != w and g != dict(w, prefix=e.get("or", w["prefix"])):
            out.append(f"OK #{i}: {g}, expected {w}")
    for name, ids in want["queries"].items():
        have = got["queries"].get(name)
        if have is None:
            out.append(f"query {name}: no answer")
        elif have != ids:
            missing, extra = sorted(set(ids) - set(have)), sorted(set(have) - set(ids))
            out.append(f"query {name}: {len(have)} events, expected {len(ids)} (missing {[m[:8] for m in missing]}, extra {[x[:8] for x in extra]}{', repeated' if len(set(have)) != len(have) else ''})")
    for name in got["queries"].keys() - want["queries"].keys():
        out.append(f"query {name}: not in the case")
    if got["live"] != want["live"]:
        out.append(f"live: {[x[:8] for x in got['live']]}, expected {[x[:8] for x in want['live']]}")
    wr = {r["case"]: r for r in want["refused"]}
    gr = {r["case"]: r for r in got["refused"]}
    for name, w in wr.items():
        g = gr.get(name)
        if g is None:
            out.append(f"record {name}: no verdict")
        elif g != w:
            out.append(f"record {name}: refused={g['refused']} kind={g['kind']!r}, expected refused={w['refused']} kind={w['kind']!r}")
    for name in gr.keys() - wr.keys():
        out.append(f"record {name}: not in the case")
    return out


def run_cell(client: str, relay_kind: str, transport: str, adapters: Dict[str, Optional[List[str]]], binaries: Dict[str, Optional[str]], work: Path, dicts: Path, expected: Dict[str, Any]) -> Dict[str, Any]:
    cell = {"client": client, "relay": relay_kind, "transport": transport}
    why_missing = []
    if not adapters.get(client):
        why_missing.append(f"no {client} adapter")
    if not binaries.get(relay_kind):
        why_missing.append(f"no {relay_kind} relay")
    if why_missing:
        return dict(cell, status="MISSING", failures=why_missing)
    cell_dir = work / "cells" / f"{client}-{relay_kind}-{transport}"
    shutil.rmtree(cell_dir, ignore_errors=True)
    cell_dir.mkdir(parents=True)
    start = time.monotonic()
    try:
        relay = start_relay(relay_kind, binaries, cell_dir, dicts)
    except Exception as e:  # noqa: BLE001 - reported as the cell's failure
        return dict(cell, status="FAIL", failures=[f"relay: {e}"], seconds=round(time.monotonic() - start, 2))
    try:
        cmd = list(adapters[client] or []) + ["--relay", relay.url, "--transport", transport, "--case", str(work / "case.json")]
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=ADAPTER_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return dict(cell, status="FAIL", failures=[f"adapter ran over {ADAPTER_TIMEOUT_S} s"], seconds=round(time.monotonic() - start, 2))
        (cell_dir / "adapter.stderr").write_bytes(p.stderr)
        (cell_dir / "adapter.stdout").write_bytes(p.stdout)
        if p.returncode != 0:
            tail = p.stderr.decode(errors="replace").strip().splitlines()[-3:]
            return dict(cell, status="FAIL", failures=[f"adapter exited {p.returncode}: {' | '.join(tail)}"], seconds=round(time.monotonic() - start, 2))
        try:
            result = json.loads(p.stdout)
        except ValueError as e:
            return dict(cell, status="FAIL", failures=[f"adapter output is not one JSON object: {e}"], seconds=round(time.monotonic() - start, 2))
        failures = differences(client, transport, result, expected)
        if relay.proc.poll() is not None:
            failures.append(f"the relay exited with {relay.proc.returncode} during the cell")
        return dict(cell, status="FAIL" if failures else "PASS", failures=failures, result=result, seconds=round(time.monotonic() - start, 2))
    finally:
        relay.stop()


def digest(answers: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest()[:12]


def run_no_fallback(client: str, adapters: Dict[str, Optional[List[str]]], binaries: Dict[str, Optional[str]], work: Path, dicts: Path) -> Dict[str, Any]:
    """Asked for v2 by a relay that speaks only JSON, an adapter must exit 2."""
    if not adapters.get(client):
        return {"client": client, "status": "MISSING", "failures": [f"no {client} adapter"]}
    cell_dir = work / "cells" / f"{client}-no-fallback"
    shutil.rmtree(cell_dir, ignore_errors=True)
    cell_dir.mkdir(parents=True)
    try:
        relay = start_relay("nostrwire-json", binaries, cell_dir, dicts)
    except Exception as e:  # noqa: BLE001 - reported as the check's failure
        return {"client": client, "status": "FAIL", "failures": [f"relay: {e}"]}
    try:
        cmd = list(adapters[client] or []) + ["--relay", relay.url, "--transport", "v2", "--case", str(work / "case.json")]
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=ADAPTER_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"client": client, "status": "FAIL", "failures": [f"adapter ran over {ADAPTER_TIMEOUT_S} s"]}
        (cell_dir / "adapter.stderr").write_bytes(p.stderr)
        if p.returncode != 2:
            return {"client": client, "status": "FAIL", "failures": [f"asked for v2 by a JSON-only relay, the adapter exited {p.returncode}, not 2"]}
        return {"client": client, "status": "PASS", "failures": []}
    finally:
        relay.stop()


def agreement(cells: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Compares the cells that ran with each other. On one relay every
    client and transport must give exactly the same answers: a cell that
    differs from most of the others there fails. Across relays the answers
    are grouped with the prefixes of accepted `OK`s set aside (the one
    choice NIP-01 leaves to relays here): one group when every cell agrees
    with every other."""
    ran = [c for c in cells if "result" in c]
    for relay in RELAYS:
        here = [c for c in ran if c["relay"] == relay]
        votes: Dict[str, int] = {}
        for c in here:
            votes[digest(normalize(c["result"]))] = votes.get(digest(normalize(c["result"])), 0) + 1
        if len(votes) < 2:
            continue
        most = max(votes.values())
        for c in here:
            if votes[digest(normalize(c["result"]))] < most or list(votes.values()).count(most) > 1:
                c["failures"].append(f"answers differently from other clients on {relay}")
                c["status"] = "FAIL"
    groups: Dict[str, List[str]] = {}
    for c in ran:
        answers = normalize(c["result"])
        for o in answers["ok"]:
            if o["accepted"]:
                o["prefix"] = None
        groups.setdefault(digest(answers), []).append(f"{c['client']}/{c['relay']}/{c['transport']}")
    return [{"answers": d, "cells": v} for d, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def table(cells: List[Dict[str, Any]]) -> str:
    by = {(c["client"], c["relay"], c["transport"]): c for c in cells}
    cols = [(r, t) for r in RELAYS for t in TRANSPORTS]
    head = ["client"] + [f"{r} {t}" for r, t in cols]
    rows = [[cl] + [by[(cl, r, t)]["status"] if (cl, r, t) in by else "-" for r, t in cols] for cl in CLIENTS]
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    line = lambda xs: "| " + " | ".join(x.ljust(w) for x, w in zip(xs, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


# ---------------------------------------------------------------- self-test


def self_test(expected: Dict[str, Any]) -> None:
    """The comparison catches each kind of wrong answer: a perfect result
    passes, and each spoiled copy fails."""
    good = dict(expected, client="node", negotiated="nostrwire.v2")
    assert differences("node", "v2", good, expected) == [], "the expected answers must pass"
    spoils = {
        "negotiated json over v2": lambda r: r.update(negotiated="json"),
        "an OK verdict flipped": lambda r: r["ok"][-1].update(accepted=True),
        "an OK prefix dropped": lambda r: r["ok"][-1].update(prefix=""),
        "a duplicate neither said nor unsaid": lambda r: r["ok"][-4].update(prefix="blocked"),
        "an OK missing": lambda r: r["ok"].pop(),
        "a query event missing": lambda r: r["queries"]["notes"].pop(),
        "a query event repeated": lambda r: r["queries"]["notes"].append(r["queries"]["notes"][0]),
        "a query missing": lambda r: r["queries"].pop("tag_p"),
        "a live event missing": lambda r: r["live"].pop(),
        "a record accepted": lambda r: r["refused"][1].update(refused=False, kind=""),
        "a record's kind": lambda r: r["refused"][2].update(kind="truncated" if r["refused"][2]["kind"] != "truncated" else "bad_version"),
    }
    for name, spoil in spoils.items():
        bad = json.loads(json.dumps(good))
        spoil(bad)
        assert differences("node", "v2", bad, expected), f"not caught: {name}"
    # Two clients on one relay that differ where the expected answers allow
    # either: both fail, since neither has a majority.
    quiet = json.loads(json.dumps(good))
    quiet["ok"][-4]["prefix"] = ""
    pair = [{"client": c, "relay": "khatru", "transport": "json", "status": "PASS", "failures": [], "result": r} for c, r in (("node", good), ("rust", quiet))]
    agreement(pair)
    assert [c["status"] for c in pair] == ["FAIL", "FAIL"], "clients that disagree on one relay must fail"
    print(f"self-test: the comparison catches all {len(spoils) + 1} spoiled results", file=sys.stderr)


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nostrwire", required=True, help="the nostrwire binary (relay, convert, dict)")
    ap.add_argument("--khatru", default="", help="the khatru-v2 example relay's binary (empty: those cells are MISSING)")
    ap.add_argument("--adapter", action="append", default=[], metavar="CLIENT=COMMAND", help="a client adapter's command line (space-separated; empty: MISSING)")
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[3] / "testdata/real-events.jsonl"))
    ap.add_argument("--work", required=True, help="scratch directory (relay logs and adapter output per cell)")
    ap.add_argument("--json", help="write the result here (default: WORK/matrix.json)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="cells run at once")
    ap.add_argument("--allow-missing", action="store_true", help="exit 0 when cells are MISSING (never when one FAILs)")
    ap.add_argument("--only", default="", help="run only cells whose client/relay/transport contains this")
    args = ap.parse_args()

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    adapters: Dict[str, Optional[List[str]]] = {c: None for c in CLIENTS}
    for spec in args.adapter:
        name, _, cmd = spec.partition("=")
        if name not in CLIENTS:
            ap.error(f"unknown client {name!r} (one of {', '.join(CLIENTS)})")
        adapters[name] = cmd.split() or None
    binaries: Dict[str, Optional[str]] = {"nostrwire": args.nostrwire, "khatru": args.khatru or None}

    t0 = time.monotonic()
    case, expected, dicts = build_case(args.nostrwire, Path(args.corpus), work)
    self_test(expected)
    print(
        f"case: {len(case['publish'])} events published ({len(set(e['id'] for e in case['publish']))} distinct), "
        f"{len(case['invalid'])} spoiled, {len(case['queries'])} queries, {len(expected['live'])} live events, "
        f"{len(case['hostile_records'])} records to decode; set {dicts.stat().st_size} bytes",
        file=sys.stderr,
    )
    todo = [(c, r, t) for c in CLIENTS for r in RELAYS for t in TRANSPORTS if args.only in f"{c}/{r}/{t}"]
    cells: List[Dict[str, Any]] = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_cell, c, r, t, adapters, binaries, work, dicts, expected): (c, r, t) for c, r, t in todo}
        for f in concurrent.futures.as_completed(futures):
            cell = f.result()
            cells.append(cell)
            extra = f" in {cell['seconds']} s" if "seconds" in cell else ""
            print(f"  {cell['status']:7} {cell['client']}/{cell['relay']}/{cell['transport']}{extra}", file=sys.stderr)
        fallback_futures = [pool.submit(run_no_fallback, c, adapters, binaries, work, dicts) for c in CLIENTS if args.only in f"{c}/"]
        no_fallback = [f.result() for f in fallback_futures]
    cells.sort(key=lambda c: (CLIENTS.index(c["client"]), RELAYS.index(c["relay"]), TRANSPORTS.index(c["transport"])))
    groups = agreement(cells)

    print(table(cells))
    for c in cells:
        if c["status"] != "PASS":
            for why in c["failures"][:8]:
                print(f"  {c['status']} {c['client']}/{c['relay']}/{c['transport']}: {why}")
            if len(c["failures"]) > 8:
                print(f"  … {len(c['failures']) - 8} more (see the JSON result)")
    if len(groups) > 1:
        print(f"cells disagree: {len(groups)} different answers")
        for g in groups:
            print(f"  {g['answers']}: {', '.join(g['cells'])}")
    else:
        ran = sum(1 for c in cells if "result" in c)
        print(f"every cell that ran ({ran}) gave the same answers")
    for c in cells:
        # Optional in an adapter's answer: what its v2 batches held.
        records = c.get("result", {}).get("records")
        if isinstance(records, dict) and records.get("batched"):
            print(f"{c['client']}/{c['relay']}/{c['transport']}: {records['batched']} records in batches, {records.get('compressed', 0)} of them compressed (0x81)")
    if no_fallback:
        print("v2 asked of a JSON-only relay, exit 2 (no fallback): " + ", ".join(f"{c['client']} {c['status']}" for c in no_fallback))
        for c in no_fallback:
            for why in c["failures"]:
                print(f"  {c['status']} {c['client']}/no-fallback: {why}")
    counts = {s: sum(1 for c in cells + no_fallback if c["status"] == s) for s in ("PASS", "FAIL", "MISSING")}
    took = round(time.monotonic() - t0, 1)
    print(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['MISSING']} MISSING ({len(cells)} cells, {len(no_fallback)} no-fallback checks) in {took} s")
    out = Path(args.json) if args.json else work / "matrix.json"
    out.write_text(json.dumps({"schema": 1, "seconds": took, "counts": counts, "agreement": groups, "no_fallback": no_fallback, "expected": expected, "cells": cells}, indent=1))
    print(f"result: {out}", file=sys.stderr)
    if counts["FAIL"] or (counts["MISSING"] and not args.allow_missing):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
