"""Stage benchmarks: the fetch ceiling, parse (forced: extraction in the stage) against bare
trafilatura, fixed cost per generation as crawldb grows. Each returns a dict of figures;
:mod:`benchmarks.suite` prints them.

Every run crawls its own root under ``work`` with the real stages (``runner.run_stage``), on
one engine (``engine``: ``embedded``, DuckDB over delta-rs in this process, or ``spark``;
crawllib.runs.engines.open_db), so the figures include what a user pays: Delta reads and
commits, joins, MERGE.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import time
from typing import Any

import trafilatura

from benchmarks.fetch import engine_config, page_rows, page_urls, run_engine, web_server
from benchmarks.procs import ProcessTree
from crawllib import config
from crawllib.config import Config
from crawllib.content.extract import close_unclosed_title, decode_html
from crawllib.core.urls import url_key
from crawllib.core.vocab import IntervalSource, StageState, Status
from crawllib.runs import runner
from crawllib.runs.engines import open_db
from crawllib.stages import seeding
from crawllib.store import generations, lease
from crawllib.store.db import Db
from crawllib.store.schemas import CRAWLDB
from crawllib.testweb import WebSpec

SPARK_OVERRIDES = [
    "spark.master=local[2]",
    "spark.shuffle_partitions=2",
    "spark.ui=false",
    "spark.log_level=ERROR",
    "network.resolve_only=true",
]
# The engines a benchmark crawls on (crawllib.runs.engines; "auto" is not offered: a
# benchmark's figures name the engine that made them).
ENGINES = ("embedded", "spark")


def bench_config() -> Config:
    """The config every benchmark starts from: Spark local[2] (for the spark engine), no DNS."""
    return config.load_config(overrides=SPARK_OVERRIDES)


def add_engine_argument(parser: argparse.ArgumentParser, default: str = "embedded") -> None:
    """``--engine embedded|spark``: the engine the benchmark's crawls run on."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=default,
        help=f"embedded: DuckDB over delta-rs in this process, no JVM; spark: a SparkSession "
        f"(default {default})",
    )


def open_root(root: str, cfg: Config, engine: str, command: str, init: bool = True) -> Db:
    """The tables of a new crawl root on ``engine``, created (``init``; else the first
    ``runner.run_crawl`` creates them); the root's writer lease taken (its runs write it)
    until `close_root`."""
    os.makedirs(root, exist_ok=True)
    lease.take(root, command, cfg)
    try:
        db = open_db(cfg, root, engine)
    except BaseException:
        lease.give_back(root)
        raise
    if init:
        try:
            db.init_tables()
        except BaseException:
            close_root(db)
            raise
    return db


def close_root(db: Db) -> None:
    """Free what `open_root` took: the engine's resources (the embedded engine's worker
    processes) and the root's writer lease (the root may be read, or removed, after)."""
    try:
        db.close()
    finally:
        lease.give_back(db.root)


def new_crawl(work: str, name: str, cfg: Config, urls: list[str], engine: str) -> Db:
    """A fresh crawl root ``work/name`` on ``engine``, seeded with ``urls`` (generation 0);
    `close_root` it when done."""
    root = os.path.join(work, name)
    os.makedirs(root, exist_ok=False)
    seeds = os.path.join(work, f"{name}-seeds.txt")
    with open(seeds, "w", encoding="utf-8") as fh:
        fh.write("\n".join(urls) + "\n")
    db = open_root(root, cfg, engine, "bench stages")
    try:
        seeding.seed(db, seeds, cfg, 0)
    except BaseException:
        close_root(db)
        raise
    return db


def timed_stage(
    db: Db,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    reextract: bool = False,
) -> dict:
    """Run one stage; its counts plus ``seconds`` (wall, bookkeeping included)."""
    t0 = time.perf_counter()
    result = runner.run_stage(db, cfg, gen, stage, force=force, reextract=reextract)
    return {**(result.as_counts() if result else {}), "seconds": time.perf_counter() - t0}


