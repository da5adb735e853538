"""Following to owned hosts, end to end: on a web whose depth crosses hosts at every level, seeded
on two of its hosts, the local default (one fetch partition, extracting on every core) owns
every host, so the first generation fetches most of the web within the depth and the
second the rest: every page breadth-first finds (crawllib.testweb.truth), each once, every new host's robots.txt before its
pages, and every followed page recorded as a planned one is (crawldb, robots, hosts). With two
partitions no host is fetched by two tasks, and a link to a new host the other partition owns
waits for the next generation."""

from __future__ import annotations

import collections
import contextlib
import shutil

import pytest

from crawllib.config import replace
from crawllib.core.urls import host_of, normalize_url
from crawllib.core.vocab import Stage
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.udfs import task_partition
from crawllib.testweb import WebSpec, serve_in_thread, truth
from crawllib.testweb.audit import audit, is_page_request
from tests.conftest import open_db
from tests.e2e import reading

pytestmark = pytest.mark.e2e

MAX_DEPTH = 3
DELAY = 0.02
SPEC = WebSpec(seed=11, hosts=8, pages_per_host=20, special=False, cross_host_link_share=0.3)


def crawl(request, engine, spark_cfg, template_root, tmp_path, seeds_of, generations, **changes):
    """Crawl SPEC from the seeds ``seeds_of(web)`` gives, ``generations`` generations; the
    root, the web, the seeds, the request log and the expected fetches."""
    with serve_in_thread(SPEC) as web:
        seeds = seeds_of(web)
        expected = truth.expect(web.site, MAX_DEPTH, seeds=seeds)
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        seed_file = tmp_path / "seeds.txt"
        seed_file.write_text("\n".join(seeds) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            crawl__max_depth=MAX_DEPTH,
            politeness__default_delay=DELAY,
            generate__max_per_host=200,
            **changes,
        )
        with lease.hold(root, "pytest", cfg):
            db = open_db(request, engine, root, cfg)
            with contextlib.closing(db):
                runner.run_crawl(db, cfg, str(seed_file), generations_wanted=generations)
        log = list(web.log)
    return root, web, seeds, log, expected


def page_requests(log) -> collections.Counter[str]:
    return collections.Counter(
        normalize_url(f"http://{r.host}{r.path_qs}") for r in log if is_page_request(r.path_qs)
    )


def test_the_local_default_fetches_the_whole_web_in_two_generations_each_page_once(
    request, engine, spark_cfg, template_root, tmp_path
):
    root, web, seeds, log, expected = crawl(
        request,
        engine,
        spark_cfg,
        template_root,
        tmp_path,
        lambda web: [f"http://{h}/" for h in web.site.regular[:2]],
        2,
    )
    wanted = {normalize_url(u) for u in expected.fetches}
    seed_hosts = {host_of(s) for s in seeds}
    # the web is shaped as meant: most of what is within the depth lies on other hosts
    assert len(wanted) > 100 and len({host_of(u) for u in wanted} - seed_hosts) >= 5
    requests = page_requests(log)
    assert set(requests) >= wanted  # recall 1.0, in at most two generations
    assert max(requests.values()) == 1  # each page once
    # most of it in the first: within a task breadth first holds per host, so a page a
    # longer path across hosts reached first is fetched at that depth, and its links past
    # the depth wait for the next generation, which finds the shorter path
    first = {f["url"] for f in reading.read(root, "fetches", "gen = 0 AND outcome = 'ok'")}
    assert len(first & wanted) >= 0.8 * len(wanted)
    # each new host: robots.txt first
    by_host: dict[str, list[str]] = collections.defaultdict(list)
    for r in sorted(log, key=lambda r: r.start):
        by_host[r.host].append(r.path_qs)
    new_hosts = {host_of(u) for u in wanted} - seed_hosts
    assert {h: by_host[h][0] for h in new_hosts} == {h: "/robots.txt" for h in new_hosts}
    assert audit(web.site, log, "crawllib", MAX_DEPTH, DELAY, seeds).politeness_violations == 0

    # recorded as planned pages are: crawldb rows (fetched), robots rows, hosts rows
    fetched = {
        r["url"]
        for r in reading.read(root, "crawldb", "status IN ('fetched', 'duplicate', 'noindex')")
    }
    assert fetched >= wanted
    assert {r["host"] for r in reading.read(root, "robots")} >= new_hosts
    assert {r["slot"] for r in reading.read(root, "hosts")} >= new_hosts
    runs = reading.latest_runs(root)
    counts = runs[(0, Stage.FETCH)].counts
    assert counts["followed_new_hosts"] > 0
    assert counts["followed"] >= counts["followed_new_hosts"]
    fetches = reading.read(root, "fetches", "gen = 0 AND source_url IS NOT NULL")
    on_new = [f for f in fetches if f["host"] not in seed_hosts]  # no other host is known
    assert counts["followed_new_hosts"] == len(on_new)
    on_planned = [f for f in fetches if f["host"] in seed_hosts]
    assert counts["followed_planned_hosts"] == len(on_planned) > 0


def test_two_partitions_never_share_a_host_and_leave_the_others_links_to_the_next_generation(
    spark_cfg, template_root, tmp_path, request
):
    def seeds_of(web):
        # a seed in each partition, so that both tasks fetch
        regular = web.site.regular
        return [f"http://{next(h for h in regular if task_partition(h, 2) == p)}/" for p in (0, 1)]

    root, web, seeds, log, expected = crawl(
        request,
        "embedded",
        spark_cfg,
        template_root,
        tmp_path,
        seeds_of,
        2,
        fetch__partitions=2,
    )
    seed_hosts = {host_of(s) for s in seeds}
    fetched0 = reading.read(root, "fetches", "gen = 0")
    assert max(page_requests(log).values()) == 1
    assert audit(web.site, log, "crawllib", MAX_DEPTH, DELAY, seeds).politeness_violations == 0
    # a new host fetched in generation 0 was reached from its own partition's pages only
    new0 = {f["host"] for f in fetched0} - seed_hosts
    assert new0
    by_url = {f["url"]: f for f in fetched0}
    followed = [f for f in fetched0 if f["host"] in new0]
    assert followed and all(f["source_url"] in by_url for f in followed)
    assert {
        f["url"]
        for f in followed
        if task_partition(f["host"], 2) != task_partition(host_of(f["source_url"]), 2)
    } == set()
    # links of generation 0 to hosts the other partition owns, to URLs not fetched then: the
    # next generation's frontier holds them
    depth0 = {f["url"]: f["depth"] for f in fetched0}
    waiting = {
        link["dst_url"]
        for link in reading.read(root, "links", "gen = 0")
        if depth0.get(link["src_url"], MAX_DEPTH) < MAX_DEPTH
        and link["dst_url"] not in depth0
        and task_partition(link["dst_host"], 2) != task_partition(host_of(link["src_url"]), 2)
    }
    assert waiting
    frontier1 = {r["url"] for r in reading.read(root, "frontier", "gen = 1")}
    assert waiting <= frontier1
