"""Politeness of the fetch engine, read from the server's own request log.

Gaps between one host's requests have lower bounds (the delay is never cut short); nothing
here has a wall-clock upper bound, which a loaded machine could break. What a gap is at most
(jitter, Crawl-delay cap, backoff, Retry-After) is checked exactly in fake time in
test_fetch_slots.py; here it is shown by ratios between hosts of the same run and by the
order of requests in the server's log.
"""

from __future__ import annotations

from aiohttp import web
from test_fetch_support import SLACK, LocalWeb, config, crawl, gaps, starts

EXACT = 0.001  # wall clock (fetched_at) against the loop's monotonic clock


def overlapping(hits) -> bool:
    return any(b.start < a.end for a, b in zip(hits, hits[1:], strict=False))


def span(hits) -> float:
    """Seconds from a host's first request to its last."""
    return hits[-1].start - hits[0].start


def test_one_request_at_a_time_spaced_by_the_delay_robots_included():
    hosts = [f"h{i}.test" for i in range(3)]
    with LocalWeb() as server:

        async def slowish(request: web.Request) -> web.Response:
            import asyncio

            await asyncio.sleep(0.15)
            return web.Response(text="<p>x</p>", content_type="text/html")

        for h in hosts:
            server.route(h, "/slow", slowish)
        urls = [f"http://{h}/p{i}" for h in hosts for i in range(4)] + [
            f"http://{h}/slow" for h in hosts
        ]
        cfg = config(server.resolve(*hosts), politeness__default_delay=0.25, politeness__jitter=0.2)
        fetches, robots = crawl(urls, cfg)
        assert {r["outcome"] for r in fetches.values()} == {"ok"}
        for h in hosts:
            hits = server.hits_of(h)
            assert hits[0].path_qs == "/robots.txt"
            assert len(hits) == 6
            assert not overlapping(hits)
            assert min(gaps(starts(fetches, robots, h))) >= 0.25 - EXACT
            assert min(gaps(hits)) >= 0.25 - SLACK


def test_crawl_delay_is_honoured_and_capped():
    with LocalWeb() as server:
        server.text("slow.test", "/robots.txt", "User-agent: *\nCrawl-delay: 0.45\n")
        server.text("capped.test", "/robots.txt", "User-agent: *\nCrawl-delay: 60\n")
        urls = [f"http://{h}/{i}" for h in ("slow.test", "capped.test") for i in range(3)]
        cfg = config(
            server.resolve("slow.test", "capped.test"),
            politeness__default_delay=0.1,
            politeness__max_crawl_delay=0.3,
        )
        fetches, robots = crawl(urls, cfg)
        assert {r["outcome"] for r in fetches.values()} == {"ok"}
        assert {r["host"]: r["crawl_delay"] for r in robots} == {
            "slow.test": 0.45,
            "capped.test": 60,
        }
        # Crawl-delay above max_crawl_delay is cut to it
        assert min(gaps(starts(fetches, robots, "slow.test"))) >= 0.3 - EXACT
        assert min(gaps(starts(fetches, robots, "capped.test"))) >= 0.3 - EXACT
        assert min(gaps(server.hits_of("slow.test"))) >= 0.3 - SLACK
        assert min(gaps(server.hits_of("capped.test"))) >= 0.3 - SLACK
        # Both are cut to the same 0.3 s, so asking for 60 s takes no longer than asking for
        # 0.45 s (uncut: 133 times longer). The hosts run side by side: a stall delays both.
        assert span(server.hits_of("capped.test")) < 1.5 * span(server.hits_of("slow.test"))


