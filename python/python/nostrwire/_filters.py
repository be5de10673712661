"""NIP-01 filters given as dicts (or JSON text), passed to Rust as JSON."""

from __future__ import annotations

import json
from typing import Any, Iterable, List, Mapping, Union

Filter = Union[Mapping[str, Any], str]
Filters = Union[Filter, Iterable[Filter]]


def filters_json(filters: Filters | None) -> List[str]:
    """One filter or several, as JSON text; the codec checks them strictly."""
    if filters is None:
        return []
    if isinstance(filters, (str, bytes, Mapping)):
        filters = [filters]
    out = []
    for f in filters:
        if isinstance(f, bytes):
            out.append(f.decode())
        elif isinstance(f, str):
            out.append(f)
        elif isinstance(f, Mapping):
            out.append(json.dumps(f, separators=(",", ":"), ensure_ascii=False))
        else:
            raise TypeError(f"a filter is a dict or JSON text, not {type(f).__name__}")
    return out
