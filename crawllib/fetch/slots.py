"""Politeness slots: one per politeness key (host or registered domain), Scrapy style.

A slot holds its queue of rows and the time of its last request start. Before each request
the slot's worker waits until ``last_start + delay * (1 + u * jitter)`` (u drawn per gap in
[0, 1)) and any Retry-After push; one request at a time, because the worker awaits the whole
response before asking for its next turn. All times are the slot's clock's: the running event
loop's (``loop.time()``, :class:`LoopClock`) unless it is given another (a test's fake clock).

delay = max(politeness.default_delay, min(robots Crawl-delay, politeness.max_crawl_delay)),
doubled for each consecutive 5xx/429 answer, up to max(delay, max_crawl_delay).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawllib.config import PolitenessConfig

BACKOFF_FLOOR = 0.1  # a delay-0 slot still backs off from a failing server


class Clock(Protocol):
    """Monotonic seconds and a sleep measured in them."""

    def time(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass
class Slot:
    key: str
    default_delay: float
    max_crawl_delay: float
    jitter: float
    rows: deque[Mapping[str, Any]] = field(default_factory=deque)
    crawl_delay: float = 0.0  # the largest robots Crawl-delay seen on this slot's hosts (capped)
    last_start: float | None = None
    not_before: float = 0.0  # Retry-After: no request before this clock time
    failures: int = 0  # consecutive 5xx/429 answers
    requests: int = 0
    _gap: float = 0.0  # jitter fraction drawn for the gap after last_start
    _rng: random.Random = field(default_factory=random.Random, repr=False)
    clock: Clock = field(default_factory=LoopClock, repr=False)
    extracting: int = 0  # fetched pages of this slot waiting for their extraction
    woken: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # one of them ended

    @classmethod
    def from_config(
        cls,
        key: str,
        politeness: PolitenessConfig,
        seed: int | None = None,
        clock: Clock | None = None,
    ) -> Slot:
        return cls(
            key=key,
            default_delay=float(politeness.default_delay),
            max_crawl_delay=float(politeness.max_crawl_delay),
            jitter=float(politeness.jitter),
            _rng=random.Random(seed),
            clock=clock or LoopClock(),
        )

    @property
    def base_delay(self) -> float:
        return max(self.default_delay, self.crawl_delay)

    @property
    def delay(self) -> float:
        """Seconds between two request starts now (backoff included, jitter excluded)."""
        base = self.base_delay
        if not self.failures:
            return base
        cap = max(base, self.max_crawl_delay)
        return min(max(base, BACKOFF_FLOOR) * 2**self.failures, cap)

    def set_crawl_delay(self, seconds: float | None) -> None:
        """Take a host's robots.txt Crawl-delay into account (capped by max_crawl_delay)."""
        if seconds is not None and seconds > 0:
            self.crawl_delay = max(self.crawl_delay, min(float(seconds), self.max_crawl_delay))

    def earliest_start(self) -> float:
        """Clock time before which the next request may not start."""
        if self.last_start is None:
            return self.not_before
        return max(self.not_before, self.last_start + self.delay * (1.0 + self._gap))

    async def wait_turn(self, deadline: float) -> bool:
        """Sleep until this slot may start a request and claim it; False if that is past
        `deadline` (nothing claimed, the caller defers)."""
        while True:
            start = self.earliest_start()
            if start > deadline:
                return False
            now = self.clock.time()
            if start <= now:
                break
            await self.clock.sleep(start - now)
        self.last_start = self.clock.time()
        self._gap = self._rng.random() * self.jitter
        self.requests += 1
        return True

    def sent(self) -> None:
        """The claimed request has just left: measure the next gap from now (a connect or TLS
        handshake must not eat into the delay the server sees)."""
        self.last_start = self.clock.time()

    def push_back(self, seconds: float) -> None:
        """Retry-After: start nothing on this slot for `seconds` from now."""
        if seconds > 0:
            until = self.clock.time() + seconds
            self.not_before = max(self.not_before, until)

    def record_status(self, http_status: int | None) -> None:
        """Back off after 5xx and 429 answers; any other answer resets the backoff."""
        if http_status is None:
            return
        if http_status >= 500 or http_status == 429:
            self.failures = min(self.failures + 1, 16)
        else:
            self.failures = 0
