"""Ground truth of a correct crawl of the test web, computed from the generator (no HTTP).

This module shares no code with the crawler: URL canonicalisation and robots.txt matching
are written here again, from RFC 3986 and RFC 9309, so the crawler is compared with an
independent reading of the rules.

Definitions, for seeds S (default: ``http://host/`` of every host), ``max_depth`` D and robots
product token A (default ``crawllib``):

* **canonical URL**: resolved against the page's URL; scheme and host lowercase; default port
  (``:80``) dropped; dot segments removed, empty path ``/``; fragment dropped; ``;jsessionid=``
  (and ``;sid=``, ``;sessionid=``, ``;phpsessid=``) path parameters dropped; query parameters
  ``utm_*``, ``sid``, ``sessionid``, ``jsessionid``, ``phpsessid``, ``fbclid``, ``gclid`` dropped,
  the rest sorted by (name, value); an empty query dropped. Only ``http``/``https``.
* **depth**: seeds are depth 0; an ``<a href>`` (``rel="nofollow"`` included) or the
  ``<link rel="canonical">`` of another URL on a page of depth d < D yields depth d + 1 (first
  discovery wins, breadth first); a redirect target has the depth of the URL that redirected to
  it (a redirect is not a link). Pages at depth D are fetched, their links ignored.
* **robots directives** of a fetched page, for product token A: the comma-separated tokens of
  ``<meta name="robots">`` and ``<meta name="A">`` (names case-insensitive) and of every
  ``X-Robots-Tag`` header line, either unscoped (``noindex``) or scoped to A (``A: nofollow``);
  ``none`` means ``noindex, nofollow``; tokens for another agent (``<meta name="otherbot">``,
  ``X-Robots-Tag: otherbot: nofollow``) do not apply. **nofollow**: the page's ``<a href>``
  links are ignored, its canonical link is not. **noindex**: the page is still fetched (and
  counted) and its links followed; only its text is not kept. The canonical link is the first
  ``<link rel="canonical" href>``, resolved against the page's URL; **tdm_reserved**: a
  ``tdm-reservation: 1`` header or ``<meta name="tdm-reservation" content="1">`` (TDMRep).
  The markup read is the page's ``<head>`` as the generator writes it (``Route.head``, checked
  against the served bytes by the tests), parsed here with ``html.parser``, and the response's
  headers (``Route.headers``, sent as they are).
* a URL is **requested** when it has depth <= D, its scheme is ``http``, its host is a host of
  this web (so never a private, loopback, link-local or metadata address, ``localhost``, or a
  ``mailto:``/``tel:``/``javascript:``/``ftp:``/``data:`` link), and robots.txt of its host allows
  its path and query for A. robots.txt: 200 -> the first 512000 bytes (500 KiB) are parsed,
  groups are chosen by case-insensitive product-token equality, else ``*``; the longest
  matching rule wins, ``Allow`` on a tie; ``*`` and a final ``$`` are wildcards; a 3xx is
  followed up to 5 hops; 4xx -> everything allowed; 5xx -> everything disallowed. Redirects
  are followed up to 5 hops from the first URL; a target seen earlier in the chain stops it.

``expected_attempts`` = every requested URL (robots.txt itself never counts): pages, errors
(404, 500, always-429), non-HTML types, dropped connections, each URL of a redirect chain or
loop and the chain's target.

``expected_fetches`` = the requested URLs whose final response is a complete ``200`` with
content type ``text/html``, for a client that retries failures in later attempts: so it
includes flaky.net/flaky.html (503 twice, then 200), ratelimit.com/limited.html (429 once),
soft 404, slow and trickled pages, the 40 MiB body and the gzip bomb (200 HTML, a crawler
truncates them), charset and broken-HTML pages, redirect targets; and excludes 4xx/5xx,
dropped connections, redirecting URLs themselves and non-HTML bodies. Pages of the changing
hosts are 200 HTML with the same links at any time, so they count whatever the clock; when
and how often their texts change is :mod:`crawllib.testweb.changes`. noindex pages count too.

``Expected.directives`` = the robots directives of every fetched URL that has any (so far only
directives.org's pages); ``expected_noindex`` = the fetched URLs whose text a correct crawl
does not keep.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

if TYPE_CHECKING:
    from crawllib.testweb.site import Site

MAX_REDIRECTS = 5
ROBOTS_MAX_BYTES = 512_000
SESSION_PARAMS = frozenset({"sid", "sessionid", "jsessionid", "phpsessid"})
TRACKING_PARAMS = SESSION_PARAMS | {"fbclid", "gclid"}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_PATH_SESSION = re.compile(r";(?:jsessionid|sid|sessionid|phpsessid)=[^/;?]*", re.IGNORECASE)


def canonical_url(href: str, base: str | None = None) -> str | None:
    """The canonical form of ``href`` (relative to ``base``), or None if not http(s)."""
    href = href.strip()
    m = _SCHEME.match(href)
    if m:
        return _canonical(href) if m.group(1).lower() in ("http", "https") else None
    return None if base is None else _canonical(_join(base, href))


@functools.lru_cache(maxsize=1 << 18)
def _canonical(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in ("http", "https") or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, 80 if scheme == "http" else 443) else f"{host}:{port}"
    path = _remove_dot_segments(_PATH_SESSION.sub("", parts.path))
    query = parts.query
    if query:
        pairs = [
            (k, v)
            for k, v in parse_qsl(query, keep_blank_values=True)
            if k.lower() not in TRACKING_PARAMS and not k.lower().startswith("utm_")
        ]
        query = urlencode(sorted(pairs))
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _join(base: str, ref: str) -> str:
    """RFC 3986 5.2 for a relative ``ref`` and an absolute ``base`` (dot segments later)."""
    if ref.startswith("//"):
        return base.split(":", 1)[0] + ":" + ref
    if ref.startswith("#") or not ref:
        return base.split("#", 1)[0]
    origin, path = _split_base(base)
    if ref.startswith("/"):
        return origin + ref
    if ref.startswith("?"):
        return origin + path + ref
    return origin + path.rsplit("/", 1)[0] + "/" + ref


@functools.lru_cache(maxsize=1024)
def _split_base(base: str) -> tuple[str, str]:
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}", parts.path or "/"


def _remove_dot_segments(path: str) -> str:
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segments[-1] in (".", "..") and out:
        out.append("")
    return "/" + "/".join(out)


def is_private_host(host: str) -> bool:
    """True for ``localhost`` and IP literals that are not global (private, loopback, ...)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not ip.is_global or ip.is_multicast


