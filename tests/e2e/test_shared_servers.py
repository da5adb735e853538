"""Politeness on a shared server, over whole crawls of the built-in test web served from three
loopback addresses, in both modes (politeness.key = ip and host), judged from the test web's
request log and the hosts table. On 127.0.0.2: two plain sites, a host answering 429 +
Retry-After: 3600 to every page (throttled.org), one answering 503 to every page
(overloaded.net) and one whose robots.txt asks a Crawl-delay of 60 s (crawldelay60.org); on
127.0.0.3, a slow server (slowserver.net). (The same on the bare engine:
tests/unit/test_fetch_addresses.py.)"""

from __future__ import annotations

import contextlib
import shutil

import pytest

from crawllib.config import replace
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, serve_in_thread
from tests.e2e import reading
from tests.unit.test_fetch_support import SLACK, gaps

pytestmark = pytest.mark.e2e

SHARED, SLOW_ADDRESS = "127.0.0.2", "127.0.0.3"
PLAIN = ("site0.net", "site1.com")
THROTTLED, OVERLOADED, CRAWL_DELAY, SLOW = (
    "throttled.org",
    "overloaded.net",
    "crawldelay60.org",
    "slowserver.net",
)
NEIGHBOURS = (THROTTLED, OVERLOADED, CRAWL_DELAY)
SPEC = WebSpec(
    seed=5,
    hosts=2,
    pages_per_host=8,
    cross_host_link_share=0.3,
    addresses=3,
    special_hosts=(*NEIGHBOURS, SLOW),
    placed=(*((h, 1) for h in (*PLAIN, *NEIGHBOURS)), (SLOW, 2)),
    slow_seconds=0.3,
)
MAX_DEPTH = 2
DELAY = 0.2
MIN_ADDRESS = 0.05
FACTOR = 4.0


@pytest.fixture(scope="module", params=["ip", "host"])
def crawled(request, spark_cfg, template_root, tmp_path_factory):
    key = request.param
    tmp = tmp_path_factory.mktemp(f"shared-{key}")
    root = str(tmp / "crawl")
    shutil.copytree(template_root, root)
    with serve_in_thread(SPEC) as web:
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__key=key,
            politeness__default_delay=DELAY,
            politeness__min_address_delay=MIN_ADDRESS,
            politeness__adaptive=True,
            politeness__response_factor=FACTOR,
            crawl__max_depth=MAX_DEPTH,
            storage__fetch_slices=1,
            fetch__slice_grace_seconds=2.0,
            fetch__max_attempts=2,  # overloaded.net: one retry is enough to show its backoff
        )
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        with (
            lease.hold(root, "pytest", cfg),  # every table write needs the writer lease
            contextlib.closing(EmbeddedDb(root, cfg)) as db,
        ):
            ran = runner.run_crawl(db, cfg, str(seeds))
        log = list(web.log)
        expected = web.expected_fetches(MAX_DEPTH)
    return {
        "key": key,
        "ran": ran,
        "log": sorted(log, key=lambda r: r.start),
        "expected": expected,
        "fetches": reading.read(root, "fetches"),
        "hosts": {r["slot"]: r for r in reading.read(root, "hosts")},
    }


def requests_to(crawled, host, pages_only=False):
    return [
        r
        for r in crawled["log"]
        if r.host == host and not (pages_only and r.path_qs in ("/robots.txt", "/sitemap.xml"))
    ]


def test_the_plain_sites_on_the_shared_address_are_crawled_whole(crawled):
    ok = {r["url"] for r in crawled["fetches"] if r["outcome"] == "ok"}
    for host in PLAIN:
        expected = {u for u in crawled["expected"] if f"//{host}/" in u}
        assert len(expected) > 3, host
        assert expected <= ok, (host, sorted(expected - ok))
    assert crawled["ran"], "the crawl ran no generation"


