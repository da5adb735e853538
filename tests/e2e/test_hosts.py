"""Politeness that remembers, over two whole generations of two slices each, from the server's
request log and the hosts table: a Retry-After of an hour, a server answering 503 to
everything, a Crawl-delay of a minute, a robots.txt answering 503 (on the embedded engine); and
a fetch task killed in the middle of its slice, whose retry keeps every host's delay (on Spark,
which tries a task whose executor was lost again). (A host that is down:
test_fetch_politeness.py.)"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time

import pytest
from aiohttp import web

from crawllib.config import replace
from crawllib.runs import runner
from crawllib.stages.seeding import seed
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from tests.e2e import reading
from tests.unit.test_fetch_support import SLACK, LocalWeb

pytestmark = pytest.mark.e2e

DELAY = 0.2
PAGES = 4
HOSTS = ("ok.net", "busy.net", "failing.net", "slowrobots.net", "norobots.net")


@pytest.fixture(scope="module")
def crawled(spark_cfg, template_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hosts")
    root = str(tmp / "crawl")
    shutil.copytree(template_root, root)
    with LocalWeb() as server:
        for p in range(PAGES):
            server.text("busy.net", f"/{p}", "later", status=429, headers={"Retry-After": "3600"})
            server.text("failing.net", f"/{p}", "oops", status=503)
        server.text("slowrobots.net", "/robots.txt", "User-agent: *\nCrawl-delay: 60\n")
        server.text("norobots.net", "/robots.txt", "down for maintenance", status=503)
        cfg = replace(
            spark_cfg,
            network__resolve=server.resolve(*HOSTS),
            # this server answers any path (a 200 /sitemap.xml would end a backoff): the
            # requests here are the pages' and robots.txt's only
            sitemaps__enabled=False,
            politeness__default_delay=DELAY,
            storage__fetch_slices=2,
            fetch__slice_grace_seconds=2.0,  # a host held back longer waits for a later slice
            crawl__max_depth=0,
            fetch__max_attempts=5,
            robots__retry_seconds=600.0,
        )
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(f"http://{h}/{p}" for h in HOSTS for p in range(PAGES)) + "\n")
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            seed(db, str(seeds), cfg, 0)
            started = time.time()
            for gen in (0, 1):
                runner.run_generation(db, cfg, gen)
        hits = list(server.hits)
    hosts = {r["slot"]: r for r in reading.read(root, "hosts")}
    fetches = reading.read(root, "fetches")
    crawldb = {r["url"]: r for r in reading.read(root, "crawldb")}
    return {
        "hits": hits,
        "hosts": hosts,
        "fetches": fetches,
        "crawldb": crawldb,
        "started": started,
    }


def requests_to(crawled, host):
    return sorted((h for h in crawled["hits"] if h.host == host), key=lambda h: h.start)


def outcomes(crawled, host, gen):
    return sorted(
        (r["outcome"], r["error_kind"])
        for r in crawled["fetches"]
        if r["host"] == host and r["gen"] == gen
    )


def test_every_host_keeps_its_delay_across_slices_and_generations(crawled):
    for host in HOSTS:
        hits = requests_to(crawled, host)
        gaps = [b.start - a.start for a, b in zip(hits, hits[1:], strict=False)]
        assert all(g >= DELAY - SLACK for g in gaps), (host, gaps)


def test_a_retry_after_of_an_hour_gets_no_further_request(crawled):
    paths = [h.path_qs for h in requests_to(crawled, "busy.net")]
    assert paths[0] == "/robots.txt" and len(paths) == 2  # and one page, once
    deferred = [("deferred", "retry_after")]
    assert outcomes(crawled, "busy.net", 0) == sorted([("http_error", None)] + deferred * 3)
    # gen 1: plan holds the host back (the hour is not over): no fetch, no attempt spent
    assert outcomes(crawled, "busy.net", 1) == []
    rows = [r for u, r in crawled["crawldb"].items() if "busy.net" in u]
    assert sorted(r["attempts"] for r in rows) == [0, 0, 0, 1]
    # plan writes no deferral: the URLs stay due (next_gen 1), held while the hosts row says so
    assert {(r["status"], r["next_gen"]) for r in rows if not r["attempts"]} == {("queued", 1)}
    row = crawled["hosts"]["busy.net"]
    assert row["not_before_reason"] == "retry_after"
    assert row["not_before"].timestamp() >= crawled["started"] + 3600 - 60
    assert (row["urls_attempted"], row["pages"], row["first_gen"], row["last_gen"]) == (1, 0, 0, 0)


def test_a_server_failing_everything_is_asked_at_the_backoff_schedule_only(crawled):
    hits = [h for h in requests_to(crawled, "failing.net") if h.path_qs != "/robots.txt"]
    # each 503 doubles the next gap, across slice and generation boundaries alike
    gaps = [b.start - a.start for a, b in zip(hits, hits[1:], strict=False)]
    assert gaps and all(g >= min(DELAY * 2 ** (i + 1), 30.0) - SLACK for i, g in enumerate(gaps)), (
        gaps
    )
    # once its next request lies past the slice's planned end, its URLs wait for a later one
    assert ("deferred", "backoff") in outcomes(crawled, "failing.net", 1)
    row = crawled["hosts"]["failing.net"]
    assert row["http_failures"] == len(hits) and row["delay_source"] == "backoff"
    assert row["delay"] == pytest.approx(min(DELAY * 2 ** len(hits), 30.0))


def test_a_crawl_delay_of_a_minute_is_never_shortened(crawled):
    assert [h.path_qs for h in requests_to(crawled, "slowrobots.net")] == ["/robots.txt"]
    assert {e for _, e in outcomes(crawled, "slowrobots.net", 0)} == {"crawl_delay_too_long"}
    assert outcomes(crawled, "slowrobots.net", 1) == []  # held back by plan from then on
    row = crawled["hosts"]["slowrobots.net"]
    assert (row["crawl_delay"], row["robots_state"], row["urls_attempted"]) == (60.0, "ok", 0)


def test_a_failing_robots_txt_holds_its_urls_without_attempts(crawled):
    assert [h.path_qs for h in requests_to(crawled, "norobots.net")] == ["/robots.txt"]
    assert set(outcomes(crawled, "norobots.net", 0)) == {("deferred", "robots_unavailable")}
    assert outcomes(crawled, "norobots.net", 1) == []  # held by plan until the retry is due
    rows = [r for u, r in crawled["crawldb"].items() if "norobots.net" in u]
    assert {(r["status"], r["attempts"]) for r in rows} == {("queued", 0)}
    row = crawled["hosts"]["norobots.net"]
    assert (row["robots_state"], row["robots_failures"]) == ("unavailable", 1)
    assert row["not_before_reason"] == "robots"


def test_a_healthy_host_adds_up(crawled):
    row = crawled["hosts"]["ok.net"]
    assert (row["urls_attempted"], row["pages"], row["http_failures"]) == (PAGES, PAGES, 0)
    assert row["bytes"] > 0 and row["addresses"] == ["127.0.0.1"]
    assert row["delay_source"] == "default" and row["not_before"] is None


def kill_python_workers() -> int:
    """SIGKILL the PySpark workers of this test session's JVM (the children of its
    pyspark.daemon, found in /proc): the task they run fails and Spark tries it again."""

    def parent(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])

    def cmdline(pid: int) -> bytes:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()

    def ours(pid: int) -> bool:  # a descendant of this process
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parent(pid)
        return False

    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    killed = 0
    for pid in pids:
        try:
            if b"pyspark.daemon" not in cmdline(pid) or not ours(pid):
                continue
            for child in pids:
                if child != pid and parent(child) == pid:
                    os.kill(child, signal.SIGKILL)
                    killed += 1
        except (FileNotFoundError, ProcessLookupError):
            continue
    return killed


def test_a_fetch_task_killed_mid_slice_is_retried_without_a_short_gap(
    spark, spark_cfg, template_root, tmp_path
):
    root = str(tmp_path / "crawl")
    shutil.copytree(template_root, root)
    # The retry starts about a second after the kill here: a delay well above that is what
    # tells a retry that waits from one that does not (it fails with retried=False).
    delay, pages, hosts = 2.5, 2, ("one.net", "two.net")
    killed: list[int] = []
    with LocalWeb() as server:

        async def kill_once(request):
            if not killed:  # the first time only: the retry gets its page
                killed.append(kill_python_workers())
            return web.Response(text="<p>two</p>", content_type="text/html")

        server.route("one.net", "/1", kill_once)
        cfg = replace(
            spark_cfg,
            network__resolve=server.resolve(*hosts),
            sitemaps__enabled=False,
            politeness__default_delay=delay,
            politeness__jitter=0.0,
            storage__fetch_slices=1,
            crawl__max_depth=0,
        )
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(f"http://{h}/{p}" for h in hosts for p in range(pages)) + "\n")
        with lease.hold(root, "pytest", cfg):
            from crawllib.store.spark_db import SparkDb

            db = SparkDb(spark, root, cfg)
            seed(db, str(seeds), cfg, 0)
            for stage in ("plan", "fetch"):  # what the test reads: the fetch and its rows
                runner.run_stage(db, cfg, 0, stage)
        hits = list(server.hits)
    assert killed and killed[0] >= 1
    paths = [h.path_qs for h in hits if h.host == "one.net"]
    assert paths.count("/1") == 2  # asked by the killed attempt and by the retry
    for host in hosts:
        starts = sorted(h.start for h in hits if h.host == host)
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert min(gaps) >= delay - SLACK, (host, gaps)
    fetches = reading.read(root, "fetches")
    assert sorted(r["url"] for r in fetches) == sorted(
        f"http://{h}/{p}" for h in hosts for p in range(pages)
    )
    assert {r["outcome"] for r in fetches} == {"ok"}
