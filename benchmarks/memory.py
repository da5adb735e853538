"""Memory of the Spark fetch stage: peak RSS per process role while it fetches a big page and a
gzip bomb, for several page sizes; it should stay bounded by the fetch limits, not the pages.

For each body size: a fresh crawl root seeded with the home pages of the regular test hosts plus
``http://bigbody.net/big.html`` (``body_bytes`` of HTML) and ``http://gzipbomb.org/bomb.html``
(about 1 MB inflating to 1 GiB); plan gen 0, then fetch gen 0 inside a
:class:`~benchmarks.procs.ProcessTree`. The fetch limits stay at their defaults
(``fetch.max_body_bytes``, ``fetch.max_decompressed_bytes``) and are reported with the figures.

Per-stage peaks. Spark reuses Python workers across tasks (``spark.python.worker.reuse``,
default on), and a process's ``VmHWM`` only grows, so a reused worker would carry the peak of
earlier stages and sizes into this one. Before the fetch, every process of the tree (driver,
JVM, PySpark's daemon and its workers) gets its high-water mark reset to its current RSS by
writing ``5`` to ``/proc/PID/clear_refs`` (Linux). ``hwm_reset`` says whether every reset was
accepted; where one was refused, that process's peak includes its earlier work. Workers forked
during the stage start from PySpark's daemon, whose pages they count as theirs (shared, copy on
write). ``worker_carried`` is the largest worker peak before the reset (what a naive measurement
would have started from), ``worker_start`` the largest worker RSS after it.

The test web runs in this process (``serve_in_thread``), so ``driver_peak`` includes it: it
streams big.html in 64 KiB pieces and builds the bomb from one 16 MiB buffer of zeros.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from typing import Any

import psutil
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.procs import ProcessTree, TreeFigures
from crawllib.config import load_config, replace
from crawllib.runs import runner
from crawllib.stages import seeding
from crawllib.store import lease, tables

BIG_URL = "http://bigbody.net/big.html"
BOMB_URL = "http://gzipbomb.org/bomb.html"
FETCH_COLUMNS = ("url", "outcome", "error_kind", "http_status", "body_bytes", "is_truncated")
MIB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes", type=float, nargs="+", default=[4, 40], help="big.html sizes in MiB (4 40)"
    )
    parser.add_argument("--hosts", type=int, default=20, help="regular hosts (default 20)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--work-dir", help="crawl roots go here (default: a temporary folder)")


def main(args: argparse.Namespace) -> None:
    from benchmarks.stages import bench_config
    from crawllib.store.session import get_spark

    cfg = replace(bench_config(), spark__master=args.master)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="crawllib-bench-memory-")
    spark = get_spark(cfg)
    try:
        sizes = [int(s * MIB) for s in args.sizes]
        rows = bench_memory(spark, work_dir, body_sizes=sizes, regular_hosts=args.hosts)
    finally:
        spark.stop()
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    print(markdown_table(rows))


def bench_memory(
    spark: SparkSession,
    work_dir: str,
    body_sizes: Iterable[int] = (4 * MIB, 40 * MIB),
    regular_hosts: int = 20,
) -> list[dict[str, Any]]:
    """Plan and fetch gen 0 of a fresh crawl under ``work_dir`` per body size; one row each.

    Row: body_bytes; driver_peak, jvm_peak, worker_peak (largest single Python worker, the
    daemon included) and workers_sum_peak (sum of the Python workers' peaks), in bytes, over
    the fetch stage only; worker_start, worker_carried, hwm_reset (see the module doc); pages
    (pages rows of the generation); big_outcome, bomb_outcome (text) and big_fetch, bomb_fetch
    (their fetches rows: FETCH_COLUMNS); fetch_s (the stage's wall seconds); max_body_bytes,
    max_decompressed_bytes (the limits in force); worker_reuse (spark.python.worker.reuse).
    """
    reuse = spark.sparkContext.getConf().get("spark.python.worker.reuse", "true")
    out = []
    for size in body_sizes:
        root = os.path.join(work_dir, f"crawl-{size}")
        shutil.rmtree(root, ignore_errors=True)
        out.append({**_measure(spark, root, size, regular_hosts), "worker_reuse": reuse})
    return out


def _measure(spark: SparkSession, root: str, size: int, regular_hosts: int) -> dict[str, Any]:
    # The test web is aiohttp: imported here, like crawllib.cli.demo does, not with Spark.
    from crawllib.testweb import WebSpec, serve_in_thread
    from crawllib.testweb.site import regular_host_name

    spec = WebSpec(hosts=regular_hosts, special=True, big_body_bytes=size)
    with serve_in_thread(spec) as web:
        cfg = replace(
            load_config(),
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
        lease.take(root, "bench memory", cfg)
        tables.init_tables(spark, root)
        seeding.seed(spark, root, seeds, cfg, gen=0)
        runner.run_stage(spark, root, cfg, 0, "plan")
        carried = _peaks().peak_rss["python_workers"]
        hwm_reset = reset_peaks()
        start = _peaks().peak_rss["python_workers"]
        with ProcessTree() as tree:
            t0 = time.monotonic()
            result = runner.run_stage(spark, root, cfg, 0, "fetch")
            fetch_s = time.monotonic() - t0
    figures = tree.figures()
    fetched = _fetch_rows(spark, root, (BIG_URL, BOMB_URL))
    return {
        "body_bytes": size,
        "driver_peak": figures.peak_rss["driver"],
        "jvm_peak": figures.peak_rss["jvm"],
        "worker_peak": figures.peak_rss["python_workers"],
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


def _peaks() -> TreeFigures:
    """One sample of this process's tree: each role's current peaks."""
    with ProcessTree() as tree:
        pass
    return tree.figures()


def _fetch_rows(spark: SparkSession, root: str, urls: Iterable[str]) -> dict[str, dict]:
    rows = (
        tables.read(spark, root, "fetches")
        .filter((F.col("gen") == 0) & F.col("url").isin(list(urls)))
        .select(*FETCH_COLUMNS)
        .collect()
    )
    return {r["url"]: r.asDict() for r in rows}


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
    head = (
        f"fetch.max_body_bytes {first['max_body_bytes']}, fetch.max_decompressed_bytes "
        f"{first['max_decompressed_bytes']}; spark.python.worker.reuse {first['worker_reuse']}; "
        f"peaks over the fetch stage only (HWM reset before it: "
        f"{all(r['hwm_reset'] for r in rows)}); MiB\n\n"
    )
    columns = (
        "body",
        "driver",
        "jvm",
        "worker start",
        "worker peak",
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
