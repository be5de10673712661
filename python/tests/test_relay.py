"""Relay frames (sans-IO) and the asyncio client against a real relay
process, and against small hostile servers."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.server import serve

import nostrwire as nw

KEYS = nw.Keys("03" * 32)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def record(event):
    return nw.nwb.encode(event)


def test_decoder_json_and_v1(corpus_lines):
    event = nw.Event.from_json(corpus_lines[10])
    js = nw.Decoder("json")
    m = js.decode(f'["EVENT","s1",{event.to_json()}]')
    assert (m.type, m.subscription_id, m.event) == ("EVENT", "s1", event)
    assert js.decode('["EOSE","s1"]').type == "EOSE"
    m = js.decode(f'["OK","{event.id}",false,"blocked: no"]')
    assert (m.type, m.event_id, m.accepted, m.message) == ("OK", event.id, False, "blocked: no")
    assert js.decode('["CLOSED","s1","error: x"]').message == "error: x"
    assert js.decode('["NOTICE","hi"]').message == "hi"
    assert js.decode('["AUTH","chal"]').message == "chal"
    assert js.decode('["COUNT","c",{"count":42}]').count == 42

    v1 = nw.Decoder(nw.SUBPROTOCOL_V1)
    frame = b"\x03\x02s1" + record(event)
    m = v1.decode(frame)
    assert (m.type, m.subscription_id, m.event) == ("EVENT", "s1", event)
    assert v1.decode(b"\x05s1").subscription_id == "s1"
    m = v1.decode(b"\x04" + bytes.fromhex(event.id) + b"\x01")
    assert (m.type, m.event_id, m.accepted, m.message) == ("OK", event.id, True, "")
    assert v1.decode(b'\x00["NOTICE","x"]').message == "x"


def test_decoder_refuses_bad_frames_and_events(corpus_lines):
    event = nw.Event.from_json(corpus_lines[10])
    raw = json.loads(corpus_lines[10])
    raw["sig"] = "2" * 128
    forged = nw.Event.from_json(json.dumps(raw), verify=False)
    js, v1 = nw.Decoder("json"), nw.Decoder("nostrwire.v1")
    with pytest.raises(nw.InvalidEvent):
        js.decode(f'["EVENT","s",{forged.to_json()}]')
    with pytest.raises(nw.InvalidEvent):
        v1.decode(b"\x03\x01s" + record(forged))
    assert nw.Decoder("json", verify=False).decode(f'["EVENT","s",{forged.to_json()}]').event == forged
    for bad in ('["EVENT","s"]', "[", '["EVENT","s",{}]', '"x"', '["EOSE",""]'):
        with pytest.raises(nw.InvalidMessage):
            js.decode(bad)
    for bad, kind in ((b"", "truncated"), (b"\x09", "unknown_message"), (b"\x05", "bad_subscription_id"),
                      (b"\x03\x01s" + record(event)[:-1], "truncated"),
                      (b"\x04" + b"\x00" * 32 + b"\x02", "non_canonical_flag")):
        with pytest.raises(nw.NwbError) as info:
            v1.decode(bad)
        assert info.value.kind == kind
    with pytest.raises(nw.InvalidMessage) as info:
        v1.decode('["EOSE","s"]')
    assert info.value.kind == "text_frame"
    good = f'["EVENT","s",{event.to_json()}]'
    out = js.decode_many([good, "junk", f'["EVENT","s",{forged.to_json()}]', '["EOSE","s"]'] * 50)
    assert [m.type for m in out[:4]] == ["EVENT", "INVALID", "INVALID", "EOSE"]
    assert out[1].error == "invalid_message" and out[1].event_id is None
    assert out[2].error == "invalid_signature" and out[2].event_id == forged.id
    assert out[2].subscription_id == "s" and len(out) == 200


def batch_frame(sub: bytes, records) -> bytes:
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    body = b"".join(varint(len(r)) + r for r in records)
    return b"\x06" + bytes([len(sub)]) + sub + varint(len(records)) + body


def test_decoder_v2_batches(corpus_lines):
    events = [nw.Event.from_json(line) for line in corpus_lines[:40]]
    raw = json.loads(corpus_lines[40])
    raw["sig"] = "4" * 128
    forged = nw.Event.from_json(json.dumps(raw), verify=False)
    records = [record(e) for e in events]
    records.insert(7, record(forged))
    v2 = nw.Decoder(nw.SUBPROTOCOL_V2)
    m = v2.decode(batch_frame(b"feed", records))
    assert (m.type, m.subscription_id, m.count) == ("EVENTS", "feed", 1)
    assert m.events == events
    assert v2.decode(b"\x07").type == "DICTIONARY_SET"
    assert v2.decode(b"\x07" + b"\xab" * 32).message == "ab" * 32
    assert v2.decode(b"\x05feed").type == "EOSE"
    out = v2.decode_many([batch_frame(b"s", records[:3]), b"\x05s", b"\x06\x01s\xff\xff\x03"])
    assert [m.type for m in out] == ["EVENTS", "EOSE", "INVALID"]
    assert out[2].error == "too_many_records"
    with pytest.raises(nw.NwbError):
        v2.decode(batch_frame(b"s", [records[0][:-1]]))
    # v1 refuses v2's frames.
    with pytest.raises(nw.NwbError) as info:
        nw.Decoder(nw.SUBPROTOCOL_V1).decode(batch_frame(b"s", records[:1]))
    assert info.value.kind == "unknown_message"


def test_encoder(corpus_lines):
    event = nw.Event.from_json(corpus_lines[10])
    js, v1 = nw.Encoder("json"), nw.Encoder("nostrwire.v1")
    assert json.loads(js.req("a", ['{"kinds":[1]}'])) == ["REQ", "a", {"kinds": [1]}]
    assert js.close("a") == '["CLOSE","a"]'
    assert json.loads(js.count("c", ["{}"])) == ["COUNT", "c", {}]
    assert json.loads(js.event(event)) == ["EVENT", event.to_dict()]
    assert json.loads(js.auth(event))[0] == "AUTH"
    assert v1.event(event) == b"\x01" + record(event)
    assert v1.auth(event) == b"\x02" + record(event)
    assert v1.close("a") == b'\x00["CLOSE","a"]'
    with pytest.raises(nw.InvalidMessage) as info:
        js.req("x" * 65, ["{}"])
    assert info.value.kind == "invalid_subscription_id"
    with pytest.raises(nw.InvalidFilter):
        js.req("a", ['{"kinds":[-1]}'])
    with pytest.raises(nw.InvalidMessage):
        js.req("a", [])
    with pytest.raises(ValueError):
        nw.Encoder("nostrwire.v9")


NEGOTIATED = {"json": "json", "auto": "nostrwire.v2", "binary": "nostrwire.v2",
              "nostrwire.v1": "nostrwire.v1", "nostrwire.v2": "nostrwire.v2"}


@pytest.mark.parametrize("transport", ["json", "auto", "nostrwire.v1", "nostrwire.v2"])
def test_client_against_the_relay(relay, transport):
    keys = nw.Keys.generate()

    async def main():
        async with nw.RelayClient(relay.url, transport=transport) as client:
            assert client.transport == NEGOTIATED[transport]
            events = [keys.sign(1, f"note {i} ✓", [["t", "pytest"]]) for i in range(60)]
            for e in events:
                assert await client.publish(e) == ""
            # The same event again is a duplicate, still accepted.
            assert (await client.publish(events[0])).startswith("duplicate:")
            got = await client.fetch({"authors": [keys.public_key]})
            assert sorted(e.id for e in got) == sorted(e.id for e in events)
            # Received events (views into the received frames) read as the sent ones.
            by_id = {e.id: e for e in events}
            for e in got:
                assert e == by_id[e.id] and e.to_dict() == by_id[e.id].to_dict()
                assert e.tags == [["t", "pytest"]] and e.content.endswith("✓")
                e.verify()
                assert nw.nwb.encode(e) == nw.nwb.encode(by_id[e.id])
            assert await client.count({"authors": [keys.public_key], "kinds": [1]}) == 60
            # Live: stored events first, then one published after EOSE.
            sub = await client.subscribe({"authors": [keys.public_key], "limit": 5})
            seen = []
            async for e in sub:
                seen.append(e)
                if len(seen) == 5:
                    await sub.eose.wait()
                    late = keys.sign(1, "late")
                    await client.publish(late)
                if len(seen) == 6:
                    break
            assert seen[-1].id == late.id
            await sub.close()
            # Refusals come back as RelayError with the NIP-01 prefix.
            raw = events[1].to_dict()
            raw["content"] = "changed"
            forged = nw.Event.from_json(json.dumps(raw), verify=False)
            with pytest.raises(nw.RelayError) as info:
                await client.publish(forged)
            assert info.value.message.startswith("invalid:")
            with pytest.raises(nw.InvalidFilter):
                await client.fetch({"kinds": ["one"]})
            assert client.invalid_events == 0

    run(main())


def test_auth(relay):
    async def main():
        async with nw.RelayClient(relay.url) as client:
            assert await client.auth(KEYS) == ""
            assert client.auth_challenge

    run(main())


async def fake_relay(handler, subprotocols=None):
    return await serve(handler, "127.0.0.1", 0, subprotocols=subprotocols)


def test_client_drops_unverified_events_and_falls_back(corpus_lines):
    good = [nw.Event.from_json(line) for line in corpus_lines[:3]]
    raw = json.loads(corpus_lines[3])
    raw["sig"] = "3" * 128
    bad = json.dumps(raw)

    async def handler(ws):
        async for message in ws:
            msg = json.loads(message)
            if msg[0] == "REQ":
                sub = msg[1]
                await ws.send(f'["EVENT","{sub}",{good[0].to_json()}]')
                await ws.send(f'["EVENT","{sub}",{bad}]')
                await ws.send("this is not json")
                for e in good[1:]:
                    await ws.send(f'["EVENT","{sub}",{e.to_json()}]')
                await ws.send(f'["NOTICE","hello"]')
                await ws.send(f'["EOSE","{sub}"]')

    async def main():
        server = await fake_relay(handler)
        port = server.sockets[0].getsockname()[1]
        url = f"ws://127.0.0.1:{port}"
        try:
            async with nw.RelayClient(url) as client:
                assert client.transport == "json"  # the server did not pick nostrwire.v1
                got = await client.fetch({"kinds": [1]})
                assert got == good
                assert client.invalid_events == 1 and client.invalid_messages == 1
                assert client.notices == ["hello"]
            with pytest.raises(nw.RelayError):
                await nw.RelayClient(url, transport="binary").connect()
        finally:
            server.close()
            await server.wait_closed()

    run(main())


def test_lost_connection_ends_subscriptions_with_an_error():
    async def handler(ws):
        await ws.recv()
        await ws.close()

    async def main():
        server = await fake_relay(handler)
        port = server.sockets[0].getsockname()[1]
        try:
            client = await nw.RelayClient(f"ws://127.0.0.1:{port}", timeout=5).connect()
            sub = await client.subscribe({"kinds": [1]})
            with pytest.raises(nw.RelayError):
                async for _ in sub:
                    pass
            with pytest.raises(nw.RelayError):
                await client.publish(KEYS.sign(1, "x"))
            await client.close()
        finally:
            server.close()
            await server.wait_closed()

    run(main())
