"""Politeness of the fetch engine, read from the server's own request log.

Gaps between one host's requests have lower bounds (the delay is never cut short); nothing
here has a wall-clock upper bound, which a loaded machine could break. What a gap is at most
(jitter, Crawl-delay cap, backoff, Retry-After) is checked exactly in fake time in
test_fetch_slots.py; here it is shown by ratios between hosts of the same run and by the
order of requests in the server's log.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from test_fetch_support import (
    SLACK,
    LocalWeb,
    RawServer,
    config,
    crawl,
    crawl_with_hosts,
    gaps,
    row,
    starts,
)

from crawllib.config import replace
from crawllib.engine import fetch_rows

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


def test_crawl_delay_is_honoured_and_never_shortened():
    hosts = ("slow.test", "long.test", "honoured.test")
    with LocalWeb() as server:
        server.text("slow.test", "/robots.txt", "User-agent: *\nCrawl-delay: 0.45\n")
        server.text("long.test", "/robots.txt", "User-agent: *\nCrawl-delay: 60\n")
        server.text("honoured.test", "/robots.txt", "User-agent: *\nCrawl-delay: 0.6\n")
        urls = [f"http://{h}/{i}" for h in hosts for i in range(3)]
        cfg = config(
            server.resolve(*hosts), politeness__default_delay=0.1, politeness__max_crawl_delay=0.5
        )
        fetches, robots = crawl(urls[:6], cfg)
        assert {r["host"]: r["crawl_delay"] for r in robots} == {"slow.test": 0.45, "long.test": 60}
        assert min(gaps(starts(fetches, robots, "slow.test"))) >= 0.45 - EXACT
        assert min(gaps(server.hits_of("slow.test"))) >= 0.45 - SLACK
        # above the maximum: not fetched faster than asked, but deferred, robots.txt only
        assert {fetches[u]["outcome"] for u in urls[3:6]} == {"deferred"}
        assert {fetches[u]["error_kind"] for u in urls[3:6]} == {"crawl_delay_too_long"}
        assert [h.path_qs for h in server.hits_of("long.test")] == ["/robots.txt"]
        # ... or honoured in full, when asked to
        honour = replace(cfg, politeness__honor_long_crawl_delay=True)
        fetches, robots = crawl(urls[6:], honour)
        assert {r["outcome"] for r in fetches.values()} == {"ok"}
        assert min(gaps(starts(fetches, robots, "honoured.test"))) >= 0.6 - EXACT
        assert min(gaps(server.hits_of("honoured.test"))) >= 0.6 - SLACK


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


def test_retry_after_is_honoured_in_full_or_defers_the_host():
    with LocalWeb() as server:
        server.text("busy.test", "/a", "slow down", status=429, headers={"Retry-After": "1"})
        date = "Wed, 21 Oct 2015 07:28:00 GMT"  # in the past: no wait beyond the delay
        server.text("old.test", "/a", "", status=503, headers={"Retry-After": date})
        server.text("long.test", "/a", "", status=503, headers={"Retry-After": "3600"})
        hosts = ("busy.test", "old.test", "long.test")
        urls = [f"http://{h}/{p}" for h in hosts for p in "abc"]
        cfg = config(
            server.resolve(*hosts), politeness__default_delay=0.1, fetch__retry_after_cap=1.5
        )
        fetches, robots, states = crawl_with_hosts(urls, cfg)
        busy = fetches["http://busy.test/a"]
        assert (busy["outcome"], busy["http_status"], busy["retry_after"]) == (
            "http_error",
            429,
            1.0,
        )
        assert fetches["http://busy.test/b"]["outcome"] == "ok"
        assert gaps(starts(fetches, robots, "busy.test"))[1] >= 1.0 - EXACT  # in full
        assert gaps(server.hits_of("busy.test"))[1] >= 1.0 - SLACK
        assert fetches["http://old.test/a"]["retry_after"] == 0.0
        assert fetches["http://old.test/b"]["outcome"] == "ok"
        # 3600 s, above the cap: the host's other URLs are deferred, not fetched sooner
        assert fetches["http://long.test/a"]["retry_after"] == 3600.0
        assert [fetches[f"http://long.test/{p}"]["error_kind"] for p in "bc"] == ["retry_after"] * 2
        assert [h.path_qs for h in server.hits_of("long.test")] == ["/robots.txt", "/a"]
        # ... and the hosts record keeps it for the next slice
        long = states["long.test"]
        assert long["not_before_reason"] == "retry_after"
        assert long["not_before"] - fetches["http://long.test/a"]["fetched_at"] >= 3600 - 1
        assert (long["http_failures"], long["delay_source"]) == (1, "backoff")
        assert long["slice_urls_tried"] == 1  # deferred URLs were not tried

        # the next call, from that state: no request at all to long.test
        hits = len(server.hits_of("long.test"))
        fetches, _, states = crawl_with_hosts(
            [f"http://long.test/{p}" for p in "bcd"], cfg, host_rows=[long]
        )
        assert {r["error_kind"] for r in fetches.values()} == {"retry_after"}
        assert len(server.hits_of("long.test")) == hits  # not even its robots.txt
        assert states["long.test"]["not_before"] == pytest.approx(long["not_before"])


def test_the_next_call_spaces_its_first_request_from_the_last_one():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"), politeness__default_delay=0.8)
        fetches, robots, states = crawl_with_hosts(["http://a.test/1"], cfg)
        robots_rows = [{**r, "body": r["body"]} for r in robots]
        state = states["a.test"]
        assert state["last_request_at"] == pytest.approx(
            fetches["http://a.test/1"]["fetched_at"], abs=0.05
        )
        assert (state["slice_urls"], state["slice_pages"], state["slice_urls_tried"]) == (1, 1, 1)
        assert state["domain"] == "a.test"
        assert state["slice_bytes"] > 0 and state["addresses"] == ["127.0.0.1"]
        fetches, _, _ = crawl_with_hosts(["http://a.test/2"], cfg, robots_rows, host_rows=[state])
        hits = server.hits_of("a.test")
        assert [h.path_qs for h in hits] == ["/robots.txt", "/1", "/2"]
        assert hits[2].start - hits[1].start >= 0.8 - SLACK
        # a retried task: its slots count as having just requested, whatever the table says
        t0 = time.monotonic()  # the server log's clock
        crawl_with_hosts(["http://a.test/3"], cfg, robots_rows, retried=True)
        assert server.hits_of("a.test")[-1].start - t0 >= 0.8 - SLACK


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


def test_a_host_down_cools_down_and_its_urls_wait_without_a_request():
    with RawServer(lambda r, w: asyncio.sleep(0)) as raw:
        closed = raw.port  # nothing listens there once the server is gone
    now = time.time()
    robots = [  # a cached robots.txt: the pages themselves meet the closed port
        {"host": "down.test", "fetched_at": now, "http_status": 404, "body": "",
         "crawl_delay": None, "sitemaps": [], "expires_at": now + 3600, "error_kind": None}
    ]  # fmt: skip
    cfg = config(
        {"down.test": f"127.0.0.1:{closed}"},
        politeness__default_delay=0.05,
        politeness__down_cooldown_seconds=600.0,
    )
    urls = [f"http://down.test/{i}" for i in range(5)]
    fetches, _, states = crawl_with_hosts(urls, cfg, robots)
    kinds = [fetches[u]["error_kind"] for u in urls]
    assert kinds == ["connect"] * 3 + ["host_unreachable"] * 2
    state = states["down.test"]
    assert (state["down_failures"], state["not_before_reason"]) == (3, "down")
    assert state["down_until"] - now >= 600 - 1 and state["slice_urls"] == 3
    # the next call: nothing tried while it cools down
    fetches, _, states = crawl_with_hosts(urls, cfg, robots, host_rows=[state])
    assert {r["error_kind"] for r in fetches.values()} == {"host_unreachable"}
    assert states["down.test"]["slice_urls"] == 0


def most_at_once(hits) -> int:
    """The largest number of requests the server was answering at the same time."""
    events = sorted([(h.start, 1) for h in hits] + [(h.end, -1) for h in hits])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_hosts_sharing_an_address_have_a_capped_number_of_requests_in_flight():
    shared = ["a.shared.org", "b.shared.org", "c.shared.org"]
    with LocalWeb(addresses=("127.0.0.1", "127.0.0.2")) as server:

        async def slow(request: web.Request) -> web.Response:
            import asyncio

            await asyncio.sleep(0.15)
            return web.Response(text="<p>x</p>", content_type="text/html")

        for host in [*shared, "solo.net"]:
            for p in "123":
                server.route(host, f"/{p}", slow)
        resolve = {**server.resolve(*shared, address="127.0.0.2"), **server.resolve("solo.net")}
        urls = [f"http://{h}/{p}" for h in [*shared, "solo.net"] for p in "123"]

        def peak_on_shared(cap: int) -> int:
            server.hits.clear()
            fetches, _ = crawl(urls, config(resolve, politeness__max_hosts_per_address=cap))
            assert {r["outcome"] for r in fetches.values()} == {"ok"}
            assert {h.address for h in server.hits_of("solo.net")} == {"127.0.0.1"}
            return most_at_once([h for h in server.hits if h.address == "127.0.0.2"])

        assert peak_on_shared(1) == 1
        assert peak_on_shared(2) == 2
        assert peak_on_shared(0) == 3  # no cap: one request per host at once


def test_only_a_urls_first_attempt_counts_as_tried():
    with LocalWeb() as server:
        cfg = config(server.resolve("a.test"))
        rows = [row("http://a.test/1"), row("http://a.test/2", attempts=2)]
        rows.append(row("http://a.test/3", attempts=0))
        records = list(fetch_rows(rows, cfg, ()))
    (host,) = [r for r in records if r["record"] == "host"]
    assert (host["slice_urls"], host["slice_urls_tried"]) == (3, 2)
