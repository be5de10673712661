"""scan(): NIP-01 filters over JSON Lines and nwb dumps, checked against a
reference written in Python."""

from __future__ import annotations

import json

import pytest

import nostrwire as nw


def reference_match(f, e):
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
        if key.startswith("#"):
            firsts = {t[1] for t in e["tags"] if t[0] == key[1:] and len(t) > 1}
            if not firsts & set(values):
                return False
    return True


@pytest.fixture(scope="module")
def dumps(corpus_lines, tmp_path_factory):
    base = tmp_path_factory.mktemp("dumps")
    jsonl = base / "dump.jsonl"
    # Blank lines and CRLF line ends are allowed in JSON Lines.
    jsonl.write_bytes(b"\n".join(corpus_lines[:500]) + b"\n\n" + b"\r\n".join(corpus_lines[500:]) + b"\n")
    nwb = base / "dump.nwb"
    nw.nwb.write(nwb, corpus_lines)
    return jsonl, nwb


def filters_for(corpus):
    authors = sorted({e["pubkey"] for e in corpus})[:7]
    tagged = next(e for e in corpus if any(t[0] == "p" and len(t) > 1 for t in e["tags"]))
    p = next(t[1] for t in tagged["tags"] if t[0] == "p")
    times = sorted(e["created_at"] for e in corpus)
    return [
        {},
        {"kinds": [1]},
        {"kinds": [0, 3, 7]},
        {"authors": authors},
        {"authors": authors, "kinds": [1]},
        {"#p": [p]},
        {"#t": ["nostr", "bitcoin"]},
        {"since": times[300], "until": times[700]},
        {"ids": [corpus[5]["id"], corpus[900]["id"]]},
        {"kinds": []},
        [{"kinds": [1]}, {"authors": authors}],
    ]


def test_filters_match_the_reference(corpus_lines, dumps):
    corpus = [json.loads(line) for line in corpus_lines]
    for f in filters_for(corpus):
        fs = f if isinstance(f, list) else [f]
        want = [e["id"] for e in corpus if any(reference_match(x, e) for x in fs)]
        for path in dumps:
            for threads in (1, 2):
                got = [e.id for e in nw.scan(path, f, threads=threads)]
                assert got == want, (f, path.name)


def test_verify_raises_at_the_bad_line_or_skips(corpus_lines, tmp_path):
    lines = list(corpus_lines[:50])
    raw = json.loads(lines[20])
    raw["content"] += " (edited)"
    lines[20] = json.dumps(raw).encode()
    lines[30] = b'{"id": "not an event"}'
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))
    # Without verification only the malformed line is refused.
    got = []
    with pytest.raises(nw.InvalidEvent) as info:
        for e in nw.scan(path):
            got.append(e)
    assert len(got) == 30 and "line 31" in str(info.value)
    got = []
    with pytest.raises(nw.InvalidEvent) as info:
        for e in nw.scan(path, verify=True):
            got.append(e)
    assert len(got) == 20 and info.value.kind == "id_mismatch" and "line 21" in str(info.value)
    scanner = nw.scan(path, verify=True, errors="skip")
    assert len(list(scanner)) == 48
    assert scanner.invalid == 2 and scanner.events_read == 50 and scanner.events_matched == 48


def test_batches_edge_cases_and_argument_errors(corpus_lines, dumps, tmp_path):
    jsonl, _ = dumps
    scanner = nw.scan(jsonl, {"kinds": [1]})
    batch = scanner.next_batch(7)
    rest = scanner.next_batch(10_000)
    assert len(batch) == 7 and scanner.next_batch(5) == []
    assert [e.id for e in batch + rest] == [e.id for e in nw.scan(jsonl, {"kinds": [1]})]
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert list(nw.scan(empty)) == []
    with pytest.raises(nw.InvalidFilter) as info:
        nw.scan(jsonl, {"kinds": [1], "bogus": 1})
    assert info.value.kind == "unknown_filter_field"
    with pytest.raises(nw.InvalidFilter):
        nw.scan(jsonl, {"authors": ["ABC"]})
    with pytest.raises(ValueError):
        nw.scan(jsonl, errors="ignore")
    for bad in ({"kinds": [1], "limit": 10}, [{}, {"search": "nostr"}]):
        with pytest.raises(ValueError):
            nw.scan(jsonl, bad)
    with pytest.raises(ValueError):
        nw.scan(jsonl, format="csv")
    with pytest.raises(FileNotFoundError):
        nw.scan(tmp_path / "missing.jsonl")
    # An nwb file read as JSON Lines fails cleanly.
    with pytest.raises(nw.InvalidEvent):
        list(nw.scan(dumps[1], format="jsonl"))
    with pytest.raises(nw.NwbError):
        list(nw.scan(jsonl, format="nwb"))
