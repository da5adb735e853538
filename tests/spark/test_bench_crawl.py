"""The whole-crawl benchmark on a tiny web (no Scrapy): its figures add up and show the crawl
polite, so the report's politeness efficiency and fetch timeline can be trusted."""

from __future__ import annotations

import pytest

from crawllib.bench.crawl import bench_crawl

DELAY = 0.1


@pytest.mark.e2e
def test_crawl_figures_add_up_and_requests_are_never_closer_than_the_delay(spark, tmp_path):
    r = bench_crawl(
        spark, str(tmp_path), hosts=3, pages=12, seed_pages=6, delay=DELAY, scrapy=False
    )
    # Seeds (6 pages and the home page per host) at depth 0, their links at depth 1; the
    # depth-2 frontier is left unplanned.
    assert r["generations"] == 2
    assert r["pages"] >= 3 * 7  # at least the seeds
    t = r["fetch_timeline"]
    assert t["before_s"] > 0 and t["after_s"] > 0 and t["requests_s"] > 0
    # The three parts are the fetch stages' time (the stage clock starts before its first row
    # is written; request times come from the engine, on the same machine clock).
    assert t["before_s"] + t["requests_s"] + t["after_s"] == pytest.approx(r["fetch_s"], abs=0.05)
    # One host's requests: at least the delay apart, and not much more (the engine keeps pace).
    assert 1.0 <= t["pacing"] < 1.5
    assert 0 < r["ideal_s"] <= t["requests_s"] + DELAY * 2
    assert r["fetch_efficiency"] == pytest.approx(r["ideal_s"] / r["fetch_s"])
