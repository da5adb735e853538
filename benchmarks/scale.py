"""Scale: one generation of ``--urls`` URLs on crawls whose crawldb holds each of ``--rows``.

For each size a synthetic crawl root is built (benchmarks.scale_build: ten generations of
history, a frontier for the next) or taken from the cache under ``--work``, copied, and its
next generation run: plan and update are the real stages (``runner.run_stage``), on Spark
(crawllib.store.spark_db.SparkDb: the engine of a crawl this size) or with ``--engine embedded``
on the embedded engine; the fetch is synthetic (benchmarks.scale_fetch), written by Spark, as
the roots are built. Per stage: wall seconds and CPU seconds of the driver, the JVM and the
Python workers (benchmarks.procs), and each table's data files and bytes before and after the
generation. The report ends with the ratio of the
largest size's figures to the smallest's, per stage; the goal is at most 1.5 for 10x rows.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.procs import ProcessTree
from benchmarks.scale_build import build_seconds, cached_root, clone_root
from benchmarks.scale_data import DAY, T0, ScaleSpec
from benchmarks.scale_fetch import run_fetch
from benchmarks.stages import ENGINES, add_engine_argument, bench_config
from crawllib import config
from crawllib.config import Config
from crawllib.core.vocab import STAGES, Stage
from crawllib.runs import runner
from crawllib.stages.base import StageResult
from crawllib.stages.fetch import fetch_partitions, new_slot_budgets
from crawllib.stages.traps import read_trapped
from crawllib.store import lease, tables
from crawllib.store.db import Db
from crawllib.store.spark_db import SparkDb
from crawllib.transforms.fetch_inputs import follow_inputs, known_slots, owned_known_slots

log = logging.getLogger(__name__)

FULL_ROWS, FULL_URLS = "1000000,10000000", 100_000
QUICK_ROWS, QUICK_URLS = "10000,100000", 2_000
GOAL = 1.5  # largest / smallest, per stage
ROLES = ("driver", "jvm", "python_workers")
# What the fetch stage computes for its followers (crawllib.transforms.fetch_inputs.follow_inputs):
# from the known keys plan wrote into the fetchlist, and as before, from crawldb. Measured
# after plan, beside the synthetic fetch (which follows no link).
FOLLOW = {"follow inputs": False, "follow inputs from crawldb (before)": True}
# What the fetch stage computes for following to new hosts (crawllib.engine.follow.Owner): the
# slots crawldb knows, read once per run, each task's share of them and its new-host budget.
NEW_HOSTS = "new-host inputs"
MEASURED = (Stage.PLAN, *FOLLOW, NEW_HOSTS, Stage.FETCH, Stage.UPDATE)
# Each stage's counts worth a column in the report.
SHOWN = {
    Stage.PLAN: ("candidates", "planned", "revisits"),
    Stage.FETCH: ("urls", "ok", "not_modified"),
    Stage.UPDATE: ("urls", "new", "revisited", "exact_duplicates", "new_frontier"),
    **dict.fromkeys(FOLLOW, ("slots", "keys")),
    NEW_HOSTS: ("known_slots", "partitions"),
}


# The report's paragraph on this benchmark (benchmarks.suite prints it; the suite does not
# run it: building a root of 10^7 URLs takes longer than the rest of the suite).
DETAILS = (
    "**11. Scale** (`python -m benchmarks scale --rows 1000000,10000000 --urls 100000 "
    "--work DIR`, run alone: figures in the notes below): one generation of `--urls` URLs on "
    "crawl roots whose crawldb holds each of `--rows` URLs. A root is synthetic, built in "
    "Spark built-ins (`benchmarks/scale_build.py`, cached under DIR/roots): rows / 100 "
    "hosts, URLs per host Zipf-like (rank^-2/3); crawldb statuses fetched 62%, queued 12%, "
    "gone 6%, duplicate 5%, redirected 4%, filtered 3.5%, failed 3%, robots_denied 2%, "
    "noindex 1%, dead 1%, blocked 0.5%; ten earlier generations: per stored URL a page (a few "
    "dozen bytes of HTML) and a text (about 400 characters), about 10 links to the next "
    "pages of its host; fetches and fetchlist rows per attempted URL; robots, hosts and traps "
    "rows; url_key as the crawler computes it (MurmurHash3 in Spark expressions, checked "
    "against `crawllib.core.urls.url_key`). The generation's candidates: 60% new URLs of its "
    "frontier (which also links 10% as many known URLs), 20% queued and 5% failed URLs due, "
    "15% revisits due; all of them planned (no per-host cap or budget cuts). Plan and "
    "update are the real stages on a copy of the root; fetch is synthetic "
    "(`benchmarks/scale_fetch.py`: pages, texts, links, fetches and hosts rows of the "
    "planned URLs, 91.5% ok or 304, in one slice). Per stage: wall and CPU seconds of the "
    "driver, the JVM and the Python workers; per table: Delta data files and bytes before and "
    "after. Goal: each stage at most 1.5 × as long at 10^7 rows as at 10^6."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", default=FULL_ROWS, help="crawldb sizes, comma-separated")
    parser.add_argument("--urls", type=int, default=FULL_URLS, help="URLs planned")
    parser.add_argument("--work", default="", help="cache of built roots and runs (default: temp)")
    parser.add_argument("--event-log", default="", help="write Spark event logs to this folder")
    parser.add_argument(
        "--quick", action="store_true", help=f"rows {QUICK_ROWS}, urls {QUICK_URLS}"
    )
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory")
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed small generation"
    )
    add_engine_argument(parser, default="spark")


def scale_config(spec: ScaleSpec, driver_memory: str = "", event_log: str = "") -> Config:
    """The benchmark's config (benchmarks.stages.bench_config, 8 shuffle partitions as
    conf/local.toml) for a spec: the crawl's clock on the measured generation's day, room for
    all its URLs (no per-host cap, budget or depth cuts them)."""
    conf: dict[str, str] = {}
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    if event_log:
        os.makedirs(event_log, exist_ok=True)
        conf.update(  # uncompressed: JSON lines any tool reads
            {
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": os.path.abspath(event_log),
                "spark.eventLog.compress": "false",
            }
        )
    now = T0.timestamp() + spec.gen * DAY
    return config.replace(
        bench_config(),
        spark__shuffle_partitions=8,
        spark__conf=conf,
        crawl__now=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        crawl__max_depth=spec.gen + 5,
        generate__max_per_host=spec.urls,
        generate__host_budget=10**9,
        generate__domain_budget=10**9,
    )


def table_sizes(spark: SparkSession, root: str) -> dict[str, tuple[int, int]]:
    return {name: tables.size_of(spark, root, name) for name in tables.TABLES}


def run_generation(db: Db, spark_db: SparkDb, spec: ScaleSpec, cfg: Config) -> dict[str, Any]:
    """Run the measured generation on ``db``'s root: per stage its wall and CPU seconds and
    counts; after plan, what the real fetch stage computes for its followers (FOLLOW), both
    ways, on ``db``'s engine; the synthetic fetch on Spark (``spark_db``, the same root)."""
    out: dict[str, Any] = {}

    def timed(name: str, step: Callable[[], dict[str, int]]) -> None:
        with ProcessTree() as tree:
            t0 = time.perf_counter()
            counts = step()
            wall = time.perf_counter() - t0
        figures = tree.figures()
        cpu = figures.cpu
        out[name] = {
            "wall_s": wall,
            "cpu_s": {role: cpu.get(role, 0.0) for role in ROLES},
            "processes": {role: figures.processes.get(role, 0) for role in ROLES},
            "counts": counts,
        }
        log.info("scale %s: %s %.1fs", spec.name, name, wall)

    def stage_step(stage: str) -> Callable[[], dict[str, int]]:
        def step() -> dict[str, int]:
            result: StageResult | None = (
                run_fetch(spark_db, spec)
                if stage == Stage.FETCH
                else runner.run_stage(db, cfg, spec.gen, stage)
            )
            assert result is not None, f"{stage} was done already"
            return result.as_counts()

        return step

    for stage in STAGES:
        if stage == Stage.FETCH:
            for name, from_crawldb in FOLLOW.items():
                timed(name, functools.partial(follow_figures, db, cfg, spec, from_crawldb))
            timed(NEW_HOSTS, functools.partial(new_host_figures, db, cfg, spec))
        timed(stage, stage_step(stage))
    return out


