"""Whole-crawl benchmarks of ``crawl run`` (to the end: no generation cap) on the regular test
web, served by a child process:

- :func:`bench_crawl`, politeness-bound: many URLs per host at a long delay, so the crawl's time
  is set by politeness; its efficiency says how much the generations' bookkeeping adds;
- :func:`bench_sites`, small sites: home pages as seeds, a site tree 3 links deep, and Scrapy on
  the same web in the same run (robots.txt obeyed, ``delay`` seconds between request starts to
  one host, one request per host at a time, the same depth limit); both crawls are audited from
  the server's request log (:mod:`crawllib.testweb.audit`), and our CPU per page is set against
  the floor: the bare engine and the bare extraction of the same pages.

Politeness efficiency = ideal / actual time, where a generation's ideal is
max over hosts of (requests to the host in that generation - 1) * delay (robots.txt counts in
the generation that fetched it), summed over generations: the time a polite crawler must spend
whatever its speed. For the fetch stage, actual = the fetch stages' wall time (commits
included); for the whole run, actual = the wall time of ``run_crawl`` (every stage, the
engine's bookkeeping included).

Both crawl on one engine (``engine``: ``embedded`` by default, the engine of a crawl on one
machine, which the Scrapy comparison is about; or ``spark``).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from collections import defaultdict
from typing import Any

from benchmarks.fetch import engine_config, run_engine, web_server
from benchmarks.procs import ProcessTree
from benchmarks.stages import bench_config, close_root, open_root
from crawllib import config
from crawllib.config import Config
from crawllib.content.extract import extract_record
from crawllib.core.vocab import Outcome, Stage, StageState
from crawllib.runs import runner
from crawllib.store import generations
from crawllib.store.db import Db
from crawllib.testweb import WebSpec
from crawllib.testweb.audit import audit, read_log
from crawllib.testweb.site import Site, regular_host_name

# Fetch outcomes that sent a request (robots_denied, blocked and deferred did not).
REQUESTED = (Outcome.OK, Outcome.REDIRECT, Outcome.HTTP_ERROR, Outcome.ERROR)


def bench_crawl(
    work: str,
    hosts: int = 100,
    pages: int = 300,
    seed_pages: int = 150,
    max_depth: int = 1,
    delay: float = 1.0,
    engine: str = "embedded",
) -> dict[str, Any]:
    """The politeness-bound crawl: ``run_crawl`` to the end on ``engine``; its figures.

    Seeds: every host's home page and its pages 0..seed_pages-1 (a sitemap-like frontier, so
    a generation holds many URLs per host as in a production crawl); their links reach the
    rest of the ``pages`` per host one link deeper.
    """
    spec = WebSpec(hosts=hosts, pages_per_host=pages, special=False)
    names = [regular_host_name(i) for i in range(hosts)]
    seeds = [f"http://{h}/" for h in names]
    seeds += [f"http://{h}/p/{n}.html" for h in names for n in range(seed_pages)]
    with web_server(spec, "process") as (resolve, _pid):
        cfg = config.replace(
            engine_config(bench_config(), resolve, hosts),
            politeness__default_delay=delay,
            crawl__max_depth=max_depth,
            generate__max_per_host=max(100, pages + 1),
            generate__host_budget=max(5000, pages + 1),
        )
        db = open_root(os.path.join(work, "crawl"), cfg, engine, "bench crawl", init=False)
        try:
            out = run_ours(db, cfg, seeds)
        finally:
            close_root(db)
    return {
        "engine": engine,
        "hosts": hosts,
        "pages_per_host": pages,
        "seed_pages": seed_pages,
        "max_depth": max_depth,
        "delay": delay,
        **out,
    }


# The hard hosts of the real-shaped web: every page 429 with Retry-After 3600, a URL that
# always answers 500, one that fails twice then answers (crawllib.testweb.special)
HARD_HOSTS = ("throttled.org", "err500.com", "flaky.net")


def bench_sites(
    work: str,
    hosts: int = 60,
    pages: int = 95,
    fanout: int = 5,
    max_depth: int = 3,
    delay: float = 0.2,
    scrapy: bool = True,
    shape: str = "real",
    engine: str = "embedded",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A crawl of small sites, each host a tree of ``pages`` pages ``fanout`` children per
    page (5 and 95: every page within 3 links of its home), crawled by ``run_crawl`` on
    ``engine`` with the default settings but delay and depth, then by Scrapy; both audited
    from the server's log. Then the CPU floor of the same pages: the bare engine (delay 0, no
    extraction) and the bare extraction (``extract_record``, this process, one core).

    ``shape``: ``real``, the web as users crawl it: a third of the links cross hosts and may
    lead anywhere in the other host's tree (WebSpec.shortcuts), only every other host's home
    is a seed (the rest are found through links, so shortest paths cross hosts and a depth-3
    crawl takes several generations), plus the HARD_HOSTS (a host that throttles with
    Retry-After 3600, a URL that always fails, one that fails twice); failed URLs are retried
    a second after their attempt (Scrapy retries at once); ``tree``: every home a seed, no
    link across hosts deeper than its source (a generation follows each site whole).
    ``settings``: more settings for our crawl (``{"fetch__partitions": 1}``)."""
    real = shape == "real"
    spec = WebSpec(
        hosts=hosts,
        pages_per_host=pages,
        fanout=fanout,
        special=real,
        special_hosts=HARD_HOSTS if real else (),
        shortcuts=real,
        cross_host_link_share=0.3 if real else 0.2,
    )
    names = [regular_host_name(i) for i in range(hosts)]
    seeds = [f"http://{h}/" for h in (names[::2] + list(HARD_HOSTS) if real else names)]
    log = os.path.join(work, "sites-web.jsonl")
    os.makedirs(work, exist_ok=True)
    out: dict[str, Any] = {
        "engine": engine,
        "shape": shape,
        "hosts": hosts,
        "pages_per_host": pages,
        "fanout": fanout,
        "max_depth": max_depth,
        "delay": delay,
        "seeds": len(seeds),
    }
    root = os.path.join(work, "sites")
    db: Db | None = None
    try:
        with web_server(spec, "process", log) as (resolve, _pid):
            cfg = config.replace(
                engine_config(bench_config(), resolve, hosts + len(HARD_HOSTS)),
                politeness__default_delay=delay,
                crawl__max_depth=max_depth,
                fetch__retry_backoff_seconds=1.0 if real else 600.0,
                **(settings or {}),
            )
            db = open_root(root, cfg, engine, "bench crawl", init=False)
            out.update(run_ours(db, cfg, seeds))
            if scrapy:
                from benchmarks.scrapy_crawl import run_scrapy

                port = int(next(iter(resolve.values())).rsplit(":", 1)[1])
                scrapy_dir = os.path.join(work, "scrapy-sites")
                domains = names + list(HARD_HOSTS) if real else names
                out["scrapy"] = run_scrapy(port, seeds, domains, max_depth, delay, scrapy_dir)
        site, requests = Site(spec), read_log(log)
        out["audit"] = audit(site, requests, "crawllib/", max_depth, delay, seeds)
        if scrapy:
            out["scrapy_audit"] = audit(site, requests, "scrapy-bench", max_depth, delay, seeds)
        out["floor"] = cpu_floor(db, spec, cfg)
    finally:
        if db is not None:
            close_root(db)
    return out


