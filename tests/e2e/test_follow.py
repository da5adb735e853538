"""In-task following inside a generation (to the task's slots and the new hosts it owns), end to
end: a crawl that follows fetches every page the rules allow, in fewer generations than depth
levels, each URL once; every followed URL is recorded as if plan had chosen it (a fetches row, a crawldb row, a frontier row of its
generation with its source and depth). With following off, each depth level takes a generation
of its own (tests/spark/test_fetch_stage.py runs the fetch stage that way)."""

from __future__ import annotations

import collections
import contextlib
import shutil

import pytest

from crawllib.config import replace
from crawllib.core.urls import normalize_url
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.audit import is_page_request
from tests.e2e import reading

pytestmark = pytest.mark.e2e

MAX_DEPTH = 2
# crawldb status after update, by fetch outcome (crawllib.transforms.update)
STATUSES = {
    "ok": {"fetched", "duplicate"},
    "redirect": {"redirected"},
    "http_error": {"gone", "failed", "dead"},
    "robots_denied": {"robots_denied"},
    # a link to a new host the task owns is followed; the network guard refuses an unsafe one
    # as it would a planned URL
    "blocked": {"blocked"},
}


def crawl(spark_cfg, template_root, tmp_path, name):
    with serve_in_thread(WebSpec(seed=21, hosts=4, pages_per_host=25, special=False)) as web:
        root = str(tmp_path / name)
        shutil.copytree(template_root, root)
        seeds = tmp_path / f"{name}.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            crawl__max_depth=MAX_DEPTH,
            politeness__default_delay=0.05,
        )
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            ran = runner.run_crawl(db, cfg, str(seeds))
        requests = collections.Counter(
            normalize_url(f"http://{r.host}{r.path_qs}")
            for r in web.log
            if is_page_request(r.path_qs)
        )
        expected = {normalize_url(u) for u in web.expected_fetches(MAX_DEPTH)}
    return root, ran, requests, expected


def rows(root, name, *columns, where="true"):
    return [{c: r[c] for c in columns} for r in reading.read(root, name, where)]


def test_following_fetches_every_page_in_fewer_generations_each_once(
    spark_cfg, template_root, tmp_path
):
    on, ran_on, requests_on, expected = crawl(spark_cfg, template_root, tmp_path, "on")

    assert set(requests_on) == expected  # every page the rules allow
    assert max(requests_on.values()) == 1  # none twice
    # Without following, depths 0..MAX_DEPTH need a generation each, and the next generation
    # finds nothing left; following fetches each host's pages in the generation that found them.
    assert len(ran_on) < MAX_DEPTH + 1

    fetched = rows(on, "fetches", "gen", "url", "url_key", "depth", "source_url", "outcome")
    followed = [f for f in fetched if f["source_url"] is not None]
    outcomes = collections.Counter(f["outcome"] for f in followed)
    assert outcomes["ok"] > 0 and "deferred" not in outcomes, outcomes  # robots denials too
    assert len({f["url_key"] for f in fetched}) == len(fetched)
    # each followed URL: one level below the page that linked it, fetched in its generation
    by_url = {f["url"]: f for f in fetched}
    for f in followed:
        source = by_url[f["source_url"]]
        assert (f["gen"], f["depth"]) == (source["gen"], source["depth"] + 1)
    # recorded as if plan had chosen it: a frontier row of its generation, a crawldb row
    frontier = {
        (r["gen"], r["url"]): r
        for r in rows(on, "frontier", "gen", "url", "depth", "source_url", "reason")
    }
    crawldb = {r["url"]: r for r in rows(on, "crawldb", "url", "status", "first_gen", "depth")}
    for f in followed:
        row = frontier[(f["gen"], f["url"])]
        assert (row["reason"], row["source_url"], row["depth"]) == (
            "link",
            f["source_url"],
            f["depth"],
        )
        assert crawldb[f["url"]]["status"] in STATUSES[f["outcome"]]
        assert (crawldb[f["url"]]["first_gen"], crawldb[f["url"]]["depth"]) == (
            f["gen"],
            f["depth"],
        )
    # the next generation's frontier holds none of the URLs already fetched
    for gen, url in frontier:
        first = by_url.get(url)
        assert first is None or first["gen"] >= gen, (gen, url)