def follow_figures(db: Db, cfg: Config, spec: ScaleSpec, from_crawldb: bool) -> dict[str, int]:
    """The follow inputs of the generation's first slice, as the fetch stage computes them
    (crawllib.stages.fetch; no following in the synthetic fetch): slots with room and the
    known keys they carry."""
    inputs = {
        "fetchlist": db.table("fetchlist", f"gen = {spec.gen}"),
        "fetches": db.table(
            "fetches", f"gen = {spec.gen}", columns=["url_key", "host", "source_url"]
        ),
    }
    if from_crawldb:
        inputs["crawldb"] = db.table("crawldb", columns=["url_key", "host", "domain"])
    trapped = read_trapped(db, cfg)
    if trapped is not None:
        inputs["trapped"] = trapped
    follow = db.sql(follow_inputs(cfg, not from_crawldb, trapped is not None), **inputs)
    row = db.one_row(
        db.sql("SELECT count(*) AS slots, sum(size(known)) AS keys FROM {f}", f=follow)
    )
    return {"slots": int(row["slots"]), "keys": int(row["keys"] or 0)}


def new_host_figures(db: Db, cfg: Config, spec: ScaleSpec) -> dict[str, int]:
    """What the real fetch stage computes for following to new hosts, as it does (once per
    run, then per slice): crawldb's slots (known_slots, kept), each task's known slot keys
    (owned_known_slots, with the generation's fetches) and the tasks' new-host budgets."""
    crawldb = db.table("crawldb", columns=["host", "domain"])
    known = db.keep(db.sql(known_slots(cfg), crawldb=crawldb), through_losses=True)
    try:
        fetched = db.table("fetches", f"gen = {spec.gen}", columns=["host"])
        partitions = fetch_partitions(db, cfg)
        owned = db.sql(owned_known_slots(cfg, partitions), known=known, fetches=fetched)
        row = db.one_row(db.sql("SELECT count(*) AS slots FROM {o}", o=owned))
        new_slot_budgets(db, cfg, partitions, known, fetched)
    finally:
        db.drop(known)
    return {"known_slots": int(row["slots"]), "partitions": partitions}


