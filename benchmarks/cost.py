"""What a generation costs when it has little to do: Spark jobs, tasks, Delta commits, files
and seconds of each stage, and of the check ``crawl run`` and ``plan --if-work`` make when
nothing is due, against the budgets of a generation of at most 2 pages.

A crawl of two small hosts in generations of about 2 pages (``generate.max_per_host`` 1, no
following: one page per host per generation), run as ``crawl run`` runs them, in a session
of its own (cold JVM, as a scheduled job starts): its first generations, then the idle check
once the crawl is complete. Jobs are counted from the status tracker (every job of the
generation, the ledger's included), commits from the tables' Delta logs; fixed cost = a
generation's wall time - its time on the network.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from pyspark.sql import SparkSession

from benchmarks.stages import bench_config
from crawllib import config
from crawllib.core import stage_order
from crawllib.runs import metrics, runner
from crawllib.stages import plan, seeding
from crawllib.store import generations, integrity, lease, tables
from crawllib.testweb import WebSpec, serve_in_thread

# Budgets of a generation with at most 2 pages (issue 36), and of an idle check.
JOBS, COMMITS, FIXED_S, IDLE_S = 40, 12, 8.0, 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--generations", type=int, default=3, help="generations measured")
    parser.add_argument("--work", default="", help="directory for the crawl (default: temp)")


def main(args: argparse.Namespace) -> None:
    from crawllib.store.session import get_spark

    spark = get_spark(bench_config())
    work = args.work or tempfile.mkdtemp(prefix="crawllib-cost-")
    result = bench_cost(spark, work, args.generations)
    print(render(result))


def bench_cost(spark: SparkSession, work: str, generations_wanted: int = 3) -> dict[str, Any]:
    """Generations of about 2 pages, each measured; then the idle check."""
    spec = WebSpec(seed=11, hosts=2, pages_per_host=8, special=False)
    root = os.path.join(work, "cost")
    gens: list[dict[str, Any]] = []
    with serve_in_thread(spec) as web:
        cfg = config.replace(
            bench_config(),
            network__resolve=web.resolve,
            politeness__default_delay=0.0,
            fetch__follow=False,
            generate__max_per_host=1,
            crawl__max_depth=1,
        )
        seeds = os.path.join(work, "cost-seeds.txt")
        with open(seeds, "w", encoding="utf-8") as fh:
            fh.write("\n".join(web.seeds()) + "\n")
        with lease.hold(root, "bench cost", cfg):
            tables.init_tables(spark, root)
            seeding.seed(spark, root, seeds, cfg, 0)
            for gen in range(generations_wanted):
                gens.append(measure_generation(spark, root, cfg, gen))
            # finish the crawl (not measured), then the check that finds nothing due
            runner.run_crawl(spark, root, cfg, None)
            idle = measure_idle(spark, root, cfg)
    return {"generations": gens, "idle": idle}


def measure_generation(spark: SparkSession, root: str, cfg: config.Config, gen: int) -> dict:
    """One generation as `crawl generation` runs it: per stage and in all."""
    before = integrity.current_versions(spark, root)
    ledger_before = tables.snapshot_of(spark, root, "generations").version()
    with metrics.job_group(spark, f"bench gen {gen}") as group:
        t0 = time.perf_counter()
        runner.run_generation(spark, root, cfg, gen)
        wall = time.perf_counter() - t0
    after = integrity.current_versions(spark, root)
    ledger = int(tables.snapshot_of(spark, root, "generations").version() - ledger_before)
    outer = metrics.cost_between(spark, root, group, before, after, ledger)
    runs = {
        stage: r
        for (g, stage), r in generations.latest_runs(spark, root).items()
        if g == gen and r.state == "done"
    }
    stage_jobs = sum(int(r.counts.get("spark_jobs", 0)) for r in runs.values())
    network = float(runs["fetch"].counts.get("seconds_fetching", 0)) if "fetch" in runs else 0.0
    return {
        "gen": gen,
        "pages": int(runs["fetch"].counts.get("ok", 0)) if "fetch" in runs else 0,
        "wall_s": wall,
        "fixed_s": wall - network,
        # the stages' own jobs, and the bookkeeping between them (ledger, integrity)
        "jobs": stage_jobs + outer.jobs,
        "commits": sum(outer.commits.values()) + outer.ledger_commits,
        "commits_by_table": {**outer.commits, "generations": ledger},
        "files": outer.files,
        "stages": {
            stage: {
                "seconds": r.seconds,
                "jobs": r.counts.get("spark_jobs"),
                "tasks": r.counts.get("spark_tasks"),
                "commits": r.counts.get("delta_commits"),
            }
            for stage, r in runs.items()
        },
    }


def measure_idle(spark: SparkSession, root: str, cfg: config.Config) -> dict[str, Any]:
    """`plan --if-work` on a complete crawl: the check that finds nothing due, timed."""
    ledger = generations.read_ledger(spark, root)
    gen = stage_order.next_gen(ledger.states)
    with metrics.job_group(spark, "bench idle") as group:
        t0 = time.perf_counter()
        idle = runner.nothing_left(spark, root, cfg, gen, ledger.states)
        seconds = time.perf_counter() - t0
        jobs, _tasks = metrics.jobs_of(spark, group)
    waiting = plan.waits(spark, root, cfg, gen)
    return {"idle": idle, "seconds": seconds, "jobs": jobs, "waits": len(waiting)}


def render(r: dict[str, Any]) -> str:
    lines = [
        "| gen | pages | wall s | fixed s | jobs | commits | files | per stage: s / jobs / commits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in r["generations"]:
        per = "; ".join(
            f"{stage} {s['seconds']:.1f} / {s['jobs']} / {s['commits']}"
            for stage, s in g["stages"].items()
        )
        lines.append(
            f"| {g['gen']} | {g['pages']} | {g['wall_s']:.1f} | {g['fixed_s']:.1f} | "
            f"{g['jobs']} | {g['commits']} | {g['files']} | {per} |"
        )
    lines += ["", "Delta commits by table:"]
    for g in r["generations"]:
        tables_ = ", ".join(f"{t} {n}" for t, n in sorted(g["commits_by_table"].items()) if n)
        lines.append(f"- gen {g['gen']}: {tables_}")
    i = r["idle"]
    lines += [
        "",
        f"idle check (`plan --if-work` on a complete crawl): {i['seconds']:.2f} s, "
        f"{i['jobs']} Spark jobs, nothing due: {i['idle']}",
    ]
    return "\n".join(lines)


def goal_rows(r: dict[str, Any]) -> list[tuple[str, str, str, float, str]]:
    """The report's rows: the worst generation after the first (the first also creates what
    a crawl makes once: robots rows, hosts rows) against the budgets."""
    later = r["generations"][1:] or r["generations"]
    jobs = max(g["jobs"] for g in later)
    commits = max(g["commits"] for g in later)
    fixed = max(g["fixed_s"] for g in later)
    idle = r["idle"]
    return [
        (
            "4c. a generation of ≤ 2 pages: Spark jobs / budget",
            str(jobs),
            str(JOBS),
            jobs / JOBS,
            "≤ 1",
        ),
        (
            "4d. a generation of ≤ 2 pages: Delta commits / budget",
            str(commits),
            str(COMMITS),
            commits / COMMITS,
            "≤ 1",
        ),
        (
            "4e. a generation of ≤ 2 pages: fixed cost / budget",
            f"{fixed:.1f} s",
            f"{FIXED_S:.0f} s",
            fixed / FIXED_S,
            "≤ 1",
        ),
        (
            "4f. `plan --if-work` with nothing due, seconds of Spark / budget",
            f"{idle['seconds']:.2f} s ({idle['jobs']} jobs)",
            f"{IDLE_S:.0f} s",
            idle["seconds"] / IDLE_S,
            "≤ 1",
        ),
    ]
