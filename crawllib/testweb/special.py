"""Special hosts of the test web: each shows one behaviour a crawler meets on the real web.

Every special host's home page ``/`` is a 200 HTML page linking (root-relative) to the paths
in the "linked from /" column; other paths answer 404 unless listed. robots.txt allows
everything unless the table says otherwise. Special hosts serve the same bytes at any time;
the hosts whose pages change with the clock (``live<i>.com``) are in :mod:`crawllib.testweb.live`.

| host | behaviour | linked from ``/`` (and other served paths) |
|---|---|---|
| robots404.net | robots.txt is 404: all allowed | /a.html, /private/b.html |
| robotsallow.com | ``Disallow: /private/`` + ``Allow: /private/open/`` | /public.html, /private/secret.html (denied), /private/open/info.html |
| robotsdelay.org | ``Crawl-delay: 2`` | /d/1.html, /d/2.html, /d/3.html |
| robots5xx.net | robots.txt is 503: the whole host is disallowed (even /) | /a.html |
| robotsredirect.com | /robots.txt 301 -> /rules/robots.txt (``Disallow: /blocked/``) | /open.html, /blocked/x.html (denied) |
| robotspattern.org | ``Disallow: /*.php$`` and ``Disallow: /*/drafts/`` | /index.php (denied), /index.php.html, /blog/drafts/1.html (denied), /drafts/1.html, /blog/post.html |
| robotsagent.net | group ``crawllib``: ``Disallow: /nocrawllib/``; group ``*``: ``Disallow: /members/``; group ``otherbot``: ``Disallow: /`` | /public.html, /members/1.html, /nocrawllib/1.html |
| robotsbig.org | 600 KiB robots.txt: ``Disallow: /early/`` first, ``Disallow: /late/`` after 600 KiB (ignored: beyond 500 KiB) | /ok.html, /early/1.html (denied), /late/1.html |
| trapcalendar.com | endless calendar: /cal/Y/M links to the previous and next month; every month the same text but its heading (an empty calendar) | /cal/2026/11 (any /cal/Y/M, 1000 <= Y <= 9999) |
| shopfacets.com | faceted search: /shop?color=C&page=P&size=S (3 colors, 3 sizes) links to every other color and size and to page P + 1, endlessly; the same products (text) on every page but the heading | /shop?color=red&page=1&size=s |
| sessiontrap.net | session ids: every link carries ``?sid=<random per request>`` or ``;jsessionid=<random>``; the page ignores them | /item/1.html?sid=..., /item/2.html;jsessionid=... (/item/<n>.html links to n+1 and 2n) |
| deeptrap.org | endless depth: /deep/a/ links to /deep/a/b/, then /deep/a/b/c/ ... (letters wrap after z) | /deep/a/ |
| mirror.net | exact mirror of the first regular host (same bytes as site0.net for every path) | the same paths as site0.net |
| neardup.org | near-duplicates: /v/<n>.html (n < 10) differ by one word and a date line | /v/0.html .. /v/9.html |
| err500.com | 500 always | /broken.html |
| flaky.net | 503 for the first ``WebSpec.flaky_failures`` (2) requests of the URL, then 200 | /flaky.html |
| notfound.org | 404; soft 404: every path but /missing.html answers 200 with the same "Page not found" page | /missing.html (404), /soft404.html (200, a soft 404) |
| ratelimit.com | 429 + ``Retry-After: 1``: on the first request only, or always | /limited.html (429 then 200), /always429.html |
| throttled.org | (only in ``WebSpec.special_hosts``) every page, ``/`` too, answers 429 + ``Retry-After: 3600`` | nothing (``/`` is a 429) |
| overloaded.net | (only in ``WebSpec.special_hosts``) every page, ``/`` too, answers 503 (no Retry-After) | nothing (``/`` is a 503) |
| crawldelay60.org | (only in ``WebSpec.special_hosts``) ``Crawl-delay: 60`` | /c/1.html, /c/2.html, /c/3.html |
| slowserver.net | (only in ``WebSpec.special_hosts``) a slow server: every answer, robots.txt included, after ``slow_seconds`` | /s/1.html, /s/2.html, /s/3.html |
| slow.net | headers after ``slow_seconds`` (3 s); body trickled over ``slow_seconds`` | /slow.html, /trickle.html |
| dropped.org | connection closed mid-body; closed before any status line | /drop.html, /drop-early.html |
| redirects.com | chain 301 -> 302 -> 307 -> 200; loop 301 <-> 302 | /chain/start (-> /chain/2 -> /chain/3 -> /chain/end.html), /loop/a (<-> /loop/b) |
| bigbody.net | 40 MiB HTML body (``big_body_bytes``), streamed, with Content-Length | /big.html |
| gzipbomb.org | ~1 MB gzip body (Content-Encoding: gzip) inflating to 1 GiB of zeros | /bomb.html |
| filetypes.com | non-HTML: image/png, application/pdf, application/json | /img/logo, /files/report.pdf, /api/data.json |
| charsets.net | Latin-1 bytes labelled utf-8; no charset anywhere (UTF-8 body); charset in ``<meta>`` only (Latin-1) | /latin1.html, /nocharset.html, /meta.html |
| brokenhtml.org | unclosed tags (still links /after.html); garbage bytes | /unclosed.html (-> /after.html), /garbage.html |
| directives.org | robots meta tags, ``X-Robots-Tag``, canonical links, ``rel="nofollow"``, TDM opt-outs: one line per page below | the 12 pages below that are not marked "(not linked from /)" |

directives.org (robots.txt allows all): every page but ``/`` is a 200 HTML article of a few
hundred words of its own whose nav and body link ``/``; "links to X" means the body also links
X, which nothing else links. Each target is reached one way only, so the pages a crawl fetches
(:mod:`crawllib.testweb.truth`) show whether it honoured the directive:

* /noindex.html: ``<meta name="robots" content="noindex">``; links to /noindex-child.html (followed: noindex is not nofollow)
* /noindex-child.html (not linked from /): a plain page
* /nofollow.html: ``<meta name="robots" content="nofollow">``; links to /nofollow-only.html (never to be requested)
* /nofollow-only.html (not linked from /): a plain page
* /agent-nofollow.html: ``<meta name="crawllib" content="nofollow">`` (our product token); links to /agent-only.html (never)
* /agent-only.html (not linked from /): a plain page
* /other-agent.html: ``<meta name="otherbot" content="noindex, nofollow">`` (not for crawllib); links to /other-child.html (followed)
* /other-child.html (not linked from /): a plain page
* /header-noindex.html: header ``X-Robots-Tag: noindex``
* /header-none.html: header ``X-Robots-Tag: none`` (noindex, nofollow); links to /header-only.html (never)
* /header-only.html (not linked from /): a plain page
* /header-other.html: header ``X-Robots-Tag: otherbot: nofollow`` (not for crawllib); links to /header-other-child.html (followed)
* /header-other-child.html (not linked from /): a plain page
* /canonical.html: ``<link rel="canonical" href="/canonical-target.html">``, the same article as its target
* /canonical-target.html (not linked from /): reached only through that canonical link (depth 2 from ``/``)
* /nofollow-canonical.html: ``<meta name="robots" content="nofollow">`` + ``<link rel="canonical" href="/nfc-target.html">``; links to /nfc-only.html (never)
* /nfc-target.html (not linked from /): reached only through the canonical link, which nofollow does not stop
* /nfc-only.html (not linked from /): a plain page
* /relnofollow.html: ``<a rel="nofollow" href="/relnf-target.html">`` (followed by default: ``parse.follow_rel_nofollow``)
* /relnf-target.html (not linked from /): a plain page
* /noai.html: ``<meta name="robots" content="noai, noimageai">``
* /tdm.html: header ``tdm-reservation: 1`` and ``<meta name="tdm-reservation" content="1">``
"""

