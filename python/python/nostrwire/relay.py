"""An asyncio relay client on `websockets`, over the sans-IO `Decoder` and
`Encoder`.

One task reads messages off the socket; another hands them, in batches of
whatever has arrived, to `Decoder.decode_many`, which decodes and verifies
them in Rust on a worker thread with the GIL released, so the socket keeps
being read while signatures are checked on every core. Events are yielded
only after their id and signature verified; those that do not are dropped
and counted (`RelayClient.invalid_events`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from typing import Any, Callable, Dict, List, Optional

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from ._filters import Filters, filters_json
from ._nostrwire import SUBPROTOCOL_V1, SUBPROTOCOL_V2, Decoder, Encoder, Event, Keys, RelayMessage

# Offered in this order; the relay picks the highest it speaks.
BINARY = [SUBPROTOCOL_V2, SUBPROTOCOL_V1]

__all__ = ["RelayClient", "RelayError", "Subscription"]

# Largest message accepted: the codec's event limit (1 MiB) plus the
# envelope, as the relay's own message limit.
MAX_MESSAGE_BYTES = (1 << 20) + 4096
# Messages decoded inline (small batches) instead of on a worker thread.
INLINE_BATCH = 8
# Most messages handed to the decoder at once.
MAX_BATCH = 2048

_EOSE = object()


class RelayError(Exception):
    """A relay refused something (`OK false`, `CLOSED`), did not answer in
    time, or the connection failed. `message` is the relay's text, with its
    NIP-01 prefix (`"blocked: ..."`) when it gave one."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Closed:
    def __init__(self, reason: str, error: Optional[BaseException] = None) -> None:
        self.reason = reason
        self.error = error


