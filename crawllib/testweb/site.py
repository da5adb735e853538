"""The test web's content and link graph, generated from ``(seed, host, path)`` on demand.

Regular hosts (``WebSpec.hosts`` of them) are news-like sites. With ``f = WebSpec.fanout``
(default 2): ``/`` links to ``/p/0.html``..``/p/<f>.html``; ``/p/<n>.html`` (n < pages_per_host)
links to ``f·n+1``..``f·n+f`` (a tree, so page n sits at depth ~log_f(n+1)+1) plus random pages
below ``f·n+f+1`` (never deeper than its children) on the same host or, with probability
``cross_host_link_share``, on another regular host (with ``shortcuts``, any page of it: a deep
page is then fewer links away through another host than through its own tree). Every target is written
in one of the forms real pages use (relative, ``./``, ``../``, root-relative, absolute,
protocol-relative, mixed-case scheme and host, ``:80``, ``#fragment``, ``utm_*`` tracking
parameters, the same query in two orders). Pages also carry links that a correct crawler never
requests: ``mailto:``, ``tel:``, ``javascript:``, ``ftp:`` and private, loopback, link-local and
metadata addresses. The query string never changes a regular page's content. Each regular
host's robots.txt disallows ``/cgi-bin/``, which every home page links to.

Host names use real public suffixes; host i is ``site<i>.net``, ``site<i>.com``,
``www.site<i>.org``, ``blog.site<i>.net``, ``a.shared<k>.org`` or ``b.shared<k>.org`` (i mod 6;
the last two share a registered domain, ``shared.org`` for k = 0). Special hosts are listed
in :mod:`crawllib.testweb.special`; the changing hosts ``live<i>.com`` (``changing_hosts``,
none by default), whose pages change on known schedules, in :mod:`crawllib.testweb.live`.
Every host but the changing ones serves the same bytes at any time.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

from crawllib.testweb import changes, live, special
from crawllib.testweb.content import (
    NOT_FOUND,
    WORDS,
    Link,
    Route,
    article_html,
    hrefs,
    simple_page,
    text_route,
    title,
)

REGULAR_ROBOTS = "User-agent: *\nDisallow: /cgi-bin/\n"
PRIVATE_LINKS = (
    "http://10.0.0.1/",
    "http://192.168.1.1/admin",
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1/x",
    "http://[::1]/",
    "http://localhost/",
)
_PAGE = re.compile(r"/p/(0|[1-9][0-9]{0,8})\.html")


@dataclass(frozen=True)
class WebSpec:
    """Shape of the test web. ``special`` adds the behaviour hosts on top of ``hosts``."""

    seed: int = 0
    hosts: int = 10
    pages_per_host: int = 50
    links_per_page: int = 8
    fanout: int = 2  # children per page in a regular host's tree (see the module docstring)
    cross_host_link_share: float = 0.2
    special: bool = True
    slow_seconds: float = 3.0  # delay of slow.net/slow.html; trickle.html spreads its body over it
    flaky_failures: int = 2  # flaky.net/flaky.html answers 503 this many times per URL, then 200
    big_body_bytes: int = 40 * 1024 * 1024  # bigbody.net/big.html
    bomb_bytes: int = 1 << 30  # gzipbomb.org/bomb.html inflates to this many zero bytes
    # loopback addresses served (127.0.0.1 .. 127.0.0.N, one port): regular host i is on
    # address i mod N, so with more hosts than addresses some share one; special hosts on .1
    addresses: int = 1
    # hosts (regular or special) served from another address: (host, k) puts host on
    # 127.0.0.<k + 1> (k < addresses), e.g. several special hosts sharing a server
    placed: tuple[tuple[str, int], ...] = ()
    # addresses (k: 127.0.0.<k + 1>) whose every answer, robots.txt included, comes after
    # slow_seconds: busy servers, whatever host is asked
    slow_addresses: tuple[int, ...] = ()
    changing_hosts: int = 0  # live0.com ...: pages that change with the clock (see live)
    changing_pages: int = 40  # /c/0.html .. /c/<n-1>.html on each changing host
    changing_sitemap: bool = False  # changing hosts serve /sitemap.xml (see live)
    # the last popular_pages pages of each regular host (deep in its tree) are linked, with
    # probability popular_link_share, from every page /p/<n>.html of every regular host (its
    # own or, at cross_host_link_share, another): important pages far from home
    popular_pages: int = 0
    popular_link_share: float = 0.5
    # cross-host links may lead anywhere in the other host's tree, not only as deep as the
    # linking page: deep pages are then fewer links away through another host than through
    # their own (shortest paths that cross hosts, found in later generations)
    shortcuts: bool = False
    # with special: these special hosts only (any of crawllib.testweb.special.HOSTS, opt-in
    # ones such as throttled.org included); empty: the default set, SPECIAL_HOSTS
    special_hosts: tuple[str, ...] = ()


def regular_host_name(i: int) -> str:
    k, pair = divmod(i, 6)
    shared = "shared" if k == 0 else f"shared{k}"
    return (
        f"site{i}.net",
        f"site{i}.com",
        f"www.site{i}.org",
        f"blog.site{i}.net",
        f"a.{shared}.org",
        f"b.{shared}.org",
    )[pair]


def _mixed_case(host: str) -> str:
    labels = host.split(".")
    return ".".join([lab.capitalize() for lab in labels[:-1]] + [labels[-1].upper()])


class Site:
    """All hosts of one :class:`WebSpec`; :meth:`route` answers any (host, path, query)."""

    def __init__(self, spec: WebSpec | None = None) -> None:
        self.spec = spec or WebSpec()
        self.regular = [regular_host_name(i) for i in range(self.spec.hosts)]
        self._index = {h: i for i, h in enumerate(self.regular)}
        chosen = tuple(self.spec.special_hosts) or special.SPECIAL_HOSTS
        unknown = [h for h in chosen if h not in special.HOSTS]
        if unknown:
            raise ValueError(f"no special host {', '.join(unknown)}")
        self.special = list(chosen) if self.spec.special else []
        if not self.regular:  # nothing to mirror
            self.special = [h for h in self.special if h != "mirror.net"]
        self.changing = [changes.changing_host_name(i) for i in range(self.spec.changing_hosts)]
        self.hosts = self.regular + self.special + self.changing
        for host, k in self.spec.placed:
            if host not in self.hosts or not 0 <= k < max(1, self.spec.addresses):
                raise ValueError(f"cannot place {host} on address {k} of {self.spec.addresses}")
        self._special = set(self.special)
        self._changing = set(self.changing)

    def seeds(self) -> list[str]:
        """Home page URL of every host."""
        return [f"http://{h}/" for h in self.hosts]

    def route(
        self, host: str, path: str, query: str = "", nonce: str = "", now: float | None = None
    ) -> Route:
        """The response for ``http://host/path?query``; ``nonce`` is fresh per request (sessions);
        ``now`` (epoch seconds, default ``time.time()``) is the time changing hosts answer as of.

        The host is matched case-insensitively without port; ``;param`` path parameters
        (``;jsessionid=...``) are ignored.
        """
        host = host.lower().rstrip(".")
        path = re.sub(r";[^/]*", "", path) or "/"
        if host in self._index:
            return self.regular_route(self._index[host], path)
        if host in self._special:
            return special.route(self, host, path, query, nonce) or NOT_FOUND
        if host in self._changing:
            when = time.time() if now is None else now
            return live.route(self.spec, host, path, when) or NOT_FOUND
        return NOT_FOUND

    def regular_route(self, i: int, path: str) -> Route:
        host = self.regular[i]
        if path == "/robots.txt":
            return text_route(REGULAR_ROBOTS)
        if path == "/":
            return self._article(i, -1)
        m = _PAGE.fullmatch(path)
        if m and int(m.group(1)) < self.spec.pages_per_host:
            return self._article(i, int(m.group(1)))
        if path.startswith("/cgi-bin/"):
            return simple_page(self.spec.seed, host, path, ["/"], "Search results")
        return NOT_FOUND

    def _article(self, i: int, n: int) -> Route:
        host = self.regular[i]
        path = "/" if n < 0 else f"/p/{n}.html"
        nav, body, footer = self._links(i, n)

        def render() -> bytes:
            rng = random.Random(f"{self.spec.seed}|page|{host}|{path}")
            heading = f"{host} front page" if n < 0 else None
            return article_html(rng, host, heading or title(rng), body, nav, footer).encode()

        return Route(links=hrefs(body, nav, footer), body=render)

    def _links(self, i: int, n: int) -> tuple[list[Link], list[Link], list[Link]]:
        spec, host = self.spec, self.regular[i]
        rng = random.Random(f"{spec.seed}|links|{host}|{n}")
        pages = spec.pages_per_host
        nav: list[Link] = [("/", "Home")]
        if pages:
            nav.append(("/p/0.html", "Latest"))
        nav.append(("#main", "Skip to content"))
        targets: list[tuple[int, int]] = []
        f = spec.fanout
        if n < 0:
            targets = [(i, m) for m in range(min(f + 1, pages))]
        else:
            targets = [(i, m) for m in range(f * n + 1, f * n + f + 1) if m < pages]
            for _ in range(max(0, spec.links_per_page - len(targets)) if pages else 0):
                bound = min(pages, f * n + f + 1)
                other = len(self.regular) > 1 and rng.random() < spec.cross_host_link_share
                j = i
                if other:
                    j = rng.randrange(len(self.regular) - 1)
                    j += j >= i
                targets.append((j, rng.randrange(pages if other and spec.shortcuts else bound)))
            if spec.popular_pages and pages and rng.random() < spec.popular_link_share:
                j = i
                if len(self.regular) > 1 and rng.random() < spec.cross_host_link_share:
                    j = rng.randrange(len(self.regular) - 1)
                    j += j >= i
                m = pages - 1 - rng.randrange(min(spec.popular_pages, pages))
                if (j, m) != (i, n):
                    targets.append((j, m))
        body: list[Link] = []
        for j, m in targets:
            anchor = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
            for href in self._forms(rng, i, n, j, m):
                body.append((href, anchor))
        if n < 0:
            body.append(("/cgi-bin/search?q=news", "Search"))
            if len(self.regular) > 1:
                nxt = self.regular[(i + 1) % len(self.regular)]
                body.append((f"//{nxt}/", "Partner site"))
            odd: tuple[str, ...] = (
                *PRIVATE_LINKS,
                "ftp://files.example.org/pub/",
                "data:text/plain,hi",
            )
        else:
            odd = (rng.choice(PRIVATE_LINKS),)
        footer: list[Link] = [
            (f"mailto:editor@{host}", "Contact"),
            ("tel:+1-555-0100", "Call us"),
            ("javascript:void(0)", "Print"),
        ]
        footer += [(href, "Partner") for href in odd]
        return nav, body, footer

    def _forms(self, rng: random.Random, i: int, n: int, j: int, m: int) -> list[str]:
        """Ways to write a link from page n of host i to page m of host j."""
        target = self.regular[j]
        path = f"/p/{m}.html"
        if j != i:
            return [_absolute(rng, rng.randrange(6), target, path)]
        if n < 0:
            relative = [f"p/{m}.html", f"./p/{m}.html"]
        else:
            relative = [f"{m}.html", f"./{m}.html", f"../p/{m}.html"]
        form = rng.randrange(14)
        if form < 5:  # relative
            return [rng.choice(relative)]
        if form < 7:
            return [path]
        if form == 7:
            return [f"{path}?b=2&a=1", f"{path}?a=1&b=2"]
        if form == 8:
            return [f"{rng.choice(relative)}?utm_source=x&utm_campaign=spring"]
        if form == 9:
            return [f"{rng.choice(relative)}#sec{rng.randint(1, 3)}"]
        return [_absolute(rng, rng.randrange(6), target, path)]


def _absolute(rng: random.Random, form: int, host: str, path: str) -> str:
    if form == 0:
        return f"http://{host}{path}"
    if form == 1:
        return f"//{host}{path}"
    if form == 2:
        return f"HTTP://{_mixed_case(host)}{path}"
    if form == 3:
        return f"http://{host}:80{path}"
    if form == 4:
        return f"http://{host}{path}#sec{rng.randint(1, 3)}"
    return f"http://{host}{path}?utm_source=feed&utm_medium=rss"
