"""Events through the Python API: the corpus, vectors/event, hostile input."""

from __future__ import annotations

import json
import pickle
import random

import pytest

import nostrwire as nw


def load_vectors(repo, name):
    return json.loads((repo / "vectors" / "event" / name).read_text())


def test_corpus_parses_verifies_and_round_trips(corpus_lines):
    assert len(corpus_lines) == 1001
    for line in corpus_lines:
        event = nw.Event.from_json(line)
        raw = json.loads(line)
        assert event.to_dict() == {k: raw[k] for k in event.to_dict()}
        assert event.id == raw["id"] and event.kind == raw["kind"]
        assert event.tags == raw["tags"] and event.content == raw["content"]
        assert nw.Event.from_json(event.to_json()) == event
        assert event.compute_id() == event.id
        assert nw.event_id(event.pubkey, event.created_at, event.kind, event.tags, event.content) == event.id


def test_str_bytes_and_buffers_agree(corpus_lines):
    line = corpus_lines[3]
    expected = nw.Event.from_json(line)
    for data in (line, line.decode(), bytearray(line), memoryview(line)):
        assert nw.Event.from_json(data) == expected
    with pytest.raises(TypeError):
        nw.Event.from_json(12)


def test_valid_vectors(repo):
    for case in load_vectors(repo, "valid.json"):
        event = nw.Event.from_json(case["json"])
        assert event.id == case["id"], case["name"]
        assert event.to_json() == case["canonical"], case["name"]


def test_invalid_vectors_raise_their_kind(repo):
    checked = 0
    for case in load_vectors(repo, "invalid.json"):
        if "limits" in case:
            continue  # custom limits: covered by the size tests below
        data = bytes.fromhex(case["json_hex"]) if "json_hex" in case else case["json"]
        with pytest.raises(nw.InvalidEvent) as info:
            nw.Event.from_json(data)
        assert info.value.kind == case["error"], case["name"]
        assert isinstance(info.value, nw.NostrwireError) and isinstance(info.value, ValueError)
        checked += 1
    assert checked >= 30


def test_verify_false_keeps_a_bad_signature_and_verify_names_it(corpus_lines):
    raw = json.loads(corpus_lines[0])
    raw["sig"] = raw["sig"][:-2] + ("00" if raw["sig"][-2:] != "00" else "11")
    text = json.dumps(raw)
    event = nw.Event.from_json(text, verify=False)
    with pytest.raises(nw.InvalidEvent) as info:
        event.verify()
    assert info.value.kind == "invalid_signature"
    with pytest.raises(nw.InvalidEvent) as info:
        nw.Event.from_json(text)
    assert info.value.kind == "invalid_signature" and info.value.field == "sig"
    raw = json.loads(corpus_lines[0])
    raw["content"] += "!"
    with pytest.raises(nw.InvalidEvent) as info:
        nw.Event.from_json(json.dumps(raw))
    assert info.value.kind == "id_mismatch"


def test_verify_many_matches_one_by_one(corpus_lines):
    items = list(corpus_lines[:300])
    raw = json.loads(corpus_lines[5])
    raw["sig"] = "0" * 128
    items[7] = json.dumps(raw)
    items[9] = b"{not json"
    items[11] = nw.Event.from_json(corpus_lines[11])
    items[13] = nw.Event.from_json(items[7], verify=False)
    items.append(None)
    expected = [True] * 300 + [False]
    for i in (7, 9, 13):
        expected[i] = False
    for threads in (1, 2, 3):
        assert nw.verify_many(items, threads=threads) == expected
    assert nw.verify_many([]) == []
    assert nw.verify_many(iter(corpus_lines[:3])) == [True] * 3


def test_keys_sign_and_checks():
    keys = nw.Keys("01" * 32)
    assert keys.public_key == nw.Keys(bytes.fromhex("01" * 32)).public_key
    assert "01" * 32 not in repr(keys)
    event = keys.sign(1, "héllo \u2028 \"q\"", [["t", "x"], ["p", "ab" * 32]], created_at=1700000000)
    event.verify()
    assert event.pubkey == keys.public_key and event.created_at == 1700000000
    assert nw.Event.from_json(event.to_json()) == event
    assert event.id == nw.event_id(event.pubkey, 1700000000, 1, event.tags, event.content)
    with pytest.raises(ValueError):
        nw.Keys(b"\x00" * 32)
    with pytest.raises(nw.InvalidEvent) as info:
        keys.sign(1, "x", [[]])
    assert info.value.kind == "empty_tag"
    with pytest.raises(nw.InvalidEvent) as info:
        keys.sign(70000, "x")
    assert info.value.kind == "kind_out_of_range"
    with pytest.raises(nw.InvalidEvent) as info:
        keys.sign(1, "x", created_at=1 << 60)
    assert info.value.kind == "timestamp_out_of_range"
    assert nw.Keys.generate().public_key != nw.Keys.generate().public_key


def test_events_are_values(corpus_lines):
    a = nw.Event.from_json(corpus_lines[1])
    b = nw.Event.from_json(corpus_lines[1])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert a.id in repr(a)
    with pytest.raises(AttributeError):
        a.kind = 3  # type: ignore[misc]


def test_size_and_count_limits():
    keys = nw.Keys("02" * 32)
    big = keys.sign(1, "x" * ((1 << 20) + 10), created_at=1700000000)
    with pytest.raises(nw.InvalidEvent) as info:
        nw.Event.from_json(big.to_json())
    assert info.value.kind == "too_large"
    many = keys.sign(1, "", [["t", "x"]] * 20_001, created_at=1700000000)
    with pytest.raises(nw.InvalidEvent) as info:
        nw.Event.from_json(many.to_json())
    assert info.value.kind == "too_many_tags"


def test_hostile_inputs_raise_invalid_event_never_crash(corpus_lines):
    rng = random.Random(36)
    line = corpus_lines[42]
    for n in range(len(line)):
        with pytest.raises(nw.InvalidEvent):
            nw.Event.from_json(line[:n])
    for _ in range(3000):
        data = bytearray(line)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            nw.Event.from_json(bytes(data))
        except nw.InvalidEvent as e:
            assert e.kind
    for data in (b"", b"[", b"{" * 100_000, b'{"id":' + b"[" * 100_000, b"\xff" * 64, "\ud800".encode("utf-8", "surrogatepass")):
        with pytest.raises(nw.InvalidEvent):
            nw.Event.from_json(data)


def test_events_own_their_input(corpus_lines):
    line = corpus_lines[8]
    buffer = bytearray(line)
    text = line.decode()
    from_buffer = nw.Event.from_json(buffer)
    from_text = nw.Event.from_json(text)
    buffer[:] = b"x" * len(buffer)  # the caller's buffer changes; the event does not
    del text
    import gc

    gc.collect()
    expected = json.loads(line)
    for event in (from_buffer, from_text):
        assert event.to_dict() == expected
        event.verify()
        assert nw.nwb.decode(nw.nwb.encode(event)) == event
