"""Whole-crawl benchmark: politeness efficiency of ``crawl run`` and the same crawl by Scrapy.

Both crawl the same regular test web (in a child process) from its home pages, with robots.txt
obeyed, ``delay`` seconds between request starts to one host, one request per host at a time
and the same depth limit.

Politeness efficiency = ideal / actual time, where a generation's ideal is
max over hosts of (requests to the host in that generation - 1) * delay (robots.txt counts in
the generation that fetched it), summed over generations: the time a polite crawler must spend
whatever its speed. For the fetch stage, actual = the fetch stages' wall time (commits
included); for the whole run, actual = the wall time of ``run_crawl`` (every stage, Spark
bookkeeping included). Scrapy has no generations; its ideal is max over hosts of
(requests - 1) * delay over the whole crawl.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import config, pipeline, tables
from crawllib.bench.fetch import engine_config, web_server
from crawllib.bench.procs import ProcessTree
from crawllib.bench.stages import bench_config
from crawllib.testing import WebSpec
from crawllib.testing.site import regular_host_name
from crawllib.vocab import Outcome, Stage, StageState

# Fetch outcomes that sent a request (robots_denied, blocked and deferred did not).
REQUESTED = (Outcome.OK, Outcome.REDIRECT, Outcome.HTTP_ERROR, Outcome.ERROR)


def bench_crawl(
    spark: SparkSession,
    work: str,
    hosts: int = 100,
    pages: int = 300,
    seed_pages: int = 150,
    max_depth: int = 1,
    delay: float = 0.2,
    scrapy: bool = True,
) -> dict[str, Any]:
    """``run_crawl`` to the end, then (if ``scrapy``) Scrapy over the same web; their figures.

    Seeds: every host's home page and its pages 0..seed_pages-1 (a sitemap-like frontier, so
    a generation holds many URLs per host as in a production crawl); their links reach the
    rest of the ``pages`` per host one generation deeper.
    """
    spec = WebSpec(hosts=hosts, pages_per_host=pages, special=False)
    names = [regular_host_name(i) for i in range(hosts)]
    seeds = [f"http://{h}/" for h in names]
    seeds += [f"http://{h}/p/{n}.html" for h in names for n in range(seed_pages)]
    out: dict[str, Any] = {
        "hosts": hosts,
        "pages_per_host": pages,
        "seed_pages": seed_pages,
        "max_depth": max_depth,
    }
    with web_server(spec, "process") as (resolve, _pid):
        cfg = config.replace(
            engine_config(bench_config(), resolve, hosts),
            politeness__default_delay=delay,
            crawl__max_depth=max_depth,
            generate__max_per_host=max(100, pages + 1),
            generate__host_budget=max(5000, pages + 1),
        )
        root = os.path.join(work, "crawl")
        os.makedirs(root)
        seed_file = os.path.join(work, "crawl-seeds.txt")
        with open(seed_file, "w", encoding="utf-8") as fh:
            fh.write("\n".join(seeds) + "\n")
        with ProcessTree() as tree:
            t0 = time.perf_counter()
            ran = pipeline.run_crawl(spark, root, cfg, seed_file, 100)
            wall = time.perf_counter() - t0
        cpu = tree.figures().total_cpu("driver", "jvm", "python_workers")
        ideal, fetch_s, pages_ok, requests = crawl_figures(spark, root, delay)
        out["stage_s"] = stage_seconds(spark, root)
        out["fetch_timeline"] = fetch_timeline(spark, root, delay)
        out.update(
            generations=len(ran),
            pages=pages_ok,
            requests=requests,
            ideal_s=ideal,
            fetch_s=fetch_s,
            wall_s=wall,
            cpu_s=cpu,
            fetch_efficiency=ideal / fetch_s,
            run_efficiency=ideal / wall,
        )
        if scrapy:
            from crawllib.bench.scrapy_crawl import run_scrapy

            port = int(next(iter(resolve.values())).rsplit(":", 1)[1])
            runs = {}
            for extract in (True, False):
                runs[extract] = run_scrapy(
                    port,
                    seeds,
                    names,
                    max_depth,
                    delay,
                    os.path.join(work, f"scrapy-{extract}"),
                    extract_text=extract,
                )
            out["scrapy"] = runs[True]
            out["scrapy_links_only"] = runs[False]
    return out


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
    its first page request: bookkeeping, reading the fetchlist, starting the tasks, robots.txt),
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
    spans = per_gen.join(stages, on="gen", how="inner").collect()
    gaps = tables.one_row(
        per_host.where(F.col("n") > 1).agg(
            F.avg((F.col("last") - F.col("first")) / (F.col("n") - 1))
        )
    )[0]
    return {
        "before_s": sum(r["first"] - r["start"] for r in spans),
        "requests_s": sum(r["last"] - r["first"] for r in spans),
        "after_s": sum(r["end"] - r["last"] for r in spans),
        "pacing": (gaps or 0.0) / delay if delay else 0.0,
    }
