"""URL-pattern traps end to end: an endless calendar and a faceted search whose pages say the
same thing are stopped once their pattern has shown enough duplicates, with the reason in
crawldb, the pattern in the traps table and the counts in plan's and update's results."""

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

pytestmark = pytest.mark.e2e

MIN_PAGES = 6
PER_GEN = 4
SEEDS = (
    "http://trapcalendar.com/cal/2026/11",
    "http://shopfacets.com/shop?color=red&page=1&size=s",
)
PATTERNS = {("trapcalendar.com", "/cal/{n}/{n}"), ("shopfacets.com", "/shop?color&page&size")}


def test_patterns_of_near_identical_pages_are_trapped_and_their_urls_filtered(
    spark_cfg, template_root, tmp_path
):
    with serve_in_thread(WebSpec(seed=5, hosts=0, special=True)) as web:
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(SEEDS) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=0.05,
            crawl__max_depth=100,  # only the trap rule can stop these
            generate__max_per_host=PER_GEN,
            traps__min_pages=MIN_PAGES,
            sitemaps__enabled=False,
        )
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            ran = runner.run_crawl(db, cfg, str(seeds), generations_wanted=8)

    assert len(ran) < 8  # the crawl ended: nothing left but trapped URLs
    traps = {(r["host"], r["pattern"]): r for r in reading.read(root, "traps")}
    for key in PATTERNS:
        row = traps[key]
        assert row["pages"] >= MIN_PAGES and row["duplicates"] >= 0.8 * row["pages"]

    def count(where: str) -> int:
        return reading.count(root, "crawldb", where)

    for host, _ in PATTERNS:
        fetched = count(f"host = '{host}' AND last_gen IS NOT NULL")
        # a generation's pages are counted by its update: one more generation may fetch
        assert MIN_PAGES <= fetched <= MIN_PAGES + 2 * PER_GEN
        trapped = count(f"host = '{host}' AND status = 'filtered' AND reason = 'trap_pattern'")
        assert trapped > 0
    counts = [r for r in reading.runs(root) if r.state == "done"]
    plan = sum(r.counts.get("filtered_trap_pattern", 0) for r in counts if r.stage == "plan")
    # a plan that then plans nothing records no run: the URLs it filtered are in crawldb only
    assert plan <= count("reason = 'trap_pattern'")
    # the last generations plan nothing: their update has no pages, and counts nothing
    judged = [r.counts.get("trap_patterns", 0) for r in counts if r.stage == "update"]
    assert max(judged) == len(PATTERNS)