def measure(
    spark: SparkSession,
    spec: ScaleSpec,
    work: str,
    cfg: Config,
    keep: bool = False,
    engine: str = "spark",
) -> dict[str, Any]:
    """Build (or reuse) the root of ``spec`` (Spark), copy it and run its next generation, its
    stages on ``engine`` (the synthetic fetch on Spark)."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    source = cached_root(spark, spec, work)
    root = os.path.join(os.path.abspath(work), "runs", spec.name)
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    clone_root(source, root)
    copy_s = time.perf_counter() - t0
    lease.take(root, "bench scale", cfg)
    spark_db = SparkDb(spark, root, cfg)
    db: Db = spark_db
    if engine == "embedded":
        from crawllib.store.embedded import EmbeddedDb

        db = EmbeddedDb(root, cfg)
    try:
        # A root cached by an earlier version gets the columns added since (as `crawl run`
        # does).
        db.init_tables(upgrade=True)
        before = table_sizes(spark, root)
        stages = run_generation(db, spark_db, spec, cfg)
        after = table_sizes(spark, root)
    finally:
        db.close()
        lease.give_back(root)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return {
        "engine": engine,
        "rows": spec.rows,
        "urls": spec.urls,
        "hosts": spec.host_count,
        "build_s": build_seconds(source),
        "copy_s": copy_s,
        "stages": stages,
        "before": before,
        "after": after,
    }


def main(args: argparse.Namespace) -> None:
    rows = QUICK_ROWS if args.quick else args.rows
    urls = QUICK_URLS if args.quick else args.urls
    specs = [ScaleSpec(rows=int(n), urls=int(urls)) for n in str(rows).split(",")]
    work = args.work or tempfile.mkdtemp(prefix="crawllib-scale-")
    from crawllib.store.session import get_spark

    spark = get_spark(scale_config(specs[0], args.driver_memory, args.event_log))
    logging.getLogger("crawllib").setLevel(logging.INFO)
    try:
        if not (args.quick or args.no_warmup):  # JIT and class loading, outside the figures
            warm = ScaleSpec(rows=10_000, urls=2_000)
            measure(spark, warm, work, scale_config(warm), engine=args.engine)
        results = [
            measure(spark, spec, work, scale_config(spec), engine=args.engine) for spec in specs
        ]
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    if args.work:
        with open(os.path.join(work, "scale-results.json"), "w") as fh:
            json.dump(results, fh, indent=1)


def ratios(results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """stage -> wall and CPU of the largest size over the smallest's."""
    small, large = min(results, key=lambda r: r["rows"]), max(results, key=lambda r: r["rows"])
    out = {}
    for stage in MEASURED:
        a, b = small["stages"][stage], large["stages"][stage]
        out[stage] = {
            "wall": b["wall_s"] / a["wall_s"],
            "cpu": sum(b["cpu_s"].values()) / max(sum(a["cpu_s"].values()), 1e-9),
        }
    return out


