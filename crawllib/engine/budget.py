"""The bytes of bodies one fetch task holds at once, over all its slots
(``fetch.max_bytes_in_flight``): bodies being read, waiting for extraction, or waiting to be
stored.

Each request takes a `Share` before it starts, which waits while the budget is spent; its body
grows into the share as it is read (a piece of the wire, a step of the decompressor), and the
reading pauses while the budget is spent. The share is given back once the body is gone (its
record emitted). So that readers never wait on each other for ever, the oldest body still
being read goes on past the budget when no body that was read in full holds any of it (those
give theirs back on their own): the bodies in memory stay below the budget plus one body's
own cap. Everything runs on the engine's event loop: no lock.
"""

from __future__ import annotations

import asyncio
import itertools


class Share:
    """One body's part of a `ByteBudget`."""

    def __init__(self, budget: ByteBudget, key: int) -> None:
        self.budget, self.key = budget, key
        self.held = 0
        self.reading = True
        self.started: int | None = None  # the order in which bodies began to be read

    async def grow_to(self, size: int) -> None:
        """Hold ``size`` bytes, waiting while the budget is spent (module text)."""
        await self.budget._grow(self, size)

    def done_reading(self, size: int) -> None:
        """The body is read in full, ``size`` bytes: hold exactly that until `release`."""
        self.reading = False
        self.budget._resize(self, size)

    def release(self) -> None:
        """The body is gone: its bytes are the budget's again."""
        self.reading = False
        self.budget._resize(self, 0)
        self.budget._shares.pop(self.key, None)
        self.budget._wake()


class ByteBudget:
    """At most ``limit`` bytes of bodies held at once (module text)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._shares: dict[int, Share] = {}
        self._order = itertools.count()
        self._waiters: list[asyncio.Future[None]] = []

    async def share(self) -> Share:
        """A share for a new request, once the budget has room (or no body holds any)."""
        while self.used >= self.limit and self._shares:
            await self._wait()
        share = Share(self, next(self._order))
        self._shares[share.key] = share
        return share

    async def _grow(self, share: Share, size: int) -> None:
        if share.started is None:
            share.started = next(self._order)
        while size > share.held:
            if self.used + size - share.held <= self.limit or self._may_pass(share):
                self._resize(share, size)
                return
            await self._wait()

    def _may_pass(self, share: Share) -> bool:
        """The oldest body being read, when no body read in full holds any of the budget."""
        assert share.started is not None
        for other in self._shares.values():
            if other.held and not other.reading:
                return False
            if other.reading and other.started is not None and other.started < share.started:
                return False
        return True

    def _resize(self, share: Share, size: int) -> None:
        self.used += size - share.held
        share.held = size
        self.peak = max(self.peak, self.used)
        self._wake()

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
