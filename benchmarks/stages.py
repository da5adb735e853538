"""Spark stage benchmarks: the fetch ceiling, parse (forced: extraction in Spark) against bare
trafilatura, fixed cost per generation as crawldb grows. Each returns a dict of figures; :mod:`benchmarks.suite`
prints them.

Every run crawls its own root under ``work`` with the real stages (``pipeline.run_stage``),
so the figures include what a user pays: Delta reads and commits, joins, MERGE.
"""

from __future__ import annotations

import os
import time
from typing import Any

import trafilatura
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.fetch import engine_config, page_rows, page_urls, run_engine, web_server
from benchmarks.procs import ProcessTree
from crawllib import config
from crawllib.config import Config
from crawllib.content.extract import close_unclosed_title, decode_html
from crawllib.core.vocab import IntervalSource, StageState, Status
from crawllib.runs import runner
from crawllib.stages import seeding
from crawllib.store import lease, tables
from crawllib.store.spark_schemas import CRAWLDB, columns_of
from crawllib.testweb import WebSpec

SPARK_OVERRIDES = [
    "spark.master=local[2]",
    "spark.shuffle_partitions=2",
    "spark.ui=false",
    "spark.log_level=ERROR",
    "network.resolve_only=true",
]


def bench_config() -> Config:
    """The config every benchmark starts from: Spark local[2], no DNS."""
    return config.load_config(overrides=SPARK_OVERRIDES)


def new_crawl(spark: SparkSession, work: str, name: str, cfg: Config, urls: list[str]) -> str:
    """A fresh crawl root ``work/name`` seeded with ``urls`` (generation 0)."""
    root = os.path.join(work, name)
    os.makedirs(root, exist_ok=False)
    seeds = os.path.join(work, f"{name}-seeds.txt")
    with open(seeds, "w", encoding="utf-8") as fh:
        fh.write("\n".join(urls) + "\n")
    lease.take(root, "bench stages", cfg)  # for this process's life: its runs write it
    tables.init_tables(spark, root)
    seeding.seed(spark, root, seeds, cfg, 0)
    return root


def timed_stage(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    reextract: bool = False,
) -> dict:
    """Run one stage; its counts plus ``seconds`` (wall, bookkeeping included)."""
    t0 = time.perf_counter()
    result = runner.run_stage(spark, root, cfg, gen, stage, force=force, reextract=reextract)
    return {**(result.as_counts() if result else {}), "seconds": time.perf_counter() - t0}


def bench_fetch_and_parse(
    spark: SparkSession, work: str, hosts: int = 200, pages: int = 50
) -> dict[str, Any]:
    """Fetch ceiling (delay 0) of the bare engine and of the Spark fetch stage over the same
    pages, then the parse stage over those pages against a bare trafilatura loop.

    The test web runs in a child process, outside the measured CPU (role ``other``).
    """
    spec = WebSpec(hosts=hosts, pages_per_host=pages, special=False)
    with web_server(spec, "process") as (resolve, server_pid):
        cfg = engine_config(bench_config(), resolve, hosts)
        cfg = config.replace(
            cfg,
            politeness__default_delay=0.0,
            generate__max_per_host=pages + 1,
            crawl__max_depth=1,
        )
        bare = run_engine(page_rows(hosts, pages), cfg, server_pid)
        root = new_crawl(spark, work, "ceiling", cfg, page_urls(hosts, pages))
        timed_stage(spark, root, cfg, 0, "plan")
        with ProcessTree() as tree:
            fetch = timed_stage(spark, root, cfg, 0, "fetch")
    fetch_cpu = tree.figures().total_cpu("driver", "jvm", "python_workers")
    timed_stage(spark, root, cfg, 0, "update")
    with ProcessTree() as tree:  # `crawl parse --force`: extract every page again, in Spark
        parse = timed_stage(spark, root, cfg, 0, "update", force=True, reextract=True)
    cores = spark.sparkContext.defaultParallelism
    bare_parse = bare_trafilatura(spark, root, cfg)
    return {
        "pages": fetch["ok"],
        "bare_pages": bare["pages"],
        "bare_pages_per_s": bare["pages"] / bare["wall"],
        "bare_cpu_ms": bare["engine_ms"],
        "spark_pages_per_s": fetch["ok"] / fetch["seconds"],
        "spark_fetching_s": fetch["seconds_fetching"],
        "spark_fetch_s": fetch["seconds"],
        "spark_cpu_ms": fetch_cpu / fetch["ok"] * 1e3,
        "cores": cores,
        "parse_pages": parse["pages"],
        "parse_s": parse["seconds"],
        "parse_per_core": parse["pages"] / parse["seconds"] / cores,
        "parse_worker_cpu_s": tree.figures().cpu["python_workers"],
        **bare_parse,
    }


