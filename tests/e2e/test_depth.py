"""Depth is the shortest path, end to end: on a web whose shortest paths cross hosts while
longer same-host paths exist (``WebSpec.shortcuts``, half the hosts seeded, two fetch tasks, so some
shorter paths are found only in a later generation), a crawl to depth D fetches exactly the pages a
breadth-first walk of the web's own link graph finds within D (crawllib.testweb.truth), with
same-host following on and off, and records each fetched page at its breadth-first depth."""

from __future__ import annotations

import collections
import contextlib
import shutil

import pytest

from crawllib.config import replace
from crawllib.core.urls import normalize_url
from crawllib.core.vocab import Stage
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, serve_in_thread, truth
from crawllib.testweb.audit import is_page_request
from tests.e2e import reading

pytestmark = pytest.mark.e2e

MAX_DEPTH = 3
SPEC = WebSpec(
    seed=7, hosts=8, pages_per_host=30, special=False, cross_host_link_share=0.3, shortcuts=True
)


@pytest.mark.parametrize("follow", [True, False], ids=["following", "no-following"])
def test_the_crawl_fetches_what_breadth_first_finds_within_the_depth(
    spark_cfg, template_root, tmp_path, follow
):
    with serve_in_thread(SPEC) as web:
        seeds = [f"http://{h}/" for h in web.site.regular[::2]]
        expected = truth.expect(web.site, MAX_DEPTH, seeds=seeds)
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        seed_file = tmp_path / "seeds.txt"
        seed_file.write_text("\n".join(seeds) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            crawl__max_depth=MAX_DEPTH,
            politeness__default_delay=0.02,
            fetch__follow=follow,
            # two fetch tasks: a link to a host the other task owns waits for the next
            # generation, so some shorter paths are found only then (one task, the local
            # default, follows every host at once)
            fetch__partitions=2,
            generate__max_per_host=200,
        )
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            runner.run_crawl(db, cfg, str(seed_file))
        requests = collections.Counter(
            normalize_url(f"http://{r.host}{r.path_qs}")
            for r in web.log
            if is_page_request(r.path_qs)
        )

    # the web is shaped as meant: many pages are closer through another host than their own
    by_truth = {normalize_url(u): d for u, d in expected.depth.items() if u in expected.fetches}
    assert len(by_truth) > 150 and max(by_truth.values()) == MAX_DEPTH

    fetched = {
        r["url"]: r["depth"]
        for r in reading.read(root, "crawldb", "status IN ('fetched', 'duplicate', 'noindex')")
    }
    missed = sorted(set(by_truth) - set(fetched))
    too_deep = sorted(set(fetched) - set(by_truth))
    assert missed == [] and too_deep == []  # recall 1.0, nothing past the depth
    assert {u: d for u, d in fetched.items() if d != by_truth[u]} == {}
    assert max(requests.values()) == 1  # fetched once each
    if follow:
        # in-task following met deep pages first by their own host's longer paths: later
        # generations found the shorter ones, and plan lowered them
        lowered = sum(
            r.counts.get("depth_lowered", 0)
            for r in reading.latest_runs(root).values()
            if r.stage == Stage.PLAN
        )
        assert lowered > 0
