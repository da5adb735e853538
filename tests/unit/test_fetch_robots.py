"""robots.txt handling of the fetch engine (RFC 9309 §2.3) against local servers."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from test_fetch_support import SLACK, LocalWeb, config, crawl, crawl_with_hosts, gaps, starts

from crawllib.engine.robots_fetch import classify

AGENT_ROBOTS = "User-agent: *\nDisallow: /no/\nSitemap: http://a.test/sitemap.xml\n"


def redirect(location: str, status: int = 301):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": location})

    return handler


def test_robots_fetched_once_per_host_and_recorded():
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", AGENT_ROBOTS)
        cfg = config(server.resolve("a.test"))
        t0 = time.time()
        fetches, robots = crawl(
            [f"http://a.test/{i}" for i in range(3)] + ["http://a.test/no/x"], cfg
        )
        assert [h.path_qs for h in server.hits_of("a.test")].count("/robots.txt") == 1
    (record,) = robots
    assert record["record"] == "robots" and record["host"] == "a.test"
    assert (record["http_status"], record["error_kind"], record["body"]) == (
        200,
        None,
        AGENT_ROBOTS,
    )
    assert record["sitemaps"] == ["http://a.test/sitemap.xml"] and record["crawl_delay"] is None
    assert record["expires_at"] == pytest.approx(record["fetched_at"] + 24 * 3600)
    assert t0 <= record["fetched_at"] <= time.time()
    assert fetches["http://a.test/no/x"]["outcome"] == "robots_denied"


def test_robots_request_counts_as_a_request_of_the_host():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"), politeness__default_delay=0.3)
        fetches, robots = crawl(["http://a.test/"], cfg)
        assert [h.path_qs for h in server.hits_of("a.test")] == ["/robots.txt", "/"]
        assert gaps(server.hits_of("a.test"))[0] >= 0.3 - SLACK
    assert gaps(starts(fetches, robots, "a.test"))[0] >= 0.3 - 0.001


@pytest.mark.parametrize("status", [401, 403, 404, 410, 429])
def test_robots_4xx_allows_all(status):
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "User-agent: *\nDisallow: /\n", status=status)
        fetches, robots = crawl(["http://a.test/x"], config(server.resolve("a.test")))
    assert fetches["http://a.test/x"]["outcome"] == "ok"
    assert robots[0]["http_status"] == status
    assert robots[0]["expires_at"] - robots[0]["fetched_at"] == pytest.approx(24 * 3600)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_robots_5xx_defers_all_and_is_asked_again_with_backoff(status):
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "", status=status)
        cfg = config(server.resolve("a.test"), robots__retry_seconds=40.0)
        urls = ["http://a.test/", "http://a.test/x"]
        fetches, robots, states = crawl_with_hosts(urls, cfg)
        assert [h.path_qs for h in server.hits_of("a.test")] == ["/robots.txt"]
        for r in fetches.values():  # waiting for robots.txt spends no attempt
            assert (r["outcome"], r["error_kind"]) == ("deferred", "robots_unavailable")
        assert robots[0]["expires_at"] - robots[0]["fetched_at"] == pytest.approx(40)
        state = states["a.test"]
        assert (state["robots_failures"], state["not_before_reason"]) == (1, "robots")
        assert state["not_before"] - robots[0]["fetched_at"] == pytest.approx(40, abs=0.5)

        # once the retry is due (the hosts row says when), robots.txt is asked again and a
        # second failure in a row doubles the wait
        later = time.time() + 41
        fetches, robots2, states = crawl_with_hosts(
            urls, cfg, robots_rows=robots, now=lambda: later, host_rows=[state]
        )
        assert [h.path_qs for h in server.hits_of("a.test")] == ["/robots.txt"] * 2
        assert robots2[0]["expires_at"] - robots2[0]["fetched_at"] == pytest.approx(80)
        assert states["a.test"]["robots_failures"] == 2

        # an answer resets the count; the URLs are fetched
        server.text("a.test", "/robots.txt", "User-agent: *\nAllow: /\n")
        later = time.time() + 200
        fetches, _, states = crawl_with_hosts(
            urls, cfg, robots_rows=robots + robots2, now=lambda: later, host_rows=[states["a.test"]]
        )
        assert {r["outcome"] for r in fetches.values()} == {"ok"}
        assert states["a.test"]["robots_failures"] == 0


def test_robots_timeout_disallows_all():
    with LocalWeb() as server:

        async def hang(request: web.Request) -> web.Response:
            await asyncio.sleep(0.8)
            return web.Response(text="")

        server.route("a.test", "/robots.txt", hang)
        cfg = config(server.resolve("a.test"), fetch__total_timeout=0.3)
        fetches, robots = crawl(["http://a.test/"], cfg)
    assert (robots[0]["http_status"], robots[0]["error_kind"]) == (None, "timeout")
    assert fetches["http://a.test/"]["outcome"] == "deferred"
    assert fetches["http://a.test/"]["error_kind"] == "robots_unavailable"


def test_robots_of_an_unknown_host_is_a_dns_error_for_its_pages():
    with LocalWeb() as server:
        fetches, robots = crawl(
            ["http://nowhere.test/", "http://nowhere.test/2"], config(server.resolve())
        )
    assert {(r["outcome"], r["error_kind"]) for r in fetches.values()} == {("error", "dns")}
    assert (robots[0]["error_kind"], robots[0]["expires_at"] - robots[0]["fetched_at"]) == (
        "dns",
        pytest.approx(60),  # robots.retry_seconds
    )


def test_robots_redirects_are_followed_across_hosts():
    with LocalWeb() as server:
        server.route("a.test", "/robots.txt", redirect("http://b.test/robots.txt"))
        server.route("b.test", "/robots.txt", redirect("/real.txt", 302))
        server.text("b.test", "/real.txt", "User-agent: crawllib\nDisallow: /x\n")
        fetches, robots = crawl(
            ["http://a.test/x", "http://a.test/y"], config(server.resolve("a.test", "b.test"))
        )
        assert [h.path_qs for h in server.hits_of("b.test")] == ["/robots.txt", "/real.txt"]
    assert fetches["http://a.test/x"]["outcome"] == "robots_denied"
    assert fetches["http://a.test/y"]["outcome"] == "ok"
    assert robots[0]["host"] == "a.test" and robots[0]["http_status"] == 200


def test_too_many_robots_redirects_allow_all():
    with LocalWeb() as server:
        for i in range(10):
            server.route("a.test", f"/r{i}", redirect(f"/r{i + 1}"))
        server.route("a.test", "/robots.txt", redirect("/r0"))
        server.text("a.test", "/r10", "User-agent: *\nDisallow: /\n")
        cfg = config(server.resolve("a.test"), robots__max_redirects=3)
        fetches, robots = crawl(["http://a.test/x"], cfg)
        robots_hops = [h.path_qs for h in server.hits_of("a.test")][:-1]
    assert robots_hops == ["/robots.txt", "/r0", "/r1", "/r2"]
    assert (robots[0]["http_status"], robots[0]["error_kind"]) == (None, "too_many_redirects")
    assert fetches["http://a.test/x"]["outcome"] == "ok"


def test_robots_redirect_to_a_private_address_is_not_followed():
    with LocalWeb() as server:
        server.route(
            "a.test", "/robots.txt", redirect(f"http://127.0.0.1:{server.port}/robots.txt")
        )
        fetches, robots = crawl(["http://a.test/x"], config(server.resolve("a.test")))
        assert {h.host for h in server.hits} == {"a.test"}
    assert robots[0]["error_kind"] == "blocked_redirect"
    assert fetches["http://a.test/x"]["outcome"] == "ok"  # unavailable: allow all


def test_gzipped_robots_is_decoded():
    import gzip

    with LocalWeb() as server:

        async def gz(request: web.Request) -> web.Response:
            body = gzip.compress(b"User-agent: *\nDisallow: /secret\n")
            return web.Response(body=body, headers={"Content-Encoding": "gzip"})

        server.route("a.test", "/robots.txt", gz)
        fetches, _ = crawl(
            ["http://a.test/secret", "http://a.test/open"], config(server.resolve("a.test"))
        )
    assert fetches["http://a.test/secret"]["outcome"] == "robots_denied"
    assert fetches["http://a.test/open"]["outcome"] == "ok"


def test_fresh_robots_rows_are_reused_and_stale_ones_refetched():
    now = time.time()
    cached = [
        {"host": "fresh.test", "fetched_at": now - 10, "http_status": 200, "error_kind": None,
         "body": "User-agent: *\nDisallow: /x\nCrawl-delay: 0.3\n", "crawl_delay": 0.3,
         "sitemaps": [], "expires_at": now + 100},
        {"host": "stale.test", "fetched_at": now - 200, "http_status": 200, "error_kind": None,
         "body": "User-agent: *\nDisallow: /x\n", "crawl_delay": None, "sitemaps": [],
         "expires_at": now - 100},
        {"host": "down.test", "fetched_at": now - 10, "http_status": 503, "error_kind": None,
         "body": "", "crawl_delay": None, "sitemaps": [], "expires_at": now + 100},
    ]  # fmt: skip
    with LocalWeb() as server:
        hosts = ("fresh.test", "stale.test", "down.test")
        urls = [f"http://{h}/{p}" for h in hosts for p in ("x", "y", "z")]
        fetches, robots = crawl(urls, config(server.resolve(*hosts)), robots_rows=cached)
        assert [h.path_qs for h in server.hits_of("fresh.test")] == ["/y", "/z"]
        assert gaps(server.hits_of("fresh.test"))[0] >= 0.3 - SLACK  # cached Crawl-delay
        assert gaps(starts(fetches, robots, "fresh.test"))[0] >= 0.3 - 0.001
        assert [h.path_qs for h in server.hits_of("stale.test")] == [
            "/robots.txt",
            "/x",
            "/y",
            "/z",
        ]
        assert server.hits_of("down.test") == []
    assert [r["host"] for r in robots] == ["stale.test"]
    assert fetches["http://fresh.test/x"]["outcome"] == "robots_denied"
    assert fetches["http://stale.test/x"]["outcome"] == "ok"  # its robots.txt is 404 now
    assert {fetches[f"http://down.test/{p}"]["error_kind"] for p in "xyz"} == {"robots_unavailable"}


def test_classify_maps_rfc_statuses():
    def policy(status, kind=None, body="User-agent: *\nDisallow: /a\n"):
        state = classify(
            {"http_status": status, "error_kind": kind, "body": body}, "crawllib", 1000
        )
        return state.rules.allowed("http://h/a"), state.rules.allowed("http://h/b")

    assert policy(200) == (False, True)
    assert policy(404) == policy(429) == (True, True)
    assert policy(500) == policy(None, "timeout") == (False, False)
    assert policy(None, "too_many_redirects") == (True, True)
    assert (
        classify({"http_status": None, "error_kind": "connect"}, "crawllib", 10).down_kind
        == "connect"
    )


def test_robots_redirect_to_an_unreachable_host_disallows_all():
    with LocalWeb() as server:
        server.route("a.test", "/robots.txt", redirect("http://elsewhere.test/robots.txt"))
        fetches, robots = crawl(["http://a.test/x"], config(server.resolve("a.test")))
    assert (robots[0]["http_status"], robots[0]["error_kind"]) == (None, "redirect_dns")
    r = fetches["http://a.test/x"]
    assert (r["outcome"], r["error_kind"]) == ("deferred", "robots_unavailable")


def test_robots_body_is_cut_to_max_bytes_on_a_character():
    with LocalWeb() as server:
        server.text("a.test", "/robots.txt", "User-agent: *\n# " + "é" * 100)
        cfg = config(server.resolve("a.test"), robots__max_bytes=64)
        _, robots = crawl(["http://a.test/x"], cfg)
    assert len(robots[0]["body"].encode()) <= 64 and robots[0]["body"].startswith("User-agent")


def test_a_large_robots_txt_is_parsed_off_the_event_loop(monkeypatch):
    """A hostile robots.txt (500 KB: 24,800 wildcard rules, Sitemap lines) costs tens of ms to
    parse; past OFF_LOOP_BYTES it is parsed in the loop's executor, fetched or cached, so the
    loop pacing the task's other hosts goes on. A small one is parsed in the loop."""
    from crawllib.engine.robots_fetch import OFF_LOOP_BYTES
    from crawllib.policy.robots import RobotsRules

    rules = "".join(f"Disallow: /*{i}*q\n" for i in range(24_800))
    sitemaps = "".join(f"Sitemap: http://hostile.test/map{i}.xml\n" for i in range(500))
    hostile = f"User-agent: *\n{rules}{sitemaps}"
    assert OFF_LOOP_BYTES < 500_000 <= len(hostile) <= 512_000
    parse = RobotsRules.parse.__func__  # type: ignore[attr-defined]
    in_loop: list[tuple[int, bool]] = []  # (body length, parsed in a running event loop)

    def watched(cls, text, agent, max_bytes=512_000):
        try:
            asyncio.get_running_loop()
            in_loop.append((len(text), True))
        except RuntimeError:
            in_loop.append((len(text), False))
        return parse(cls, text, agent, max_bytes)

    monkeypatch.setattr(RobotsRules, "parse", classmethod(watched))
    with LocalWeb() as server:
        server.text("hostile.test", "/robots.txt", hostile)
        server.text("calm.test", "/robots.txt", AGENT_ROBOTS)
        cfg = config(server.resolve("hostile.test", "calm.test"))
        urls = ["http://hostile.test/a", *(f"http://calm.test/{i}" for i in range(3))]
        fetches, robots = crawl(urls, cfg)
        assert sorted(in_loop) == [(len(AGENT_ROBOTS), True), (len(hostile), False)]
        # the hostile host's rules: too many wildcards, every page disallowed
        assert fetches["http://hostile.test/a"]["outcome"] == "robots_denied"
        assert all(fetches[u]["outcome"] == "ok" for u in urls[1:])
        (record,) = [r for r in robots if r["host"] == "hostile.test"]
        assert len(record["sitemaps"]) == 500
        in_loop.clear()
        fetches, _ = crawl(["http://hostile.test/b"], cfg, robots_rows=[record])  # cached
        assert in_loop == [(len(hostile), False)]
        assert fetches["http://hostile.test/b"]["outcome"] == "robots_denied"