@dataclass
class RobotsRules:
    """Rules of one robots.txt for one agent; ``allowed(path_and_query)``."""

    rules: list[tuple[bool, str]] = field(default_factory=list)  # (is_allow, pattern)
    disallow_all: bool = False

    def allowed(self, path_qs: str) -> bool:
        if self.disallow_all:
            return False
        best: tuple[int, bool] | None = None
        for is_allow, pattern in self.rules:
            if _pattern_regex(pattern).match(path_qs):
                best = max(best or (-1, False), (len(pattern), is_allow))
        return best is None or best[1]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    return re.compile(".*".join(re.escape(p) for p in body.split("*")) + ("$" if anchored else ""))


def parse_robots(data: bytes, agent: str) -> RobotsRules:
    """RFC 9309 groups of the first 500 KiB of ``data``, for product token ``agent``."""
    text = data[:ROBOTS_MAX_BYTES].decode("utf-8", errors="replace")
    groups: list[tuple[list[str], list[tuple[bool, str]]]] = []
    in_rules = True
    for raw in text.splitlines():
        key, sep, value = raw.split("#", 1)[0].partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep:
            continue
        if key == "user-agent":
            if in_rules:
                groups.append(([], []))
                in_rules = False
            groups[-1][0].append(value.lower())
        elif key in ("allow", "disallow", "crawl-delay") and groups:
            in_rules = True
            if key != "crawl-delay" and value:
                groups[-1][1].append((key == "allow", value))
    mine = [rules for agents, rules in groups if agent.lower() in agents]
    chosen = mine or [rules for agents, rules in groups if "*" in agents]
    return RobotsRules([rule for rules in chosen for rule in rules])