def run_ours(db: Db, cfg: Config, seeds: list[str]) -> dict[str, Any]:
    """``run_crawl`` from ``seeds`` into ``db``'s new root until nothing is left; its
    figures. The seed file goes beside the root."""
    delay = cfg.politeness.default_delay
    seed_file = db.root + "-seeds.txt"
    with open(seed_file, "w", encoding="utf-8") as fh:
        fh.write("\n".join(seeds) + "\n")
    with ProcessTree() as tree:
        t0 = time.perf_counter()
        ran = runner.run_crawl(db, cfg, seed_file)
        wall = time.perf_counter() - t0
    figures = tree.figures()
    cpu = figures.total_cpu("driver", "jvm", "python_workers")
    ideal, fetch_s, pages_ok, requests = crawl_figures(db, delay)
    return {
        "cpu_roles": {
            role: figures.cpu.get(role, 0.0) for role in ("driver", "jvm", "python_workers")
        },
        "root": db.root,
        "generations": len(ran),
        "pages": pages_ok,
        "requests": requests,
        "followed": followed(db),
        "ideal_s": ideal,
        "fetch_s": fetch_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "fetch_efficiency": ideal / fetch_s,
        "run_efficiency": ideal / wall,
        "stage_s": stage_seconds(db),
        "fetch_timeline": fetch_timeline(db, delay),
    }


def followed(db: Db) -> int:
    """Fetch attempts of URLs a fetch task followed inside their generation."""
    fetches = db.table("fetches", columns=["source_url"])
    return db.count(db.sql("SELECT * FROM {f} WHERE source_url IS NOT NULL", f=fetches))


def cpu_floor(db: Db, spec: WebSpec, cfg: Config) -> dict[str, float]:
    """CPU ms per page of the bare engine (the crawl's ok pages again, delay 0, no extraction,
    on a fresh server: its requests stay out of the audited log) and of the bare extraction of
    the stored pages (``extract_record``, as the fetch task runs it)."""
    pages = db.table("pages", columns=["url", "url_key", "host", "body", "charset"])
    # the regular hosts' pages: a hard host answers a fresh server otherwise (flaky.net fails)
    rows = [r for r in db.collect(pages) if r["host"] not in HARD_HOSTS]
    inputs = [
        {"url": r["url"], "url_key": r["url_key"], "host": r["host"], "depth": 1} for r in rows
    ]
    with web_server(spec, "process") as (resolve, server_pid):
        fast = config.replace(
            cfg, network__resolve=resolve, politeness__default_delay=0.0, fetch__extract=False
        )
        engine = run_engine(inputs, fast, server_pid)
    ok = engine["outcomes"].get(Outcome.OK, 0)
    if ok != len(rows):
        raise RuntimeError(f"the floor's engine run fetched {ok} of {len(rows)} pages")
    t0 = time.process_time()
    for r in rows:
        extract_record(r["body"], r["url"], r["charset"], cfg)
    extract_ms = (time.process_time() - t0) / len(rows) * 1e3
    return {
        "pages": len(rows),
        "engine_ms": engine["engine_ms"],
        "extract_ms": extract_ms,
        "floor_ms": engine["engine_ms"] + extract_ms,
    }


