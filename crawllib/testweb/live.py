"""Changing hosts: pages whose text changes on known schedules, for recrawl tests.

``WebSpec.changing_hosts`` (default 0: none) hosts ``live0.com``, ``live1.com`` ... each
serve, as of the test web's clock (``TestWeb.set_now``; ``GET /__testweb/now?t=`` in the
subprocess mode), a front page ``/`` linking root-relative to ``/c/0.html`` ..
``/c/<changing_pages - 1>.html`` (default 40 pages); every page links back to ``/`` and to
two sibling pages. robots.txt allows everything. The link graph never changes, only texts.
Each ``live<i>.com`` is its own registered domain; changing hosts follow the special hosts in
``Site.hosts`` and are served from 127.0.0.1.

| page | change kind (main text) | validators |
|---|---|---|
| ``/`` | hourly, on the hour | full |
| /c/<n>.html, n mod 8 = 0 | hourly (per-page phase) | by n mod 3 (below) |
| n mod 8 = 1 | daily (per-page phase) | |
| n mod 8 = 2 | weekly (per-page phase) | |
| n mod 8 = 3, 7 | never | |
| n mod 8 = 4 | random: Poisson process, mean gap 6 h | |
| n mod 8 = 5 | boilerplate: main text never changes, the ``<aside>`` sidebar (an "updated at" line, an ad, trending titles) changes hourly | |
| n mod 8 = 6 | random: Poisson process, mean gap 2 days | |

Validators by n mod 3: 0 ``full`` (ETag and Last-Modified of the page version; 304 without a
body when If-None-Match matches, or, without If-None-Match, when If-Modified-Since >=
Last-Modified), 1 ``ignore`` (both sent, always 200 with the body), 2 ``none`` (neither sent).
The validators follow the bytes (:func:`crawllib.testweb.changes.page_version`), so a ``full``
boilerplate page answers 200 with new bytes every hour although its extracted text is the same.

With ``WebSpec.changing_sitemap``, each changing host also serves ``/sitemap.xml``: every
/c/ page with ``lastmod`` (the start of its text version) and, for periodic kinds, its
``changefreq``, and ``/archive.html``, a page that never changes and that only the sitemap
lists. Without it both answer 404.

A version's main text (what ``crawllib.content.extract`` keeps: the ``<article>``) is an "Updated
<date>" line and five sections of seeded prose, drawn from ``(seed, host, path, text
version)``: it changes completely from one version to the next. The ground truth (kind,
versions, when they began, changes in an interval) is in :mod:`crawllib.testweb.changes`.
"""

from __future__ import annotations

import html
import random
import time
from collections.abc import Mapping, Sequence
from datetime import UTC
from email.utils import formatdate, parsedate_to_datetime
from typing import TYPE_CHECKING

from crawllib.testweb import changes
from crawllib.testweb.content import (
    Link,
    Route,
    article_html,
    fixed_route,
    hrefs,
    sentence,
    simple_page,
    text_route,
    title,
)

if TYPE_CHECKING:
    from crawllib.testweb.site import WebSpec

ALLOW_ALL = "User-agent: *\nDisallow:\n"
SECTIONS = 5  # at least 5 paragraphs: a main text well over 500 characters


def route(spec: WebSpec, host: str, path: str, now: float) -> Route | None:
    """The response of a changing host at time ``now``, or None (404)."""
    if path == "/robots.txt":
        return text_route(ALLOW_ALL)
    if spec.changing_sitemap and path == "/sitemap.xml":
        return fixed_route(sitemap_xml(spec, host, now), content_type="application/xml")
    if spec.changing_sitemap and path == ARCHIVE:
        return simple_page(spec.seed, host, path, ["/"], heading=f"{host}: archive")
    n = changes.page_number(host, path)
    if n is None or n >= spec.changing_pages:
        return None
    url = f"http://{host}{path}"
    mode = changes.validators(url)
    nav: list[Link] = [("/", "Home")]
    body = _body_links(spec, host, n)
    text_v, text_start = changes.text_version(url, now), changes.version_start(url, now)
    page_v, page_start = changes.page_version(url, now), changes.page_version_start(url, now)
    headers: tuple[tuple[str, str], ...] = ()
    if mode != "none":
        headers = (("ETag", changes.etag(url, now)), ("Last-Modified", http_date(page_start)))

    def render() -> bytes:
        rng = random.Random(f"{spec.seed}|live|{host}|{path}|{text_v}")
        lead = f"Updated {_stamp(text_start)} UTC. {sentence(rng)}"
        aside = _aside(spec.seed, host, path, page_v, page_start)
        heading = _heading(spec.seed, host, n)
        return article_html(
            rng, host, heading, body, nav, sections=SECTIONS, lead=lead, aside=aside
        ).encode()

    return Route(
        links=hrefs(body, nav),
        headers=headers,
        conditional=mode == "full",
        body=render,
    )


