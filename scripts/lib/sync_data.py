#!/usr/bin/env python3
"""Keeps the generated events every relay of the sync scripts stores as
given (standard input to standard output, JSON Lines), so that after a sync
both sides can be compared id for id:

- no direct messages (kind 4) or gift wraps (1059): a nostrwire relay serves
  them only to their parties after AUTH, so they are not in its side of a
  sync, nor in a plain REQ's answer; strfry serves them to anyone;
- no deletions (5): strfry refuses one that names another author's event;
- no event over 60,000 bytes: strfry's default events.maxEventSize is
  65,536, and a WebSocket message over its maxWebsocketPayloadSize closes
  the connection;
- no `e` or `p` tag whose value is not 64 hex digits: strfry refuses them
  ("unexpected size for fixed-size tag");
- one event per replaceable or addressable address (the first): no version
  replaces another, so a one-way sync leaves the receiving side holding
  every id of the sending one.

    sync_data.py [LIMIT] < generated.jsonl > kept.jsonl

LIMIT, if given, stops after that many events kept.
"""

import json
import re
import sys

HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def address(event):
    """The replaceable or addressable address of an event, or None."""
    kind = event["kind"]
    if kind in (0, 3) or 10000 <= kind < 20000:
        return (kind, event["pubkey"])
    if 30000 <= kind < 40000:
        d = next((t[1] for t in event["tags"] if len(t) > 1 and t[0] == "d"), "")
        return (kind, event["pubkey"], d)
    return None


def kept(line, seen):
    if len(line) > 60000:
        return False
    event = json.loads(line)
    if event["kind"] in (4, 5, 1059):
        return False
    if not all(
        len(tag) < 2 or tag[0] not in ("e", "p") or HEX64.match(tag[1])
        for tag in event["tags"]
    ):
        return False
    at = address(event)
    if at is None:
        return True
    if at in seen:
        return False
    seen.add(at)
    return True


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
    count = 0
    seen = set()
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line and kept(line, seen):
            print(line)
            count += 1
            if limit is not None and count >= limit:
                break


if __name__ == "__main__":
    main()
