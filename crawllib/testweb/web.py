"""The test web server: one aiohttp server on 127.0.0.1 serving every host of a :class:`Site`.

The host is chosen by the ``Host`` header (its port is ignored); the response is generated
by :meth:`Site.route` on each request, plus the behaviour the route names (slow, trickle,
flaky, first429, drop, drop_early, big, bomb), which only this module implements. Every
request, robots.txt and errors included, is appended to :attr:`TestWeb.log`.

The changing hosts (:mod:`crawllib.testweb.live`) answer as of the web's clock, which tests
set: ``web.set_now(t)`` (epoch seconds; None: the real time) or, from another process (the
``python -m crawllib.testweb`` server), the control request ``GET /__testweb/now?t=<epoch
seconds>`` on any Host (``t=`` empty: back to the real time), answered 204 (400 for a bad or
missing ``t``), never linked from any page and not logged. Only page versions follow this
clock; slow and flaky behaviours and the request log keep the wall clock. ``full`` validator
pages answer a matching conditional request 304, with ETag and Last-Modified and no body.
A route's ``headers`` (Retry-After, ETag, X-Robots-Tag...) are sent as given, one header line
each, so a name may repeat.

Async use::

    web = TestWeb(WebSpec(hosts=5))
    await web.start()
    ...
    await web.stop()

Sync callers (Spark tests, benchmarks, ``crawl demo``)::

    with serve_in_thread(WebSpec(hosts=5)) as web:
        run_crawl(seeds=web.seeds(), resolve=web.resolve)
        assert fetched == web.expected_fetches(max_depth=2)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from aiohttp import web

from crawllib.testweb import live, truth
from crawllib.testweb.content import HTML, Route, status_route
from crawllib.testweb.payloads import big_body_chunks, gzip_bomb
from crawllib.testweb.site import Site, WebSpec

LOOPBACK = "127.0.0.1"
CONTROL_NOW = "/__testweb/now"  # GET ?t=<epoch seconds> sets the clock, ?t= resets it
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogRecord:
    """One request: wall-clock ``time.time()`` start and end, host (lowercase, no port),
    path with query as sent, the status sent (0 when the connection was closed before any
    status line) and the User-Agent header."""

    start: float
    end: float
    host: str
    path_qs: str
    status: int
    user_agent: str = ""
    address: str = LOOPBACK  # the server address the request reached


def host_of(header: str) -> str:
    """``Site1.COM:8080`` -> ``site1.com``; ``[::1]:80`` -> ``[::1]``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1]
    name, sep, port = header.rpartition(":")
    host = name if sep and port.isdigit() else header
    return host.rstrip(".")


