"""The built-in test web: virtual hosting, content, special behaviours, log and ground truth.

Requests go to 127.0.0.1:port only, with the virtual host in the Host header.
"""

from __future__ import annotations

import asyncio
import http.client
import signal
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser

import aiohttp
import pytest
import tldextract
from protego import Protego

from crawllib.testweb import (
    SPECIAL_HOSTS,
    Site,
    TestWeb,
    WebSpec,
    canonical_url,
    expect,
    is_private_host,
    serve_in_thread,
)
from crawllib.testweb.audit import read_log
from crawllib.testweb.content import Route
from crawllib.testweb.payloads import big_body_chunks
from crawllib.testweb.special import HOSTS
from crawllib.testweb.truth import robots_rules
from crawllib.testweb.web import _plain

SPEC = WebSpec(hosts=6, slow_seconds=0.5)


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(SPEC) as tw:
        yield tw


def get(web, host, path, cap=None, headers=None):
    """(status, headers, body) of one request, no redirect following, body read up to cap."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host, **(headers or {})})
        resp = conn.getresponse()
        body = resp.read(cap) if cap else resp.read()
        return resp.status, resp.headers, body
    finally:
        conn.close()


class Hrefs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]


def hrefs_of(body: bytes) -> list[str]:
    parser = Hrefs()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.hrefs


# -- hosting and content ----------------------------------------------------------------------


def test_virtual_hosts_by_host_header_port_ignored(web):
    status, headers, home0 = get(web, "site0.net", "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"<title>site0.net front page | site0.net</title>" in home0
    assert get(web, "SITE0.NET:4321", "/")[2] == home0
    assert get(web, "site1.com", "/")[2] != home0
    assert get(web, "unknown.example.com", "/")[0] == 404
    assert get(web, "site0.net", "/p/999.html")[0] == 404
    assert get(web, "site0.net", "/cgi-bin/search?q=news")[0] == 200  # served, robots-denied


def test_served_bytes_are_the_generator_and_depend_on_seed(web):
    served = get(web, "www.site2.org", "/p/4.html")[2]
    assert served == get(web, "www.site2.org", "/p/4.html")[2]
    assert served == Site(SPEC).route("www.site2.org", "/p/4.html").render()
    other = Site(WebSpec(seed=1, hosts=6)).route("www.site2.org", "/p/4.html").render()
    assert other != served


def test_query_order_and_tracking_do_not_change_content(web):
    plain = get(web, "site1.com", "/p/2.html")[2]
    assert get(web, "site1.com", "/p/2.html?b=2&a=1")[2] == plain
    assert get(web, "site1.com", "/p/2.html?a=1&b=2")[2] == plain
    assert get(web, "site1.com", "/p/2.html?utm_source=x")[2] == plain


def test_pages_are_articles_and_not_near_duplicates():
    site = Site(SPEC)
    pages = [site.route("site0.net", f"/p/{n}.html").render().decode() for n in range(2)]
    for page in pages:
        assert "<title>" in page and "<nav" in page and "<footer>" in page
        assert page.count("<p>") >= 3
    words = [set(p.split()) for p in pages]
    assert len(words[0] & words[1]) / len(words[0] | words[1]) < 0.5


def test_html_links_equal_route_links_everywhere():
    site = Site(SPEC)
    for host in site.hosts:
        for path in ["/", "/p/0.html", "/p/7.html", *HOSTS.get(host, {})]:
            route = site.route(host, path)
            if route.delivers_html and route.behaviour not in ("big", "bomb"):
                assert tuple(hrefs_of(route.render())) == route.links, (host, path)


def test_links_take_every_real_world_form():
    site = Site(WebSpec(hosts=6, pages_per_host=50))
    paths = ["/", *(f"/p/{n}.html" for n in range(50))]
    links = {h for path in paths for h in site.route("site1.com", path).links}
    text = "\n".join(links)
    for needle in ["../p/", "./", "//", "HTTP://", ":80/", "#sec", "utm_source=", "mailto:"]:
        assert needle in text, needle
    assert any(h[0].isdigit() for h in links)  # plain relative: "7.html"
    assert any(h.startswith("/p/") for h in links)  # root-relative
    shuffled = {h[: -len("?b=2&a=1")] for h in links if h.endswith("?b=2&a=1")}
    assert shuffled and all(f"{h}?a=1&b=2" in links for h in shuffled)  # same page, two orders
    assert {"tel:+1-555-0100", "javascript:void(0)", "ftp://files.example.org/pub/"} <= links
    assert {
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
    } <= links
    assert {"http://localhost/", "http://192.168.1.1/admin", "http://127.0.0.1/x"} <= links
    assert any("site1.com" not in h and h.startswith(("http", "//")) for h in links)  # cross-host


def test_hosts_seeds_resolve_and_registered_domains(web):
    assert len(web.hosts) == 6 + len(SPECIAL_HOSTS) == len(set(web.hosts))
    assert web.seeds() == [f"http://{h}/" for h in web.hosts]
    assert web.resolve == {h: f"127.0.0.1:{web.port}" for h in web.hosts}
    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # bundled list, offline
    domains = [extract(h).top_domain_under_public_suffix for h in web.hosts]
    assert domains[:6] == [
        "site0.net",
        "site1.com",
        "site2.org",
        "site3.net",
        "shared.org",
        "shared.org",
    ]
    assert len(set(domains)) == len(domains) - 1


# -- special hosts ------------------------------------------------------------------------------


def test_robots_variants(web):
    assert get(web, "robots404.net", "/robots.txt")[0] == 404
    assert get(web, "robots5xx.net", "/robots.txt")[0] == 503
    status, headers, _ = get(web, "robotsredirect.com", "/robots.txt")
    assert status == 301 and headers["Location"] == "/rules/robots.txt"
    assert b"Disallow: /blocked/" in get(web, "robotsredirect.com", "/rules/robots.txt")[2]
    assert b"Crawl-delay: 2" in get(web, "robotsdelay.org", "/robots.txt")[2]
    assert b"Disallow: /*.php$" in get(web, "robotspattern.org", "/robots.txt")[2]
    assert (
        b"User-agent: crawllib\nDisallow: /nocrawllib/"
        in get(web, "robotsagent.net", "/robots.txt")[2]
    )
    big = get(web, "robotsbig.org", "/robots.txt")[2]
    assert len(big) > 600 * 1024 and big.index(b"Disallow: /late/") > 512_000
    assert b"Disallow: /early/" in big[:1000]


def test_truth_robots_agrees_with_protego():
    site = Site(SPEC)
    for host in [h for h in SPECIAL_HOSTS if h.startswith("robots")]:
        route = site.route(host, "/robots.txt")
        if route.is_redirect:
            route = site.route(host, route.location)
        text = route.render()[:512_000].decode() if route.status == 200 else None
        for agent in ("crawllib", "otherbot", "anybot"):
            rules = robots_rules(site, host, agent)
            for path in [p for p in HOSTS[host] if not p.endswith("robots.txt")]:
                want = (
                    route.status < 500
                    if text is None
                    else Protego.parse(text).can_fetch(f"http://{host}{path}", agent)
                )
                assert rules.allowed(path) == want, (host, agent, path)


def test_traps(web):
    cal = hrefs_of(get(web, "trapcalendar.com", "/cal/2026/12")[2])
    assert "/cal/2026/11" in cal and "/cal/2027/1" in cal
    one, two = (
        hrefs_of(get(web, "sessiontrap.net", "/item/3.html;jsessionid=X")[2]) for _ in range(2)
    )
    assert one != two and one[0] == "/" and one[1].startswith("/?sid=")
    assert one[2].startswith("/item/4.html?sid=") and one[3].startswith("/item/6.html;jsessionid=")
    assert {canonical_url(h, "http://sessiontrap.net/item/3.html") for h in one} == {
        canonical_url(h, "http://sessiontrap.net/item/3.html") for h in two
    }
    assert hrefs_of(get(web, "deeptrap.org", "/deep/a/b/")[2]) == ["/", "/", "c/"]


def test_mirror_and_near_duplicates(web):
    assert get(web, "mirror.net", "/p/3.html")[2] == get(web, "site0.net", "/p/3.html")[2]
    a, b = (get(web, "neardup.org", f"/v/{n}.html")[2].split() for n in (0, 1))
    assert a != b and len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) <= 3


def test_error_statuses(web):
    web.reset_state()
    assert get(web, "err500.com", "/broken.html")[0] == 500
    assert get(web, "notfound.org", "/missing.html")[0] == 404
    status, _, body = get(web, "notfound.org", "/soft404.html")
    assert status == 200 and b"Page not found" in body
    status, headers, _ = get(web, "ratelimit.com", "/always429.html")
    assert status == 429 and headers["Retry-After"] == "1"
    limited = [get(web, "ratelimit.com", "/limited.html") for _ in range(2)]
    assert [r[0] for r in limited] == [429, 200] and limited[0][1]["Retry-After"] == "1"
    assert [get(web, "flaky.net", "/flaky.html")[0] for _ in range(4)] == [503, 503, 200, 200]
    web.reset_state()
    assert get(web, "flaky.net", "/flaky.html")[0] == 503


def test_content_types_and_charsets(web):
    types = {
        p: get(web, "filetypes.com", p)
        for p in ("/img/logo", "/files/report.pdf", "/api/data.json")
    }
    assert [t[1]["Content-Type"] for t in types.values()] == [
        "image/png",
        "application/pdf",
        "application/json",
    ]
    assert types["/img/logo"][2].startswith(b"\x89PNG") and types["/files/report.pdf"][
        2
    ].startswith(b"%PDF")
    _, headers, latin = get(web, "charsets.net", "/latin1.html")
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    with pytest.raises(UnicodeDecodeError):
        latin.decode("utf-8")
    assert get(web, "charsets.net", "/nocharset.html")[1]["Content-Type"] == "text/html"
    _, headers, meta = get(web, "charsets.net", "/meta.html")
    assert headers["Content-Type"] == "text/html" and b'<meta charset="iso-8859-1">' in meta
    assert "Crème" in meta.decode("iso-8859-1")
    assert b"\x00" in get(web, "brokenhtml.org", "/garbage.html")[2]
    assert hrefs_of(get(web, "brokenhtml.org", "/unclosed.html")[2]) == ["/after.html"]


class HeadTags(HTMLParser):
    """Every <meta name content>, <link rel href> and <a rel href> of a page, as served."""

    def __init__(self):
        super().__init__()
        self.meta, self.link, self.a_rel, self.text = [], [], [], []
        self.in_head, self.skip = False, 0

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        self.in_head |= tag == "head"
        self.skip += tag in ("title", "nav", "footer")
        if tag == "meta" and "name" in values:
            self.meta.append((values["name"], values["content"], self.in_head))
        if tag == "link":
            self.link.append((values["rel"], values["href"], self.in_head))
        if tag == "a" and "rel" in values:
            self.a_rel.append((values["rel"], values["href"]))

    def handle_endtag(self, tag):
        self.in_head &= tag != "head"
        self.skip -= tag in ("title", "nav", "footer")

    def handle_data(self, data):
        if not self.skip and not self.in_head:
            self.text.append(data)


def head_tags(body: bytes) -> HeadTags:
    parser = HeadTags()
    parser.feed(body.decode("utf-8"))
    return parser


DIRECTIVE_PAGES = {  # path: (meta tags, X-Robots-Tag lines, canonical href, hrefs beyond "/")
    "/noindex.html": ([("robots", "noindex")], [], None, ["/noindex-child.html"]),
    "/nofollow.html": ([("robots", "nofollow")], [], None, ["/nofollow-only.html"]),
    "/agent-nofollow.html": ([("crawllib", "nofollow")], [], None, ["/agent-only.html"]),
    "/other-agent.html": ([("otherbot", "noindex, nofollow")], [], None, ["/other-child.html"]),
    "/header-noindex.html": ([], ["noindex"], None, []),
    "/header-none.html": ([], ["none"], None, ["/header-only.html"]),
    "/header-other.html": ([], ["otherbot: nofollow"], None, ["/header-other-child.html"]),
    "/canonical.html": ([], [], "/canonical-target.html", []),
    "/nofollow-canonical.html": (
        [("robots", "nofollow")],
        [],
        "/nfc-target.html",
        ["/nfc-only.html"],
    ),
    "/relnofollow.html": ([], [], None, ["/relnf-target.html"]),
    "/noai.html": ([("robots", "noai, noimageai")], [], None, []),
    "/tdm.html": ([("tdm-reservation", "1")], [], None, []),
}
DIRECTIVE_TARGETS = [
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
]


def test_directives_home_links_every_directive_page_and_no_target(web):
    status, headers, body = get(web, "directives.org", "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert hrefs_of(body) == ["/", *DIRECTIVE_PAGES]
    assert set(HOSTS["directives.org"]) == set(DIRECTIVE_PAGES) | set(DIRECTIVE_TARGETS)
    robots = get(web, "directives.org", "/robots.txt")[2]
    assert Protego.parse(robots.decode()).can_fetch(
        "http://directives.org/nfc-only.html", "crawllib"
    )


def test_directives_pages_serve_their_meta_tags_headers_and_links(web):
    for path, (meta, x_robots, canonical, links) in DIRECTIVE_PAGES.items():
        status, headers, body = get(web, "directives.org", path)
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8", path
        tags = head_tags(body)
        assert [(n, c) for n, c, in_head in tags.meta if in_head] == meta, path
        assert [(n, c) for n, c, in_head in tags.meta if not in_head] == [], path
        assert headers.get_all("X-Robots-Tag", []) == x_robots, path
        want_link = [("canonical", canonical, True)] if canonical else []
        assert tags.link == want_link, path
        assert hrefs_of(body) == ["/", "/", *links], path
        rel = [("nofollow", "/relnf-target.html")] if path == "/relnofollow.html" else []
        assert tags.a_rel == rel, path
        assert ("tdm-reservation" in headers) == (path == "/tdm.html"), path
    assert get(web, "directives.org", "/tdm.html")[1]["tdm-reservation"] == "1"
    for path in DIRECTIVE_TARGETS:
        status, headers, body = get(web, "directives.org", path)
        tags = head_tags(body)
        assert status == 200 and not tags.meta and not tags.link and not tags.a_rel, path
        assert "X-Robots-Tag" not in headers and hrefs_of(body) == ["/", "/"], path


def test_directives_pages_are_distinct_articles_but_the_canonical_duplicate(web):
    texts = {}
    for path in [*DIRECTIVE_PAGES, *DIRECTIVE_TARGETS]:
        body = get(web, "directives.org", path)[2]
        texts[path] = " ".join(" ".join(head_tags(body).text).split())
        assert len(texts[path].split()) >= 200, path
    assert texts["/canonical.html"] == texts["/canonical-target.html"]
    others = [t for p, t in texts.items() if p != "/canonical.html"]
    assert len(set(others)) == len(others)
    canonical, target = (
        get(web, "directives.org", p)[2] for p in ("/canonical.html", "/canonical-target.html")
    )
    assert canonical.replace(b'<link rel="canonical" href="/canonical-target.html">', b"") == target


def test_route_head_is_the_served_head_markup():
    """What truth reads (Route.head) is what the page carries in <head>, and all of it."""
    site = Site(SPEC)
    heads = 0
    for host, paths in HOSTS.items():
        for path in ["/", *paths]:
            route = site.route(host, path)
            if not route.delivers_html or route.behaviour in ("big", "bomb"):
                continue
            body = route.render()
            if route.head:
                heads += 1
                assert body[: body.index(b"</head>")].endswith(f"</title>{route.head}".encode()), (
                    host,
                    path,
                )
            for tag in ("<meta name=", "<link"):
                assert body.count(tag.encode()) == route.head.count(tag), (host, path, tag)
    assert heads == 8  # the directives.org pages with a meta tag or a canonical link


def test_repeated_response_headers_are_sent_as_separate_lines():
    route = Route(headers=(("X-Robots-Tag", "noindex"), ("X-Robots-Tag", "otherbot: nofollow")))
    resp = _plain(route)
    assert resp.headers.getall("X-Robots-Tag") == ["noindex", "otherbot: nofollow"]
    assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
    typed = _plain(Route(content_type="text/plain", headers=(("Content-Type", "image/png"),)))
    assert typed.headers.getall("Content-Type") == ["image/png"]


def test_redirect_chain_and_loop(web):
    hops, path = [], "/chain/start"
    for _ in range(5):
        status, headers, _ = get(web, "redirects.com", path)
        hops.append((status, path))
        if status != 200:
            path = canonical_url(headers["Location"], f"http://redirects.com{path}").split(".com")[
                1
            ]
    assert hops[:4] == [
        (301, "/chain/start"),
        (302, "/chain/2"),
        (307, "/chain/3"),
        (200, "/chain/end.html"),
    ]
    assert get(web, "redirects.com", "/loop/a")[1]["Location"] == "/loop/b"
    assert get(web, "redirects.com", "/loop/b")[1]["Location"] == "http://redirects.com/loop/a"


def test_slow_and_trickle(web):
    start = time.monotonic()
    assert get(web, "slow.net", "/slow.html")[0] == 200
    assert time.monotonic() - start >= SPEC.slow_seconds
    start = time.monotonic()
    status, _, body = get(web, "slow.net", "/trickle.html")
    assert status == 200 and body.endswith(b"</html>\n")
    assert time.monotonic() - start >= SPEC.slow_seconds * 0.9


def test_dropped_connections(web):
    with pytest.raises(http.client.IncompleteRead):
        get(web, "dropped.org", "/drop.html")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        get(web, "dropped.org", "/drop-early.html")
    statuses = {r.path_qs: r.status for r in web.log if r.host == "dropped.org"}
    assert statuses == {"/drop.html": 200, "/drop-early.html": 0}


def test_big_body_is_streamed(web):
    status, headers, head = get(web, "bigbody.net", "/big.html", cap=2 << 20)
    assert status == 200 and int(headers["Content-Length"]) == 40 * 1024 * 1024
    assert len(head) == 2 << 20 and head.startswith(b"<!DOCTYPE html>")
    sizes = [len(c) for c in big_body_chunks(SPEC.big_body_bytes)]
    assert sum(sizes) == SPEC.big_body_bytes and max(sizes) <= 64 * 1024


def test_gzip_bomb_is_small_and_inflates_hugely(web):
    status, headers, body = get(web, "gzipbomb.org", "/bomb.html")
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert int(headers["Content-Length"]) == len(body) < 2_000_000
    inflater = zlib.decompressobj(31)
    first = inflater.decompress(body, 50 << 20)
    assert first == bytes(50 << 20) and inflater.unconsumed_tail  # far more than 50 MiB to come


def test_request_log(web):
    web.reset_log()
    get(web, "site0.net", "/robots.txt")
    get(web, "site0.net", "/p/1.html?a=1", headers={"User-Agent": "crawllib/0.1"})
    get(web, "nowhere.org", "/x")
    log = web.log
    assert [(r.host, r.path_qs, r.status) for r in log] == [
        ("site0.net", "/robots.txt", 200),
        ("site0.net", "/p/1.html?a=1", 200),
        ("nowhere.org", "/x", 404),
    ]
    assert log[1].user_agent == "crawllib/0.1" and all(r.start <= r.end for r in log)
    web.reset_log()
    assert web.log == []


def test_async_mode_with_aiohttp():
    async def scenario():
        async with TestWeb(WebSpec(hosts=2, special=False)) as tw:
            async with aiohttp.ClientSession() as session:
                url = f"{tw.base_url}/p/0.html"
                async with session.get(url, headers={"Host": "site1.com"}) as resp:
                    body = await resp.read()
            return tw.port, resp.status, body, tw.log, tw.site

    port, status, body, log, site = asyncio.run(scenario())
    assert port > 0 and status == 200
    assert body == site.route("site1.com", "/p/0.html").render()
    assert [(r.host, r.path_qs) for r in log] == [("site1.com", "/p/0.html")]


def test_command_line_serves_until_interrupted():
    cmd = [sys.executable, "-m", "crawllib.testweb", "--hosts", "2", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[1].startswith("[network]") and '"site0.net" = "127.0.0.1:' in lines[2]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


# -- ground truth ----------------------------------------------------------------------------


def test_canonical_url():
    base = "http://site1.com/p/3.html"
    cases = {
        "7.html": "http://site1.com/p/7.html",
        "../p/7.html#sec2": "http://site1.com/p/7.html",
        "//Site2.COM/p/1.html": "http://site2.com/p/1.html",
        "HTTP://Site1.COM:80/p/2.html": "http://site1.com/p/2.html",
        "/p/2.html?b=2&a=1&utm_source=x": "http://site1.com/p/2.html?a=1&b=2",
        "/item/2.html;jsessionid=AB?sid=9": "http://site1.com/item/2.html",
        "http://site1.com:8080/a/./b/../c": "http://site1.com:8080/a/c",
        "#top": base,
        "mailto:x@site1.com": None,
        "javascript:void(0)": None,
    }
    assert {href: canonical_url(href, base) for href in cases} == cases
    assert all(is_private_host(h) for h in ["10.0.0.1", "[::1]", "localhost", "169.254.169.254"])
    assert not is_private_host("site1.com")


def test_expected_grows_with_depth_from_seeds_only_at_zero(web):
    seeds = {canonical_url(s) for s in web.seeds()}
    levels = [web.expected_fetches(d) for d in range(4)]
    assert levels[0] == seeds - {"http://robots5xx.net/"}
    assert levels[0] < levels[1] < levels[2] < levels[3]
    attempts = web.expected_attempts(3)
    assert levels[3] <= attempts
    assert web.expected_fetches(1, seeds=["http://site0.net/"]) == {
        "http://site0.net/",
        "http://site0.net/p/0.html",
        "http://site0.net/p/1.html",
        "http://site0.net/p/2.html",
        "http://site1.com/",
    }


def test_expected_respects_robots_and_skips_unfetchable(web):
    fetches, attempts = web.expected_fetches(3), web.expected_attempts(3)
    assert "http://robotsallow.com/private/open/info.html" in fetches
    assert "http://robotsallow.com/private/secret.html" not in attempts
    assert not {u for u in attempts if "robots5xx.net" in u}
    assert "http://robotsbig.org/late/1.html" in fetches
    assert "http://robotsbig.org/early/1.html" not in attempts
    assert "http://robotspattern.org/drafts/1.html" in fetches
    assert {
        "http://robotspattern.org/index.php",
        "http://robotspattern.org/blog/drafts/1.html",
    }.isdisjoint(attempts)
    assert "http://robotsagent.net/members/1.html" in fetches
    assert "http://robotsagent.net/nocrawllib/1.html" not in attempts
    assert not {u for u in web.expected_attempts(3, agent="otherbot") if "robotsagent.net" in u}
    assert not {u for u in attempts if "/cgi-bin/" in u}
    assert all(u.startswith("http://") and u.split("/")[2] in web.hosts for u in attempts)
    assert not [u for u in attempts if "utm_" in u or "sid=" in u or "jsessionid" in u or "#" in u]


def test_expected_errors_redirects_and_traps(web):
    fetches, attempts = web.expected_fetches(3), web.expected_attempts(3)
    failing = {
        "http://err500.com/broken.html",
        "http://notfound.org/missing.html",
        "http://ratelimit.com/always429.html",
        "http://dropped.org/drop.html",
        "http://filetypes.com/img/logo",
        "http://redirects.com/chain/start",
        "http://redirects.com/chain/2",
        "http://redirects.com/loop/a",
        "http://redirects.com/loop/b",
    }
    assert failing <= attempts and failing.isdisjoint(fetches)
    for url in [
        "chain/end.html",
        "flaky.html",
        "limited.html",
        "soft404.html",
        "big.html",
        "bomb.html",
    ]:
        assert any(u.endswith("/" + url) for u in fetches), url
    for depth in (2, 4):
        e = expect(Site(SPEC), depth)
        assert len([u for u in e.fetches if "/cal/" in u]) == 2 * depth - 1
        assert (
            max(len(u) for u in e.fetches if "deeptrap" in u)
            == len("http://deeptrap.org/deep/") + 2 * depth
        )


def test_every_expected_fetch_is_served_as_html(web):
    expected = expect(Site(SPEC), 2, seeds=["http://site0.net/", "http://blog.site3.net/"]).fetches
    assert len(expected) > 10
    for url in expected:
        host, _, path = url[len("http://") :].partition("/")
        status, headers, _ = get(web, host, "/" + path)
        assert status == 200 and headers["Content-Type"].startswith("text/html"), url


def test_command_line_writes_its_request_log_when_terminated(tmp_path):
    log = tmp_path / "log.jsonl"
    cmd = [sys.executable, "-m", "crawllib.testweb", "--hosts", "2", "--port", "0"]
    proc = subprocess.Popen([*cmd, "--log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split("127.0.0.1:")[1].split(":")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/p/1.html", headers={"Host": "site1.com", "User-Agent": "probe"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    [record] = read_log(str(log))
    assert (record.host, record.path_qs, record.status, record.user_agent) == (
        "site1.com",
        "/p/1.html",
        200,
        "probe",
    )


def test_hosts_are_served_from_several_loopback_addresses_some_shared():
    spec = WebSpec(hosts=5, addresses=2, special=True)
    with serve_in_thread(spec) as web:
        resolve = web.resolve
        assert {resolve[h].rsplit(":", 1)[0] for h in web.site.regular} == {
            "127.0.0.1",
            "127.0.0.2",
        }
        assert resolve["site1.com"] == f"127.0.0.2:{web.port}"  # regular host 1 of 5
        assert resolve["redirects.com"].startswith("127.0.0.1:")  # special hosts: .1
        for host in ("site0.net", "site1.com"):
            address = resolve[host].rsplit(":", 1)[0]
            conn = http.client.HTTPConnection(address, web.port, timeout=10)
            conn.request("GET", "/", headers={"Host": host})
            assert conn.getresponse().status == 200
            conn.close()
        log = web.log
    assert [(r.host, r.address) for r in log] == [
        ("site0.net", "127.0.0.1"),
        ("site1.com", "127.0.0.2"),
    ]


def test_placed_hosts_share_a_server_with_the_opt_in_hosts_of_the_politeness_scenario():
    shared = ("throttled.org", "overloaded.net", "crawldelay60.org")
    spec = WebSpec(
        hosts=2,
        addresses=3,
        special_hosts=(*shared, "slowserver.net"),
        placed=(("site0.net", 1), *((h, 1) for h in shared), ("slowserver.net", 2)),
        slow_seconds=0.3,
    )
    with serve_in_thread(spec) as web:
        resolve = web.resolve
        assert {h: resolve[h].rsplit(":", 1)[0] for h in web.hosts} == {
            "site0.net": "127.0.0.2",  # placed: regular host 0 would be on .1
            "site1.com": "127.0.0.2",
            **dict.fromkeys(shared, "127.0.0.2"),
            "slowserver.net": "127.0.0.3",
        }
        assert [get(web, "overloaded.net", p)[0] for p in ("/", "/x.html")] == [503, 503]
        assert get(web, "overloaded.net", "/robots.txt")[0] == 200
        assert b"Crawl-delay: 60" in get(web, "crawldelay60.org", "/robots.txt")[2]
        assert b"/c/1.html" in get(web, "crawldelay60.org", "/")[2]
        start = time.monotonic()
        assert get(web, "slowserver.net", "/robots.txt")[0] == 200  # robots.txt slow too
        assert b"/s/1.html" in get(web, "slowserver.net", "/")[2]
        assert get(web, "slowserver.net", "/s/2.html")[0] == 200
        assert get(web, "slowserver.net", "/sitemap.xml")[0] == 404  # a slow 404
        assert time.monotonic() - start >= 4 * 0.3
    with pytest.raises(ValueError, match="cannot place"):
        Site(WebSpec(hosts=2, addresses=2, placed=(("site0.net", 2),)))


def test_a_slow_address_answers_slowly_whatever_host_is_asked():
    spec = WebSpec(hosts=4, addresses=2, special=False, slow_addresses=(1,), slow_seconds=0.4)
    with serve_in_thread(spec) as web:

        def seconds(host: str, path: str) -> float:
            address = web.resolve[host].rsplit(":", 1)[0]
            conn = http.client.HTTPConnection(address, web.port, timeout=10)
            start = time.monotonic()
            conn.request("GET", path, headers={"Host": host})
            assert conn.getresponse().status == 200
            conn.close()
            return time.monotonic() - start

        # site1.com and blog.site3.net on 127.0.0.2, site0.net on 127.0.0.1
        assert seconds("site1.com", "/") >= 0.4
        assert seconds("blog.site3.net", "/robots.txt") >= 0.4
        assert seconds("site0.net", "/") < 0.4
