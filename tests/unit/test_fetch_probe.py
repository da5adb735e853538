"""The soft-404 probe: after a fresh robots.txt, one request per host for a URL no page links
to, made as politely as a page, whose answer is a "probe" record."""

from __future__ import annotations

import asyncio
import re

from aiohttp import web
from test_fetch_support import SLACK, LocalWeb, config, gaps, row

from crawllib.core.vocab import PROBE_HEX, PROBE_PREFIX, is_probe_path, probe_path
from crawllib.engine import fetch_rows

EXACT = 0.001  # wall clock (fetched_at) against the loop's monotonic clock
PROBE = re.compile(r"/crawllib-probe-[0-9a-f]{16}\.html")
NOT_FOUND = (
    "<html><head><title>Page not found</title></head><body><h1>Page not found</h1>"
    "<p>Sorry, the page you are looking for does not exist on this site any more. "
    "Try the home page or the search box instead.</p></body></html>"
)


def probe_config(server: LocalWeb, *hosts: str, **changes):
    return config(server.resolve(*hosts), fetch__soft404_probe=True, **changes)


def run(urls, cfg, robots_rows=()) -> dict[str, list[dict]]:
    """Fetch `urls`; the records by kind."""
    out: dict[str, list[dict]] = {}
    for record in fetch_rows([row(u) for u in urls], cfg, robots_rows):
        out.setdefault(record["record"], []).append(record)
    return out


def probes_asked(server: LocalWeb, host: str) -> list[str]:
    return [h.path_qs for h in server.hits_of(host) if is_probe_path(h.path_qs)]


def test_the_probe_path_is_the_agent_then_random_hex():
    path = probe_path("crawllib", "0123456789abcdef")
    assert path == "/crawllib-probe-0123456789abcdef.html"
    assert path.startswith(PROBE_PREFIX.format(agent="crawllib")) and PROBE_HEX == 16
    assert is_probe_path(path) and is_probe_path("/other-bot-probe-0123456789abcdef.html")
    assert not is_probe_path("/crawllib-probe-0123.html")
    assert not is_probe_path("/p/crawllib-probe-0123456789abcdef.html")


def test_one_probe_per_host_after_its_pages_and_delay_fingerprinted_like_a_page():
    hosts = ("a.test", "b.test")
    with LocalWeb() as server:

        async def not_found(request: web.Request) -> web.Response:
            return web.Response(text=NOT_FOUND, content_type="text/html")

        for h in hosts:
            server.text(h, "/robots.txt", "User-agent: *\nDisallow: /private/\n")
            server.fallback(h, not_found)
        urls = [f"http://{h}/{p}" for h in hosts for p in ("1", "2", "3")]
        cfg = probe_config(server, *hosts, politeness__default_delay=0.2)
        records = run(urls, cfg)
        again = run(urls[:1], cfg)  # a new call, robots.txt fetched afresh: a new probe
        hits = {h: server.hits_of(h) for h in hosts}
        first = {h: probes_asked(server, h)[0] for h in hosts}
        asked = {h: probes_asked(server, h) for h in hosts}
    probes = {r["host"]: r for r in records["probe"]}
    assert sorted(probes) == list(hosts)  # exactly one each
    for h in hosts:
        paths = [x.path_qs for x in hits[h]]
        # robots.txt, the pages, then the probe; nothing else of the host asked
        assert paths[:5] == ["/robots.txt", "/1", "/2", "/3", first[h]]
        assert PROBE.fullmatch(first[h])
        probe = probes[h]
        assert probe["url"] == f"http://{h}{first[h]}"
        assert (probe["http_status"], probe["error_kind"], probe["redirect_to"]) == (
            200,
            None,
            None,
        )
        assert probe["content_type"] == "text/html"
        assert probe["text_chars"] > 50 and isinstance(probe["simhash"], int)
        assert re.fullmatch(r"[0-9a-f]{64}", probe["content_hash"])
        # one request per delay, the probe included
        starts = sorted(
            [r["fetched_at"] for r in records["robots"] + records["fetch"] if r["host"] == h]
            + [probe["fetched_at"]]
        )
        assert starts[-1] == probe["fetched_at"]
        assert min(gaps(starts)) >= 0.2 - EXACT
        assert min(gaps(hits[h][:5])) >= 0.2 - SLACK
    # counted among the host's requests, not among its URLs tried or pages
    host = {r["slot"]: r for r in records["host"]}["a.test"]
    assert (host["slice_urls"], host["slice_urls_tried"], host["slice_pages"]) == (4, 3, 3)
    # the second call's probe of a.test: another random path
    assert len(again["probe"]) == 1 and asked["b.test"] == [first["b.test"]]
    assert len(set(asked["a.test"])) == len(asked["a.test"]) == 2