def bench_fetch_and_parse(
    work: str, hosts: int = 200, pages: int = 50, engine: str = "embedded"
) -> dict[str, Any]:
    """Fetch ceiling (delay 0) of the bare engine and of the fetch stage on ``engine`` over the
    same pages, then the parse stage over those pages against a bare trafilatura loop.

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
        db = new_crawl(work, "ceiling", cfg, page_urls(hosts, pages), engine)
        timed_stage(db, cfg, 0, "plan")
        with ProcessTree() as tree:
            fetch = timed_stage(db, cfg, 0, "fetch")
    try:
        fetch_cpu = tree.figures().total_cpu("driver", "jvm", "python_workers")
        timed_stage(db, cfg, 0, "update")
        with ProcessTree() as tree:  # `crawl parse --force`: extract every page again
            parse = timed_stage(db, cfg, 0, "update", force=True, reextract=True)
        cores = db.parallelism()
        bare_parse = bare_trafilatura(db, cfg)
    finally:
        close_root(db)
    return {
        "engine": engine,
        "pages": fetch["ok"],
        "bare_pages": bare["pages"],
        "bare_pages_per_s": bare["pages"] / bare["wall"],
        "bare_cpu_ms": bare["engine_ms"],
        "stage_pages_per_s": fetch["ok"] / fetch["seconds"],
        "stage_fetching_s": fetch["seconds_fetching"],
        "stage_fetch_s": fetch["seconds"],
        "stage_cpu_ms": fetch_cpu / fetch["ok"] * 1e3,
        "cores": cores,
        "parse_pages": parse["pages"],
        "parse_s": parse["seconds"],
        "parse_per_core": parse["pages"] / parse["seconds"] / cores,
        "parse_worker_cpu_s": tree.figures().cpu["python_workers"],
        **bare_parse,
    }


def bare_trafilatura(db: Db, cfg: Config) -> dict[str, float]:
    """trafilatura alone, in this process, over the pages the parse stage read: pages per CPU
    second = pages per second on one core. Decoding is outside the timed loop."""
    rows = db.collect(db.table("pages", columns=["url", "body", "charset"]))
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
    work: str,
    sizes: tuple[int, ...] = (1_000, 100_000),
    hosts: int = 20,
    engine: str = "embedded",
) -> list[dict[str, Any]]:
    """One small generation (``hosts`` home pages, delay 0) on a crawl whose crawldb already
    holds N fetched URLs, for each N in sizes, run as ``crawl generation`` runs it
    (``runner.run_generation``: one ledger read, a stage's done row and the next one's
    running row in one commit) on ``engine``: seconds per stage (from the generations table)
    and the fixed cost = the generation's wall time - time on the network."""
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
            db = new_crawl(work, f"fixed-{n}", cfg, web.seeds(), engine)
            try:
                fill_crawldb(db, n)
                t0 = time.perf_counter()
                runner.run_generation(db, cfg, 0)
                total = time.perf_counter() - t0
                runs = {
                    stage: r
                    for (gen, stage), r in generations.latest_runs(db).items()
                    if gen == 0 and r.state == StageState.DONE
                }
            finally:
                close_root(db)
            network = runs["fetch"].counts["seconds_fetching"]
            out.append(
                {
                    "engine": engine,
                    "crawldb": n,
                    "pages": runs["fetch"].counts["ok"],
                    **{f"{k}_s": runs[k].seconds for k in ("plan", "fetch", "update")},
                    "network_s": network,
                    "total_s": total,
                    "fixed_s": total - network,
                }
            )
    return out


def fill_crawldb(db: Db, n: int) -> None:
    """Append n URLs fetched just now (not due again for a day) on 1000 hosts that are not in
    the test web."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    rows = []
    for i in range(n):
        host = f"filler{i % 1000}.net"
        url = f"http://{host}/p/{i}.html"
        rows.append(
            {
                "url_key": url_key(url),
                "url": url,
                "host": host,
                "domain": host,
                "status": Status.FETCHED,
                "attempts": 1,
                "depth": 1,
                "first_gen": 0,
                "last_gen": 0,
                "http_status": 200,
                "content_hash": hashlib.sha256(url.encode()).hexdigest(),
                "updated_at": now,
                "fetched_at": now,
                "fetch_interval": 86400.0,
                "next_fetch_at": now + dt.timedelta(days=1),
                "interval_source": IntervalSource.DEFAULT,
                "visits_changed": 0,
                "visits_unchanged": 0,
                "changed_at": now,
            }
        )
    db.append(db.rows(rows, CRAWLDB), "crawldb")
