#!/usr/bin/env python3
"""The interop matrix's Python client: the python/ package's RelayClient.

    python_client.py --relay ws://127.0.0.1:PORT --transport json|v2 --case CASE.json

Prints one JSON object (tests/interop/README.md); diagnostics on stderr.
Exits 2 when --transport v2 was asked and the relay did not negotiate it.
The client verifies every event (id and signature) before yielding it.
"""

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

import nostrwire as nw

# The harness's module, imported without leaving bytecode in the checkout.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from matrix import matches  # noqa: E402 - the harness's NIP-01 filter matching

PREFIX = re.compile(r"^([a-z-]+):")


def prefix(message: str) -> str:
    """The machine-readable prefix of an OK message (NIP-01)."""
    m = PREFIX.match(message or "")
    return m.group(1) if m else ""


async def connect(url: str, transport: str) -> nw.RelayClient:
    wanted = "nostrwire.v2" if transport == "v2" else "json"
    try:
        client = await nw.RelayClient(url, transport=wanted, timeout=20).connect()
    except nw.RelayError as e:
        if transport == "v2":
            print(f"the relay did not negotiate nostrwire.v2: {e}", file=sys.stderr)
            sys.exit(2)
        raise
    if client.transport != wanted:
        print(f"the relay negotiated {client.transport}, not {wanted}", file=sys.stderr)
        sys.exit(2)
    return client


async def publish(client: nw.RelayClient, event: nw.Event) -> dict:
    try:
        message = await client.publish(event)
        return {"id": event.id, "accepted": True, "prefix": prefix(message)}
    except nw.RelayError as e:
        if str(e) in ("no OK before the timeout", "not connected"):
            raise
        return {"id": event.id, "accepted": False, "prefix": prefix(str(e))}


async def run(args: argparse.Namespace) -> dict:
    with open(args.case, encoding="utf-8") as f:
        case = json.load(f)
    as_event = lambda e: nw.Event.from_json(json.dumps(e), verify=False)  # noqa: E731
    client = await connect(args.relay, args.transport)
    negotiated = client.transport

    ok = [await publish(client, as_event(e)) for e in case["publish"] + case["invalid"]]

    queries = {}
    for q in case["queries"]:
        sub = await client.subscribe(q["filter"], until_eose=True)
        queries[q["name"]] = sorted([e.id async for e in sub])
        if not sub.eose.is_set():
            raise nw.RelayError(f"query {q['name']}: {sub.closed_reason}")

    live_filter = case["live"]["filter"]
    sub = await client.subscribe(live_filter)
    live = []

    async def collect() -> None:
        async for e in sub:
            live.append(e.id)

    reader = asyncio.ensure_future(collect())
    await asyncio.wait_for(sub.eose.wait(), 20)
    await asyncio.sleep(0)
    if live:
        print(f"live filter matched {len(live)} stored events", file=sys.stderr)
        live.clear()
    publisher = await connect(args.relay, args.transport)
    events = [as_event(e) for e in case["live"]["events"]]
    for e in events:
        verdict = await publish(publisher, e)
        if not verdict["accepted"]:
            print(f"live event {e.id} refused: {verdict['prefix']}", file=sys.stderr)
    wanted = {e.id for e in events if matches(live_filter, e.to_dict())}
    deadline = time.monotonic() + case["live"].get("wait_ms", 5000) / 1000
    while time.monotonic() < deadline and not wanted <= set(live):
        await asyncio.sleep(0.02)
    await sub.close()
    await reader
    await publisher.close()
    await client.close()
    if client.invalid_events:
        print(f"{client.invalid_events} events did not verify", file=sys.stderr)

    refused = []
    for r in case["hostile_records"]:
        try:
            nw.nwb.decode(bytes.fromhex(r["hex"]), verify=False)
            refused.append({"case": r["name"], "refused": False, "kind": ""})
        except nw.NwbError as e:
            refused.append({"case": r["name"], "refused": True, "kind": e.kind})
    return {"client": "python", "negotiated": negotiated, "ok": ok, "queries": queries, "live": sorted(live), "refused": refused}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--relay", required=True)
    ap.add_argument("--transport", required=True, choices=("json", "v2"))
    ap.add_argument("--case", required=True)
    result = asyncio.run(run(ap.parse_args()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
