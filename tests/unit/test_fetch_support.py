"""Helpers of the fetch engine tests: a tiny multi-host HTTP server on 127.0.0.1, a raw TCP
server for broken responses, and config/row builders. No HTTP is mocked: the engine talks to
these servers through ``network.resolve`` with ``network.resolve_only`` on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

from crawllib.config import load_config, replace
from crawllib.core.urls import url_key
from crawllib.engine import fetch_rows

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Hit:
    host: str
    path_qs: str
    start: float  # time.monotonic() when the handler began
    end: float | None = None
    address: str = "127.0.0.1"  # the server address the request reached


class LocalWeb:
    """aiohttp server on 127.0.0.1:<free port>, routing on (Host, path) to registered handlers.
    ``addresses``: more loopback addresses to serve on, same port (all of 127.0.0.0/8 is local
    on Linux), so tests can give hosts distinct or shared server addresses (:meth:`resolve`).

    Unregistered paths answer with the host's :meth:`fallback` if it has one, else 200 HTML
    (robots.txt: 404). ``hits`` logs every request.
    """

    def __init__(self, addresses: Iterable[str] = ("127.0.0.1",)) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.fallbacks: dict[str, Handler] = {}
        self.hits: list[Hit] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.addresses = list(addresses)

    def route(self, host: str, path: str, handler: Handler) -> None:
        self.routes[(host, path)] = handler

    def fallback(self, host: str, handler: Handler) -> None:
        """Answer every path of `host` without a route of its own (robots.txt included)."""
        self.fallbacks[host] = handler

    def text(self, host: str, path: str, body: str, status: int = 200, **kw) -> None:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=body, status=status, **kw)

        self.route(host, path, handler)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        host = request.host.rsplit(":", 1)[0] if request.host.count(":") == 1 else request.host
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        hit = Hit(host, request.path_qs, time.monotonic(), address=(sockname or ("?",))[0])
        self.hits.append(hit)
        try:
            handler = self.routes.get((host, request.path)) or self.fallbacks.get(host)
            if handler is not None:
                return await handler(request)
            if request.path == "/robots.txt":
                return web.Response(status=404, text="no robots")
            return web.Response(
                text=f"<html><body>{host}{request.path_qs}</body></html>",
                content_type="text/html",
            )
        finally:
            hit.end = time.monotonic()

    def __enter__(self) -> LocalWeb:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(runner.setup())
        for address in self.addresses:
            site = web.TCPSite(runner, address, self.port)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
        self._runner = runner
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def resolve(self, *hosts: str, address: str = "127.0.0.1") -> dict[str, str]:
        return {h: f"{address}:{self.port}" for h in hosts}

    def hits_of(self, host: str) -> list[Hit]:
        return sorted((h for h in self.hits if h.host == host), key=lambda h: h.start)


class RawServer:
    """A TCP server on 127.0.0.1 whose every connection is handled by ``serve(reader, writer)``
    (for answers aiohttp's server will not give: dropped connections, broken status lines)."""

    def __init__(self, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable]):
        self.serve = serve
        self.connections = 0
        self.loop = asyncio.new_event_loop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.serve(reader, writer)
        finally:
            writer.close()

    def __enter__(self) -> RawServer:
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def config(resolve: dict[str, str], **changes):
    """The default config with test timings, reaching only `resolve` (resolve_only on). No
    sitemaps and no soft-404 probes unless asked for (they add requests after each host's
    pages)."""
    base = {
        "sitemaps__enabled": False,
        "fetch__soft404_probe": False,
        "politeness__default_delay": 0.0,
        "politeness__jitter": 0.0,
        "politeness__adaptive": False,  # it would follow the machine's load (conftest.py)
        "fetch__connect_timeout": 2.0,
        "fetch__total_timeout": 5.0,
        "network__resolve": resolve,
        "network__resolve_only": True,
    }
    base.update(changes)
    cfg = replace(load_config(), **base)
    assert cfg.network.resolve_only
    return cfg


def row(url: str, depth: int = 0, **extra) -> dict:
    host = url.split("/")[2].rsplit(":", 1)[0] if "//" in url else ""
    return {"url": url, "url_key": url_key(url), "host": host.strip("[]"), "depth": depth, **extra}


def crawl(urls: Iterable[str], cfg, robots_rows=(), now=time.time) -> tuple[dict, list[dict]]:
    """Fetch `urls`; return ({url: fetch record}, [robots records])."""
    fetches, robots, _ = crawl_with_hosts(urls, cfg, robots_rows, now)
    return fetches, robots


def crawl_with_hosts(
    urls: Iterable[str], cfg, robots_rows=(), now=time.time, host_rows=(), retried=False
) -> tuple[dict, list[dict], dict]:
    """Fetch `urls`; return ({url: fetch record}, [robots records], {slot: host record})."""
    fetches, robots, hosts = {}, [], {}
    rows = [row(u) for u in urls]
    for record in fetch_rows(rows, cfg, robots_rows, now, host_rows=host_rows, retried=retried):
        if record["record"] == "fetch":
            fetches[record["url"]] = record
        elif record["record"] == "robots":
            robots.append(record)
        else:
            hosts[record["slot"]] = record
    return fetches, robots, hosts


# The server's log sees a request when its handler starts. That server shares the machine
# (here also the GIL) with the engine, so under load a handler can start tens of ms late and
# make the next gap look short: server-side gaps get SLACK; the engine's own request starts
# (fetched_at, see starts()) are checked exactly.
SLACK = 0.05
REQUESTED = ("ok", "redirect", "http_error")


def gaps(hits: list[Hit] | list[float]) -> list[float]:
    times = [h if isinstance(h, float) else h.start for h in hits]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def starts(fetches: dict, robots: list[dict], host: str) -> list[float]:
    """The engine's start times (fetched_at) of the requests it made to `host`."""
    times = [r["fetched_at"] for r in robots if r["host"] == host]
    times += [
        r["fetched_at"] for r in fetches.values() if r["host"] == host and r["outcome"] in REQUESTED
    ]
    return sorted(times)


def test_local_web_routes_by_host():
    with LocalWeb() as server:
        server.text("a.test", "/x", "<p>a</p>", content_type="text/html")
        fetches, robots = crawl(
            ["http://a.test/x", "http://b.test/x"], config(server.resolve("a.test", "b.test"))
        )
    assert fetches["http://a.test/x"]["body"] == b"<p>a</p>"
    assert b"b.test/x" in fetches["http://b.test/x"]["body"]
    assert {r["host"] for r in robots} == {"a.test", "b.test"}
