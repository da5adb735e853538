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
included); for the whole run, actual = the wall time of ``run_crawl`` (every stage, Spark
bookkeeping included).
"""

from __future__ import annotations

import os
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.fetch import engine_config, run_engine, web_server
from benchmarks.procs import ProcessTree
from benchmarks.stages import bench_config
from crawllib import config
from crawllib.config import Config
from crawllib.content.extract import extract_record
from crawllib.core.vocab import Outcome, Stage, StageState
from crawllib.runs import runner
from crawllib.store import lease, tables
from crawllib.testweb import WebSpec
from crawllib.testweb.audit import audit, read_log
from crawllib.testweb.site import Site, regular_host_name

# Fetch outcomes that sent a request (robots_denied, blocked and deferred did not).
REQUESTED = (Outcome.OK, Outcome.REDIRECT, Outcome.HTTP_ERROR, Outcome.ERROR)


def bench_crawl(
    spark: SparkSession,
    work: str,
    hosts: int = 100,
    pages: int = 300,
    seed_pages: int = 150,
    max_depth: int = 1,
    delay: float = 1.0,
) -> dict[str, Any]:
    """The politeness-bound crawl: ``run_crawl`` to the end; its figures.

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
        out = run_ours(spark, os.path.join(work, "crawl"), cfg, seeds)
    return {
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
    spark: SparkSession,
    work: str,
    hosts: int = 60,
    pages: int = 95,
    fanout: int = 5,
    max_depth: int = 3,
    delay: float = 0.2,
    scrapy: bool = True,
    shape: str = "real",
) -> dict[str, Any]:
    """A crawl of small sites, each host a tree of ``pages`` pages ``fanout`` children per
    page (5 and 95: every page within 3 links of its home), crawled by ``run_crawl`` with the
    default settings but delay and depth, then by Scrapy; both audited from the server's log.
    Then the CPU floor of the same pages: the bare engine (delay 0, no extraction) and the
    bare extraction (``extract_record``, this process, one core).

    ``shape``: ``real``, the web as users crawl it: a third of the links cross hosts and may
    lead anywhere in the other host's tree (WebSpec.shortcuts), only every other host's home
    is a seed (the rest are found through links, so shortest paths cross hosts and a depth-3
    crawl takes several generations), plus the HARD_HOSTS (a host that throttles with
    Retry-After 3600, a URL that always fails, one that fails twice); failed URLs are retried
    a second after their attempt (Scrapy retries at once); ``tree``: every home a seed, no
    link across hosts deeper than its source (a generation follows each site whole)."""
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
        "shape": shape,
        "hosts": hosts,
        "pages_per_host": pages,
        "fanout": fanout,
        "max_depth": max_depth,
        "delay": delay,
        "seeds": len(seeds),
    }
    with web_server(spec, "process", log) as (resolve, _pid):
        cfg = config.replace(
            engine_config(bench_config(), resolve, hosts + len(HARD_HOSTS)),
            politeness__default_delay=delay,
            crawl__max_depth=max_depth,
            fetch__retry_backoff_seconds=1.0 if real else 600.0,
        )
        root = os.path.join(work, "sites")
        out.update(run_ours(spark, root, cfg, seeds))
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
    out["floor"] = cpu_floor(spark, root, spec, cfg)
    return out


def run_ours(spark: SparkSession, root: str, cfg: Config, seeds: list[str]) -> dict[str, Any]:
    """``run_crawl`` from ``seeds`` into a new ``root`` until nothing is left; its figures."""
    delay = cfg.politeness.default_delay
    os.makedirs(root)
    seed_file = root + "-seeds.txt"
    with open(seed_file, "w", encoding="utf-8") as fh:
        fh.write("\n".join(seeds) + "\n")
    lease.take(root, "bench crawl", cfg)  # for this process's life: later figures read it
    with ProcessTree() as tree:
        t0 = time.perf_counter()
        ran = runner.run_crawl(spark, root, cfg, seed_file)
        wall = time.perf_counter() - t0
    figures = tree.figures()
    cpu = figures.total_cpu("driver", "jvm", "python_workers")
    ideal, fetch_s, pages_ok, requests = crawl_figures(spark, root, delay)
    return {
        "cpu_roles": {
            role: figures.cpu.get(role, 0.0) for role in ("driver", "jvm", "python_workers")
        },
        "root": root,
        "generations": len(ran),
        "pages": pages_ok,
        "requests": requests,
        "followed": followed(tables.read(spark, root, "fetches")),
        "ideal_s": ideal,
        "fetch_s": fetch_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "fetch_efficiency": ideal / fetch_s,
        "run_efficiency": ideal / wall,
        "stage_s": stage_seconds(spark, root),
        "fetch_timeline": fetch_timeline(spark, root, delay),
    }