ARCHIVE = "/archive.html"  # listed by the sitemap only
CHANGEFREQ = {"hourly": "hourly", "daily": "daily", "weekly": "weekly", "never": "never"}


def sitemap_xml(spec: WebSpec, host: str, now: float) -> bytes:
    """The sitemap of a changing host at ``now``: its /c/ pages (lastmod: when their text
    version began; changefreq for periodic and never-changing kinds) and ARCHIVE."""
    entries = []
    for n in range(spec.changing_pages):
        url = f"http://{host}/c/{n}.html"
        lastmod = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(changes.version_start(url, now)))
        freq = CHANGEFREQ.get(changes.change_kind(url))
        hint = f"<changefreq>{freq}</changefreq>" if freq else ""
        entries.append(f"<url><loc>{url}</loc><lastmod>{lastmod}</lastmod>{hint}</url>")
    entries.append(f"<url><loc>http://{host}{ARCHIVE}</loc></url>")
    xmlns = "http://www.sitemaps.org/schemas/sitemap/0.9"
    return f'<urlset xmlns="{xmlns}">{"".join(entries)}</urlset>'.encode()


def not_modified(headers: Sequence[tuple[str, str]], request: Mapping[str, str]) -> bool:
    """Whether a request with headers ``request`` gets a 304 from a page sending ``headers``:
    If-None-Match lists its ETag (weak comparison) or ``*``; without If-None-Match,
    If-Modified-Since is a valid HTTP-date at or after its Last-Modified."""
    own = dict(headers)
    tags = request.get("If-None-Match")
    if tags is not None:
        listed = {tag.strip().removeprefix("W/") for tag in tags.split(",")}
        return "*" in listed or own.get("ETag") in listed
    since, modified = request.get("If-Modified-Since"), own.get("Last-Modified")
    if since is None or modified is None:
        return False
    try:
        return _epoch(since) >= _epoch(modified)
    except (TypeError, ValueError):
        return False


def http_date(t: float) -> str:
    """``Wed, 02 Dec 2026 06:00:00 GMT``."""
    return formatdate(t, usegmt=True)


def _epoch(value: str) -> float:
    parsed = parsedate_to_datetime(value)
    if parsed.tzinfo is None:  # "-0000": UTC, not local time
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


def _heading(seed: int, host: str, n: int) -> str:
    if n < 0:
        return f"{host}: live news"
    return title(random.Random(f"{seed}|live|{host}|{n}|heading"))


def _body_links(spec: WebSpec, host: str, n: int) -> list[Link]:
    pages = spec.changing_pages
    if n < 0:
        targets = list(range(pages))
    else:
        # two siblings, distinct from each other and from n once there are 3 pages or more
        siblings = ((n + 1) % pages, (n + pages // 2 + 1) % pages)
        targets = list(dict.fromkeys(m for m in siblings if m != n))
    return [(f"/c/{m}.html", _heading(spec.seed, host, m)) for m in targets]


def _aside(seed: int, host: str, path: str, version: int, start: float) -> str:
    """The sidebar: boilerplate that changes with the page version (hourly on boilerplate
    pages, with the text elsewhere)."""
    rng = random.Random(f"{seed}|live-aside|{host}|{path}|{version}")
    trending = "".join(f"<li>Trending: {html.escape(title(rng))}</li>" for _ in range(3))
    return (
        f'<aside class="sidebar"><p>Page updated at {_stamp(start)} UTC.</p>'
        f'<p class="ad">Advertisement: {html.escape(sentence(rng))}</p>'
        f"<ul>{trending}</ul></aside>"
    )
