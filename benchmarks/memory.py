"""Memory of the fetch stage: peak RSS per process role while it fetches a big page and a gzip
bomb, for several page sizes; it should stay bounded by the fetch limits, not the pages.

For each body size: a fresh crawl root seeded with the home pages of the regular test hosts plus
``http://bigbody.net/big.html`` (``body_bytes`` of HTML) and ``http://gzipbomb.org/bomb.html``
(about 1 MB inflating to 1 GiB); plan gen 0, then fetch gen 0 inside a
:class:`~benchmarks.procs.ProcessTree`, on one engine (``--engine``: ``embedded`` by default,
whose fetch tasks run in worker processes of this one, started for each root; or ``spark``). The
fetch limits stay at their defaults (``fetch.max_body_bytes``, ``fetch.max_decompressed_bytes``)
and are reported with the figures.

Per-stage peaks. Spark reuses Python workers across tasks (``spark.python.worker.reuse``,
default on), and a process's ``VmHWM`` only grows, so a reused worker would carry the peak of
earlier stages and sizes into this one. Before the fetch, every process of the tree (driver,
JVM, PySpark's daemon and its workers; the embedded engine's workers, if it started any) gets its
high-water mark reset to its current RSS by writing ``5`` to ``/proc/PID/clear_refs`` (Linux).
``hwm_reset`` says whether every reset was accepted; where one was refused, that process's peak
includes its earlier work. Workers forked during the stage start from PySpark's daemon, whose
pages they count as theirs (shared, copy on write); the embedded engine's are fresh
interpreters, started in the stage. ``worker_carried`` is the largest worker peak before the
reset (what a naive measurement would have started from), ``worker_start`` the largest worker
RSS after it; on the embedded engine, whose workers start with the fetch stage, the RSS of one
such worker once started and ready for its first task (`idle_worker_rss`: what every worker
holds before it fetches, as a PySpark worker holds its daemon's pages).

The test web runs in this process (``serve_in_thread``), so ``driver_peak`` includes it: it
streams big.html in 64 KiB pieces and builds the bomb from one 16 MiB buffer of zeros. On the
embedded engine the driver also holds the engine (DuckDB, delta-rs) and ``jvm_peak`` is 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from typing import Any

import psutil

from benchmarks.procs import WORKER_MODULE, ProcessTree, TreeFigures
from benchmarks.stages import add_engine_argument, bench_config, close_root, open_root
from crawllib.config import Config, replace
from crawllib.runs import runner
from crawllib.stages import seeding
from crawllib.store.db import Db

BIG_URL = "http://bigbody.net/big.html"
BOMB_URL = "http://gzipbomb.org/bomb.html"
FETCH_COLUMNS = ("url", "outcome", "error_kind", "http_status", "body_bytes", "is_truncated")
MIB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes", type=float, nargs="+", default=[4, 40], help="big.html sizes in MiB (4 40)"
    )
    parser.add_argument("--hosts", type=int, default=20, help="regular hosts (default 20)")
    parser.add_argument(
        "--master", default="local[2]", help="Spark master of --engine spark (default local[2])"
    )
    parser.add_argument("--work-dir", help="crawl roots go here (default: a temporary folder)")
    add_engine_argument(parser)


def main(args: argparse.Namespace) -> None:
    cfg = replace(bench_config(), spark__master=args.master)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="crawllib-bench-memory-")
    try:
        sizes = [int(s * MIB) for s in args.sizes]
        rows = bench_memory(
            work_dir, body_sizes=sizes, regular_hosts=args.hosts, engine=args.engine, base=cfg
        )
    finally:
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    print(markdown_table(rows))


def bench_memory(
    work_dir: str,
    body_sizes: Iterable[int] = (4 * MIB, 40 * MIB),
    regular_hosts: int = 20,
    engine: str = "embedded",
    base: Config | None = None,
) -> list[dict[str, Any]]:
    """Plan and fetch gen 0 of a fresh crawl under ``work_dir`` per body size on ``engine``
    (``base``: the config the crawls start from, benchmarks.stages.bench_config by default);
    one row each.

    Row: body_bytes; driver_peak, jvm_peak, worker_peak (largest single Python worker, the
    daemon included, its extraction processes not), extraction_peak (the largest extraction
    process: extract.max_memory_mb bounds it) and workers_sum_peak (sum of the Python workers'
    peaks, extraction processes included), in bytes, over
    the fetch stage only; worker_start, worker_carried, hwm_reset (see the module doc); pages
    (pages rows of the generation); big_outcome, bomb_outcome (text) and big_fetch, bomb_fetch
    (their fetches rows: FETCH_COLUMNS); fetch_s (the stage's wall seconds); max_body_bytes,
    max_decompressed_bytes (the limits in force); engine; worker_reuse
    (spark.python.worker.reuse on Spark; on the embedded engine "per root": its workers run
    task after task, and are started afresh for each root).
    """
    out = []
    for size in body_sizes:
        root = os.path.join(work_dir, f"crawl-{size}")
        shutil.rmtree(root, ignore_errors=True)
        out.append(_measure(root, size, regular_hosts, engine, base or bench_config()))
    return out


def _worker_reuse(db: Db) -> str:
    spark = getattr(db, "spark", None)  # crawllib.store.spark_db.SparkDb
    if spark is None:
        return "per root"
    return str(spark.sparkContext.getConf().get("spark.python.worker.reuse", "true"))


def _measure(root: str, size: int, regular_hosts: int, engine: str, base: Config) -> dict[str, Any]:
    # The test web is aiohttp: imported here, like crawllib.cli.demo does, not with Spark.
    from crawllib.testweb import WebSpec, serve_in_thread
    from crawllib.testweb.site import regular_host_name

    spec = WebSpec(hosts=regular_hosts, special=True, big_body_bytes=size)
    with serve_in_thread(spec) as web:
        cfg = replace(
            base,
            network__resolve=web.resolve,
            network__resolve_only=True,
            politeness__default_delay=0.0,
            politeness__jitter=0.0,
            fetch__follow=False,  # the seeds only: the same pages for every body size
        )
        os.makedirs(root)
        seeds = os.path.join(root, "seeds.txt")
        homes = [f"http://{regular_host_name(i)}/" for i in range(regular_hosts)]
        with open(seeds, "w", encoding="utf-8") as fh:
            fh.write("\n".join([*homes, BIG_URL, BOMB_URL]) + "\n")
        db = open_root(root, cfg, engine, "bench memory")
        try:
            seeding.seed(db, seeds, cfg, gen=0)
            runner.run_stage(db, cfg, 0, "plan")
            carried = _peaks().peak_rss["python_workers"]
            hwm_reset = reset_peaks()
            start = _peaks().peak_rss["python_workers"]
            if not start and engine == "embedded":  # its workers start with the stage
                start = idle_worker_rss()
            with ProcessTree() as tree:
                t0 = time.monotonic()
                result = runner.run_stage(db, cfg, 0, "fetch")
                fetch_s = time.monotonic() - t0
            fetched = _fetch_rows(db, (BIG_URL, BOMB_URL))
            reuse = _worker_reuse(db)
        finally:
            close_root(db)
    figures = tree.figures()
    return {
        "engine": engine,
        "worker_reuse": reuse,
        "body_bytes": size,
        "driver_peak": figures.peak_rss["driver"],
        "jvm_peak": figures.peak_rss["jvm"],
        "worker_peak": figures.worker_peak_rss,
        "extraction_peak": figures.extraction_peak_rss,
        "workers_sum_peak": figures.sum_peak_rss["python_workers"],
        "worker_start": start,
        "worker_carried": carried,
        "hwm_reset": hwm_reset,
        "pages": result.as_counts().get("pages", 0) if result else 0,
        "big_outcome": describe(fetched.get(BIG_URL)),
        "bomb_outcome": describe(fetched.get(BOMB_URL)),
        "big_fetch": fetched.get(BIG_URL),
        "bomb_fetch": fetched.get(BOMB_URL),
        "fetch_s": fetch_s,
        "max_body_bytes": cfg.fetch.max_body_bytes,
        "max_decompressed_bytes": cfg.fetch.max_decompressed_bytes,
    }


def reset_peaks(pid: int | None = None) -> bool:
    """Reset ``VmHWM`` to the current RSS for ``pid``'s tree (default: this process); True if
    every process accepted (Linux ``/proc/PID/clear_refs``, the processes must be ours)."""
    root = psutil.Process(pid or os.getpid())
    accepted = True
    for proc in [root, *root.children(recursive=True)]:
        try:
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")
        except FileNotFoundError:
            continue  # the process ended meanwhile
        except OSError:
            accepted = False
    return accepted


def idle_worker_rss(timeout: float = 60.0, settled: float = 1.0) -> int:
    """The RSS of an embedded engine worker process (``python -m crawllib.store.workers``, as
    crawllib.store.workers starts them) once it has imported what it preloads and waits for
    its first task: its memory and CPU time unchanged for ``settled`` seconds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        watched = psutil.Process(proc.pid)
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            times = watched.cpu_times()
            now = (watched.memory_info().rss, times.user + times.system)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= settled:
                break
            time.sleep(0.1)
        assert last is not None
        return int(last[0])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # a worker ends at the end of its stdin
        proc.wait(timeout=30)


def _peaks() -> TreeFigures:
    """One sample of this process's tree: each role's current peaks."""
    with ProcessTree() as tree:
        pass
    return tree.figures()


def _fetch_rows(db: Db, urls: Iterable[str]) -> dict[str, dict]:
    wanted = set(urls)
    rows = db.collect(db.table("fetches", "gen = 0", columns=FETCH_COLUMNS))
    return {r["url"]: r for r in rows if r["url"] in wanted}


def describe(fetch: dict | None) -> str:
    """A fetches row in a few words: 'ok, truncated, 5000000 B read'."""
    if fetch is None:
        return "not fetched"
    words = [fetch["outcome"] + (f": {fetch['error_kind']}" if fetch["error_kind"] else "")]
    if fetch["is_truncated"]:
        words.append("truncated")
    words.append(f"{fetch['body_bytes']} B read")
    return ", ".join(words)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table (MiB), the limits and worker reuse in a line above it."""
    if not rows:
        return "(no rows)"
    first = rows[0]
    engine = first.get("engine", "spark")
    workers = (
        f"spark.python.worker.reuse {first['worker_reuse']}"
        if engine == "spark"
        else f"worker processes {first['worker_reuse']}"
    )
    head = (
        f"{engine} engine; fetch.max_body_bytes {first['max_body_bytes']}, "
        f"fetch.max_decompressed_bytes {first['max_decompressed_bytes']}; {workers}; "
        f"peaks over the fetch stage only (HWM reset before it: "
        f"{all(r['hwm_reset'] for r in rows)}); MiB\n\n"
    )
    columns = (
        "body",
        "driver",
        "jvm",
        "worker start",
        "worker peak",
        "extraction peak",
        "workers sum",
        "worker carried",
        "pages",
        "big.html",
        "bomb.html",
        "fetch s",
    )
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [
            *(
                f"{r[k] / MIB:.0f}"
                for k in (
                    "body_bytes",
                    "driver_peak",
                    "jvm_peak",
                    "worker_start",
                    "worker_peak",
                    "extraction_peak",
                    "workers_sum_peak",
                    "worker_carried",
                )
            ),
            str(r["pages"]),
            r["big_outcome"],
            r["bomb_outcome"],
            f"{r['fetch_s']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines)
