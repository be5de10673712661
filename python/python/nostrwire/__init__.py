"""nostrwire: fast Nostr for Python.

Strict NIP-01 events with BIP-340 verification (`Event`, `verify_many`),
nwb binary records and files (`nostrwire.nwb`), dump scanning (`scan`),
sans-IO relay frames (`Decoder`, `Encoder`) and an asyncio relay client
(`RelayClient`, speaking NIP-01 JSON or the binary `nostrwire.v1`).
The codec is the Rust one of the nostrwire workspace.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Union

from . import nwb
from ._filters import Filters, filters_json
from ._nostrwire import (
    SUBPROTOCOL_V1,
    SUBPROTOCOL_V2,
    Decoder,
    Encoder,
    Event,
    InvalidEvent,
    InvalidFilter,
    InvalidMessage,
    Keys,
    NostrwireError,
    NwbError,
    RelayMessage,
    Scanner,
    __version__,
    _scan,
    event_id,
    verify_many,
)
from .relay import RelayClient, RelayError, Subscription

__all__ = [
    "SUBPROTOCOL_V1",
    "SUBPROTOCOL_V2",
    "Decoder",
    "Encoder",
    "Event",
    "InvalidEvent",
    "InvalidFilter",
    "InvalidMessage",
    "Keys",
    "NostrwireError",
    "NwbError",
    "RelayClient",
    "RelayError",
    "RelayMessage",
    "Scanner",
    "Subscription",
    "__version__",
    "event_id",
    "nwb",
    "scan",
    "verify_many",
]

_ERRORS = ("raise", "skip")


def scan(
    path: Union[str, os.PathLike],
    filter: Optional[Filters] = None,
    *,
    verify: bool = False,
    errors: str = "raise",
    threads: Optional[int] = None,
    format: str = "auto",
    dictionaries: Union[None, str, os.PathLike, nwb.DictSet] = None,
) -> Scanner:
    """Streams the events of a JSON Lines or nwb file that match `filter`.

    `filter` is a NIP-01 filter (a dict) or a list of them (an event matches
    if any matches): `ids`, `authors`, `kinds`, `#x` tags, `since`, `until`.
    `limit` and `search` raise `ValueError`: a dump has no order to take the
    newest from, nor a search index (`itertools.islice` bounds a scan). Matching, and
    verification when `verify=True`, run in Rust on `threads` threads
    (default: every core) over a memory map of the file. With
    `errors="raise"` the first bad line or record raises `InvalidEvent` or
    `NwbError` (naming its line or byte offset) after the events before it;
    `errors="skip"` counts it in `Scanner.invalid` and goes on.
    """
    if errors not in _ERRORS:
        raise ValueError(f'errors must be "raise" or "skip", not {errors!r}')
    filters = filters_json(filter)
    for text in filters:
        keys = json.loads(text).keys()
        for key in ("limit", "search"):
            if key in keys:
                raise ValueError(f"scan does not apply {key!r}: remove it from the filter")
    return _scan(
        os.fspath(path),
        filters,
        verify,
        errors == "skip",
        threads,
        format,
        nwb._dictset(dictionaries),
    )


