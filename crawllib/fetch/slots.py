"""Politeness slots: one per politeness key (host, registered domain or server address), Scrapy style.

A slot holds its queue of rows and the time of its last request start. Before each request
the slot's worker waits until ``last_start + delay * (1 + u * jitter)`` (u drawn per gap in
[0, 1)) and any ``not_before`` (Retry-After, a down host's cool-down); one request at a time,
because the worker awaits the whole response before asking for its next turn. All times are
the slot's clock's: the running event loop's (``loop.time()``, :class:`LoopClock`) unless it
is given another (a test's fake clock).

delay = max(politeness.default_delay, robots Crawl-delay), doubled for each consecutive
5xx/429 answer, up to max(delay, max_crawl_delay). A Crawl-delay is never shortened: above
``max_crawl_delay`` the slot is ``refused`` (its URLs are deferred) unless
``honor_long_crawl_delay``.

A slot outlives an engine call through the hosts table: :meth:`Slot.restore` starts it from
its stored state (last request, backoff level, down count, not_before, all in epoch seconds)
and :meth:`Slot.state` gives it back, so the first request of the next slice or generation is
spaced from the last one of this one by rule.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawllib.config import PolitenessConfig
from crawllib.vocab import DelaySource, WaitReason

BACKOFF_FLOOR = 0.1  # a delay-0 slot still backs off from a failing server
MAX_BACKOFF_LEVEL = 16
MAX_DOWN_COOLDOWN = 86400.0


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
    honor_long_crawl_delay: bool = False
    down_cooldown: float = 600.0
    rows: deque[Mapping[str, Any]] = field(default_factory=deque)
    crawl_delay: float = 0.0  # the largest robots Crawl-delay seen on its hosts, as asked
    last_start: float | None = None
    not_before: float = 0.0  # no request before this clock time (Retry-After, cool-down)
    not_before_reason: str | None = None  # a WaitReason word while not_before is ahead
    failures: int = 0  # consecutive 5xx/429 answers: the backoff level
    down: int = 0  # consecutive DNS/connect failures
    down_until: float | None = None  # clock time a down slot's cool-down ends
    robots_failures: int = 0  # consecutive failed robots.txt fetches
    requests: int = 0
    # this call's record for the hosts table: hosts seen, requests made, pages kept, their
    # body bytes, server addresses reached
    hosts: set[str] = field(default_factory=set)
    attempted: int = 0
    pages: int = 0
    bytes: int = 0
    tried: int = 0  # URLs given their first attempt (any outcome but deferred)
    addresses: set[str] = field(default_factory=set)
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
            honor_long_crawl_delay=bool(politeness.honor_long_crawl_delay),
            down_cooldown=float(politeness.down_cooldown_seconds),
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

    @property
    def delay_source(self) -> str:
        if self.failures and self.delay > self.base_delay:
            return DelaySource.BACKOFF
        if self.crawl_delay > self.default_delay:
            return DelaySource.CRAWL_DELAY
        return DelaySource.DEFAULT

    @property
    def refused(self) -> bool:
        """Its Crawl-delay is above the maximum and is not to be honoured: fetch nothing."""
        return self.crawl_delay > self.max_crawl_delay and not self.honor_long_crawl_delay

    def set_crawl_delay(self, seconds: float | None) -> None:
        """Take a host's robots.txt Crawl-delay into account, as the host asks it."""
        if seconds is not None and seconds > 0:
            self.crawl_delay = max(self.crawl_delay, float(seconds))

    def restore(
        self, state: Mapping[str, Any], wall_now: float, just_requested: bool = False
    ) -> None:
        """Start from the hosts table's state (a HostState; epoch seconds; ``wall_now`` is the epoch time
        that is this clock's now). just_requested: a retried task's slot, whose last request
        may have been an instant ago (its first attempt's): treated as made now."""
        now = self.clock.time()

        def to_clock(epoch: float | None) -> float | None:
            return None if epoch is None else now - (wall_now - float(epoch))

        self.last_start = to_clock(state.get("last_request_at"))
        self.failures = min(int(state.get("http_failures") or 0), MAX_BACKOFF_LEVEL)
        self.down = int(state.get("down_failures") or 0)
        self.robots_failures = int(state.get("robots_failures") or 0)
        not_before = to_clock(state.get("not_before"))
        if not_before is not None and not_before > now:
            self.not_before = not_before
            self.not_before_reason = state.get("not_before_reason")
        self.down_until = to_clock(state.get("down_until"))
        if just_requested:
            self.last_start = now if self.last_start is None else max(self.last_start, now)

    def state(self, wall_now: float) -> dict[str, Any]:
        """Its state for the hosts table, times in epoch seconds (the HostRecord keys that
        the slot knows)."""
        now = self.clock.time()

        def to_epoch(at: float | None) -> float | None:
            return None if at is None else wall_now - (now - at)

        ahead = self.not_before > now
        return {
            "slot": self.key,
            "last_request_at": to_epoch(self.last_start),
            "delay": self.delay,
            "delay_source": self.delay_source,
            "crawl_delay": self.crawl_delay or None,
            "http_failures": self.failures,
            "down_failures": self.down,
            "robots_failures": self.robots_failures,
            "not_before": to_epoch(self.not_before) if ahead else None,
            "not_before_reason": self.not_before_reason if ahead else None,
            "down_until": to_epoch(self.down_until),
        }

    def _by_delay(self) -> float | None:
        """Clock time the delay (backoff and this gap's jitter included) allows next."""
        if self.last_start is None:
            return None
        return self.last_start + self.delay * (1.0 + self._gap)

    def earliest_start(self) -> float:
        """Clock time before which the next request may not start."""
        by_delay = self._by_delay()
        return self.not_before if by_delay is None else max(self.not_before, by_delay)

    def wait_cause(self) -> str | None:
        """What holds the next request back beyond the default delay: a WaitReason word
        (Retry-After, cool-down), DelaySource.BACKOFF or CRAWL_DELAY; None for the default."""
        by_delay = self._by_delay()
        if self.not_before > self.clock.time() and (
            by_delay is None or self.not_before >= by_delay
        ):
            return self.not_before_reason or WaitReason.RETRY_AFTER
        source = self.delay_source
        return None if source == DelaySource.DEFAULT else source

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

    def push_back(self, seconds: float, reason: str = WaitReason.RETRY_AFTER) -> None:
        """Start nothing on this slot for `seconds` from now (Retry-After, in full)."""
        if seconds > 0:
            until = self.clock.time() + seconds
            if until > self.not_before:
                self.not_before = until
                self.not_before_reason = reason

    def record_status(self, http_status: int | None) -> None:
        """Back off after 5xx and 429 answers; any other answer resets the backoff. Any
        answer ends a run of DNS/connect failures."""
        if http_status is None:
            return
        self.down = 0
        self.down_until = None
        if http_status >= 500 or http_status == 429:
            self.failures = min(self.failures + 1, MAX_BACKOFF_LEVEL)
        else:
            self.failures = 0

    def record_robots(self, failed: bool, retry_base: float, hold: bool = True) -> float | None:
        """A robots.txt fetch ended. Failed: it is asked again after ``retry_base`` seconds,
        doubled per failure in a row (up to a day), returned; hold: no request on the slot
        before then. An answer resets the count."""
        if not failed:
            self.robots_failures = 0
            return None
        self.robots_failures += 1
        retry = min(retry_base * 2 ** min(self.robots_failures - 1, 30), MAX_DOWN_COOLDOWN)
        if hold:
            self.push_back(retry, WaitReason.ROBOTS)
        return retry

    def record_down(self, down_after: int) -> bool:
        """A DNS/connect failure; True once it makes ``down_after`` in a row: then no request
        until a cool-down ends (down_cooldown, doubled per further failure, up to a day)."""
        self.down += 1
        if self.down < down_after:
            return False
        cooldown = min(self.down_cooldown * 2 ** (self.down - down_after), MAX_DOWN_COOLDOWN)
        self.down_until = self.clock.time() + cooldown
        self.push_back(cooldown, WaitReason.DOWN)
        return True