from __future__ import annotations

import dataclasses
import html
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from crawllib.testweb import traps
from crawllib.testweb.content import (
    NOT_FOUND,
    Route,
    article_html,
    fixed_route,
    hrefs,
    redirect_route,
    sentence,
    simple_page,
    status_route,
    text_route,
    title,
)
from crawllib.testweb.payloads import (
    PDF,
    UNCLOSED,
    big_robots,
    charset_page,
    garbage_page,
    png_bytes,
)

if TYPE_CHECKING:
    from crawllib.testweb.site import Site

ALLOW_ALL = "User-agent: *\nDisallow:\n"
MIRRORED = 0  # index of the regular host that mirror.net copies

Make = Callable[["Site", str, str], Route]  # (site, host, path) -> Route


def _page(*links: str, heading: str = "") -> Make:
    return lambda site, host, path: simple_page(site.spec.seed, host, path, ["/", *links], heading)


def _robots(text: str) -> Make:
    return lambda site, host, path: text_route(text)


def _status(code: int, *headers: tuple[str, str]) -> Make:
    return lambda site, host, path: status_route(code, *headers)


def _redirect(code: int, location: str) -> Make:
    return lambda site, host, path: redirect_route(code, location)


def _behaviour(name: str) -> Make:
    def make(site: Site, host: str, path: str) -> Route:
        return dataclasses.replace(_page()(site, host, path), behaviour=name)

    return make


