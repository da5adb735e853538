"""Two levels of politeness on the wire (politeness.key = ip): the bare engine against servers
on loopback addresses, judged from the servers' request log. On one address: two plain sites,
a host answering 429 + Retry-After: 3600 to every page, one answering 503 to every page and
one whose robots.txt asks a Crawl-delay of 60 s; on another, a slow server. (The same rules in
fake time: test_fetch_servers.py; across whole generations on the built-in test web:
tests/e2e/test_shared_servers.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from crawllib.engine import fetch_rows
from tests.unit.test_fetch_support import SLACK, LocalWeb, config, gaps, row

SHARED = "127.0.0.2"
PLAIN = ("plain1.net", "plain2.net")
BUSY, FAILING, SLOWROBOTS = "busy.net", "failing.net", "slowrobots.net"
HOSTS = (*PLAIN, BUSY, FAILING, SLOWROBOTS)
PAGES = 6
DELAY = 0.4
MIN_ADDRESS = 0.05


def crawl_rows(rows: list[dict], cfg: Any, host_rows=()) -> tuple[dict, dict]:
    """({url: fetch record}, {slot: host record}) of one engine call."""
    fetches, hosts = {}, {}
    for record in fetch_rows(rows, cfg, (), host_rows=host_rows):
        if record["record"] == "fetch":
            fetches[record["url"]] = record
        elif record["record"] == "host":
            hosts[record["slot"]] = record
    return fetches, hosts


def shared_web(server: LocalWeb, **changes: Any) -> Any:
    """Serve the hosts of the shared address; the engine's config reaching them (key = ip)."""
    for p in range(PAGES):
        server.text(BUSY, f"/{p}", "later", status=429, headers={"Retry-After": "3600"})
        server.text(FAILING, f"/{p}", "oops", status=503)
    server.text(SLOWROBOTS, "/robots.txt", "User-agent: *\nCrawl-delay: 60\n")
    return config(
        server.resolve(*HOSTS, address=SHARED),
        politeness__key="ip",
        politeness__default_delay=DELAY,
        **changes,
    )


def test_hosts_on_one_address_keep_their_own_rules():
    with LocalWeb(addresses=("127.0.0.1", SHARED)) as server:
        cfg = shared_web(
            server, politeness__min_address_delay=MIN_ADDRESS, fetch__slice_grace_seconds=3.0
        )
        urls = [f"http://{h}/{p}" for h in HOSTS for p in range(PAGES)]
        fetches, hosts = crawl_rows([row(u, slot=SHARED) for u in urls], cfg)
        hits = sorted((h for h in server.hits if h.address == SHARED), key=lambda h: h.start)

    def outcomes(host: str) -> list[str]:
        return [fetches[f"http://{host}/{p}"]["outcome"] for p in range(PAGES)]

    # the plain sites are crawled whole, whatever their neighbours do
    for host in PLAIN:
        assert outcomes(host) == ["ok"] * PAGES, host
    # the 429 host: one page request, then its Retry-After holds it alone
    assert [h.path_qs for h in server.hits_of(BUSY)] == ["/robots.txt", "/0"]
    assert [fetches[f"http://{BUSY}/{p}"]["error_kind"] for p in range(1, PAGES)] == [
        "retry_after"
    ] * (PAGES - 1)
    # the Crawl-delay 60 host: its robots.txt, nothing within 60 s after it
    assert [h.path_qs for h in server.hits_of(SLOWROBOTS)] == ["/robots.txt"]
    assert set(outcomes(SLOWROBOTS)) == {"deferred"}
    # the 503 host backs off by itself: each gap doubles (robots.txt, then its pages)
    failing = gaps(server.hits_of(FAILING))
    assert failing, "the 503 host got no second request"
    assert all(g >= DELAY * 2**i - SLACK for i, g in enumerate(failing)), failing
    # every host is asked at most once per its delay
    for host in HOSTS:
        assert all(g >= DELAY - SLACK for g in gaps(server.hits_of(host))), host
    # the address: each gap at least the rule's (default_delay / hosts with requests left),
    # and shorter than one host's delay while several hosts are queued
    address_gaps = gaps(hits)
    assert len(address_gaps) > 2 * PAGES
    for i, gap in enumerate(address_gaps):
        queued = len({h.host for h in hits[i:]})
        assert gap >= max(MIN_ADDRESS, DELAY / queued) - SLACK, (i, gap, queued)
    assert min(address_gaps) < DELAY / 2
    # the hosts table: a row per host, with its address, and one for the address
    assert set(hosts) == {*HOSTS, SHARED}
    assert {hosts[h]["kind"] for h in HOSTS} == {"host"}
    assert {hosts[h]["address"] for h in HOSTS} == {SHARED}
    assert (hosts[SHARED]["kind"], hosts[SHARED]["address"]) == ("address", SHARED)
    assert hosts[BUSY]["not_before_reason"] == "retry_after"
    assert hosts[SHARED]["not_before"] is None and hosts[PLAIN[0]]["not_before"] is None
    assert hosts[SLOWROBOTS]["crawl_delay"] == 60.0
    assert hosts[FAILING]["delay_source"] == "backoff"
    assert hosts[SHARED]["http_failures"] == 0  # 2 of 5 hosts failing say nothing of the server
    assert hosts[SHARED]["slice_urls"] == sum(hosts[h]["slice_urls"] for h in HOSTS)
    assert hosts[PLAIN[0]]["slice_urls_tried"] == PAGES and hosts[SHARED]["slice_urls_tried"] == 0


