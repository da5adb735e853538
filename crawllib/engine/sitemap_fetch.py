"""Sitemaps for the fetch engine: which documents a slot asks for, and one request each.

When a host's robots.txt has just been fetched (so at most once per ``robots.ttl_hours``) and
its rules apply, the slot queues the sitemaps it lists, or ``/sitemap.xml`` when it lists none
(:func:`sitemap_urls`). They are fetched on the slot like its pages (its delay, its address
gate, robots.txt rules), after its pages, up to ``sitemaps.max_documents`` documents per host
(the children of an index included), and read by :func:`crawllib.content.sitemaps.parse_sitemap` in
the engine's extraction thread. Only sitemaps on the slot's own hosts are fetched: a sitemap on
another host would be a request outside this slot's politeness. A sitemap keeps the URLs of its
own host and, when it sits on another host of the slot (``politeness.key = domain``), those of
the host whose robots.txt listed it (the protocol's cross-submit rule).

Each document gives a :class:`crawllib.core.records.SitemapRecord`; a failed fetch or a broken
document is a record with its ``error_kind`` (never an exception), and the entries read before a
parse error are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager

import aiohttp
from yarl import URL

from crawllib.config import Config
from crawllib.content.sitemaps import SitemapResult, parse_sitemap
from crawllib.core.records import SitemapEntry, SitemapRecord
from crawllib.core.urls import InvalidURL, host_of, normalize_url, url_key
from crawllib.core.vocab import Outcome, Record
from crawllib.engine.budget import Share
from crawllib.engine.client import Fetched, Limits, fetch_url
from crawllib.policy.robots import RobotsRules


def sitemap_urls(
    page_url: str, listed: Iterable[str], hosts: Iterable[str], limit: int | None = None
) -> list[str]:
    """The sitemaps a slot fetches after its host's robots.txt: those it lists on one of the
    slot's ``hosts`` (normalised, in order, once each; the first ``limit``), or
    ``/sitemap.xml`` of the page's origin when it lists none."""
    listed = list(listed)
    if not listed:
        return [str(URL(page_url, encoded=True).origin().with_path("/sitemap.xml"))]
    own = set(hosts)
    out: dict[str, None] = {}
    for text in listed:
        if limit is not None and len(out) >= limit:
            break
        try:
            url = normalize_url(text)
        except InvalidURL:
            continue
        if host_of(url) in own:
            out[url] = None
    return list(out)


def sitemap_limits(cfg: Config) -> Limits:
    """Any media type (sitemaps come as XML, text or gzip); the body cut at the document's
    limit (parse_sitemap then records ``too_large`` or a cut document)."""
    cap = cfg.sitemaps.max_bytes
    return Limits(max_raw=cap, max_decoded=cap, keep_types=None, overflow_is_error=False)


async def fetch_sitemap(
    session: aiohttp.ClientSession,
    url: str,
    host: str,
    cfg: Config,
    rules: RobotsRules,
    before_request: Callable[[], Awaitable[bool]],
    after_response: Callable[[Fetched], None],
    request: Callable[[], AbstractAsyncContextManager[None]],
    on_sent: Callable[[], None] | None,
    now: Callable[[], float],
    executor: Executor | None,
    share: Share | None = None,
    room: asyncio.Semaphore | None = None,
) -> SitemapRecord | None:
    """Fetch and read one sitemap document listed (or, /sitemap.xml, implied) by ``host``'s
    robots.txt; None when no request was made (the deadline came first, or robots.txt
    disallows it: the next robots.txt fetch asks again).

    ``before_request()`` waits for the slot's turn (False: the deadline passed); the request
    runs inside ``request()`` (the engine's room per server address). ``share``: the body's
    part of the task's byte budget; ``room``: the engine's extraction room, held while the
    document is read in ``executor``."""
    if not rules.allowed(url) or not await before_request():
        return None
    async with request():
        fetched_at = now()
        got = await fetch_url(session, url, sitemap_limits(cfg), on_sent, share=share)
    after_response(got)
    record: SitemapRecord = {
        "record": Record.SITEMAP,
        "host": host,
        "url": url,
        "fetched_at": fetched_at,
        "http_status": got.http_status,
        "error_kind": got.error_kind,
        "sitemap_kind": None,
        "entries": [],
        "children": [],
        "invalid": 0,
        "out_of_scope": 0,
    }
    if got.outcome != Outcome.OK or got.body is None:
        if record["error_kind"] is None:
            record["error_kind"] = f"http_{got.http_status}" if got.http_status else got.outcome
        return record
    loop = asyncio.get_running_loop()
    async with room or contextlib.nullcontext():
        parsed: SitemapResult = await loop.run_in_executor(
            executor,
            lambda: parse_sitemap(
                got.body or b"",
                url,
                content_type=got.content_type,
                allowed_hosts=frozenset({host}),
                max_urls=cfg.sitemaps.max_urls,
                max_bytes=cfg.sitemaps.max_bytes,
            ),
        )
    entries: list[SitemapEntry] = [
        {
            "url": e.url,
            "url_key": url_key(e.url),
            "host": host_of(e.url),
            "lastmod": e.lastmod,
            "changefreq": e.changefreq,
            "priority": e.priority,
        }
        for e in parsed.urls
    ]
    record["error_kind"] = parsed.error
    record["sitemap_kind"] = parsed.kind
    record["entries"] = entries
    record["children"] = [s.url for s in parsed.sitemaps]
    record["invalid"] = parsed.invalid
    record["out_of_scope"] = parsed.out_of_scope
    return record
