"""Parse + id + verify per event on the real-event corpus.

nostrwire `Event.from_json` (and `verify_many` on 1 and 2 threads) against
the hand-written orjson + hashlib + coincurve loop, nostr-sdk's
`Event.from_json(...).verify()`, and, as the floor, a bare libsecp256k1
check from Python (coincurve's BIP-340 verify on pre-decoded bytes).
"""

from __future__ import annotations

import hashlib
import json
import sys

import coincurve
import nostr_sdk
import orjson

import nostrwire as nw
from common import REPO, host, interleaved, save, summary


def handwritten(line: bytes) -> bool:
    e = orjson.loads(line)
    preimage = json.dumps(
        [0, e["pubkey"], e["created_at"], e["kind"], e["tags"], e["content"]],
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    digest = hashlib.sha256(preimage).digest()
    if digest.hex() != e["id"]:
        return False
    return coincurve.PublicKeyXOnly(bytes.fromhex(e["pubkey"])).verify(bytes.fromhex(e["sig"]), digest)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    lines = [l for l in (REPO / "testdata" / "real-events.jsonl").read_bytes().splitlines() if l.strip()]
    texts = [l.decode() for l in lines]
    bare = [(bytes.fromhex(o["pubkey"]), bytes.fromhex(o["sig"]), bytes.fromhex(o["id"]))
            for o in map(orjson.loads, lines)]
    # Every baseline must accept the whole corpus, or it measures something else.
    # json.dumps escapes as NIP-01 does except for U+2028/9 and DEL, which it
    # leaves verbatim too; a mismatch would show here.
    assert all(handwritten(l) for l in lines), "hand-written loop rejects a corpus event"
    assert all(nostr_sdk.Event.from_json(t).verify() for t in texts)
    assert all(nw.verify_many(lines))

    def floor():
        for pk, sig, msg in bare:
            coincurve.PublicKeyXOnly(pk).verify(sig, msg)

    def hand():
        for l in lines:
            handwritten(l)

    def sdk():
        for t in texts:
            nostr_sdk.Event.from_json(t).verify()

    def ours():
        for l in lines:
            nw.Event.from_json(l)

    cases = {
        "libsecp256k1 bare (coincurve verify)": floor,
        "orjson+hashlib+coincurve": hand,
        "nostr-sdk Event.from_json+verify": sdk,
        "nostrwire Event.from_json": ours,
        "nostrwire verify_many, 1 thread": lambda: nw.verify_many(lines, threads=1),
        "nostrwire verify_many, 2 threads": lambda: nw.verify_many(lines, threads=2),
    }
    times = interleaved(cases, rounds)
    result = {"bench": "events", "events": len(lines), "rounds": rounds, "host": host(),
              "cases": summary(times, len(lines))}
    print(save("events", result))
    for name, s in result["cases"].items():
        print(f"{name:40s} {s['median_per_item_us']:8.1f} µs/event (best {s['best_per_item_us']:.1f}, cpu {s['median_cpu_per_item_us']:.1f})")


if __name__ == "__main__":
    main()