def bare_trafilatura(spark: SparkSession, root: str, cfg: Config) -> dict[str, float]:
    """trafilatura alone, in this process, over the pages the parse stage read: pages per CPU
    second = pages per second on one core. Decoding is outside the timed loop."""
    rows = tables.read(spark, root, "pages").select("url", "body", "charset").collect()
    limit = cfg.parse.max_html_bytes
    docs = [
        (r["url"], close_unclosed_title(decode_html(r["body"][:limit], r["charset"])))
        for r in rows
        if r["body"]
    ]
    t0 = time.process_time()
    for url, html in docs:  # the options crawllib.content.extract uses
        trafilatura.extract(
            html, url=url, include_comments=False, include_tables=True, output_format="txt"
        )
    cpu = time.process_time() - t0
    return {"trafilatura_pages": len(docs), "trafilatura_per_core": len(docs) / cpu}


def bench_fixed_cost(
    spark: SparkSession, work: str, sizes: tuple[int, ...] = (1_000, 100_000), hosts: int = 20
) -> list[dict[str, Any]]:
    """One small generation (``hosts`` home pages, delay 0) on a crawl whose crawldb already
    holds N fetched URLs, for each N in sizes, run as ``crawl generation`` runs it
    (``pipeline.run_generation``: one ledger read, a stage's done row and the next one's
    running row in one commit): seconds per stage (from the generations table) and the fixed
    cost = the generation's wall time - time on the network."""
    from crawllib.testweb import serve_in_thread

    out = []
    spec = WebSpec(hosts=hosts, pages_per_host=5, special=False)
    with serve_in_thread(spec) as web:
        cfg = config.replace(
            bench_config(),
            network__resolve=web.resolve,
            politeness__default_delay=0.0,
            politeness__jitter=0.0,
            fetch__follow=False,  # the home pages only: the generation stays small
        )
        for n in sizes:
            root = new_crawl(spark, work, f"fixed-{n}", cfg, web.seeds())
            fill_crawldb(spark, root, n)
            t0 = time.perf_counter()
            runner.run_generation(spark, root, cfg, 0)
            total = time.perf_counter() - t0
            runs = {
                r["stage"]: r
                for r in tables.read(spark, root, "generations")
                .where((F.col("gen") == 0) & (F.col("state") == StageState.DONE))
                .collect()
            }
            network = runs["fetch"]["counts"]["seconds_fetching"]
            out.append(
                {
                    "crawldb": n,
                    "pages": runs["fetch"]["counts"]["ok"],
                    **{f"{k}_s": runs[k]["seconds"] for k in ("plan", "fetch", "update")},
                    "network_s": network,
                    "total_s": total,
                    "fixed_s": total - network,
                }
            )
    return out


def fill_crawldb(spark: SparkSession, root: str, n: int) -> None:
    """Append n URLs fetched just now (not due again for a day) on 1000 hosts that are not in
    the test web."""
    url = F.format_string("http://filler%d.net/p/%d.html", F.col("id") % 1000, F.col("id"))
    host = F.format_string("filler%d.net", F.col("id") % 1000)
    now = F.current_timestamp()
    given = {
        "url_key": F.xxhash64(url),
        "url": url,
        "host": host,
        "domain": host,
        "status": F.lit(Status.FETCHED),
        "attempts": F.lit(1),
        "depth": F.lit(1),
        "first_gen": F.lit(0),
        "last_gen": F.lit(0),
        "http_status": F.lit(200),
        "content_hash": F.sha2(url, 256),
        "updated_at": now,
        "fetched_at": now,
        "fetch_interval": F.lit(86400.0),
        "next_fetch_at": now + F.expr("INTERVAL 1 DAY"),
        "interval_source": F.lit(IntervalSource.DEFAULT),
        "visits_changed": F.lit(0),
        "visits_unchanged": F.lit(0),
        "changed_at": now,
    }
    blank = {f.name: F.lit(None) for f in CRAWLDB.fields if f.name not in given}
    rows = spark.range(n, numPartitions=2).select(*columns_of(CRAWLDB, **blank, **given))
    tables.append(rows, root, "crawldb")
