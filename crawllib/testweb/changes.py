"""When each page of a changing host changes: the schedules and their ground truth. Pure.

The changing hosts themselves (paths, HTML, validators, 304) are described in
:mod:`crawllib.testweb.live`; this module answers, for a page URL and a time ``t`` (epoch
seconds, the test web's settable clock), which version of the page is served. A schedule is a
function of the URL alone (host and path, never ``WebSpec.seed``), so every function here
takes only the URL and the time.

Two versions per page:

* the **text version** (:func:`text_version`): the version of the main text, what a crawler
  that hashes the extracted text sees change. It is an integer that grows by exactly 1 at each
  change, so ``expected_changes(url, t0, t1) == text_version(url, t1) - text_version(url, t0)``;
  its zero point is arbitrary (it may be negative);
* the **page version** (:func:`page_version`): the version of the bytes served. It equals the
  text version except for ``boilerplate`` pages, whose main text never changes while their
  boilerplate changes every hour. ``ETag`` and ``Last-Modified`` follow the page version, as
  HTTP requires of a representation's validators.

Every change happens at a whole second, so ``Last-Modified`` (one-second resolution) is exact.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import random
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from crawllib.testweb.site import WebSpec

HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY
# Text version 0 of a ``random`` page is the one current at ORIGIN (2026-01-01T00:00:00Z, a
# multiple of WEEK, so block boundaries of the random process fall on it).
ORIGIN = 1_767_225_600
# ``never`` and ``boilerplate`` texts were last modified at STATIC_SINCE + up to 30 days
# (2025-01-01T00:00:00Z + a per-page offset), whatever the clock says.
STATIC_SINCE = 1_735_689_600
KINDS = ("hourly", "daily", "weekly", "never", "random", "boilerplate")
VALIDATORS = ("full", "ignore", "none")  # page /c/<n>.html: VALIDATORS[n mod 3]
PERIODS = {"hourly": HOUR, "daily": DAY, "weekly": WEEK}
# Page /c/<n>.html: SLOTS[n mod 8] = (change kind, mean seconds between changes of a random
# page). 8 and 3 are coprime: every (kind, validators) pair occurs among pages 0..23.
SLOTS: tuple[tuple[str, int], ...] = (
    ("hourly", 0),
    ("daily", 0),
    ("weekly", 0),
    ("never", 0),
    ("random", 6 * HOUR),
    ("boilerplate", 0),
    ("random", 2 * DAY),
    ("never", 0),
)
_HOST = re.compile(r"live(0|[1-9][0-9]{0,8})\.com")
_PAGE = re.compile(r"/c/(0|[1-9][0-9]{0,8})\.html")


def changing_host_name(i: int) -> str:
    """Changing host i: ``live<i>.com``."""
    return f"live{i}.com"


def changing_urls(spec: WebSpec) -> list[str]:
    """Every page of the spec's changing hosts: per host its front page, then /c/0.html ..."""
    out = []
    for i in range(spec.changing_hosts):
        host = changing_host_name(i)
        out.append(f"http://{host}/")
        out += [f"http://{host}/c/{n}.html" for n in range(spec.changing_pages)]
    return out


def page_number(host: str, path: str) -> int | None:
    """n of ``/c/<n>.html``, -1 for the front page ``/``, None for any other path or host."""
    if not _HOST.fullmatch(host):
        return None
    if path == "/":
        return -1
    m = _PAGE.fullmatch(path)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Schedule:
    """How one page changes. ``period``: seconds between changes of a periodic kind (hourly,
    daily, weekly); ``mean``: mean seconds between changes of a ``random`` page (a Poisson
    process); ``phase``: periodic texts (and the hourly boilerplate) change at
    ``phase + k·period``; ``since``: when a ``never`` or ``boilerplate`` text was written."""

    host: str
    path: str
    kind: str
    validators: str
    period: int = 0
    mean: int = 0
    phase: int = 0
    since: int = 0


def schedule(url: str) -> Schedule:
    """The schedule of a changing-host page URL (ValueError for any other URL)."""
    parts = urlsplit(url)
    host, path = (parts.hostname or "").rstrip("."), parts.path or "/"
    return _schedule(host, path)


@functools.lru_cache(maxsize=1 << 16)
def _schedule(host: str, path: str) -> Schedule:
    n = page_number(host, path)
    if n is None:
        raise ValueError(f"not a page of a changing host: http://{host}{path}")
    if n < 0:  # the front page: new headlines on every hour
        return Schedule(host, path, "hourly", "full", period=HOUR)
    kind, mean = SLOTS[n % len(SLOTS)]
    rng = random.Random(f"live|{host}|{path}|schedule")
    period = PERIODS.get(kind, HOUR)  # boilerplate changes hourly
    phase = rng.randrange(period)
    since = STATIC_SINCE + rng.randrange(30 * DAY)
    validators = VALIDATORS[n % len(VALIDATORS)]
    return Schedule(host, path, kind, validators, PERIODS.get(kind, 0), mean, phase, since)


