"""What a generation may fetch, end to end on the test web: the operator's exclusions, a time
budget at each host's delay, and redirect chains that end past fetch.max_redirects, each with
its reason in crawldb and its count in the stage results."""

from __future__ import annotations

import collections
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

GENERATIONS = 2  # the home pages, then what they link to
SEEDS = (
    "http://site0.net/",
    "http://robotsdelay.org/",
    "http://redirects.com/",
    "http://neardup.org/",
)


def test_exclusions_time_budget_and_redirect_hops_on_the_test_web(
    spark_cfg, template_root, tmp_path
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
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            runner.run_crawl(db, cfg, str(seeds), generations_wanted=GENERATIONS)
        log = list(web.log)

    crawldb = reading.read(root, "crawldb")
    done = [r for r in reading.runs(root) if r.state == "done"]

    def count(where: str) -> int:
        return reading.count(root, "crawldb", where)

    def total(stage: str, count: str) -> int:
        return sum(r.counts.get(count, 0) for r in done if r.stage == stage)

    def reasons(host: str) -> dict[str, str]:
        rows = [r for r in crawldb if r["host"] == host]
        return {r["url"].split(host, 1)[1]: r["reason"] for r in rows}

    requested = {(r.host, r.path_qs) for r in log}

    # exclusions: neither the excluded host nor the excluded prefix is ever requested
    assert not [p for h, p in requested if h == "neardup.org"]
    site0 = reasons("site0.net")
    excluded = {p for p, reason in site0.items() if reason == "excluded"}
    assert "/p/1.html" in excluded and all(p.startswith("/p/1") for p in excluded)
    assert not [p for h, p in requested if h == "site0.net" and p.startswith("/p/1")]
    assert reasons("neardup.org") == {"/": "excluded"}
    assert total("plan", "filtered_excluded") == count("reason = 'excluded'")

    # the time budget: one robotsdelay.org URL a generation, the rest deferred to the next
    per_gen = collections.Counter(
        r["last_gen"]
        for r in crawldb
        if r["host"] == "robotsdelay.org" and r["last_gen"] is not None
    )
    assert set(per_gen.values()) == {1}
    assert total("plan", "deferred_time") >= 2
    assert len([p for h, p in requested if h == "site0.net"]) > GENERATIONS + 1  # not held

    # redirect hops: /chain/start -> /chain/2 (hop 1) -> /chain/3 is past max_redirects = 1
    chain = reasons("redirects.com")
    assert chain["/chain/2"] == "too_many_redirects"
    assert ("redirects.com", "/chain/3") not in requested
    assert total("update", "too_many_redirects") == count("reason = 'too_many_redirects'")