def render(results: list[dict[str, Any]]) -> str:
    """Markdown: a table of stages and one of tables per size, then the ratios."""
    lines = []
    for r in results:
        on = f" (plan and update on {r['engine']})" if "engine" in r else ""
        lines += [
            f"### crawldb {r['rows']:,} URLs, {r['hosts']:,} hosts, generation of "
            f"{r['urls']:,} URLs{on}",
            "",
            f"Root built in {r['build_s']:.0f} s (cached after), copied in {r['copy_s']:.1f} s.",
            "",
            "| stage | wall s | CPU s | driver | JVM | Python workers | counts |",
            "|---|---|---|---|---|---|---|",
        ]
        for stage in MEASURED:
            s = r["stages"][stage]
            cpu = s["cpu_s"]
            shown = ", ".join(f"{k} {s['counts'].get(k, 0):,}" for k in SHOWN[stage])
            name = "fetch (synthetic)" if stage == Stage.FETCH else stage
            lines.append(
                f"| {name} | {s['wall_s']:.1f} | {sum(cpu.values()):.1f} | "
                + " | ".join(f"{cpu[role]:.1f}" for role in ROLES)
                + f" | {shown} |"
            )
        lines += [
            "",
            "| table | files before | files after | MiB before | MiB after |",
            "|---|---|---|---|---|",
        ]
        for name in tables.TABLES:
            (f0, b0), (f1, b1) = r["before"][name], r["after"][name]
            lines.append(f"| {name} | {f0:,} | {f1:,} | {b0 / 2**20:.1f} | {b1 / 2**20:.1f} |")
        lines.append("")
    if len(results) > 1:
        small = min(r["rows"] for r in results)
        large = max(r["rows"] for r in results)
        lines += [
            f"### Ratio {large:,} / {small:,} rows (goal: each stage ≤ {GOAL})",
            "",
            "| stage | wall | CPU | met |",
            "|---|---|---|---|",
        ]
        for stage, q in ratios(results).items():
            met = "yes" if q["wall"] <= GOAL else "**no**"
            lines.append(f"| {stage} | {q['wall']:.2f} | {q['cpu']:.2f} | {met} |")
    return "\n".join(lines)