def _fixed(body: Callable[[], bytes], content_type: str, links: tuple[str, ...] = ()) -> Make:
    return lambda site, host, path: dataclasses.replace(
        fixed_route(body, content_type), links=links
    )


def _garbage(site: Site, host: str, path: str) -> Route:
    return fixed_route(garbage_page(site.spec.seed))


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _not_found_page(site: Site, host: str) -> Route:
    """notfound.org's answer to any path it has no page for: 200 and the same "Page not
    found" page, whatever the path (a soft 404)."""

    def render() -> bytes:
        rng = random.Random(f"{site.spec.seed}|notfound|{host}")
        return article_html(rng, host, "Page not found", [("/", "Home")], sections=1).encode()

    return Route(links=hrefs([("/", "Home")]), body=render)


def _pages(*paths: str) -> dict[str, Make]:
    return {p: _page() for p in paths}


LEAD_WORDS = 150  # a directives.org article opens with at least this many words of prose


def _article(
    *links: str,
    meta: Sequence[tuple[str, str]] = (),
    canonical: str = "",
    headers: Sequence[tuple[str, str]] = (),
    nofollow: Sequence[str] = (),
    text_of: str = "",
) -> Make:
    """A page of directives.org: an article linking ``/`` and ``links`` (those in ``nofollow``
    with ``rel="nofollow"``), with ``<meta name content>`` tags and a canonical link in its head,
    ``headers`` in its response; the text of ``text_of`` (a path) when given, else its own."""
    head = "".join(
        f'<meta name="{_attr(name)}" content="{_attr(content)}">' for name, content in meta
    )
    if canonical:
        head += f'<link rel="canonical" href="{_attr(canonical)}">'
    body = [(h, h) for h in ("/", *links)]
    rels = {h: "nofollow" for h in nofollow}

    def make(site: Site, host: str, path: str) -> Route:
        def render() -> bytes:
            rng = random.Random(f"{site.spec.seed}|directives|{host}|{text_of or path}")
            heading = title(rng)
            lead: list[str] = []
            while sum(len(s.split()) for s in lead) < LEAD_WORDS:
                lead.append(sentence(rng))
            return article_html(
                rng, host, heading, body, sections=3, lead=" ".join(lead), head=head, rels=rels
            ).encode()

        return Route(links=hrefs(body), headers=tuple(headers), head=head, body=render)

    return make