class TestWeb:
    """The multi-host test web on ``127.0.0.1:port`` (port 0: any free port, set by start)."""

    __test__ = False  # not a pytest test class

    def __init__(self, spec: WebSpec | None = None, port: int = 0) -> None:
        self.spec = spec or WebSpec()
        self.site = Site(self.spec)
        self.port = port
        self._log: list[LogRecord] = []
        self._lock = threading.Lock()
        self._hits: Counter[tuple[str, str]] = Counter()
        self._runner: web.ServerRunner | None = None
        self._now: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> TestWeb:
        server = web.Server(self._handle, access_log=None)
        self._runner = web.ServerRunner(server, shutdown_timeout=1.0)
        await self._runner.setup()
        for address in self.addresses:  # all of 127.0.0.0/8 is local on Linux
            site = web.TCPSite(self._runner, address, self.port)
            await site.start()
            self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> TestWeb:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what callers pass to a crawler -------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return list(self.site.hosts)

    def seeds(self) -> list[str]:
        """``http://host/`` for every host (regular first, then special)."""
        return self.site.seeds()

    @property
    def addresses(self) -> list[str]:
        """The loopback addresses served (WebSpec.addresses)."""
        return [f"127.0.0.{i + 1}" for i in range(max(1, self.spec.addresses))]

    def address_of(self, host: str) -> str:
        """The address ``host`` is served from: as WebSpec.placed says, else regular host i
        on address i mod N, a special host on the first."""
        placed = {name: k for name, k in self.spec.placed}
        if host in placed:
            return self.addresses[placed[host]]
        index = self.site.regular.index(host) if host in self.site.regular else 0
        return self.addresses[index % len(self.addresses)]

    def resolve_map(self, port: int | None = None) -> dict[str, str]:
        """``{host: "ADDRESS:PORT"}`` for every host: the crawler's ``network.resolve``."""
        return {h: f"{self.address_of(h)}:{port or self.port}" for h in self.site.hosts}

    @property
    def resolve(self) -> dict[str, str]:
        return self.resolve_map()

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    # -- request log and server state ---------------------------------------------------------
    @property
    def log(self) -> list[LogRecord]:
        """A copy of the request log, safe to read from any thread."""
        with self._lock:
            return list(self._log)

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()

    def reset_state(self) -> None:
        """Forget how often each flaky / rate-limited URL was requested."""
        with self._lock:
            self._hits.clear()

    # -- the clock of page versions ------------------------------------------------------------
    def set_now(self, t: float | None) -> None:
        """Serve changing pages as of ``t`` (epoch seconds) from now on; None: the real time."""
        self._now = t

    def now(self) -> float:
        """The time changing pages are served as of (set_now, else ``time.time()``)."""
        t = self._now
        return time.time() if t is None else t

    # -- ground truth (see crawllib.testweb.truth) ---------------------------------------------
    def expected_fetches(
        self, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
    ) -> set[str]:
        return truth.expected_fetches(self.site, max_depth, agent, seeds)

    def expected_attempts(
        self, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
    ) -> set[str]:
        return truth.expected_attempts(self.site, max_depth, agent, seeds)

    def expected_noindex(
        self, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
    ) -> set[str]:
        return truth.expected_noindex(self.site, max_depth, agent, seeds)

    # -- serving -----------------------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.path == CONTROL_NOW and request.method == "GET":
            return self._control_now(request)  # not traffic of the web: not logged
        start = time.time()
        host = host_of(request.headers.get("Host", ""))
        status = 0
        try:
            try:
                resp = await self._respond(request, host)
            except Exception:
                logger.exception("test web: error serving %s%s", host, request.raw_path)
                resp = _plain(status_route(500))
            status = resp.status if resp.prepared or not self._dropped(request) else 0
            return resp
        finally:
            sockname = request.transport.get_extra_info("sockname") if request.transport else None
            record = LogRecord(
                start,
                time.time(),
                host,
                request.raw_path,
                status,
                request.headers.get("User-Agent", ""),
                sockname[0] if sockname else LOOPBACK,
            )
            with self._lock:
                self._log.append(record)

    def _control_now(self, request: web.BaseRequest) -> web.Response:
        value = request.query.get("t")
        if value is None:
            return web.Response(status=400, text="t=<epoch seconds> or t= (real time)\n")
        if not value.strip():
            self.set_now(None)
            return web.Response(status=204)
        try:
            t = float(value)
        except ValueError:
            t = math.nan
        if not math.isfinite(t):
            return web.Response(status=400, text=f"not a time: {value!r}\n")
        self.set_now(t)
        return web.Response(status=204)

    @staticmethod
    def _dropped(request: web.BaseRequest) -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    def _slow_address(self, request: web.BaseRequest) -> bool:
        """Whether the request reached one of WebSpec.slow_addresses."""
        if not self.spec.slow_addresses or request.transport is None:
            return False
        sockname = request.transport.get_extra_info("sockname")
        slow = {self.addresses[k] for k in self.spec.slow_addresses if k < len(self.addresses)}
        return bool(sockname) and sockname[0] in slow

    async def _respond(self, request: web.BaseRequest, host: str) -> web.StreamResponse:
        nonce = secrets.token_hex(8)
        route = self.site.route(host, request.path, request.query_string, nonce, self.now())
        if route.conditional and live.not_modified(route.headers, request.headers):
            return web.Response(status=304, headers=dict(route.headers))
        kind = route.behaviour
        if self._slow_address(request):
            await asyncio.sleep(self.spec.slow_seconds)
        if kind in ("flaky", "first429"):
            with self._lock:
                self._hits[(host, request.path)] += 1
                hits = self._hits[(host, request.path)]
            if kind == "flaky" and hits <= self.spec.flaky_failures:
                return _plain(status_route(503))
            if kind == "first429" and hits <= 1:
                return _plain(status_route(429, ("Retry-After", "1")))
        if kind == "slow":
            await asyncio.sleep(self.spec.slow_seconds)
        if kind == "trickle":
            body = route.render()
            step = -(-len(body) // 10)
            pieces = (body[i : i + step] for i in range(0, len(body), step))
            return await _stream(request, pieces, len(body), self.spec.slow_seconds / 10)
        if kind == "drop":
            resp = web.StreamResponse(headers={"Content-Type": HTML})
            resp.content_length = 100_000
            await resp.prepare(request)
            await resp.write(route.render()[:1000])
            _close(request)
            return resp
        if kind == "drop_early":
            _close(request)
            return web.Response(status=200)
        if kind == "big":
            size = self.spec.big_body_bytes
            return await _stream(request, big_body_chunks(size), size)
        if kind == "bomb":
            data = await asyncio.to_thread(gzip_bomb, self.spec.bomb_bytes)
            headers = {"Content-Type": HTML, "Content-Encoding": "gzip"}
            return web.Response(body=data, headers=headers)
        return _plain(route)


def _plain(route: Route) -> web.Response:
    headers = list(route.headers)  # pairs: a name given twice is sent as two header lines
    if "content-type" not in {name.lower() for name, _ in headers}:
        headers.insert(0, ("Content-Type", route.content_type))
    if route.location:
        headers.append(("Location", route.location))
    return web.Response(status=route.status, body=route.render(), headers=headers)


def _close(request: web.BaseRequest) -> None:
    if request.transport is not None:
        request.transport.close()


async def _stream(
    request: web.BaseRequest, pieces: Iterator[bytes], length: int, pause: float = 0.0
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": HTML})
    resp.content_length = length
    await resp.prepare(request)
    try:
        for piece in pieces:
            if pause:
                await asyncio.sleep(pause)
            await resp.write(piece)
        await resp.write_eof()
    except ConnectionError:
        pass  # the client stopped reading (a capped crawler): nothing more to send
    return resp


@contextlib.contextmanager
def serve_in_thread(spec: WebSpec | None = None, port: int = 0) -> Iterator[TestWeb]:
    """Run a :class:`TestWeb` in a background thread with its own event loop.

    Yields the started web (``web.port``, ``web.log``, ``web.resolve``...); stops it on exit.
    """
    tw = TestWeb(spec, port)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(tw.start())
        except BaseException as exc:  # reported to the caller's thread below
            failure.append(exc)
            ready.set()
            loop.close()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(tw.stop())
        loop.close()

    thread = threading.Thread(target=run, name="crawllib-testweb", daemon=True)
    thread.start()
    ready.wait()
    if failure:
        raise failure[0]
    try:
        yield tw
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