def robots_rules(site: Site, host: str, agent: str) -> RobotsRules:
    """What a correct crawler concludes from ``http://host/robots.txt``."""
    url = f"http://{host}/robots.txt"
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        route = site.route(parts.hostname or "", parts.path, parts.query)
        if route.is_redirect:
            url = urljoin(url, route.location)
            continue
        if route.status == 200:
            return parse_robots(route.render(), agent)
        return RobotsRules(disallow_all=route.status >= 500)
    return RobotsRules()  # too many redirects: unavailable, like a 4xx


# X-Robots-Tag rules that take a value after a colon: "max-snippet: 20" is not an agent "max-snippet"
VALUED_RULES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
_PRODUCT_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Directives:
    """What a fetched page tells product token A (see the module docstring): ``rules`` are the
    robots tokens that apply to A, lowercase, ``none`` spelt out as ``noindex`` and ``nofollow``
    (``noai``, ``noimageai``... kept as they are); ``canonical`` is the canonical URL of its
    ``<link rel="canonical">`` when that is another URL, else None."""

    rules: frozenset[str] = frozenset()
    canonical: str | None = None
    tdm_reserved: bool = False

    @property
    def noindex(self) -> bool:
        return "noindex" in self.rules

    @property
    def nofollow(self) -> bool:
        return "nofollow" in self.rules

    @property
    def noai(self) -> bool:
        return "noai" in self.rules

    def __bool__(self) -> bool:
        return bool(self.rules or self.canonical or self.tdm_reserved)


