"""nwb, the nostrwire binary event format (`spec/nwb.md`).

`encode`/`decode` convert one event and its record; `write` and `open`
write and read a stream of length-prefixed records (a `.nwb` file),
compressed with a dictionary set (`DictSet`) when given.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Union

from ._nostrwire import DictSet, Event, NwbError, Scanner, _scan, decode, encode
from ._nostrwire import write as _write

__all__ = ["DictSet", "NwbError", "decode", "encode", "open", "write"]


def _dictset(dictionaries: Union[None, str, os.PathLike, DictSet]) -> Optional[DictSet]:
    if dictionaries is None or isinstance(dictionaries, DictSet):
        return dictionaries
    return DictSet.load(os.fspath(dictionaries))


def open(  # noqa: A001 - mirrors builtins.open for a file format module
    path: Union[str, os.PathLike],
    *,
    verify: bool = False,
    dictionaries: Union[None, str, os.PathLike, DictSet] = None,
    errors: str = "raise",
    threads: Optional[int] = None,
) -> Scanner:
    """Iterates over the events of an nwb stream through a memory map.

    Records compressed with dictionaries need the set they were written
    with (`dictionaries`: a `DictSet` or the path of a set file).
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f'errors must be "raise" or "skip", not {errors!r}')
    return _scan(
        os.fspath(path), [], verify, errors == "skip", threads, "nwb", _dictset(dictionaries)
    )


def write(
    path: Union[str, os.PathLike],
    events: Iterable[Union[Event, str, bytes]],
    dictionaries: Union[None, str, os.PathLike, DictSet] = None,
) -> int:
    """Writes events (each an `Event`, or event JSON) as an nwb stream.

    Returns the number written. Each record is compressed with
    `dictionaries` when that makes it smaller. An event that does not parse
    raises, leaving the ones before it in the file.
    """
    return _write(os.fspath(path), events, _dictset(dictionaries))