def change_kind(url: str) -> str:
    """One of :data:`KINDS`."""
    return schedule(url).kind


def validators(url: str) -> str:
    """``full`` (ETag + Last-Modified, 304 when they match), ``ignore`` (both sent, always
    200) or ``none`` (neither sent)."""
    return schedule(url).validators


def mean_interval(url: str) -> float:
    """Mean seconds between two text changes (``math.inf`` for never and boilerplate)."""
    s = schedule(url)
    return float(s.period or s.mean or math.inf)


def text_version(url: str, t: float) -> int:
    """Version of the main text at time t (0 for never and boilerplate, see the module doc)."""
    s = schedule(url)
    if s.period:
        return math.floor((t - s.phase) / s.period)
    if s.mean:
        return _process(s.host, s.path, s.mean).count(t)
    return 0


def version_start(url: str, t: float) -> float:
    """When the text version current at t began (a whole second, <= t unless the kind is never
    or boilerplate and t is before their fixed ``since``)."""
    s = schedule(url)
    if s.period:
        return float(math.floor((t - s.phase) / s.period) * s.period + s.phase)
    if s.mean:
        return float(_process(s.host, s.path, s.mean).last(t))
    return float(s.since)


def page_version(url: str, t: float) -> int:
    """Version of the bytes served at t: the text version, or the hour for boilerplate."""
    s = schedule(url)
    if s.kind == "boilerplate":
        return math.floor((t - s.phase) / HOUR)
    return text_version(url, t)


def page_version_start(url: str, t: float) -> float:
    """When the page version current at t began: the ``Last-Modified`` of the page at t."""
    s = schedule(url)
    if s.kind == "boilerplate":
        return float(page_version(url, t) * HOUR + s.phase)
    return version_start(url, t)


def etag(url: str, t: float) -> str:
    """The quoted ``ETag`` of the page at t (sent unless the page's validators are ``none``)."""
    s = schedule(url)
    token = hashlib.sha256(f"{s.host}{s.path}|{page_version(url, t)}".encode()).hexdigest()
    return f'"{token[:16]}"'


def expected_changes(url: str, t0: float, t1: float) -> int:
    """Number of text changes in (t0, t1] (0 when t1 <= t0)."""
    return max(0, text_version(url, t1) - text_version(url, t0))


class _Poisson:
    """Event times (whole seconds) of a Poisson process with mean gap ``mean``, generated
    lazily a week (a block) at a time, each block from its own seed: restarting at a block
    boundary keeps the process Poisson (memoryless), and any block is made without the others.
    ``count(t)`` is signed: events in (ORIGIN, t], or minus the events in (t, ORIGIN]."""

    def __init__(self, key: str, mean: int) -> None:
        self._key, self._mean = key, mean
        self._events: dict[int, list[int]] = {}
        origin = ORIGIN // WEEK
        self._before = {origin: 0}  # block -> signed count of events from ORIGIN to its start
        self._lo = self._hi = origin
        self._lock = threading.Lock()  # the server thread and a test may ask at once

    def count(self, t: float) -> int:
        b = math.floor(t / WEEK)
        with self._lock:
            return self._count_before(b) + bisect.bisect_right(self._block(b), t)

    def last(self, t: float) -> int:
        """The last event at or before t."""
        b = math.floor(t / WEEK)
        with self._lock:
            k = bisect.bisect_right(self._block(b), t)
            while not k:  # an empty stretch: look in earlier blocks
                b -= 1
                k = len(self._block(b))
            return self._block(b)[k - 1]

    def _block(self, b: int) -> list[int]:
        if b not in self._events:
            rng = random.Random(f"{self._key}|{b}")
            t, end, out = b * WEEK, (b + 1) * WEEK, []
            while True:
                t += max(1, math.ceil(rng.expovariate(1 / self._mean)))
                if t >= end:
                    break
                out.append(t)
            self._events[b] = out
        return self._events[b]

    def _count_before(self, b: int) -> int:
        while self._hi < b:
            self._before[self._hi + 1] = self._before[self._hi] + len(self._block(self._hi))
            self._hi += 1
        while self._lo > b:
            self._before[self._lo - 1] = self._before[self._lo] - len(self._block(self._lo - 1))
            self._lo -= 1
        return self._before[b]


@functools.lru_cache(maxsize=4096)
def _process(host: str, path: str, mean: int) -> _Poisson:
    return _Poisson(f"live|{host}|{path}|events", mean)
