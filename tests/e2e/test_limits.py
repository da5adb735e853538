"""What a generation may fetch, end to end on the test web: the operator's exclusions, a time
budget at each host's delay, and redirect chains that end past fetch.max_redirects, each with
its reason in crawldb and its count in the stage results."""

from __future__ import annotations

import shutil

import pytest

from crawllib.config import replace
from crawllib.runs import runner
from crawllib.store import generations, lease, tables
from crawllib.testweb import WebSpec, serve_in_thread

pytestmark = pytest.mark.e2e

GENERATIONS = 2  # the home pages, then what they link to
SEEDS = (
    "http://site0.net/",
    "http://robotsdelay.org/",
    "http://redirects.com/",
    "http://neardup.org/",
)


def test_exclusions_time_budget_and_redirect_hops_on_the_test_web(
    spark, spark_cfg, template_root, tmp_path
):
    with serve_in_thread(WebSpec(seed=11, hosts=1, pages_per_host=12, special=True)) as web:
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(SEEDS) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            politeness__default_delay=0.05,
            crawl__exclude=("host:neardup.org", "prefix:http://site0.net/p/1"),
            # robotsdelay.org asks Crawl-delay 2: 1 + 1 // 2 = 1 URL a generation; the
            # others (0.05 s) 21
            generate__fetch_seconds=1.0,
            fetch__max_redirects=1,
            sitemaps__enabled=False,
        )
        with lease.hold(root, "pytest", cfg):
            runner.run_crawl(spark, root, cfg, str(seeds), generations_wanted=GENERATIONS)
        log = list(web.log)

    crawldb = tables.read(spark, root, "crawldb")
    done = [r for r in generations.read_rows(spark, root) if r.state == "done"]

    def total(stage: str, count: str) -> int:
        return sum(r.counts.get(count, 0) for r in done if r.stage == stage)

    def reasons(host: str) -> dict[str, str]:
        rows = crawldb.where(f"host = '{host}'").collect()
        return {r["url"].split(host, 1)[1]: r["reason"] for r in rows}

    requested = {(r.host, r.path_qs) for r in log}

    # exclusions: neither the excluded host nor the excluded prefix is ever requested
    assert not [p for h, p in requested if h == "neardup.org"]
    site0 = reasons("site0.net")
    excluded = {p for p, reason in site0.items() if reason == "excluded"}
    assert "/p/1.html" in excluded and all(p.startswith("/p/1") for p in excluded)
    assert not [p for h, p in requested if h == "site0.net" and p.startswith("/p/1")]
    assert reasons("neardup.org") == {"/": "excluded"}
    assert total("plan", "filtered_excluded") == crawldb.where("reason = 'excluded'").count()

    # the time budget: one robotsdelay.org URL a generation, the rest deferred to the next
    per_gen = crawldb.where("host = 'robotsdelay.org' AND last_gen IS NOT NULL").groupBy("last_gen")
    assert {r["count"] for r in per_gen.count().collect()} == {1}
    assert total("plan", "deferred_time") >= 2
    assert len([p for h, p in requested if h == "site0.net"]) > GENERATIONS + 1  # not held

    # redirect hops: /chain/start -> /chain/2 (hop 1) -> /chain/3 is past max_redirects = 1
    chain = reasons("redirects.com")
    assert chain["/chain/2"] == "too_many_redirects"
    assert ("redirects.com", "/chain/3") not in requested
    assert (
        total("update", "too_many_redirects")
        == crawldb.where("reason = 'too_many_redirects'").count()
    )