def followed(fetches: DataFrame) -> int:
    """Fetch attempts of URLs a fetch task followed inside their generation."""
    return fetches.where(F.col("source_url").isNotNull()).count()


def cpu_floor(spark: SparkSession, root: str, spec: WebSpec, cfg: Config) -> dict[str, float]:
    """CPU ms per page of the bare engine (the crawl's ok pages again, delay 0, no extraction,
    on a fresh server: its requests stay out of the audited log) and of the bare extraction of
    the stored pages (``extract_record``, as the fetch task runs it)."""
    pages = tables.read(spark, root, "pages").select("url", "url_key", "host", "body", "charset")
    # the regular hosts' pages: a hard host answers a fresh server otherwise (flaky.net fails)
    rows = [r for r in pages.collect() if r["host"] not in HARD_HOSTS]
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


def stage_seconds(spark: SparkSession, root: str) -> dict[str, float]:
    """Seconds spent in each stage over the whole crawl (done runs)."""
    rows = (
        tables.read(spark, root, "generations")
        .where(F.col("state") == StageState.DONE)
        .groupBy("stage")
        .agg(F.sum("seconds").alias("seconds"))
        .collect()
    )
    return {r["stage"]: r["seconds"] for r in rows}


def crawl_figures(spark: SparkSession, root: str, delay: float) -> tuple[float, float, int, int]:
    """(ideal seconds, fetch stages' seconds, ok pages, requests) of a finished crawl."""
    fetches = tables.read(spark, root, "fetches")
    first_gen = fetches.groupBy("host").agg(F.min("gen").alias("first_gen"))
    per_host = (
        fetches.groupBy("gen", "host")
        .agg(
            F.count_if(F.col("outcome").isin(*REQUESTED)).alias("requests"),
            F.count_if(F.col("outcome") == Outcome.OK).alias("ok"),
        )
        .join(first_gen, on="host", how="inner")
        # robots.txt: fetched once per host, in its first generation (cached afterwards)
        .withColumn(
            "requests", F.col("requests") + (F.col("gen") == F.col("first_gen")).cast("int")
        )
    )
    per_gen = (
        per_host.groupBy("gen")
        .agg(
            F.max("requests").alias("busiest"),
            F.sum("requests").alias("requests"),
            F.sum("ok").alias("ok"),
        )
        .collect()
    )
    ideal = sum(max(0, r["busiest"] - 1) * delay for r in per_gen)
    fetch_s = tables.one_row(
        tables.read(spark, root, "generations")
        .where((F.col("stage") == Stage.FETCH) & (F.col("state") == StageState.DONE))
        .agg(F.sum("seconds"))
    )[0]
    return ideal, fetch_s, sum(r["ok"] for r in per_gen), sum(r["requests"] for r in per_gen)


def fetch_timeline(spark: SparkSession, root: str, delay: float) -> dict[str, float]:
    """Where the fetch stages' time went, summed over generations: before_s (stage start to
    its first page request, or to its end if it sent none: bookkeeping, reading the fetchlist,
    starting the tasks, robots.txt),
    requests_s (first to last page request), after_s (last request to the stage's end:
    persisting, commits). pacing: the mean gap between one host's consecutive page requests,
    over delay (1.0: the engine waited exactly the delay, and no longer).
    """
    epoch = {c: F.unix_micros(c) / 1e6 for c in ("fetched_at", "started_at", "finished_at")}
    per_host = (
        tables.read(spark, root, "fetches")
        .where(F.col("outcome").isin(*REQUESTED))
        .groupBy("gen", "host")
        .agg(
            F.count("*").alias("n"),
            F.min(epoch["fetched_at"]).alias("first"),
            F.max(epoch["fetched_at"]).alias("last"),
        )
    )
    per_gen = per_host.groupBy("gen").agg(
        F.min("first").alias("first"), F.max("last").alias("last")
    )
    stages = (
        tables.read(spark, root, "generations")
        .where((F.col("stage") == Stage.FETCH) & (F.col("state") == StageState.DONE))
        .groupBy("gen")
        .agg(F.max(epoch["started_at"]).alias("start"), F.max(epoch["finished_at"]).alias("end"))
    )
    # A fetch stage that sent no request (every URL denied, deferred or refused) is all
    # "before": it never reached its first request.
    spans = stages.join(per_gen, on="gen", how="left").collect()
    sent = [r for r in spans if r["first"] is not None]
    gaps = tables.one_row(
        per_host.where(F.col("n") > 1).agg(
            F.avg((F.col("last") - F.col("first")) / (F.col("n") - 1))
        )
    )[0]
    return {
        "before_s": sum((r["first"] or r["end"]) - r["start"] for r in spans),
        "requests_s": sum(r["last"] - r["first"] for r in sent),
        "after_s": sum(r["end"] - r["last"] for r in sent),
        "pacing": (gaps or 0.0) / delay if delay else 0.0,
    }