class _HeadTags(HTMLParser):
    """``<meta name content>`` and ``<link rel href>`` tags, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.meta: list[tuple[str, str]] = []  # (name lowercase, content)
        self.links: list[tuple[list[str], str]] = []  # (rel tokens lowercase, href)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "meta" and "name" in values:
            self.meta.append((values["name"].strip().lower(), values.get("content", "")))
        elif tag == "link" and "href" in values:
            self.links.append((values.get("rel", "").lower().split(), values["href"]))


def _rule_tokens(text: str) -> set[str]:
    """``"noindex, max-snippet: 20, NONE"`` -> {"noindex", "max-snippet", "nofollow"}."""
    tokens = {t.split(":", 1)[0].strip().lower() for t in text.split(",")} - {""}
    if "none" in tokens:
        tokens |= {"noindex", "nofollow"}
    return tokens - {"none"}


def _header_rules(value: str, agent: str) -> set[str]:
    """The rules of one X-Robots-Tag line that apply to ``agent``."""
    name, sep, rest = value.partition(":")
    name = name.strip()
    if sep and _PRODUCT_TOKEN.fullmatch(name) and name.lower() not in VALUED_RULES:
        return _rule_tokens(rest) if name.lower() == agent.lower() else set()
    return _rule_tokens(value)


def directives(
    head: str, headers: Iterable[tuple[str, str]], url: str, agent: str = "crawllib"
) -> Directives:
    """The robots directives of the page at ``url`` whose ``<head>`` holds ``head`` and whose
    response carries ``headers``, for product token ``agent``."""
    rules: set[str] = set()
    tdm = False
    for name, value in headers:
        if name.lower() == "x-robots-tag":
            rules |= _header_rules(value, agent)
        elif name.lower() == "tdm-reservation":
            tdm = tdm or value.strip() == "1"
    canonical = None
    if head:
        tags = _HeadTags()
        tags.feed(head)
        tags.close()
        for name, content in tags.meta:
            if name in ("robots", agent.lower()):
                rules |= _rule_tokens(content)
            elif name == "tdm-reservation":
                tdm = tdm or content.strip() == "1"
        hrefs = [href for rel, href in tags.links if "canonical" in rel]
        if hrefs:
            target = canonical_url(hrefs[0], url)
            canonical = target if target != canonical_url(url) else None
    return Directives(frozenset(rules), canonical, tdm)


def page_directives(site: Site, url: str, agent: str = "crawllib") -> Directives:
    """The directives :func:`directives` reads from the response to ``url`` (no redirects)."""
    parts = urlsplit(url)
    route = site.route(parts.netloc, parts.path, parts.query, nonce="truth")
    return directives(route.head, route.headers, url, agent)


@dataclass
class Expected:
    attempts: set[str]
    fetches: set[str]
    depth: dict[str, int]  # every discovered canonical URL (requested or not) -> its depth
    # every fetched URL whose page has robots directives, a TDM reservation or a canonical link
    directives: dict[str, Directives] = field(default_factory=dict)

    @property
    def noindex(self) -> set[str]:
        """Fetched URLs whose text a correct crawl does not keep."""
        return {url for url, d in self.directives.items() if d.noindex}


def expect(
    site: Site, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
) -> Expected:
    """Breadth-first walk of the site's own link graph, with the rules in the module docstring."""
    hosts = set(site.hosts)
    policies: dict[str, RobotsRules] = {}
    out = Expected(set(), set(), {})

    def requestable(url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.netloc not in hosts or is_private_host(parts.netloc):
            return False
        if parts.netloc not in policies:
            policies[parts.netloc] = robots_rules(site, parts.netloc, agent)
        path_qs = parts.path + (f"?{parts.query}" if parts.query else "")
        return policies[parts.netloc].allowed(path_qs)

    def visit(url: str, depth: int) -> tuple[str, tuple[str, ...]] | None:
        """The final URL and the URLs its page leads to (links unless nofollow, canonical)."""
        chain: set[str] = set()
        while url not in chain and len(chain) <= MAX_REDIRECTS and requestable(url):
            chain.add(url)
            out.attempts.add(url)
            parts = urlsplit(url)
            route = site.route(parts.netloc, parts.path, parts.query, nonce="truth")
            if not route.is_redirect:
                if not route.delivers_html:
                    return None
                out.fetches.add(url)
                found = directives(route.head, route.headers, url, agent)
                if not found:
                    return url, route.links
                out.directives[url] = found
                links = () if found.nofollow else route.links
                return url, links + ((found.canonical,) if found.canonical else ())
            target = canonical_url(route.location, url)
            if target is None:
                return None
            out.depth.setdefault(target, depth)
            url = target
        return None

    level = _discover(
        [canonical_url(s) for s in (site.seeds() if seeds is None else seeds)], 0, out
    )
    for depth in range(max_depth + 1):
        found: list[str | None] = []
        for url in level:
            page = visit(url, depth)
            if page is not None and depth < max_depth:
                final, links = page
                found += [canonical_url(href, final) for href in links]
        level = _discover(found, depth + 1, out)
    return out


def _discover(urls: list[str | None], depth: int, out: Expected) -> list[str]:
    new = []
    for url in urls:
        if url is not None and url not in out.depth:
            out.depth[url] = depth
            new.append(url)
    return new


def expected_fetches(
    site: Site, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
) -> set[str]:
    """Canonical URLs a correct crawl fetches as HTML 200 (see the module docstring)."""
    return expect(site, max_depth, agent, seeds).fetches


def expected_attempts(
    site: Site, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
) -> set[str]:
    """Canonical URLs a correct crawl requests at least once (see the module docstring)."""
    return expect(site, max_depth, agent, seeds).attempts


def expected_noindex(
    site: Site, max_depth: int, agent: str = "crawllib", seeds: list[str] | None = None
) -> set[str]:
    """Canonical URLs a correct crawl fetches but whose text it does not keep (noindex)."""
    return expect(site, max_depth, agent, seeds).noindex
