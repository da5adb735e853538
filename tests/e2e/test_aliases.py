"""Alias hosts end to end: mirror.net serves site0.net's bytes; once it has shown enough pages,
mostly copies of site0.net's, it is judged an alias and its URLs are no longer fetched, with the
reason in crawldb, the pair in the aliases table and the counts in plan's and update's results;
site0.net, the original, is crawled on."""

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

MIN_PAGES = 4
PER_GEN = 4  # the fetch follows a host's links up to its quota: PER_GEN pages a generation
FIRST = 1  # generations of site0.net alone before the mirror is found


def test_a_host_copying_another_is_judged_an_alias_and_no_longer_fetched(
    spark_cfg, template_root, tmp_path
):
    with serve_in_thread(WebSpec(seed=7, hosts=1, pages_per_host=40, special=True)) as web:
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=0.05,
            crawl__max_depth=100,
            generate__max_per_host=PER_GEN,
            aliases__min_pages=MIN_PAGES,
            aliases__allow=(),
            sitemaps__enabled=False,
        )
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("http://site0.net/\n")
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            runner.run_crawl(db, cfg, str(seeds), generations_wanted=FIRST)
            seeds.write_text("http://mirror.net/\n")
            runner.run_crawl(db, cfg, str(seeds), generations_wanted=FIRST + 3)

    aliases = {(r["host"], r["of_host"]): r["copies"] for r in reading.read(root, "aliases")}
    assert aliases[("mirror.net", "site0.net")] >= 0.8 * MIN_PAGES
    assert aliases.get(("site0.net", "mirror.net"), 0) < aliases[("mirror.net", "site0.net")]

    def count(where: str) -> int:
        return reading.count(root, "crawldb", where)

    fetched = count("host = 'mirror.net' AND last_gen IS NOT NULL")
    # a generation's pages are counted by its update: one more generation may fetch
    assert MIN_PAGES <= fetched <= MIN_PAGES + 2 * PER_GEN
    assert count("host = 'mirror.net' AND status = 'filtered' AND reason = 'alias'") > 0
    assert count("host = 'site0.net' AND reason = 'alias'") == 0
    # the original is crawled on at its pace, PER_GEN pages a generation
    assert count("host = 'site0.net' AND last_gen IS NOT NULL") >= PER_GEN * (FIRST + 2)
    done = [r for r in reading.runs(root) if r.state == "done"]
    plan = sum(r.counts.get("filtered_alias", 0) for r in done if r.stage == "plan")
    assert plan == count("reason = 'alias'")
    assert max(r.counts.get("alias_hosts", 0) for r in done if r.stage == "update") == 1