class Subscription:
    """A REQ: an async iterator of verified events, stored ones first.

    Iteration ends when the subscription is closed (by `close()`, by the
    relay with CLOSED, whose reason is in `closed_reason`), or at EOSE when
    it was opened with `until_eose=True`; it raises `RelayError` if the
    connection is lost.
    """

    def __init__(self, client: RelayClient, sub_id: str, until_eose: bool) -> None:
        self.id = sub_id
        self._client = client
        # Batches of events (lists) and markers, in order; `_ready` holds the
        # events of the batch being handed out.
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._ready: collections.deque[Event] = collections.deque()
        self._until_eose = until_eose
        self.eose = asyncio.Event()
        self.closed_reason: Optional[str] = None
        self.invalid_events = 0
        self._done = False

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        if self._ready:
            return self._ready.popleft()
        if self._done:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, list):
            self._ready.extend(item)
            return self._ready.popleft()
        if item is _EOSE:
            if self._until_eose:
                self._done = True
                await self.close()
                raise StopAsyncIteration
            return await self.__anext__()
        # _Closed
        self._done = True
        self.closed_reason = item.reason
        if item.error is not None:
            raise RelayError(item.reason) from item.error
        raise StopAsyncIteration

    async def close(self) -> None:
        """Sends CLOSE (once) and ends the iteration after what is queued."""
        if self._client._subs.pop(self.id, None) is not None:
            self._queue.put_nowait(_Closed("closed by the client"))
            try:
                await self._client._send(self._client._encoder.close(self.id))
            except (ConnectionClosed, RelayError):
                pass

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RelayClient:
    """A connection to one relay.

    `transport`: `"auto"` offers `nostrwire.v2` and `nostrwire.v1` and falls
    back to NIP-01 JSON; `"binary"` insists on one of the two; `"json"`
    never asks; `"nostrwire.v1"` or `"nostrwire.v2"` insists on that
    version. Over `nostrwire.v2` the client holds no dictionary set, so the
    relay sends records that need none.
    Events are verified before they are yielded unless `verify=False`;
    `threads` verifier threads (default: every core). `timeout` bounds
    every wait for an answer (seconds). `compression="deflate"` offers
    permessage-deflate (fewer bytes on the network, more CPU on both ends);
    `None` does not.

        async with RelayClient("ws://127.0.0.1:7777") as relay:
            events = await relay.fetch({"kinds": [1], "limit": 100})
    """

    def __init__(
        self,
        url: str,
        *,
        transport: str = "auto",
        verify: bool = True,
        threads: Optional[int] = None,
        timeout: float = 30.0,
        compression: Optional[str] = "deflate",
        on_notice: Optional[Callable[[str], None]] = None,
    ) -> None:
        if transport not in ("auto", "json", "binary", SUBPROTOCOL_V1, SUBPROTOCOL_V2):
            raise ValueError(
                'transport must be "auto", "json", "binary", '
                f'"{SUBPROTOCOL_V1}" or "{SUBPROTOCOL_V2}", not {transport!r}'
            )
        self.url = url
        self.timeout = timeout
        self._compression = compression
        self.on_notice = on_notice
        self.notices: List[str] = []
        self.invalid_events = 0
        self.invalid_messages = 0
        self.auth_challenge: Optional[str] = None
        self._wanted = transport
        self._verify = verify
        self._threads = threads
        self._ws: Optional[ClientConnection] = None
        self._decoder: Optional[Decoder] = None
        self._encoder = Encoder("json")
        self._subs: Dict[str, Subscription] = {}
        self._oks: Dict[str, asyncio.Future[RelayMessage]] = {}
        self._counts: Dict[str, asyncio.Future[int]] = {}
        self._challenge = asyncio.Event()
        self._ids = itertools.count(1)
        self._raw: List[Any] = []
        self._wake = asyncio.Event()
        self._tasks: List[asyncio.Task[None]] = []
        self._closed: Optional[_Closed] = None

    @property
    def transport(self) -> Optional[str]:
        """`"json"`, `"nostrwire.v1"` or `"nostrwire.v2"` once connected."""
        return self._decoder.transport if self._decoder else None

    async def connect(self) -> RelayClient:
        ws = None
        if self._wanted != "json":
            offer = BINARY if self._wanted in ("auto", "binary") else [self._wanted]
            try:
                ws = await self._open(offer)
            except (InvalidHandshake, OSError):
                # Some servers refuse an upgrade that offers an unknown
                # subprotocol instead of ignoring it: retry without.
                if self._wanted != "auto":
                    raise
            if ws is not None and ws.subprotocol not in offer and self._wanted != "auto":
                await ws.close()
                raise RelayError(f"{self.url} speaks none of {', '.join(offer)}")
        if ws is None:
            ws = await self._open(None)
        name = ws.subprotocol if ws.subprotocol in BINARY else "json"
        self._ws = ws
        self._decoder = Decoder(name, verify=self._verify, threads=self._threads)
        self._encoder = Encoder(name)
        self._tasks = [
            asyncio.ensure_future(self._read()),
            asyncio.ensure_future(self._process()),
        ]
        return self

    async def _open(self, subprotocols: Optional[List[str]]) -> ClientConnection:
        return await asyncio.wait_for(
            connect(
                self.url,
                subprotocols=subprotocols,  # type: ignore[arg-type]
                max_size=MAX_MESSAGE_BYTES,
                compression=self._compression,
                open_timeout=None,
            ),
            self.timeout,
        )

    async def close(self) -> None:
        """Closes the connection; open subscriptions end."""
        if self._ws is not None:
            await self._ws.close()
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, self.timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                task.cancel()
        self._tasks = []

    async def __aenter__(self) -> RelayClient:
        if self._ws is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # Reading: the socket → `_raw` → batches decoded off the event loop.

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for message in self._ws:
                self._raw.append(message)
                self._wake.set()
        except ConnectionClosed:
            pass
        finally:
            self._closed = _Closed("connection closed")
            self._wake.set()

    async def _process(self) -> None:
        assert self._decoder is not None
        loop = asyncio.get_running_loop()
        decode_many = self._decoder.decode_many
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._raw:
                batch = self._raw[:MAX_BATCH]
                del self._raw[:MAX_BATCH]
                if len(batch) <= INLINE_BATCH:
                    messages = decode_many(batch)
                else:
                    messages = await loop.run_in_executor(None, decode_many, batch)
                self._dispatch_all(messages)
            if self._closed is not None:
                self._fail_all(self._closed.reason)
                return

    def _dispatch_all(self, messages: List[RelayMessage]) -> None:
        # A subscription's events go to it as one list per batch; anything
        # else for it (EOSE, CLOSED) first flushes the events before it.
        pending: Dict[str, List[Event]] = {}
        for m in messages:
            if m.type == "EVENT" or m.type == "EVENTS":
                events = pending.get(m.subscription_id)  # type: ignore[arg-type]
                if events is None:
                    if m.subscription_id not in self._subs:
                        continue
                    events = pending[m.subscription_id] = []  # type: ignore[index]
                if m.type == "EVENT":
                    events.append(m.event)  # type: ignore[arg-type]
                else:
                    # A v2 batch; `count` events in it did not verify.
                    events.extend(m.events)  # type: ignore[arg-type]
                    if m.count:
                        self.invalid_events += m.count
                        self._subs[m.subscription_id].invalid_events += m.count  # type: ignore[index]
                continue
            if m.subscription_id in pending:
                self._flush(m.subscription_id, pending.pop(m.subscription_id))  # type: ignore[arg-type]
            self._dispatch(m)
        for sub_id, events in pending.items():
            self._flush(sub_id, events)

    def _flush(self, sub_id: str, events: List[Event]) -> None:
        sub = self._subs.get(sub_id)
        if sub is not None:
            sub._queue.put_nowait(events)

    def _dispatch(self, m: RelayMessage) -> None:
        t = m.type
        if t == "EOSE":
            sub = self._subs.get(m.subscription_id)  # type: ignore[arg-type]
            if sub is not None:
                sub.eose.set()
                sub._queue.put_nowait(_EOSE)
        elif t == "OK":
            fut = self._oks.pop(m.event_id, None)  # type: ignore[arg-type]
            if fut is not None and not fut.done():
                fut.set_result(m)
        elif t == "CLOSED":
            sub = self._subs.pop(m.subscription_id, None)  # type: ignore[arg-type]
            if sub is not None:
                sub._queue.put_nowait(_Closed(m.message or ""))
            fut_count = self._counts.pop(m.subscription_id, None)  # type: ignore[arg-type]
            if fut_count is not None and not fut_count.done():
                fut_count.set_exception(RelayError(m.message or ""))
        elif t == "COUNT":
            fut_count = self._counts.pop(m.subscription_id, None)  # type: ignore[arg-type]
            if fut_count is not None and not fut_count.done():
                fut_count.set_result(m.count)  # type: ignore[arg-type]
        elif t == "NOTICE":
            self._notice(m.message or "")
        elif t == "AUTH":
            self.auth_challenge = m.message
            self._challenge.set()
        elif t == "INVALID":
            if m.subscription_id is not None and m.event_id is not None:
                self.invalid_events += 1
                sub = self._subs.get(m.subscription_id)
                if sub is not None:
                    sub.invalid_events += 1
            else:
                self.invalid_messages += 1

    def _notice(self, text: str) -> None:
        self.notices.append(text)
        if self.on_notice is not None:
            self.on_notice(text)

    def _fail_all(self, reason: str) -> None:
        error = RelayError(reason)
        for sub in list(self._subs.values()):
            sub._queue.put_nowait(_Closed(reason, error))
        self._subs.clear()
        for fut in list(self._oks.values()) + list(self._counts.values()):
            if not fut.done():
                fut.set_exception(RelayError(reason))
        self._oks.clear()
        self._counts.clear()

    # Writing.

    async def _send(self, frame: Any) -> None:
        if self._ws is None or self._closed is not None:
            raise RelayError("not connected")
        await self._ws.send(frame)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    async def subscribe(
        self, filters: Filters, *, id: Optional[str] = None, until_eose: bool = False
    ) -> Subscription:
        """Sends a REQ and returns its `Subscription` (an async iterator of
        verified events). Filters are dicts (or JSON text), checked strictly
        before anything is sent (`InvalidFilter`)."""
        sub_id = id or self._next_id("sub:")
        frame = self._encoder.req(sub_id, filters_json(filters))
        sub = Subscription(self, sub_id, until_eose)
        self._subs[sub_id] = sub
        await self._send(frame)
        return sub

    async def fetch(self, filters: Filters, *, timeout: Optional[float] = None) -> List[Event]:
        """The stored events matching `filters`, up to EOSE (then CLOSE).
        Raises `RelayError` if the relay closes the subscription or does not
        reach EOSE within `timeout` (default: the client's)."""
        sub = await self.subscribe(filters, until_eose=True)

        async def collect() -> List[Event]:
            return [event async for event in sub]

        try:
            events = await asyncio.wait_for(collect(), timeout or self.timeout)
        except asyncio.TimeoutError:
            await sub.close()
            raise RelayError("no EOSE before the timeout") from None
        if not sub.eose.is_set():
            raise RelayError(sub.closed_reason or "subscription closed before EOSE")
        return events

    async def publish(self, event: Event, *, timeout: Optional[float] = None) -> str:
        """Sends EVENT and waits for OK: returns the relay's message when
        accepted, raises `RelayError` with it when refused."""
        return await self._send_event(event, self._encoder.event(event), timeout)

    async def _send_event(self, event: Event, frame: Any, timeout: Optional[float]) -> str:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RelayMessage] = loop.create_future()
        self._oks[event.id] = fut
        try:
            await self._send(frame)
            answer = await asyncio.wait_for(fut, timeout or self.timeout)
        except asyncio.TimeoutError:
            raise RelayError("no OK before the timeout") from None
        finally:
            self._oks.pop(event.id, None)
        if not answer.accepted:
            raise RelayError(answer.message or "")
        return answer.message or ""

    async def count(self, filters: Filters, *, timeout: Optional[float] = None) -> int:
        """NIP-45 COUNT: how many stored events match `filters`."""
        sub_id = self._next_id("count:")
        frame = self._encoder.count(sub_id, filters_json(filters))
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._counts[sub_id] = fut
        try:
            await self._send(frame)
            return await asyncio.wait_for(fut, timeout or self.timeout)
        except asyncio.TimeoutError:
            raise RelayError("no COUNT before the timeout") from None
        finally:
            self._counts.pop(sub_id, None)

    async def auth(self, keys: Keys, *, timeout: Optional[float] = None) -> str:
        """NIP-42: signs the relay's challenge (waiting for one if none came
        yet) as a kind-22242 event with `keys`, sends it and waits for OK."""
        wait = timeout or self.timeout
        if self.auth_challenge is None:
            try:
                await asyncio.wait_for(self._challenge.wait(), wait)
            except asyncio.TimeoutError:
                raise RelayError("the relay sent no AUTH challenge") from None
        event = keys.sign(
            22242, "", [["relay", self.url], ["challenge", self.auth_challenge or ""]]
        )
        return await self._send_event(event, self._encoder.auth(event), timeout)