# host -> {path: Make}. ``/`` links to every path in order, except those in HIDDEN;
# ``/robots.txt`` is ALLOW_ALL unless given. Pattern hosts (traps, mirror) are in ``traps``.
HOSTS: dict[str, dict[str, Make]] = {
    "robots404.net": {"/robots.txt": _status(404), **_pages("/a.html", "/private/b.html")},
    "robotsallow.com": {
        "/robots.txt": _robots("User-agent: *\nDisallow: /private/\nAllow: /private/open/\n"),
        **_pages("/public.html", "/private/secret.html", "/private/open/info.html"),
    },
    "robotsdelay.org": {
        "/robots.txt": _robots("User-agent: *\nCrawl-delay: 2\nDisallow:\n"),
        **_pages("/d/1.html", "/d/2.html", "/d/3.html"),
    },
    "robots5xx.net": {"/robots.txt": _status(503), **_pages("/a.html")},
    "robotsredirect.com": {
        "/robots.txt": _redirect(301, "/rules/robots.txt"),
        "/rules/robots.txt": _robots("User-agent: *\nDisallow: /blocked/\n"),
        **_pages("/open.html", "/blocked/x.html"),
    },
    "robotspattern.org": {
        "/robots.txt": _robots("User-agent: *\nDisallow: /*.php$\nDisallow: /*/drafts/\n"),
        **_pages(
            "/index.php",
            "/index.php.html",
            "/blog/drafts/1.html",
            "/drafts/1.html",
            "/blog/post.html",
        ),
    },
    "robotsagent.net": {
        "/robots.txt": _robots(
            "User-agent: *\nDisallow: /members/\n\n"
            "User-agent: crawllib\nDisallow: /nocrawllib/\n\n"
            "User-agent: otherbot\nDisallow: /\n"
        ),
        **_pages("/public.html", "/members/1.html", "/nocrawllib/1.html"),
    },
    "robotsbig.org": {
        "/robots.txt": _fixed(big_robots, "text/plain"),
        **_pages("/ok.html", "/early/1.html", "/late/1.html"),
    },
    **{host: {} for host in traps.PATTERN_HOSTS},
    "err500.com": {"/broken.html": _status(500)},
    "flaky.net": {"/flaky.html": _behaviour("flaky")},
    "notfound.org": {
        "/missing.html": _status(404),
        "/soft404.html": lambda site, host, path: _not_found_page(site, host),
    },
    "ratelimit.com": {
        "/limited.html": _behaviour("first429"),
        "/always429.html": _status(429, ("Retry-After", "1")),
    },
    "throttled.org": {"/": _status(429, ("Retry-After", "3600"))},
    "overloaded.net": {"/": _status(503)},
    "crawldelay60.org": {
        "/robots.txt": _robots("User-agent: *\nCrawl-delay: 60\nDisallow:\n"),
        **_pages("/c/1.html", "/c/2.html", "/c/3.html"),
    },
    "slowserver.net": _pages("/s/1.html", "/s/2.html", "/s/3.html"),
    "slow.net": {"/slow.html": _behaviour("slow"), "/trickle.html": _behaviour("trickle")},
    "dropped.org": {"/drop.html": _behaviour("drop"), "/drop-early.html": _behaviour("drop_early")},
    "redirects.com": {
        "/chain/start": _redirect(301, "http://redirects.com/chain/2"),
        "/chain/2": _redirect(302, "/chain/3"),
        "/chain/3": _redirect(307, "end.html"),
        "/chain/end.html": _page(heading="End of the chain"),
        "/loop/a": _redirect(301, "/loop/b"),
        "/loop/b": _redirect(302, "http://redirects.com/loop/a"),
    },
    "bigbody.net": {"/big.html": _behaviour("big")},
    "gzipbomb.org": {"/bomb.html": _behaviour("bomb")},
    "filetypes.com": {
        "/img/logo": _fixed(png_bytes, "image/png"),
        "/files/report.pdf": _fixed(lambda: PDF, "application/pdf"),
        "/api/data.json": _fixed(lambda: b'{"ok": true, "items": [1, 2, 3]}', "application/json"),
    },
    "charsets.net": {
        "/latin1.html": _fixed(
            charset_page("iso-8859-1", False), "text/html; charset=utf-8", ("/",)
        ),
        "/nocharset.html": _fixed(charset_page("utf-8", False), "text/html", ("/",)),
        "/meta.html": _fixed(charset_page("iso-8859-1", True), "text/html", ("/",)),
    },
    "brokenhtml.org": {
        "/unclosed.html": _fixed(lambda: UNCLOSED, "text/html", ("/after.html",)),
        "/garbage.html": _garbage,
        "/after.html": _page(),
    },
    "directives.org": {
        "/noindex.html": _article("/noindex-child.html", meta=[("robots", "noindex")]),
        "/noindex-child.html": _article(),
        "/nofollow.html": _article("/nofollow-only.html", meta=[("robots", "nofollow")]),
        "/nofollow-only.html": _article(),
        "/agent-nofollow.html": _article("/agent-only.html", meta=[("crawllib", "nofollow")]),
        "/agent-only.html": _article(),
        "/other-agent.html": _article(
            "/other-child.html", meta=[("otherbot", "noindex, nofollow")]
        ),
        "/other-child.html": _article(),
        "/header-noindex.html": _article(headers=[("X-Robots-Tag", "noindex")]),
        "/header-none.html": _article("/header-only.html", headers=[("X-Robots-Tag", "none")]),
        "/header-only.html": _article(),
        "/header-other.html": _article(
            "/header-other-child.html", headers=[("X-Robots-Tag", "otherbot: nofollow")]
        ),
        "/header-other-child.html": _article(),
        "/canonical.html": _article(
            canonical="/canonical-target.html", text_of="/canonical-target.html"
        ),
        "/canonical-target.html": _article(),
        "/nofollow-canonical.html": _article(
            "/nfc-only.html", meta=[("robots", "nofollow")], canonical="/nfc-target.html"
        ),
        "/nfc-target.html": _article(),
        "/nfc-only.html": _article(),
        "/relnofollow.html": _article("/relnf-target.html", nofollow=["/relnf-target.html"]),
        "/relnf-target.html": _article(),
        "/noai.html": _article(meta=[("robots", "noai, noimageai")]),
        "/tdm.html": _article(meta=[("tdm-reservation", "1")], headers=[("tdm-reservation", "1")]),
    },
}
# directives.org: each page a directive page links to (or names as canonical) is reached
# only that way
DIRECTIVE_TARGETS = frozenset(
    {
        "/noindex-child.html",
        "/nofollow-only.html",
        "/agent-only.html",
        "/other-child.html",
        "/header-only.html",
        "/header-other-child.html",
        "/canonical-target.html",
        "/nfc-target.html",
        "/nfc-only.html",
        "/relnf-target.html",
    }
)
HIDDEN = frozenset(
    {"/robots.txt", "/rules/robots.txt", "/chain/2", "/chain/3", "/chain/end.html", "/loop/b"}
    | {"/after.html"}
    | DIRECTIVE_TARGETS
)
# Hosts a web has only when WebSpec.special_hosts names them (the default set stays as the
# tests that count its requests know it).
OPT_IN = frozenset({"throttled.org", "overloaded.net", "crawldelay60.org", "slowserver.net"})
SPECIAL_HOSTS = tuple(h for h in HOSTS if h not in OPT_IN)
# Hosts whose every page answers as their ``/`` does; hosts whose every answer is slow.
SAME_EVERYWHERE = frozenset({"throttled.org", "overloaded.net"})
SLOW_SERVERS = frozenset({"slowserver.net"})


def route(site: Site, host: str, path: str, query: str, nonce: str) -> Route | None:
    """Route of a special host, or None (404). A slow server's every answer is slow, its
    404s included."""
    found = _route(site, host, path, query, nonce)
    if host in SLOW_SERVERS:
        return dataclasses.replace(found or NOT_FOUND, behaviour="slow")
    return found


def _route(site: Site, host: str, path: str, query: str, nonce: str) -> Route | None:
    if host == "mirror.net":
        return site.regular_route(MIRRORED, path) if site.regular else None
    paths = HOSTS[host]
    if path in paths:
        return paths[path](site, host, path)
    if host in SAME_EVERYWHERE and path != "/robots.txt":
        return paths["/"](site, host, path)
    if path == "/robots.txt":
        return text_route(ALLOW_ALL)
    if path == "/":
        linked = [p for p in paths if p not in HIDDEN] or traps.home_links(host, nonce)
        return simple_page(site.spec.seed, host, "/", linked, f"{host}: test web")
    if host == "notfound.org":
        return _not_found_page(site, host)
    return traps.route(site.spec.seed, host, path, nonce, query)