def test_hosts_are_fetched_concurrently():
    hosts = [f"c{i}.test" for i in range(50)]
    with LocalWeb() as server:
        urls = [f"http://{h}/{i}" for h in hosts for i in range(4)]
        cfg = config(server.resolve(*hosts), politeness__default_delay=0.3)
        fetches, robots = crawl(urls, cfg)
        assert len(fetches) == 200 and len(robots) == 50
        assert {r["outcome"] for r in fetches.values()} == {"ok"}
        for h in hosts:
            assert min(gaps(starts(fetches, robots, h))) >= 0.3 - EXACT
            assert not overlapping(server.hits_of(h))
            # 50 requests at once queue in the in-process server: twice the usual slack
            assert min(gaps(server.hits_of(h))) >= 0.3 - 2 * SLACK
        # All 50 at once: every host's first request came before any host's last one (one
        # host after another, each first request would follow the previous host's last).
        firsts = [server.hits_of(h)[0].start for h in hosts]
        lasts = [server.hits_of(h)[-1].start for h in hosts]
        assert max(firsts) < min(lasts)


def test_max_hosts_in_flight_bounds_active_hosts():
    hosts = [f"m{i}.test" for i in range(4)]
    with LocalWeb() as server:
        urls = [f"http://{h}/{i}" for h in hosts for i in range(3)]
        cfg = config(
            server.resolve(*hosts),
            politeness__default_delay=0.1,
            politeness__max_hosts_in_flight=2,
        )
        crawl(urls, cfg)
        spans = [(server.hits_of(h)[0].start, server.hits_of(h)[-1].end) for h in hosts]
    for t, _ in spans:
        active = sum(1 for a, b in spans if a <= t < b)
        assert active <= 2


def test_retry_after_pushes_the_next_request():
    with LocalWeb() as server:
        server.text("busy.test", "/a", "slow down", status=429, headers={"Retry-After": "1"})
        date = "Wed, 21 Oct 2015 07:28:00 GMT"  # in the past: no wait beyond the delay
        server.text("old.test", "/a", "", status=503, headers={"Retry-After": date})
        server.text("long.test", "/a", "", status=503, headers={"Retry-After": "3600"})
        urls = [f"http://{h}/{p}" for h in ("busy.test", "old.test", "long.test") for p in "ab"]
        cfg = config(
            server.resolve("busy.test", "old.test", "long.test"),
            politeness__default_delay=0.1,
            fetch__retry_after_cap=0.6,
        )
        fetches, robots = crawl(urls, cfg)
        busy = fetches["http://busy.test/a"]
        assert (busy["outcome"], busy["http_status"], busy["retry_after"]) == (
            "http_error",
            429,
            1.0,
        )
        assert fetches["http://busy.test/b"]["outcome"] == "ok"
        assert gaps(starts(fetches, robots, "busy.test"))[-1] >= 0.6 - EXACT  # the cap
        assert gaps(server.hits_of("busy.test"))[-1] >= 0.6 - SLACK
        assert fetches["http://old.test/a"]["retry_after"] == 0.0
        assert fetches["http://long.test/a"]["retry_after"] == 3600.0
        long_wait = gaps(starts(fetches, robots, "long.test"))[-1]
        assert long_wait >= 0.6 - EXACT
        # 3600 s is cut to the cap like busy.test's 1 s: the two hosts wait alike
        assert long_wait < 1.5 * gaps(starts(fetches, robots, "busy.test"))[-1]


def test_repeated_5xx_doubles_the_delay():
    with LocalWeb() as server:
        for i in range(4):
            server.text("down.test", f"/{i}", "oops", status=500)
        cfg = config(server.resolve("down.test"), politeness__default_delay=0.1)
        fetches, robots = crawl([f"http://down.test/{i}" for i in range(5)], cfg)
        assert [fetches[f"http://down.test/{i}"]["http_status"] for i in range(5)] == [500] * 4 + [
            200
        ]
        g = gaps(starts(fetches, robots, "down.test"))  # robots, 0..4
        assert min(x - d for x, d in zip(g, [0.1, 0.2, 0.4, 0.8, 1.6], strict=True)) >= -EXACT
        # doubled, not more: the longer gaps (least disturbed by load) grow by less than 3x
        assert all(b < 3 * a for a, b in zip(g[2:], g[3:], strict=False))
        assert len(server.hits_of("down.test")) == 6