def test_the_429_host_gets_one_page_request_per_retry_after(crawled):
    pages = requests_to(crawled, THROTTLED, pages_only=True)
    assert [r.status for r in pages] == [429]
    assert crawled["hosts"][THROTTLED]["not_before_reason"] == "retry_after"


def test_the_crawl_delay_host_is_never_asked_twice_within_60_seconds(crawled):
    asked = requests_to(crawled, CRAWL_DELAY)
    assert asked, "crawldelay60.org got no request, not even its robots.txt"
    assert all(g >= 60 for g in gaps(asked)), gaps(asked)
    assert crawled["hosts"][CRAWL_DELAY]["crawl_delay"] == 60.0


def test_each_host_is_asked_at_most_once_per_its_delay(crawled):
    for host in (*PLAIN, *NEIGHBOURS):
        asked = requests_to(crawled, host)
        assert asked, host
        assert all(g >= DELAY - SLACK for g in gaps(asked)), (host, gaps(asked))
    # the 503 host backs off by itself: its delay doubled per failure in a row
    overloaded = crawled["hosts"][OVERLOADED]
    assert (overloaded["delay_source"], overloaded["http_failures"] > 0) == ("backoff", True)


def test_the_address_requests_follow_the_address_rule(crawled):
    on_shared = [r for r in crawled["log"] if r.address == SHARED]
    assert {r.host for r in on_shared} == {*PLAIN, *NEIGHBOURS}
    if crawled["key"] == "host":
        return  # separate slots: only max_hosts_per_address limits the address
    shared_gaps = gaps(on_shared)
    # at least default_delay / the hosts queued (5 at most here), and min_address_delay;
    # shorter than one host's delay while several of its hosts have URLs
    least = max(MIN_ADDRESS, DELAY / (len(PLAIN) + len(NEIGHBOURS)))
    assert min(shared_gaps) >= least - SLACK, shared_gaps
    assert min(shared_gaps) < DELAY - SLACK, shared_gaps


def test_a_slow_server_gets_a_longer_delay_recorded_in_hosts(crawled):
    asked = requests_to(crawled, SLOW)
    assert len(asked) >= 4, asked
    # once its answers are known slow, a request per FACTOR x their time
    later = gaps(asked)[2:]
    assert later and all(g >= 0.8 * FACTOR * SPEC.slow_seconds for g in later), gaps(asked)
    slow = crawled["hosts"][SLOW]
    assert slow["delay_source"] == "adaptive"
    assert slow["response_seconds"] >= SPEC.slow_seconds
    assert slow["adaptive_delay"] == pytest.approx(FACTOR * slow["response_seconds"])
    assert slow["delay"] >= slow["adaptive_delay"]
    assert crawled["hosts"][PLAIN[0]]["delay_source"] == "default"  # a quick server: the rule


def test_the_hosts_table_has_a_row_per_host_and_with_key_ip_one_per_address(crawled):
    hosts = crawled["hosts"]
    named = {*PLAIN, *NEIGHBOURS, SLOW}
    assert named <= set(hosts)
    assert {hosts[h]["kind"] for h in named} == {"host"}
    assert {h: hosts[h]["address"] for h in named} == {
        **dict.fromkeys((*PLAIN, *NEIGHBOURS), SHARED),
        SLOW: SLOW_ADDRESS,
    }
    addresses = {s: r for s, r in hosts.items() if r["kind"] == "address"}
    if crawled["key"] == "host":
        assert addresses == {}
        return
    # (the pages' links to IP literals, refused by network safety, are slots of their own)
    assert {SHARED, SLOW_ADDRESS} <= set(addresses)
    shared = addresses[SHARED]
    # one host's Retry-After, one's 503s and one's Crawl-delay hold the address back not at all
    assert (shared["not_before"], shared["http_failures"], shared["down_failures"]) == (None, 0, 0)
    on_shared = {*PLAIN, *NEIGHBOURS}
    assert shared["urls_attempted"] == sum(hosts[h]["urls_attempted"] for h in on_shared)
    assert addresses[SLOW_ADDRESS]["delay_source"] == "adaptive"
