"""nwb through the Python API: vectors/wire, the corpus, dictionary sets,
streams and hostile records."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

import nostrwire as nw
from conftest import relay_binary


@pytest.fixture(scope="module")
def wire_vectors(repo):
    base = repo / "vectors" / "wire"
    return json.loads((base / "valid.json").read_text()), json.loads((base / "invalid.json").read_text())


@pytest.fixture(scope="module")
def dictset_path(repo, tmp_path_factory):
    """A dictionary set trained on the corpus by `nostrwire dict train`."""
    out = tmp_path_factory.mktemp("dicts") / "corpus.nwbd"
    subprocess.run(
        [str(relay_binary()), "dict", "train", "--corpus", str(repo / "testdata" / "real-events.jsonl"),
         "-o", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def test_valid_vectors(wire_vectors):
    valid, _ = wire_vectors
    for case in valid["cases"]:
        record = bytes.fromhex(case["hex"])
        event = nw.nwb.decode(record, verify=False)
        assert event.to_json() == case["json"], case["name"]
        assert nw.nwb.encode(case["json"]) == record, case["name"]
        assert nw.nwb.encode(event) == record, case["name"]


def test_invalid_vectors_raise_their_kind(wire_vectors):
    _, invalid = wire_vectors
    for case in invalid["cases"]:
        with pytest.raises(nw.NwbError) as info:
            nw.nwb.decode(bytes.fromhex(case["hex"]), verify=False)
        assert info.value.kind == case["error"], case["name"]


def test_compressed_vectors(repo):
    cases = json.loads((repo / "vectors" / "wire" / "compressed.json").read_text())["cases"]
    for case in cases:
        data = bytes.fromhex(case["hex"])
        with pytest.raises(nw.NwbError) as info:
            nw.nwb.decode(data, verify=False)
        assert info.value.kind == "bad_version", case["name"]
        if "error" in case:
            with pytest.raises(nw.NwbError) as info:
                nw.nwb.decode(data, verify=False, stored=True)
            assert info.value.kind == case["error"], case["name"]
        else:
            event = nw.nwb.decode(data, verify=False, stored=True)
            assert nw.nwb.encode(event).hex() == case["record"], case["name"]


def test_corpus_round_trips_through_every_bytes_like(corpus_lines):
    for line in corpus_lines:
        event = nw.Event.from_json(line)
        record = nw.nwb.encode(line)
        assert record == nw.nwb.encode(event)
        for data in (record, bytearray(record), memoryview(record)):
            assert nw.nwb.decode(data) == event


def test_decode_verifies_by_default(corpus_lines):
    raw = json.loads(corpus_lines[0])
    raw["sig"] = "1" * 128
    record = nw.nwb.encode(json.dumps(raw))
    assert nw.nwb.decode(record, verify=False).sig == "1" * 128
    with pytest.raises(nw.InvalidEvent) as info:
        nw.nwb.decode(record)
    assert info.value.kind in ("invalid_signature", "invalid_public_key")


def test_dictionary_sets_compress_and_open(corpus_lines, dictset_path, tmp_path):
    dicts = nw.nwb.DictSet.load(dictset_path)
    assert len(dicts) >= 1 and dicts.level >= 1
    assert nw.nwb.DictSet(dictset_path.read_bytes()).dictionaries() == dicts.dictionaries()
    events = [nw.Event.from_json(line) for line in corpus_lines]
    plain = sum(len(nw.nwb.encode(e)) for e in events)
    stored = [nw.nwb.encode(e, dictionaries=dicts) for e in events]
    assert sum(map(len, stored)) < plain
    assert any(s[0] == 0x81 for s in stored)
    assert [nw.nwb.decode(s, dictionaries=dicts) for s in stored] == events
    compressed = next(s for s in stored if s[0] == 0x81)
    with pytest.raises(nw.NwbError) as info:
        nw.nwb.decode(compressed)
    assert info.value.kind == "bad_version"
    with pytest.raises(nw.NwbError) as info:
        nw.nwb.decode(compressed, dictionaries=nw.nwb.DictSet(b"NWBD\x01\x03\x00"))
    assert info.value.kind == "unknown_dictionary"

    path = tmp_path / "dump.nwb"
    assert nw.nwb.write(path, events, dictionaries=dictset_path) == len(events)
    assert list(nw.nwb.open(path, dictionaries=dicts, verify=True)) == events
    with pytest.raises(nw.NwbError) as info:
        list(nw.nwb.open(path))
    assert info.value.kind == "unknown_dictionary"
    with pytest.raises(nw.NwbError) as info:
        nw.nwb.DictSet(b"NWBD\x01\x03\x05")
    assert info.value.kind == "bad_dictionary_set"


def test_write_and_open_a_stream(corpus_lines, tmp_path):
    path = tmp_path / "dump.nwb"
    assert nw.nwb.write(path, corpus_lines) == len(corpus_lines)
    events = [nw.Event.from_json(line) for line in corpus_lines]
    with nw.nwb.open(path, verify=True) as f:
        assert f.format == "nwb"
        first = f.next_batch(10)
        rest = list(f)
        assert first + rest == events
        assert f.events_read == len(events)
    # A file cut inside a record yields the records before the cut, then raises.
    data = path.read_bytes()
    cut = tmp_path / "cut.nwb"
    cut.write_bytes(data[: len(data) - 5])
    got = []
    with pytest.raises(nw.NwbError) as info:
        for event in nw.nwb.open(cut):
            got.append(event)
    assert info.value.kind == "truncated" and got == events[:-1]
    assert "byte offset" in str(info.value)
    # errors="skip" counts it instead.
    scanner = nw.nwb.open(cut, errors="skip")
    assert list(scanner) == events[:-1] and scanner.invalid == 1
    with pytest.raises(nw.InvalidEvent):
        nw.nwb.write(tmp_path / "bad.nwb", [corpus_lines[0], b"{}"])


def test_hostile_records_raise_nwb_error_never_crash(corpus_lines, tmp_path):
    rng = random.Random(36)
    record = nw.nwb.encode(corpus_lines[77])
    for n in range(len(record)):
        with pytest.raises(nw.NwbError):
            nw.nwb.decode(record[:n], verify=False)
    for _ in range(5000):
        data = bytearray(record)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            nw.nwb.decode(bytes(data), verify=False)
        except nw.NwbError as e:
            assert e.kind
    for _ in range(2000):
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))
        try:
            nw.nwb.decode(junk)
        except (nw.NwbError, nw.InvalidEvent):
            pass
    # A stream whose length prefix claims far more than the file holds, or
    # more than the limit, is refused before anything is allocated.
    huge = tmp_path / "huge.nwb"
    huge.write_bytes(b"\xff\xff\xff\xff\x0f" + b"\x01" * 100)
    with pytest.raises(nw.NwbError) as info:
        list(nw.nwb.open(huge))
    assert info.value.kind == "record_too_large"