def _done_runs(db: Db, stage: str | None = None) -> list[Any]:
    """The generations table's done rows (of ``stage``, if given)."""
    return [
        r
        for r in generations.read_rows(db)
        if r.state == StageState.DONE and (stage is None or r.stage == stage)
    ]


def stage_seconds(db: Db) -> dict[str, float]:
    """Seconds spent in each stage over the whole crawl (done runs)."""
    out: dict[str, float] = defaultdict(float)
    for r in _done_runs(db):
        out[r.stage] += r.seconds or 0.0
    return dict(out)


def _fetches(db: Db) -> list[dict[str, Any]]:
    return db.collect(db.table("fetches", columns=["gen", "host", "outcome", "fetched_at"]))


def crawl_figures(db: Db, delay: float) -> tuple[float, float, int, int]:
    """(ideal seconds, fetch stages' seconds, ok pages, requests) of a finished crawl."""
    fetches = _fetches(db)
    first_gen: dict[str, int] = {}
    for r in fetches:
        first_gen[r["host"]] = min(r["gen"], first_gen.get(r["host"], r["gen"]))
    # robots.txt: fetched once per host, in its first generation (cached afterwards)
    requests: dict[tuple[int, str], int] = defaultdict(int)
    for host, gen in first_gen.items():
        requests[(gen, host)] += 1
    ok: dict[int, int] = defaultdict(int)
    for r in fetches:
        if r["outcome"] in REQUESTED:
            requests[(r["gen"], r["host"])] += 1
        ok[r["gen"]] += r["outcome"] == Outcome.OK
    busiest: dict[int, int] = defaultdict(int)
    for (gen, _host), n in requests.items():
        busiest[gen] = max(busiest[gen], n)
    ideal = sum(max(0, n - 1) * delay for n in busiest.values())
    fetch_s = sum(r.seconds or 0.0 for r in _done_runs(db, Stage.FETCH))
    return ideal, fetch_s, sum(ok.values()), sum(requests.values())


def _epoch(at: dt.datetime) -> float:
    """Seconds since the epoch of a collected timestamp (naive: UTC, as both engines give
    them; only differences of one engine's timestamps are taken)."""
    return (at if at.tzinfo else at.replace(tzinfo=dt.UTC)).timestamp()


def fetch_timeline(db: Db, delay: float) -> dict[str, float]:
    """Where the fetch stages' time went, summed over generations: before_s (stage start to
    its first page request, or to its end if it sent none: bookkeeping, reading the fetchlist,
    starting the tasks, robots.txt),
    requests_s (first to last page request), after_s (last request to the stage's end:
    persisting, commits). pacing: the mean gap between one host's consecutive page requests,
    over delay (1.0: the engine waited exactly the delay, and no longer).
    """
    per_host: dict[tuple[int, str], list[float]] = defaultdict(list)
    for r in _fetches(db):
        if r["outcome"] in REQUESTED:
            per_host[(r["gen"], r["host"])].append(_epoch(r["fetched_at"]))
    per_gen: dict[int, tuple[float, float]] = {}
    for (gen, _host), times in per_host.items():
        first, last = per_gen.get(gen, (min(times), max(times)))
        per_gen[gen] = (min(first, *times), max(last, *times))
    stages: dict[int, tuple[float, float]] = {}
    for r in _done_runs(db, Stage.FETCH):
        assert r.finished_at is not None
        start, end = _epoch(r.started_at), _epoch(r.finished_at)
        before = stages.get(r.gen, (start, end))
        stages[r.gen] = (max(before[0], start), max(before[1], end))
    # A fetch stage that sent no request (every URL denied, deferred or refused) is all
    # "before": it never reached its first request.
    before_s = requests_s = after_s = 0.0
    for gen, (start, end) in stages.items():
        if gen in per_gen:
            first, last = per_gen[gen]
            before_s += first - start
            requests_s += last - first
            after_s += end - last
        else:
            before_s += end - start
    gaps = [
        (max(times) - min(times)) / (len(times) - 1)
        for times in per_host.values()
        if len(times) > 1
    ]
    return {
        "before_s": before_s,
        "requests_s": requests_s,
        "after_s": after_s,
        "pacing": (statistics.mean(gaps) if gaps else 0.0) / delay if delay else 0.0,
    }