def test_a_probe_answered_like_a_page_of_the_same_text_has_its_fingerprints():
    with LocalWeb() as server:

        async def not_found(request: web.Request) -> web.Response:
            return web.Response(text=NOT_FOUND, content_type="text/html")

        server.fallback("a.test", not_found)  # robots.txt too: it reads as allow all
        records = run(["http://a.test/gone"], probe_config(server, "a.test"))
        unextracted = run(
            ["http://a.test/gone"], probe_config(server, "a.test", fetch__extract=False)
        )
    (page,) = records["fetch"]
    (probe,) = records["probe"]
    assert page["extracted"] is not None
    fingerprints = ("text_chars", "content_hash", "simhash")
    assert tuple(probe[k] for k in fingerprints) == tuple(
        page["extracted"][k] for k in fingerprints
    )
    # a probe is extracted even when the pages are left to the parse stage
    (other,) = unextracted["probe"]
    assert unextracted["fetch"][0]["extracted"] is None
    assert tuple(other[k] for k in fingerprints) == tuple(probe[k] for k in fingerprints)


def test_a_404_probe_has_its_status_and_no_fingerprints():
    with LocalWeb() as server:

        async def missing(request: web.Request) -> web.Response:
            if request.path != "/robots.txt" and request.path != "/":
                return web.Response(text="<p>not found</p>", status=404, content_type="text/html")
            return web.Response(text="<p>home</p>", content_type="text/html")

        server.fallback("a.test", missing)
        records = run(["http://a.test/"], probe_config(server, "a.test"))
    (probe,) = records["probe"]
    assert (probe["http_status"], probe["error_kind"], probe["content_type"]) == (
        404,
        None,
        "text/html",
    )
    assert (probe["text_chars"], probe["content_hash"], probe["simhash"]) == (None, None, None)
    assert records["fetch"][0]["outcome"] == "ok"


def test_a_redirected_probe_records_its_target_and_is_not_followed():
    with LocalWeb() as server:

        async def to_home(request: web.Request) -> web.Response:
            if request.path in ("/robots.txt", "/home"):
                return web.Response(text="<p>home</p>", content_type="text/html")
            return web.Response(status=302, headers={"Location": "/home?from=missing"})

        server.fallback("a.test", to_home)
        records = run(["http://a.test/home"], probe_config(server, "a.test"))
        paths = [h.path_qs for h in server.hits_of("a.test")]
    (probe,) = records["probe"]
    assert (probe["http_status"], probe["redirect_to"]) == (302, "http://a.test/home?from=missing")
    assert (probe["error_kind"], probe["simhash"]) == (None, None)
    assert paths == ["/robots.txt", "/home", probe["url"].removeprefix("http://a.test")]


def test_no_probe_when_robots_txt_disallows_its_path():
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "User-agent: crawllib\nDisallow: /crawllib-probe-\n")
        server.text("b.test", "/robots.txt", "User-agent: *\nDisallow: /*.html$\n")
        records = run(
            ["http://a.test/", "http://b.test/"], probe_config(server, "a.test", "b.test")
        )
        asked = probes_asked(server, "a.test") + probes_asked(server, "b.test")
    assert "probe" not in records and asked == []
    assert {r["outcome"] for r in records["fetch"]} == {"ok"}


def test_no_probe_without_a_fresh_robots_txt_or_when_switched_off():
    with LocalWeb() as server:
        cfg = probe_config(server, "a.test", "b.test")
        first = run(["http://a.test/"], cfg)
        cached = run(["http://a.test/x"], cfg, robots_rows=first["robots"])  # not expired
        off = run(["http://b.test/"], config(server.resolve("b.test")))  # the tests' default
        assert config(server.resolve("b.test")).fetch.soft404_probe is False
        a_paths = [h.path_qs for h in server.hits_of("a.test")]
        b_paths = [h.path_qs for h in server.hits_of("b.test")]
    assert len(first["probe"]) == 1
    assert "probe" not in cached and "robots" not in cached
    assert a_paths[3:] == ["/x"]  # robots.txt, /, the probe of the first call; then /x alone
    assert "probe" not in off and b_paths == ["/robots.txt", "/"]


def test_no_probe_once_the_deadline_has_passed_and_the_pages_are_unaffected():
    with LocalWeb() as server:

        async def slow(request: web.Request) -> web.Response:
            await asyncio.sleep(1.2)
            return web.Response(text="<p>slow</p>", content_type="text/html")

        server.route("a.test", "/slow", slow)
        cfg = probe_config(server, "a.test", fetch__deadline_seconds=1.0)
        records = run(["http://a.test/1", "http://a.test/slow"], cfg)
        asked = probes_asked(server, "a.test")
    assert "probe" not in records and asked == []
    assert sorted((r["url"], r["outcome"]) for r in records["fetch"]) == [
        ("http://a.test/1", "ok"),
        ("http://a.test/slow", "ok"),
    ]
    (host,) = records["host"]
    assert (host["slice_urls"], host["slice_urls_tried"]) == (2, 2)
