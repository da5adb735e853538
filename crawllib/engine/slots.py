"""Politeness slots: one per politeness key (host, registered domain or server address), Scrapy style.

A slot holds its queue of rows and the time of its last request. Before each request the
slot's worker waits until ``last_start + delay * (1 + u * jitter)`` (u drawn per gap in
[0, 1)) and any ``not_before`` (Retry-After, a down host's cool-down); one request at a time,
because the worker awaits the whole response before asking for its next turn. ``last_start``
is when the last request left, and then when its answer ended (:meth:`Slot.ended`): the delay
counts from the end of one answer to the next request, as in Nutch and Heritrix, so the
server sees at least the delay between two requests whatever the network or its own queue
delays the first by (a gap measured from the client's send shrinks by that much). All times are
the slot's clock's: the running event loop's (``loop.time()``, :class:`LoopClock`) unless it
is given another (a test's fake clock).

delay = max(politeness.default_delay, robots Crawl-delay, the adaptive delay), doubled for
each consecutive 5xx/429 answer, up to max(delay, max_crawl_delay). The adaptive delay
(politeness.adaptive) is response_factor times the moving average of the slot's response
times (from when a request left to its last byte, robots.txt included), up to max_delay. A
Crawl-delay is never shortened: above ``max_crawl_delay`` the slot is ``refused`` (its URLs
are deferred) unless ``honor_long_crawl_delay``.

With politeness.key = ip a host's slot has a ``server`` (:class:`crawllib.engine.servers.Server`,
itself a slot, for the address): a turn then waits for both, and claims both; the host keeps
its own Retry-After, backoff, Crawl-delay, robots.txt failures and DNS failures, while
connection failures and the response times also teach the server.

A slot outlives an engine call through the hosts table: :meth:`Slot.restore` starts it from
its stored state (last request, backoff level, down count, not_before, response time, all in
epoch seconds) and :meth:`Slot.state` gives it back, so the first request of the next slice
or generation is spaced from the last one of this one by rule.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections import Counter
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Self

from crawllib.config import PolitenessConfig
from crawllib.core.vocab import SERVER_DOWN_KINDS, DelaySource, HostKind, WaitReason

if TYPE_CHECKING:
    from crawllib.engine.servers import Server

BACKOFF_FLOOR = 0.1  # a delay-0 slot still backs off from a failing server
MAX_BACKOFF_LEVEL = 16
MAX_DOWN_COOLDOWN = 86400.0
# The weight of the newest response time in a slot's moving average: about the last five
# answers count, so one slow page moves the delay a little and a slow server soon moves it all.
RESPONSE_WEIGHT = 0.3


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


class RowQueue:
    """A slot's URLs to fetch, shallowest first, then in the order they came: the slot's own
    links, which it follows in its task, are fetched breadth first. A queued URL that a
    shorter path reaches (:meth:`lower`) moves up, at that depth."""

    def __init__(self, rows: Iterable[Mapping[str, Any]] = ()) -> None:
        # [depth, order, row, live]: a lowered row's old entry is left in place, dead
        self._heap: list[list[Any]] = []
        self._order = itertools.count()
        self._queued: dict[int, list[Any]] = {}  # url_key -> its live entry
        self._live = 0
        self.extend(rows)

    def append(self, row: Mapping[str, Any]) -> None:
        entry = [row.get("depth") or 0, next(self._order), row, True]
        heapq.heappush(self._heap, entry)
        self._live += 1
        key = row.get("url_key")
        if key is not None:
            self._queued[key] = entry

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.append(row)

    def peek(self) -> Mapping[str, Any]:
        """The row :meth:`popleft` returns next, left in the queue."""
        self._drop_dead()
        if not self._heap:
            raise IndexError("peek into an empty RowQueue")
        row: Mapping[str, Any] = self._heap[0][2]
        return row

    def popleft(self) -> Mapping[str, Any]:
        self._drop_dead()
        if not self._heap:
            raise IndexError("pop from an empty RowQueue")
        entry = heapq.heappop(self._heap)
        self._live -= 1
        key = entry[2].get("url_key")
        if key is not None and self._queued.get(key) is entry:
            del self._queued[key]
        return entry[2]

    def next_depth(self) -> int | None:
        """The depth of the row :meth:`popleft` returns next (None: empty)."""
        self._drop_dead()
        return self._heap[0][0] if self._heap else None

    def lower(self, key: int, depth: int, source_url: str | None = None) -> bool:
        """Requeue the queued URL ``key`` at ``depth`` if that is less than its depth (a
        followed URL also takes ``source_url``, the page of the shorter path); whether it
        moved."""
        entry = self._queued.get(key)
        if entry is None or depth >= entry[0]:
            return False
        entry[3] = False
        self._live -= 1
        row = {**entry[2], "depth": depth}
        if source_url is not None and row.get("source_url") is not None:
            row["source_url"] = source_url
        self.append(row)
        return True

    def discard(self, keys: Container[int]) -> None:
        """Drop the queued URLs whose url_key is in ``keys``."""
        for key in [k for k in self._queued if k in keys]:
            entry = self._queued.pop(key)
            entry[3] = False
            self._live -= 1

    def _drop_dead(self) -> None:
        while self._heap and not self._heap[0][3]:
            heapq.heappop(self._heap)

    def __len__(self) -> int:
        return self._live

    def __bool__(self) -> bool:
        return self._live > 0


@dataclass
class Slot:
    key: str
    default_delay: float
    max_crawl_delay: float
    jitter: float
    honor_long_crawl_delay: bool = False
    down_cooldown: float = 600.0
    adaptive: bool = False
    response_factor: float = 1.0
    max_delay: float = 0.0
    kind: str = HostKind.HOST  # what it paces: a hosts.kind word
    rows: RowQueue = field(default_factory=RowQueue)
    crawl_delay: float = 0.0  # the largest robots Crawl-delay seen on its hosts, as asked
    last_start: float | None = None
    not_before: float = 0.0  # no request before this clock time (Retry-After, cool-down)
    not_before_reason: str | None = None  # a WaitReason word while not_before is ahead
    failures: int = 0  # consecutive 5xx/429 answers: the backoff level
    down: int = 0  # consecutive DNS/connect failures
    down_until: float | None = None  # clock time a down slot's cool-down ends
    robots_failures: int = 0  # consecutive failed robots.txt fetches
    response_time: float | None = None  # moving average of its response times, seconds
    server: Server | None = None  # with key = ip: its address's slot
    busy: bool = False  # one of its rows is being fetched (the engine sets it)
    requests: int = 0
    # this call's record for the hosts table: hosts seen, requests made, pages kept, their
    # body bytes, server addresses reached
    hosts: set[str] = field(default_factory=set)
    attempted: int = 0
    pages: int = 0
    bytes: int = 0
    tried: int = 0  # URLs given their first attempt (any outcome but deferred)
    addresses: set[str] = field(default_factory=set)
    address: str | None = None  # the server address its last request reached
    _gap: float = 0.0  # jitter fraction drawn for the gap after last_start
    _rng: random.Random = field(default_factory=random.Random, repr=False)
    clock: Clock = field(default_factory=LoopClock, repr=False)
    extracting: int = 0  # fetched pages of this slot waiting for their extraction
    woken: asyncio.Event = field(default_factory=asyncio.Event, repr=False)  # one of them ended
    # depth -> pages of that depth waiting for their extraction (their links are one deeper)
    extracting_depths: Counter[int] = field(default_factory=Counter, repr=False)

    @classmethod
    def from_config(
        cls,
        key: str,
        politeness: PolitenessConfig,
        seed: int | None = None,
        clock: Clock | None = None,
    ) -> Self:
        return cls(
            key=key,
            default_delay=float(politeness.default_delay),
            max_crawl_delay=float(politeness.max_crawl_delay),
            jitter=float(politeness.jitter),
            honor_long_crawl_delay=bool(politeness.honor_long_crawl_delay),
            down_cooldown=float(politeness.down_cooldown_seconds),
            adaptive=bool(politeness.adaptive),
            response_factor=float(politeness.response_factor),
            max_delay=float(politeness.max_delay),
            _rng=random.Random(seed),
            clock=clock or LoopClock(),
        )

    def extraction_started(self, depth: int | None) -> None:
        self.extracting += 1
        self.extracting_depths[depth or 0] += 1

    def extraction_ended(self, depth: int | None) -> None:
        self.extracting -= 1
        self.extracting_depths[depth or 0] -= 1
        if not self.extracting_depths[depth or 0]:
            del self.extracting_depths[depth or 0]
        self.woken.set()

    def shallower_pending(self) -> bool:
        """Whether a page still being extracted may bring links shallower than the next queued
        URL (its depth + 1 below that URL's): breadth first, the slot waits for them."""
        if not self.extracting_depths:
            return False
        following = self.rows.next_depth()
        return following is not None and min(self.extracting_depths) + 1 < following

    @property
    def rule_delay(self) -> float:
        """The delay its rule gives, before any robots.txt, response time or failure."""
        return self.default_delay

    @property
    def rule_source(self) -> str:
        return DelaySource.DEFAULT

    @property
    def adaptive_delay(self) -> float | None:
        """response_factor times the moving average of its response times, up to max_delay;
        None when not adaptive or nothing has been answered yet."""
        if not self.adaptive or self.response_time is None:
            return None
        return min(self.response_factor * self.response_time, self.max_delay)

    @property
    def base_delay(self) -> float:
        return max(self.rule_delay, self.crawl_delay, self.adaptive_delay or 0.0)

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
        adaptive = self.adaptive_delay or 0.0
        if self.crawl_delay > self.rule_delay and self.crawl_delay >= adaptive:
            return DelaySource.CRAWL_DELAY
        if adaptive > self.rule_delay:
            return DelaySource.ADAPTIVE
        return self.rule_source

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
        response = state.get("response_seconds")
        self.response_time = None if response is None else float(response)
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
            "kind": self.kind,
            "address": self.server.key if self.server is not None else self.address,
            "last_request_at": to_epoch(self.last_start),
            "delay": self.delay,
            "delay_source": self.delay_source,
            "response_seconds": self.response_time,
            "adaptive_delay": self.adaptive_delay,
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

    def own_start(self) -> float:
        """Clock time before which its own rules allow no request (its server's aside)."""
        by_delay = self._by_delay()
        return self.not_before if by_delay is None else max(self.not_before, by_delay)

    def earliest_start(self) -> float:
        """Clock time before which the next request may not start (its server's rules too)."""
        own = self.own_start()
        return own if self.server is None else max(own, self.server.earliest_start())

    def wait_cause(self) -> str | None:
        """What holds the next request back beyond the rule's delay: a WaitReason word
        (Retry-After, cool-down), DelaySource.BACKOFF, CRAWL_DELAY or ADAPTIVE; None for
        the rule. A server that holds its host back longer than the host's own rules gives
        the cause."""
        if self.server is not None and self.server.earliest_start() > self.own_start():
            return self.server.wait_cause()
        by_delay = self._by_delay()
        if self.not_before > self.clock.time() and (
            by_delay is None or self.not_before >= by_delay
        ):
            return self.not_before_reason or WaitReason.RETRY_AFTER
        source = self.delay_source
        return None if source == self.rule_source else source

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
        self.claim()
        if self.server is not None:
            self.server.claim()
        return True

    def claim(self) -> None:
        """Take the turn now: the next gap counts from here, with a jitter of its own."""
        self.last_start = self.clock.time()
        self._gap = self._rng.random() * self.jitter
        self.requests += 1

    def sent(self) -> None:
        """The claimed request has just left: measure the next gap from now (a connect or TLS
        handshake must not eat into the delay the server sees)."""
        self.last_start = self.clock.time()
        if self.server is not None:
            self.server.sent()

    def ended(self) -> None:
        """The request's answer has ended (or the request failed): the next gap counts from
        now. The server saw the request before its answer ended, so it sees at least the
        delay between the two."""
        now = self.clock.time()
        self.last_start = now if self.last_start is None else max(self.last_start, now)
        if self.server is not None:
            self.server.ended()

    def record_response(self, seconds: float) -> None:
        """An answer ended ``seconds`` after its request left: into the moving average of
        its response times (and its server's)."""
        seconds = max(0.0, seconds)
        average = self.response_time
        if average is None:
            self.response_time = seconds
        else:
            self.response_time = average + RESPONSE_WEIGHT * (seconds - average)
        if self.server is not None:
            self.server.record_response(seconds)

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
        failed = http_status >= 500 or http_status == 429
        if failed:
            self.failures = min(self.failures + 1, MAX_BACKOFF_LEVEL)
        else:
            self.failures = 0
        if self.server is not None:
            self.server.record_answer(self.key, failed)

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

    def record_down(self, down_after: int, kind: str | None = None) -> bool:
        """A DNS/connect failure (``kind``: its error_kind); True once it makes ``down_after``
        in a row: then no request until a cool-down ends (down_cooldown, doubled per further
        failure, up to a day). A connection failure of a host on a server counts against the
        server (every host on it is down with it); a name or a certificate is the host's."""
        if self.server is not None and kind in SERVER_DOWN_KINDS:
            return self.server.record_down(down_after, kind)
        self.down += 1
        if self.down < down_after:
            return False
        cooldown = min(self.down_cooldown * 2 ** (self.down - down_after), MAX_DOWN_COOLDOWN)
        self.down_until = self.clock.time() + cooldown
        self.push_back(cooldown, WaitReason.DOWN)
        return True
