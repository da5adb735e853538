"""The whole-crawl benchmark on a tiny web (no Scrapy): its figures add up and show the crawl
polite and complete, so the report's efficiency, fetch timeline, audit and CPU floor can be
trusted (the politeness-bound crawl shares run_ours and its figures), on each engine."""

from __future__ import annotations

import pytest

from benchmarks.crawl import bench_sites
from crawllib.testweb.site import PRIVATE_LINKS
from tests.e2e import reading

DELAY = 0.1


@pytest.mark.e2e
def test_small_site_crawl_is_complete_polite_and_costs_more_than_its_floor(bench_engine, tmp_path):
    r = bench_sites(
        str(tmp_path),
        hosts=3,
        pages=12,
        fanout=3,
        max_depth=3,
        delay=DELAY,
        scrapy=False,
        shape="tree",  # every home a seed: a generation follows each site whole
        engine=bench_engine,
    )
    assert r["engine"] == bench_engine
    a = r["audit"]
    # Every page within 3 links of a home page: home and the 12 pages of each host, plus the
    # query-string variants the pages link to.
    assert a.expected >= 3 * 13 and a.fetched == a.expected == r["pages"]
    assert (a.missing, a.twice, a.robots_violations, a.politeness_violations) == (0, 0, 0, 0)
    # Attempts followed inside their generation: every page but the 3 seeds, each home
    # page's /cgi-bin/ link (denied by robots.txt, an attempt all the same) and the links to
    # private addresses (crawllib.testweb.site.PRIVATE_LINKS) whose host, new to crawldb, a
    # task owns: the network guard blocks them before any request, an attempt too (the next
    # generation's fetch would block them all the same).
    private = len(
        reading.read(r["root"], "fetches", "source_url IS NOT NULL AND outcome = 'blocked'")
    )
    assert private <= len(PRIVATE_LINKS)
    assert r["followed"] == r["pages"] - 3 + 3 + private
    # The fetch timeline: its three parts are the fetch stages' time (the stage clock starts
    # before its first row is written; request times come from the engine, on the same clock).
    t = r["fetch_timeline"]
    assert t["before_s"] > 0 and t["after_s"] > 0 and t["requests_s"] > 0
    assert t["before_s"] + t["requests_s"] + t["after_s"] == pytest.approx(r["fetch_s"], abs=0.05)
    # One host's requests: at least the delay apart, and not much more (the engine keeps pace).
    assert 1.0 <= t["pacing"] < 1.5
    assert 0 < r["ideal_s"] <= t["requests_s"] + DELAY * 2
    assert r["fetch_efficiency"] == pytest.approx(r["ideal_s"] / r["fetch_s"])
    floor = r["floor"]
    assert floor["pages"] == r["pages"] and 0 < floor["engine_ms"] < floor["floor_ms"]
    assert r["cpu_s"] / r["pages"] * 1e3 > floor["floor_ms"]
    # The fetch tasks ran in the engine's Python workers (Spark's, or the embedded engine's
    # worker processes), whose CPU the figures count.
    assert r["cpu_roles"]["python_workers"] > 0