def test_the_next_call_starts_each_host_and_the_address_from_its_row():
    with LocalWeb(addresses=("127.0.0.1", SHARED)) as server:
        cfg = shared_web(server)
        first = [row(f"http://{h}/0", slot=SHARED) for h in (PLAIN[0], BUSY)]
        _, hosts = crawl_rows(first, cfg)
        states = list(hosts.values())
        server.hits.clear()
        later = [row(f"http://{h}/1", slot=SHARED) for h in (PLAIN[0], BUSY)]
        fetches, _ = crawl_rows(later, cfg, host_rows=states)
    # the busy host's Retry-After, kept in its row, still holds it; its neighbour goes on
    assert fetches[f"http://{BUSY}/1"]["error_kind"] == "retry_after"
    assert fetches[f"http://{PLAIN[0]}/1"]["outcome"] == "ok"
    assert [(h.host, h.path_qs) for h in server.hits] == [
        (PLAIN[0], "/robots.txt"),  # no robots rows given: asked again
        (PLAIN[0], "/1"),
    ]


def test_a_slow_server_gets_a_longer_delay():
    slow = 0.3
    with LocalWeb(addresses=("127.0.0.1", "127.0.0.3")) as server:

        async def answer(request: web.Request) -> web.Response:
            await asyncio.sleep(slow)
            body = "User-agent: *\nDisallow:\n" if request.path == "/robots.txt" else "<p>x</p>"
            return web.Response(text=body, content_type="text/html")

        server.fallback("slow.net", answer)
        cfg = config(
            server.resolve("slow.net", address="127.0.0.3"),
            politeness__key="ip",
            politeness__default_delay=0.1,
            politeness__adaptive=True,
            politeness__response_factor=3.0,
        )
        urls = [f"http://slow.net/{p}" for p in range(4)]
        fetches, hosts = crawl_rows([row(u, slot="127.0.0.3") for u in urls], cfg)
        hits = server.hits_of("slow.net")
    assert {r["outcome"] for r in fetches.values()} == {"ok"}
    # robots.txt answered slowly too: from the first page on, factor x its response time
    assert [h.path_qs for h in hits][0] == "/robots.txt"
    assert all(g >= 3 * slow - SLACK for g in gaps(hits)), gaps(hits)
    for key in ("slow.net", "127.0.0.3"):
        record = hosts[key]
        assert record["response_seconds"] >= slow
        assert record["adaptive_delay"] == record["delay"] >= 3 * slow
        assert record["delay_source"] == "adaptive"
