"""The fetch engine's entry points: fetch a batch of URLs politely and return one row each.

In (one mapping per URL, :class:`crawllib.core.records.FetchInput`): url (normalised, absolute),
url_key, host, depth, optionally slot (the politeness key value; default: host). Out
(:mod:`crawllib.core.records`): a :class:`FetchRecord` (``record`` "fetch") for each input row, and
a :class:`RobotsRecord` ("robots") for each host whose robots.txt was requested in this call
(see :mod:`.robots_fetch`). The words below are those of :mod:`crawllib.core.vocab`.

Per slot one request at a time, starts spaced by the slot's delay (:mod:`.slots`); up to
``politeness.max_hosts_in_flight`` slots at once, the slots with most URLs first. A failure is
a row, never an exception; only errors of the engine itself (or of ``emit``) propagate.

outcome      error_kind (None unless listed)
ok           2xx. body: the bytes (decoded from gzip/deflate) if the media type is in
             fetch.content_types or absent, else None; is_truncated past fetch.max_body_bytes
not_modified 304 to a conditional GET (a revisit with the stored version's etag or
             last_modified, recrawl.conditional_get): no body, the stored version stays
redirect     3xx with Location, not followed; redirect_to = normalised absolute target, or
             None with "bad_location" (unparseable or not http(s))
http_error   4xx, 5xx (429 and 503 carry retry_after), 3xx without Location ("no_location")
robots_denied  no request: robots.txt disallows the URL
blocked      no request: "scheme" (not http/https), "resolve_only" (IP literal outside
             network.resolve), or netsafety.BLOCKED_KINDS ("private_address",
             "loopback_address", "link_local_address", "metadata_address", ...)
error        "dns", "connect", "connect_timeout", "ssl", "timeout" (fetch.total_timeout),
             "disconnected" (dropped mid-answer), "bad_response" (unparseable status line or
             headers), "decompressed_too_large" (past fetch.max_decompressed_bytes: no body),
             "decode_error" (corrupt gzip/deflate), "unsupported_encoding" (e.g. br),
             "invalid_url", "internal" (a bug; error_detail names the exception)
deferred     not attempted, fetch again later: "deadline" (fetch.deadline_seconds passed),
             "max_urls_per_host", "host_unreachable" (3 dns/connect failures in a row, or
             the slot's cool-down after them), "robots_unavailable" (robots.txt answered 5xx
             or timed out: asked again after robots.retry_seconds, doubled per failure in
             a row), "crawl_delay_too_long" (robots.txt Crawl-delay
             above politeness.max_crawl_delay, not honoured), and "retry_after", "backoff",
             "crawl_delay", "adaptive": the slot's next allowed request (its host's, or
             with key = ip its address's) lies past the slice's planned
             end (fetch.slice_grace_seconds after the time its busiest slot needs at the
             default delay), or a Retry-After is above fetch.retry_after_cap

Sitemaps (:mod:`.sitemap_fetch`): after a host's robots.txt was fetched in this call and its
rules apply, its slot fetches the sitemaps it lists, after its pages (:class:`SitemapRecord`,
``record`` "sitemap", one per document).

Soft-404 probe (``fetch.soft404_probe``): after a host's robots.txt was fetched in this call
and its rules apply (robots_state ok), its slot requests one URL no page links to,
``<scheme>://<host>[:port]`` of the host's first URL + :func:`crawllib.core.vocab.probe_path`
(``/<robots.agent>-probe-<16 random hex>.html``), if robots.txt allows it: once its pages (and
the links they led to) are done, before its sitemaps. It is a request of the slot like a page:
its turn after the slot's delay, its address gate, the pages' limits and network safety, no
redirect followed, never past the deadline nor when the slot is held (no request, no record).
It counts in the host record's slice_urls, not in slice_urls_tried or slice_pages. Its answer
is a :class:`ProbeRecord` (``record`` "probe"); a body a page would keep is extracted (always,
fetch.extract or not) for its fingerprints (text_chars, content_hash, simhash), then dropped.

Host records (:class:`HostRecord`, ``record`` "host"): one per slot at the end of the call, its
politeness state for the hosts table. ``host_rows`` (:class:`HostState`) start the slots from
the state an earlier call left; ``retried`` (a Spark task attempt after the first) treats every
slot as having just made a request.

Fetch records carry one key beyond the table's columns: error_detail (exception text or None).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import ipaddress
import logging
import math
import secrets
import socket
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
from yarl import URL

from crawllib.config import Config, parse_now
from crawllib.content.extract_worker import shared_extractor
from crawllib.core.records import (
    EngineRecord,
    FetchRecord,
    HostRecord,
    HostState,
    ProbeRecord,
    Resume,
)
from crawllib.core.urls import host_of, private_domain, registered_domain, surt
from crawllib.core.vocab import (
    HOST_DOWN_KINDS,
    PROBE_HEX,
    DelaySource,
    ErrorKind,
    HostKind,
    Outcome,
    Record,
    RobotsStatus,
    WaitReason,
    probe_path,
)
from crawllib.engine.budget import ByteBudget, Share
from crawllib.engine.client import (
    Fetched,
    Limits,
    conditional_headers,
    fetch_url,
    trace_config,
)
from crawllib.engine.dns import Resolver
from crawllib.engine.follow import Follower, Owner
from crawllib.engine.resume import continue_slot, replay
from crawllib.engine.robots_fetch import (
    RobotsState,
    classify,
    classify_off_loop,
    fetch_robots,
    fresh_rows,
)
from crawllib.engine.servers import Server
from crawllib.engine.sitemap_fetch import fetch_sitemap, sitemap_urls
from crawllib.engine.slots import LoopClock, RowQueue, Slot
from crawllib.policy.robots import RobotsRules

log = logging.getLogger(__name__)

EXTRACTIONS_IN_FLIGHT = 8  # fetched pages waiting for each extraction thread, at most
HOST_DOWN_AFTER = 3  # consecutive dns/connect failures after which a host's rest is deferred
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"

Emit = Callable[[EngineRecord], "Awaitable[None] | None"]


async def fetch_async(
    rows: Iterable[Mapping[str, Any]],
    cfg: Config,
    robots_rows: Iterable[Mapping[str, Any]] = (),
    emit: Emit | None = None,
    now: Callable[[], float] = time.time,
    follow_rows: Iterable[Mapping[str, Any]] = (),
    host_rows: Iterable[HostState] = (),
    retried: bool = False,
    resume: Resume | None = None,
    checkpoint_seconds: float = 0.0,
    on_request: Callable[[int], object] | None = None,
    deadline_seconds: float | None = None,
    owner: Owner | None = None,
) -> None:
    """Fetch every row and pass each result record to ``emit`` (awaited if it returns an
    awaitable: that is the back-pressure). ``now`` gives epoch seconds (fetched_at, robots
    freshness); delays and the deadline use the event loop's clock. ``follow_rows``: per slot,
    its room under the per-generation cap and the url_keys known for it
    (:mod:`crawllib.engine.follow`); a slot without one follows nothing. ``host_rows``: the
    slots' stored politeness; ``retried``: see the module's text. ``resume``: what earlier
    attempts of this task did (:mod:`crawllib.engine.resume`), not done again;
    ``checkpoint_seconds``: emit a CheckpointRecord this often (0: never); ``on_request``:
    called with a page's url_key just before its request is sent. ``deadline_seconds``: the
    time this call may fetch for (the rest of the generation's fetch.deadline_seconds, which
    it is when None). ``owner``: which new slots the call may take, and how many URLs it may
    fetch from them (:class:`crawllib.engine.follow.Owner`; None: none)."""
    if emit is None:
        raise TypeError("fetch_async needs an emit callable")
    run = _Run(
        cfg, robots_rows, emit, now, follow_rows, host_rows, retried, deadline_seconds, owner
    )
    run.resume, run.checkpoint_seconds, run.on_request = resume, checkpoint_seconds, on_request
    await run.run(rows)


class _Run:
    """The state of one fetch call: slots, robots per host, one session."""

    def __init__(
        self,
        cfg: Config,
        robots_rows: Iterable[Any],
        emit: Emit,
        now: Callable[[], float],
        follow_rows: Iterable[Any] = (),
        host_rows: Iterable[HostState] = (),
        retried: bool = False,
        deadline_seconds: float | None = None,
        owner: Owner | None = None,
    ):
        self.cfg = cfg
        self.host_states = {row["slot"]: row for row in host_rows}
        self.retried = retried
        self.now = now
        self._emit = emit
        self.loop = asyncio.get_running_loop()
        self.clock = LoopClock()  # the slots' clock, which the deadline is compared with
        if deadline_seconds is None:
            deadline_seconds = cfg.fetch.deadline_seconds
        self.deadline = self.clock.time() + deadline_seconds
        self.cached_robots = fresh_rows(robots_rows, now())
        self.robots: dict[str, asyncio.Future[RobotsState | None]] = {}
        self.slice_end = self.deadline  # set once the slots are known (`_slice_end`)
        self.per_host: Counter[str] = Counter()
        self.limits = Limits(
            max_raw=cfg.fetch.max_body_bytes,
            max_decoded=cfg.fetch.max_decompressed_bytes,
            keep_types=frozenset(t.lower() for t in cfg.fetch.content_types),
        )
        self.resolver = Resolver(cfg.network, timeout=cfg.fetch.connect_timeout)
        self.address_gates: dict[str, asyncio.Semaphore] = {}  # server address -> its room
        self.session: aiohttp.ClientSession | None = None
        # Extraction runs in threads beside the loop (extract.processes, as the stage resolved
        # it: the task's cores), while the slots wait on politeness, each page in a child
        # process of this one killed past extract.max_seconds; a bounded number of fetched
        # pages (and sitemaps) wait for them. The bodies the task holds at once, read
        # or being read, stay within fetch.max_bytes_in_flight (crawllib.engine.budget).
        self.extractor: ThreadPoolExecutor | None = None
        self.lanes = max(1, cfg.extract.processes)
        self.extraction = shared_extractor(cfg, self.lanes)
        self.extraction_room = asyncio.Semaphore(EXTRACTIONS_IN_FLIGHT * self.lanes)
        self.budget = ByteBudget(cfg.fetch.max_bytes_in_flight)
        self.group: asyncio.TaskGroup | None = None
        follow = cfg.fetch.follow and cfg.fetch.extract
        self.follower = Follower(cfg, follow_rows, owner) if follow else None
        # every slot of the call, the new ones a followed link brings included; the slots
        # waiting for a worker, and the keys of those queued or being served
        self.slots: dict[str, Slot] = {}
        self.queue: deque[Slot] | None = None
        self.active: set[str] = set()
        self.workers = 0  # workers running
        # slot -> sitemaps to fetch after its pages (host, URL, the host's rules); host -> how
        # many it has been given (sitemaps.max_documents)
        self.sitemaps: dict[str, deque[tuple[str, str, RobotsRules]]] = {}
        self.sitemaps_given: Counter[str] = Counter()
        # slot -> soft-404 probes to make after its pages: (host, probe URL)
        self.probes: dict[str, list[tuple[str, str]]] = {}
        # going on from earlier attempts (crawllib.engine.resume): what they did, not done again
        self.resume: Resume | None = None
        self.sitemaps_done: set[str] = set()
        self.probed: set[str] = set()
        self.replayed_rules: dict[str, RobotsRules] = {}
        self.first_url: dict[str, str] = {}  # host -> its first URL of the call
        self.checkpoint_seconds = 0.0
        self.on_request: Callable[[int], object] | None = None

    async def emit(self, record: EngineRecord) -> None:
        result = self._emit(record)
        if inspect.isawaitable(result):
            await result

    async def run(self, rows: Iterable[Mapping[str, Any]]) -> None:
        slots = self.slots = self._slots(rows)
        if not slots:
            return
        if self.resume is not None:
            replay(self, slots, self.resume)
        self.slice_end = self._slice_end(slots.values())
        fetch = self.cfg.fetch
        connector = aiohttp.TCPConnector(
            resolver=self.resolver,
            limit=2 * self.cfg.politeness.max_hosts_in_flight,
            limit_per_host=0,
            use_dns_cache=False,  # the resolver caches (and checks) itself
            # a slot's connection must outlive its delay; idle ones of finished hosts go soon
            keepalive_timeout=min(max(5.0, 2 * self.cfg.politeness.default_delay), 60.0),
        )
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=fetch.total_timeout, sock_connect=fetch.connect_timeout
            ),
            headers={
                "User-Agent": fetch.user_agent,
                "Accept": ACCEPT,
                "Accept-Encoding": "gzip, deflate",
            },
            auto_decompress=False,
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            trace_configs=[trace_config()],
        )
        # aiohttp resends an idempotent request at once when the server drops the connection
        # (RFC 9112 9.3.1.1): a second request with no delay. A drop is a failed attempt here,
        # retried in a later generation. No public switch exists (aiohttp pinned in pyproject).
        session._retry_connection = False
        try:
            async with session:
                self.session = session
                queue = self.queue = deque(sorted(slots.values(), key=lambda s: -_queued_rows(s)))
                self.active = set(slots)
                workers = min(len(queue), self.cfg.politeness.max_hosts_in_flight)
                if self.cfg.fetch.extract:
                    self.extractor = ThreadPoolExecutor(
                        self.lanes, thread_name_prefix="crawllib-extract"
                    )
                if self.cfg.fetch.extract or self.cfg.fetch.soft404_probe:
                    # its child's start costs a second of CPU: before the first request
                    await self.loop.run_in_executor(self.extractor, self.extraction.start)
                ticker = None
                if self.checkpoint_seconds > 0:
                    ticker = asyncio.create_task(self._checkpoints(slots))
                try:
                    async with asyncio.TaskGroup() as group:
                        self.group = group
                        for i in range(workers):
                            self.workers += 1
                            group.create_task(self._worker(queue, i / workers))
                except BaseExceptionGroup as group_error:  # an engine or emit failure
                    raise group_error.exceptions[0] from None
                finally:
                    if ticker is not None:
                        ticker.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await ticker
                log.info(
                    "fetch task: bodies held at most %d bytes at once, of %d "
                    "(fetch.max_bytes_in_flight)",
                    self.budget.peak,
                    self.budget.limit,
                )
                for slot in slots.values():
                    for record in self._host_records(slot):
                        await self.emit(record)
        finally:
            if self.extractor is not None:
                self.extractor.shutdown(wait=True, cancel_futures=True)
            await self.resolver.close()

    async def _checkpoints(self, slots: Mapping[str, Slot]) -> None:
        """Every checkpoint_seconds, every slot's state as it is (a CheckpointRecord)."""
        while True:
            await asyncio.sleep(self.checkpoint_seconds)
            hosts = [self._host_record(slot) for slot in slots.values()]
            await self.emit({"record": Record.CHECKPOINT, "hosts": hosts})

    def _time_room(self, slot: Slot) -> int | None:
        """How many more URLs ``slot`` may take in this call under generate.fetch_seconds
        (None: no time budget): the quota plan gives it (transforms.plan.cap_by_time), at the
        delay it has now (a Crawl-delay learnt in this call included), less the URLs it has
        tried and still holds."""
        seconds = self.cfg.generate.fetch_seconds
        if seconds <= 0 or slot.delay <= 0:
            return None
        quota = 1 + math.floor(seconds / slot.delay)
        return max(0, quota - slot.attempted - len(slot.rows))

    def _wall_now(self) -> float:
        """The epoch by which a stored hold is over: the real clock's, or crawl.now when
        later (a later run's clock; config.hold_now)."""
        fixed = parse_now(self.cfg.crawl.now)
        return self.now() if fixed is None else max(self.now(), fixed)

    def _slots(self, rows: Iterable[Mapping[str, Any]]) -> dict[str, Slot]:
        slots: dict[str, Slot] = {}
        wall_now = self._wall_now()
        politeness = self.cfg.politeness
        for row in rows:
            row = row.asDict() if hasattr(row, "asDict") else row
            host = row.get("host") or host_of(row.get("url") or "")
            key = row.get("slot") or host
            slot = slots.get(key)
            if slot is None:
                # key = ip: a slot per address, a slot per host inside it (a host plan could
                # not resolve is its own slot: it has no address to share)
                by_address = politeness.key == "ip" and _is_address(key)
                kind = Server if by_address else Slot
                slot = slots[key] = kind.from_config(key, politeness, clock=self.clock)
                if politeness.key == "domain":
                    slot.kind = HostKind.DOMAIN
                self._restore(slot, wall_now)
            self.first_url.setdefault(host, row.get("url") or "")
            if isinstance(slot, Server):
                fresh = host not in slot.members
                member = slot.member(host, politeness)
                if fresh:
                    self._restore(member, wall_now)
                member.hosts.add(host)
                member.rows.append(row)
            else:
                slot.hosts.add(host)
                slot.rows.append(row)
            if self.follower is not None and self.follower.host_slots is not None:
                self.follower.host_slots[host] = key
        return slots

    def _restore(self, slot: Slot, wall_now: float) -> None:
        """Start ``slot`` from its journal's checkpoint (a task run again after its executor
        was lost) or its hosts row, if it has one (a retried task's: as if it had just made a
        request)."""
        checkpoint = self.resume.hosts.get(slot.key) if self.resume is not None else None
        state = checkpoint or self.host_states.get(slot.key)
        if state is not None or self.retried:
            slot.restore(state or {"slot": slot.key}, wall_now, self.retried)
        if checkpoint is not None:  # a task run again: its journal's state of the slot
            continue_slot(slot, checkpoint)

    def _slice_end(self, slots: Iterable[Slot]) -> float:
        """The slice's planned end on the slots' clock: the time its busiest slot needs at
        the default delay (followed links included, up to the slot's room), plus
        fetch.slice_grace_seconds; never past the deadline. A slot held back past it by a
        Retry-After, backoff or Crawl-delay defers its remaining URLs."""
        p = self.cfg.politeness
        room = self.follower.room if self.follower is not None else {}

        def seconds(slot: Slot) -> float:
            extra = room.get(slot.key, 0)
            if not isinstance(slot, Server):
                return (len(slot.rows) + extra) * p.default_delay
            # an address: its busiest host at the host delay, all of them at the address's
            busiest = max(len(m.rows) for m in slot.members.values()) + extra
            least = p.address_delay or p.min_address_delay
            return max(busiest * p.default_delay, (_queued_rows(slot) + extra) * least)

        planned = max(seconds(s) for s in slots) * (1.0 + p.jitter)
        return min(self.deadline, self.clock.time() + planned + self.cfg.fetch.slice_grace_seconds)

    async def _worker(self, queue: deque[Slot], offset: float = 0.0) -> None:
        try:
            # Spread the first requests over one delay: slots started together would
            # otherwise fire together on every later turn too, in bursts that make every
            # answer late.
            if offset and self.cfg.politeness.default_delay:
                await asyncio.sleep(offset * min(self.cfg.politeness.default_delay, 1.0))
            while queue:
                slot = queue.popleft()
                await self._serve(slot)
                self.active.discard(slot.key)
                if _queued_rows(slot):  # another slot's page brought URLs since
                    self._wake(slot)
        finally:
            self.workers -= 1

    def _wake(self, slot: Slot) -> None:
        """Queue ``slot`` for a worker unless it is queued or served already (a slot whose
        worker finished gets more URLs from another slot's page, a new slot its first), and
        start a worker for it if fewer than politeness.max_hosts_in_flight run. Before the
        workers start (a journal's replay) the slot is queued with the others."""
        if self.queue is None or slot.key in self.active:
            return
        self.active.add(slot.key)
        self.queue.append(slot)
        if self.group is not None and self.workers < self.cfg.politeness.max_hosts_in_flight:
            self.workers += 1
            self.group.create_task(self._worker(self.queue))

    async def _serve(self, slot: Slot) -> None:
        """Fetch the URLs of ``slot`` (an address: of its hosts) until none is left, then its
        soft-404 probes and sitemaps."""
        members = _members(slot)
        while True:
            member = self._next(members)
            if member is None:
                # With following, a slot is done only once the extractions of its pages
                # are: they may bring more of its URLs. Breadth first: a URL waits while a
                # shallower page's extraction may bring links above it.
                if self.follower is not None and any(m.extracting for m in members):
                    slot.woken.clear()
                    await slot.woken.wait()
                    continue
                break
            if await self._robots_first(member):
                continue  # a request made: another host may be free sooner
            await self._fetch_next(member)
        for member in members:
            await self._probe(member)
            await self._fetch_sitemaps(member)

    def _next(self, members: list[Slot]) -> Slot | None:
        """The host slot whose next URL to take: one that is held (its URLs are deferred at
        once, no request), else the one free soonest (the least recently asked on a tie).
        None when no host has a URL it may take now (none left, or each waits for a
        shallower page's extraction)."""
        best: Slot | None = None
        best_at = (math.inf, math.inf)
        for member in members:
            if not member.rows or (self.follower is not None and member.shallower_pending()):
                continue
            if len(members) > 1 and self._held(member) is not None:
                return member
            at = (member.own_start(), member.last_start or -math.inf)
            if at < best_at:
                best, best_at = member, at
        return best

    async def _robots_first(self, slot: Slot) -> bool:
        """On an address (politeness.key = ip), a host's robots.txt is a turn of its own:
        fetched here when its next URL needs it and may be requested, so that the page waits
        for its host's next turn while other hosts take the address's. Whether a robots.txt
        request was made."""
        if slot.server is None:
            return False
        row = slot.rows.peek()
        url = row.get("url") or ""
        host = row.get("host") or host_of(url)
        if host in self.robots or host in self.cached_robots:
            return False
        if self.clock.time() >= self.deadline or self._held(slot) is not None:
            return False
        if self._precheck(url) is not None:
            return False
        await self._robots_for(slot, host, url)
        return True

    async def _fetch_next(self, slot: Slot) -> None:
        """Fetch the next URL of ``slot`` and pass its record on (through the extraction
        thread when it has a body to extract)."""
        row = slot.rows.popleft()
        share = await self.budget.share()
        slot.busy = True
        try:
            record = await self._one(slot, row, share)
        except Exception as exc:  # a bug for one URL must not stop the others
            log.exception("fetch of %s failed inside the engine", row.get("url"))
            record = self._row(row, Outcome.ERROR, error_kind=ErrorKind.INTERNAL)
            record["error_detail"] = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            slot.busy = False
        if record["outcome"] != Outcome.DEFERRED and not row.get("attempts"):
            slot.tried += 1  # what sets the URL's last_gen: plan's budgets count it
        if self.extractor is not None and record["body"] is not None:
            await self.extraction_room.acquire()
            assert self.group is not None
            slot.extraction_started(record["depth"])
            self.group.create_task(self._extract_and_emit(slot, record, share))
        else:
            await self.emit(record)
            share.release()

    def _queue_sitemaps(
        self, slot: Slot, host: str, url: str, listed: Iterable[str], rules: RobotsRules
    ) -> None:
        """After a fresh robots.txt of ``host`` whose rules apply: its sitemaps, to fetch on
        the slot once its pages are done (crawllib.engine.sitemap_fetch)."""
        queue = self.sitemaps.setdefault(slot.key, deque())
        listed_urls = sitemap_urls(
            url, listed, slot.hosts | {host}, limit=self.cfg.sitemaps.max_documents
        )
        self._queue_documents(queue, host, listed_urls, rules)

    def _queue_documents(
        self,
        queue: deque[tuple[str, str, RobotsRules]],
        host: str,
        urls: Iterable[str],
        rules: RobotsRules,
    ) -> None:
        """Queue sitemap documents of ``host``, up to sitemaps.max_documents given (those an
        earlier attempt fetched count, but are not fetched again)."""
        for url in urls:
            if self.sitemaps_given[host] < self.cfg.sitemaps.max_documents:
                self.sitemaps_given[host] += 1
                if url not in self.sitemaps_done:
                    queue.append((host, url, rules))

    def robots_replayed(self, slot: Slot, row: Mapping[str, Any], url: str | None) -> None:
        """A robots.txt an earlier attempt of the task fetched (crawllib.engine.resume): the
        host's cached one from now on, and what fetching it queued (sitemaps, the probe)."""
        host = row["host"]
        if host not in fresh_rows([row], self.now()):
            return  # expired already: fetched again, as it would be
        self.cached_robots[host] = row
        robots = self.cfg.robots
        state = classify(row, robots.agent, robots.max_bytes)
        slot.set_crawl_delay(state.crawl_delay)
        if not url or state.deny_kind or state.down_kind or state.blocked_kind:
            return
        self.replayed_rules[host] = state.rules
        if self.cfg.sitemaps.enabled:
            self._queue_sitemaps(slot, host, url, row.get("sitemaps") or (), state.rules)
        if self.cfg.fetch.soft404_probe:
            self._queue_probe(slot, host, url, state.rules)

    def queue_sitemap_children(self, slot: Slot, record: Mapping[str, Any]) -> None:
        """The documents a sitemap index an earlier attempt fetched lists, as its fetch
        queued them."""
        host = record["host"]
        rules = self.replayed_rules.get(host)
        if rules is not None:
            queue = self.sitemaps.setdefault(slot.key, deque())
            children = [c for c in record["children"] if host_of(c) in slot.hosts]
            self._queue_documents(queue, host, children, rules)

    async def _fetch_sitemaps(self, slot: Slot) -> None:
        queue = self.sitemaps.pop(slot.key, None)
        assert self.session is not None
        while queue:
            host, url, rules = queue.popleft()
            if self._held(slot) is not None:
                return  # the slot may not ask more in this slice: the next robots.txt will
            share = await self.budget.share()
            try:
                record = await fetch_sitemap(
                    self.session,
                    url,
                    host,
                    self.cfg,
                    rules,
                    lambda: slot.wait_turn(self.deadline),
                    lambda got: self._after(slot, got),
                    functools.partial(self._address_gate, host),
                    slot.sent,
                    self.now,
                    self.extractor,
                    share=share,
                    room=self.extraction_room,
                )
            finally:
                share.release()  # the document is read: its entries are small
            if record is None:
                continue
            children = [c for c in record["children"] if host_of(c) in slot.hosts]
            self._queue_documents(queue, host, children, rules)
            await self.emit(record)

    def _queue_probe(self, slot: Slot, host: str, url: str, rules: RobotsRules) -> None:
        """After a fresh robots.txt of ``host`` whose rules apply: its soft-404 probe, on the
        origin of ``url`` (the host's first URL), to make once the slot's pages are done; none
        if robots.txt disallows its path."""
        if host in self.probed:  # by an earlier attempt of the task
            return
        path = probe_path(self.cfg.robots.agent, secrets.token_hex(PROBE_HEX // 2))
        probe = str(URL(url, encoded=True).origin().with_path(path))
        if rules.allowed(probe):
            self.probes.setdefault(slot.key, []).append((host, probe))

    async def _probe(self, slot: Slot) -> None:
        for host, url in self.probes.pop(slot.key, ()):
            try:
                record = await self._probe_one(slot, host, url)
            except Exception:  # a bug in an optional request must not stop the others
                log.exception("soft-404 probe %s failed inside the engine", url)
                continue
            if record is not None:
                await self.emit(record)

    async def _probe_one(self, slot: Slot, host: str, url: str) -> ProbeRecord | None:
        """Request one probe URL as a page is requested; None when no request was made (the
        deadline, a held slot, network safety)."""
        if self.clock.time() >= self.deadline or self._held(slot) is not None:
            return None
        if self._precheck(url) is not None or not await slot.wait_turn(self.deadline):
            return None
        assert self.session is not None
        share = await self.budget.share()
        try:
            return await self._probe_request(slot, host, url, share)
        finally:
            share.release()  # its body is dropped once its fingerprints are taken

    async def _probe_request(
        self, slot: Slot, host: str, url: str, share: Share
    ) -> ProbeRecord | None:
        assert self.session is not None
        async with self._address_gate(host):
            fetched_at = self.now()
            got = await fetch_url(self.session, url, self.limits, slot.sent, share=share)
        self._after(slot, got)
        if got.outcome == Outcome.BLOCKED:  # the resolved address is refused: nothing sent
            return None
        slot.attempted += 1
        if got.ip:
            slot.addresses.add(got.ip)
        record: ProbeRecord = {
            "record": Record.PROBE,
            "host": host,
            "url": url,
            "fetched_at": fetched_at,
            "http_status": got.http_status,
            "error_kind": got.error_kind,
            "redirect_to": got.redirect_to,
            "content_type": got.content_type,
            "text_chars": None,
            "content_hash": None,
            "simhash": None,
        }
        if got.outcome == Outcome.OK and got.body is not None:
            async with self.extraction_room:
                extracted = await self.loop.run_in_executor(
                    self.extractor,
                    functools.partial(self.extraction.extract, headers=got.headers),
                    got.body,
                    url,
                    got.charset,
                )
            record["text_chars"] = extracted["text_chars"]
            record["content_hash"] = extracted["content_hash"]
            record["simhash"] = extracted["simhash"]
        return record

    async def _extract_and_emit(self, slot: Slot, record: FetchRecord, share: Share) -> None:
        """Extract a fetched page in an extraction thread (the slot goes on meanwhile), queue
        the links its slot follows, then emit its record with the extraction; its body's
        share of the budget is given back once emitted."""
        try:
            try:
                record["extracted"] = await self.loop.run_in_executor(
                    self.extractor,
                    functools.partial(self.extraction.extract, headers=record["headers"]),
                    record["body"],
                    record["url"] or "",
                    record["charset"],
                )
                if self.follower is not None:
                    self.queue_links(slot, record)
            finally:
                self.extraction_room.release()
                slot.extraction_ended(record["depth"])
            await self.emit(record)
        finally:
            share.release()

    def queue_links(self, slot: Slot, page: FetchRecord) -> None:
        """Queue the links of ``page`` (fetched by ``slot``) that the task follows, each on
        its slot: ``slot``, another slot of the task, or a new slot the task owns, made here
        (crawllib.engine.follow); on an address, each on the slot of its host."""
        assert self.follower is not None
        server = slot.server
        if server is not None:
            for row in self.follower.links(server.key, page, self._time_room(slot), server):
                server.member(row["host"], self.cfg.politeness).rows.append(row)
            return
        elsewhere = self._room_elsewhere if self.cfg.fetch.follow_other_hosts else None
        rows = self.follower.links(slot.key, page, self._time_room(slot), slot.rows, elsewhere)
        for row in rows:
            target = self.slots.get(row["slot"])
            if target is None:
                target = self._new_slot(row["slot"])
            target.hosts.add(row["host"])
            self.first_url.setdefault(row["host"], row["url"])
            target.rows.append(row)
            if target is not slot:
                self._wake(target)
                if len(target.rows) == 1:  # its first URL: the slice may last as it needs
                    self.slice_end = max(self.slice_end, self._slice_end([target]))

    def _room_elsewhere(self, key: str) -> tuple[int | None, RowQueue | None]:
        """The time room and the queue of slot ``key`` for a link from another slot's page:
        a new slot's, as one with nothing done yet (none past the deadline: no slot is made
        then)."""
        slot = self.slots.get(key)
        if slot is not None:
            return self._time_room(slot), slot.rows
        if self.clock.time() >= self.deadline:
            return 0, None
        seconds, delay = self.cfg.generate.fetch_seconds, self.cfg.politeness.default_delay
        return (None if seconds <= 0 or delay <= 0 else 1 + math.floor(seconds / delay)), None

    def _new_slot(self, key: str) -> Slot:
        """A slot for a new host (or domain) a followed link leads to, as `_slots` makes one;
        its hosts row, robots.txt and URLs come in this call."""
        politeness = self.cfg.politeness
        slot = self.slots[key] = Slot.from_config(key, politeness, clock=self.clock)
        if politeness.key == "domain":
            slot.kind = HostKind.DOMAIN
        self._restore(slot, self._wall_now())
        return slot

    async def _one(self, slot: Slot, row: Mapping[str, Any], share: Share) -> FetchRecord:
        url = row.get("url") or ""
        host = row.get("host") or host_of(url)
        if self.clock.time() >= self.deadline:
            return self._row(row, Outcome.DEFERRED, error_kind=ErrorKind.DEADLINE)
        self.per_host[host] += 1
        if self.per_host[host] > self.cfg.fetch.max_urls_per_host:
            return self._row(row, Outcome.DEFERRED, error_kind=ErrorKind.MAX_URLS_PER_HOST)
        held = self._held(slot)
        if held is not None:
            return self._row(row, Outcome.DEFERRED, error_kind=held)
        refused = self._precheck(url)
        if refused is not None:
            return self._row(row, refused.outcome, error_kind=refused.error_kind)
        state = await self._robots_for(slot, host, url)
        if state is None:
            return self._row(row, Outcome.DEFERRED, error_kind=ErrorKind.DEADLINE)
        if state.blocked_kind:
            return self._row(row, Outcome.BLOCKED, error_kind=state.blocked_kind)
        if state.down_kind:
            return self._row(row, Outcome.ERROR, error_kind=state.down_kind)
        if state.deny_kind:  # robots.txt failed: wait for it, no attempt spent
            return self._row(row, Outcome.DEFERRED, error_kind=state.deny_kind)
        if not state.rules.allowed(url):
            return self._row(row, Outcome.ROBOTS_DENIED, error_kind=state.deny_kind)
        held = self._held(slot)
        if held is not None:
            return self._row(row, Outcome.DEFERRED, error_kind=held)
        if not await slot.wait_turn(self.deadline):
            return self._row(row, Outcome.DEFERRED, error_kind=ErrorKind.DEADLINE)
        key = row.get("url_key")
        async with self._address_gate(host):
            if self.on_request is not None and key is not None:
                self.on_request(key)
            fetched_at = self.now()
            got = await fetch_url(
                self.session,  # type: ignore[arg-type]
                url,
                self.limits,
                slot.sent,
                self.validators(row),
                share,
            )
        self._after(slot, got)
        slot.attempted += 1
        if got.ip:
            slot.addresses.add(got.ip)
        if got.outcome == Outcome.OK and got.body is not None:
            slot.pages += 1
            slot.bytes += got.body_bytes
        record = self._row(row, got.outcome, got, fetched_at)
        if self.resume is not None and got.outcome != Outcome.BLOCKED:
            record["refetched"] = key in self.resume.requested
        return record

    def validators(self, row: Mapping[str, Any]) -> dict[str, str]:
        """The conditional GET headers of a revisit (recrawl.conditional_get): the stored
        version's validators, as plan put them in the fetchlist."""
        if not self.cfg.recrawl.conditional_get:
            return {}
        return conditional_headers(row.get("etag"), row.get("last_modified"))

    def _held(self, slot: Slot) -> str | None:
        """The error_kind of a deferral if the slot's next request may not start in this
        slice: its Crawl-delay is above the maximum (and not honoured), it cools down after failing DNS/connects, or a Retry-After, backoff or
        Crawl-delay puts it past the slice's planned end (a Retry-After above
        fetch.retry_after_cap defers at once)."""
        if slot.refused:
            return ErrorKind.CRAWL_DELAY_TOO_LONG
        cause = slot.wait_cause()
        if cause is None:
            return None
        start = slot.earliest_start()
        if cause == WaitReason.DOWN:
            return ErrorKind.HOST_UNREACHABLE
        if cause == WaitReason.ROBOTS:
            return ErrorKind.ROBOTS_UNAVAILABLE
        late = start > self.slice_end
        if cause == WaitReason.RETRY_AFTER:
            if late or start - self.clock.time() > self.cfg.fetch.retry_after_cap:
                return ErrorKind.RETRY_AFTER
            return None
        if late:
            return _LATE.get(cause, ErrorKind.CRAWL_DELAY)
        return None

    @contextlib.asynccontextmanager
    async def _address_gate(self, host: str) -> AsyncIterator[None]:
        """Hold one of the politeness.max_hosts_per_address requests in flight to the server
        address of ``host`` (resolved as the connector will: cached, overrides first) while
        the request runs. A name that does not resolve passes: the request records why."""
        cap = self.cfg.politeness.max_hosts_per_address
        address = None
        if cap:
            try:
                address = (await self.resolver.resolve(host, family=socket.AF_UNSPEC))[0]["host"]
            except OSError:
                pass
        if address is None:
            yield
            return
        gate = self.address_gates.get(address)
        if gate is None:
            gate = self.address_gates[address] = asyncio.Semaphore(cap)
        async with gate:
            yield

    def _precheck(self, url: str) -> Fetched | None:
        """Refuse before any request: bad URL, scheme, unsafe literal host, resolve_only."""
        refused = self.resolver.refuse(url)
        return Fetched(refused[0], error_kind=refused[1]) if refused else None

    async def _robots_for(self, slot: Slot, host: str, url: str) -> RobotsState | None:
        future = self.robots.get(host)
        if future is not None:
            return await asyncio.shield(future)
        future = self.robots[host] = self.loop.create_future()
        try:
            state = await self._load_robots(slot, host, url)
        except BaseException as exc:
            del self.robots[host]
            future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            future.exception()
            raise
        future.set_result(state)
        return state

    async def _load_robots(self, slot: Slot, host: str, url: str) -> RobotsState | None:
        robots = self.cfg.robots
        cached = self.cached_robots.get(host)
        if cached is not None:
            state = await classify_off_loop(cached, robots.agent, robots.max_bytes)
            slot.set_crawl_delay(state.crawl_delay)
            return state

        async def before_request(hop_url: str) -> Fetched | None:
            refused = self._precheck(hop_url)
            if refused is not None:
                return Fetched(Outcome.BLOCKED, error_kind=refused.error_kind)
            if not await slot.wait_turn(self.deadline):
                return Fetched(Outcome.DEFERRED, error_kind=ErrorKind.DEADLINE)
            return None

        assert self.session is not None
        result = await fetch_robots(
            self.session,
            url,
            host,
            self.cfg,
            before_request,
            lambda got: self._after(slot, got),
            slot.sent,
            self.now,
            gate=lambda: self._address_gate(host),
        )
        if result is None:
            return None
        state, record = result
        if record is not None:
            # A host that is down spends its URLs' attempts (a dead domain's URLs must end
            # dead) and cools down by its own rule; a failing robots.txt holds the slot.
            failed = bool(state.deny_kind or state.down_kind)
            retry = slot.record_robots(
                failed, self.cfg.robots.retry_seconds, hold=state.deny_kind is not None
            )
            if retry is not None:  # asked again when the slot may ask, not an hour later
                record["expires_at"] = min(record["expires_at"], record["fetched_at"] + retry)
            await self.emit(record)
        slot.set_crawl_delay(state.crawl_delay)
        fresh = not (state.deny_kind or state.down_kind or state.blocked_kind)
        if record is not None and fresh and self.cfg.sitemaps.enabled:
            self._queue_sitemaps(slot, host, url, record["sitemaps"], state.rules)
        if record is not None and fresh and self.cfg.fetch.soft404_probe:
            self._queue_probe(slot, host, url, state.rules)
        return state

    def _after(self, slot: Slot, got: Fetched) -> None:
        """What an answer (or its absence) teaches the slot: backoff, Retry-After in full, a
        run of DNS/connect failures, its response time; the next gap counts from now."""
        if got.error_kind in HOST_DOWN_KINDS:
            slot.record_down(HOST_DOWN_AFTER, got.error_kind)
        slot.record_status(got.http_status)
        if got.retry_after is not None:
            slot.push_back(got.retry_after)
        if got.http_status is not None or got.error_kind == ErrorKind.TIMEOUT:
            # since the request left (slot.sent): what the server took to answer
            slot.record_response(self.clock.time() - (slot.last_start or self.clock.time()))
        if got.ip:
            slot.address = got.ip
        slot.ended()

    def _host_records(self, slot: Slot) -> list[HostRecord]:
        """The hosts rows of a slot at the end of the call: one; for an address, one per host
        on it and one for the address (its requests, pages and bytes the sums of its hosts';
        no URL counts as tried there: the hosts' rows hold the budgets). A host named by the
        address itself is one row with it, the stricter of the two states."""
        if not isinstance(slot, Server):
            return [self._host_record(slot)]
        members = list(slot.members.values())
        address: HostRecord = {
            **self._host_record(slot),
            "addresses": sorted({slot.key}.union(*(m.addresses for m in members))),
            "domain": None,
            "slice_urls": sum(m.attempted for m in members),
            "slice_pages": sum(m.pages for m in members),
            "slice_bytes": sum(m.bytes for m in members),
            "slice_urls_tried": 0,
        }
        records = [self._host_record(m) for m in members if m.key != slot.key]
        same = slot.members.get(slot.key)
        return [*records, address if same is None else _stricter(address, self._host_record(same))]

    def _host_record(self, slot: Slot) -> HostRecord:
        robots = [self.robots[h] for h in slot.hosts if h in self.robots]
        states = [f.result() for f in robots if f.done() and not f.exception()]
        before = self.resume.hosts.get(slot.key) if self.resume is not None else None
        return {
            "record": Record.HOST,
            **slot.state(self.now()),  # type: ignore[typeddict-item]
            "robots_state": (
                _robots_status(states[-1])
                if states
                else (before["robots_state"] if before is not None else None)
            ),
            "addresses": sorted(slot.addresses),
            "domain": _shared_domain(slot.hosts),
            "slice_urls": slot.attempted,
            "slice_pages": slot.pages,
            "slice_bytes": slot.bytes,
            "slice_urls_tried": slot.tried,
        }

    def _row(
        self,
        row: Mapping[str, Any],
        outcome: str,
        got: Fetched | None = None,
        fetched_at: float | None = None,
        error_kind: str | None = None,
    ) -> FetchRecord:
        got = got or Fetched(outcome, error_kind=error_kind)
        url = row.get("url")
        host = row.get("host") or host_of(url or "")
        return {
            "record": Record.FETCH,
            "url_key": row.get("url_key"),
            "url": url,
            "host": host,
            "domain": registered_domain(host) if host else None,
            "surt": surt(url) if url else None,
            "depth": row.get("depth"),
            "outcome": outcome,
            "fetched_at": self.now() if fetched_at is None else fetched_at,
            "http_status": got.http_status,
            "error_kind": got.error_kind,
            "error_detail": got.error_detail,
            "redirect_to": got.redirect_to,
            "content_type": got.content_type,
            "charset": got.charset,
            "headers": got.headers,
            "body": got.body if outcome == Outcome.OK else None,
            "body_bytes": got.body_bytes,
            "is_truncated": got.is_truncated,
            "fetch_ms": got.fetch_ms,
            "ip": got.ip,
            "retry_after": got.retry_after,
            "extracted": None,
            "source_url": row.get("source_url"),
            "etag": got.etag,
            "last_modified": got.last_modified,
            "mime_detected": got.mime_detected,
            "private_domain": private_domain(host) if host else None,
            "refetched": False,
        }


# The error_kind of URLs deferred because a wait past the slice's planned end has this cause.
_LATE = {
    DelaySource.BACKOFF: ErrorKind.BACKOFF,
    DelaySource.CRAWL_DELAY: ErrorKind.CRAWL_DELAY,
    DelaySource.ADAPTIVE: ErrorKind.ADAPTIVE,
}


def _members(slot: Slot) -> list[Slot]:
    """The host slots a worker serves for ``slot``: an address's hosts, or the slot itself."""
    return list(slot.members.values()) if isinstance(slot, Server) else [slot]


def _queued_rows(slot: Slot) -> int:
    return sum(len(m.rows) for m in _members(slot))


def _is_address(key: str) -> bool:
    try:
        ipaddress.ip_address(key.strip("[]"))
    except ValueError:
        return False
    return True


def _stricter(address: HostRecord, host: HostRecord) -> HostRecord:
    """One hosts row for a host that is its own address: each time the later, each count the
    larger, so that neither state is relaxed when both start from it."""
    a: dict[str, Any] = dict(address)
    h: dict[str, Any] = dict(host)
    out = dict(a)
    for key in ("last_request_at", "down_until", "response_seconds", "adaptive_delay"):
        values = [v for v in (a[key], h[key]) if v is not None]
        out[key] = max(values) if values else None
    for key in ("http_failures", "down_failures", "robots_failures", "slice_urls_tried"):
        out[key] = max(a[key], h[key])
    if (h["not_before"] or 0) > (a["not_before"] or 0):
        out["not_before"], out["not_before_reason"] = h["not_before"], h["not_before_reason"]
    if h["delay"] > a["delay"]:
        out["delay"], out["delay_source"] = h["delay"], h["delay_source"]
    out["crawl_delay"], out["robots_state"] = h["crawl_delay"], h["robots_state"]
    return out  # type: ignore[return-value]


def _shared_domain(hosts: Iterable[str]) -> str | None:
    """The registered domain of every host given, or None if they differ."""
    domains = {registered_domain(h) for h in hosts}
    return domains.pop() if len(domains) == 1 else None


def _robots_status(state: RobotsState | None) -> str | None:
    if state is None:
        return None
    if state.blocked_kind:
        return RobotsStatus.BLOCKED
    if state.down_kind:
        return RobotsStatus.UNREACHABLE
    if state.deny_kind:
        return RobotsStatus.UNAVAILABLE
    return RobotsStatus.OK
