"""What a generation costs when it has little to do, on each engine: Spark jobs, tasks, Delta
commits, files and seconds of each stage, and of the check ``crawl run`` and ``plan --if-work``
make when nothing is due, against the budgets of a generation of at most 2 pages.

A crawl of two small hosts in generations of about 2 pages (``generate.max_per_host`` 1, no
following: one page per host per generation), run as ``crawl run`` runs them, once per engine
(``--engine``, both by default: the embedded engine first, DuckDB over delta-rs in this
process, then Spark in a session this process starts: a cold JVM, as a scheduled job starts),
each on a fresh root and a fresh test web of the same pages: its first generations, then the
idle check once the crawl is complete. Jobs are counted from Spark's status tracker (every job
of the generation, the ledger's included; the embedded engine runs none), commits from the
tables' Delta logs; fixed cost = a generation's wall time - its time on the network. The last
table sets the engines side by side, one row each, on the same generation.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.stages import ENGINES, bench_config
from crawllib import config
from crawllib.core import stage_order
from crawllib.core.vocab import STAGES
from crawllib.runs import metrics, runner
from crawllib.runs.engines import open_db
from crawllib.stages import plan, seeding
from crawllib.store import generations, integrity, lease
from crawllib.store.db import LEDGER, Db
from crawllib.testweb import WebSpec, serve_in_thread

# Budgets of a generation with at most 2 pages (issue 47), and of an idle check: Spark jobs
# and Delta commits, and the fixed cost per engine (on an idle machine).
JOBS, COMMITS, IDLE_S = 50, 12, 2.0
FIXED_S = {"embedded": 2.0, "spark": 15.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--generations", type=int, default=3, help="generations measured")
    parser.add_argument(
        "--engine",
        nargs="+",
        choices=ENGINES,
        default=list(ENGINES),
        help="the engines measured, in this order (default: embedded spark)",
    )
    parser.add_argument("--work", default="", help="directory for the crawls (default: temp)")


def main(args: argparse.Namespace) -> None:
    work = args.work or tempfile.mkdtemp(prefix="crawllib-cost-")
    result = bench_cost(work, args.generations, args.engine)
    print(render(result))


def bench_cost(
    work: str, generations_wanted: int = 3, engines: Sequence[str] = ENGINES
) -> dict[str, Any]:
    """Per engine: generations of about 2 pages, each measured; then the idle check."""
    return {
        "generations_wanted": generations_wanted,
        "engines": {engine: bench_engine(work, engine, generations_wanted) for engine in engines},
    }


def bench_engine(work: str, engine: str, generations_wanted: int = 3) -> dict[str, Any]:
    """The crawl of `bench_cost` on one engine, in ``work/cost-ENGINE``."""
    spec = WebSpec(seed=11, hosts=2, pages_per_host=8, special=False)
    root = os.path.join(work, f"cost-{engine}")
    os.makedirs(work, exist_ok=True)
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
        seeds = os.path.join(work, f"cost-{engine}-seeds.txt")
        with open(seeds, "w", encoding="utf-8") as fh:
            fh.write("\n".join(web.seeds()) + "\n")
        with lease.hold(root, "bench cost", cfg):
            db = open_db(cfg, root, engine)
            try:
                db.init_tables()
                seeding.seed(db, seeds, cfg, 0)
                for gen in range(generations_wanted):
                    gens.append(measure_generation(db, cfg, gen))
                # finish the crawl (not measured), then the check that finds nothing due
                runner.run_crawl(db, cfg, None)
                idle = measure_idle(db, cfg)
            finally:
                db.close()
    return {"engine": engine, "generations": gens, "idle": idle}


def measure_generation(db: Db, cfg: config.Config, gen: int) -> dict:
    """One generation as `crawl generation` runs it: per stage and in all."""
    before = integrity.current_versions(db)
    ledger_before = db.version_of(LEDGER)
    with db.job_group(f"bench gen {gen}") as group:
        t0 = time.perf_counter()
        runner.run_generation(db, cfg, gen)
        wall = time.perf_counter() - t0
    after = integrity.current_versions(db)
    ledger = db.version_of(LEDGER) - ledger_before
    outer = metrics.cost_between(db, group, before, after, ledger)
    latest = generations.latest_runs(db)
    runs = {
        stage: latest[(gen, stage)]
        for stage in STAGES
        if (gen, stage) in latest and latest[(gen, stage)].state == "done"
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
        "commits_by_table": {**outer.commits, LEDGER: ledger},
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


def measure_idle(db: Db, cfg: config.Config) -> dict[str, Any]:
    """`plan --if-work` on a complete crawl: the check that finds nothing due, timed."""
    ledger = generations.read_ledger(db)
    gen = stage_order.next_gen(ledger.states)
    with db.job_group("bench idle") as group:
        t0 = time.perf_counter()
        idle = runner.nothing_left(db, cfg, gen, ledger.states)
        seconds = time.perf_counter() - t0
        jobs, _tasks = db.jobs_of(group)
    waiting = plan.waits(db, cfg, gen)
    return {"idle": idle, "seconds": seconds, "jobs": jobs, "waits": len(waiting)}


def _jobs(engine: str, jobs: int | None) -> str:
    """Spark jobs as shown: "none" on the embedded engine (it runs no Spark job)."""
    return "none" if engine == "embedded" and not jobs else str(jobs)


def compared(r: dict[str, Any]) -> int | None:
    """The generation the engines are set side by side on: the last measured (the first also
    creates what a crawl makes once: robots rows, hosts rows)."""
    gens = [g["gen"] for e in r["engines"].values() for g in e["generations"]]
    return max(gens) if gens else None


def render(r: dict[str, Any]) -> str:
    lines = [
        "| engine | gen | pages | wall s | fixed s | Spark jobs | Delta commits | files | "
        "per stage: s / Spark jobs / commits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for engine, e in r["engines"].items():
        for g in e["generations"]:
            per = "; ".join(
                f"{stage} {s['seconds']:.1f} / {_jobs(engine, s['jobs'])} / {s['commits']}"
                for stage, s in g["stages"].items()
            )
            lines.append(
                f"| {engine} | {g['gen']} | {g['pages']} | {g['wall_s']:.1f} | "
                f"{g['fixed_s']:.1f} | {_jobs(engine, g['jobs'])} | {g['commits']} | "
                f"{g['files']} | {per} |"
            )
    lines += ["", "Delta commits by table:"]
    for engine, e in r["engines"].items():
        for g in e["generations"]:
            tables_ = ", ".join(f"{t} {n}" for t, n in sorted(g["commits_by_table"].items()) if n)
            lines.append(f"- {engine}, gen {g['gen']}: {tables_}")
    lines += [""]
    for engine, e in r["engines"].items():
        i = e["idle"]
        lines.append(
            f"idle check on {engine} (`plan --if-work` on a complete crawl): "
            f"{i['seconds']:.2f} s, Spark jobs {_jobs(engine, i['jobs'])}, nothing due: "
            f"{i['idle']}"
        )
    gen = compared(r)
    if gen is not None:
        lines += [
            "",
            f"Generation {gen} (≤ 2 pages) on each engine:",
            "",
            "| engine | pages | wall s | fixed s | Spark jobs | Delta commits | files | "
            "idle check s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for engine, e in r["engines"].items():
            g = next((g for g in e["generations"] if g["gen"] == gen), None)
            if g is None:
                continue
            lines.append(
                f"| {engine} | {g['pages']} | {g['wall_s']:.1f} | {g['fixed_s']:.1f} | "
                f"{_jobs(engine, g['jobs'])} | {g['commits']} | {g['files']} | "
                f"{e['idle']['seconds']:.2f} |"
            )
    return "\n".join(lines)


def goal_rows(r: dict[str, Any]) -> list[tuple[str, str, str, float, str]]:
    """The report's rows, per engine: the worst generation after the first (the first also
    creates what a crawl makes once: robots rows, hosts rows) against the budgets."""
    out = []
    for engine, e in r["engines"].items():
        later = e["generations"][1:] or e["generations"]
        jobs = max(g["jobs"] for g in later)
        commits = max(g["commits"] for g in later)
        fixed = max(g["fixed_s"] for g in later)
        idle = e["idle"]
        out += [
            (
                f"4c. a generation of ≤ 2 pages ({engine}): Spark jobs / budget",
                _jobs(engine, jobs),
                str(JOBS),
                jobs / JOBS,
                "≤ 1",
            ),
            (
                f"4d. a generation of ≤ 2 pages ({engine}): Delta commits / budget",
                str(commits),
                str(COMMITS),
                commits / COMMITS,
                "≤ 1",
            ),
            (
                f"4e. a generation of ≤ 2 pages ({engine}): fixed cost / budget",
                f"{fixed:.1f} s",
                f"{FIXED_S[engine]:.0f} s",
                fixed / FIXED_S[engine],
                "≤ 1",
            ),
            (
                f"4f. `plan --if-work` with nothing due ({engine}), seconds / budget",
                f"{idle['seconds']:.2f} s ({_jobs(engine, idle['jobs'])} Spark jobs)",
                f"{IDLE_S:.0f} s",
                idle["seconds"] / IDLE_S,
                "≤ 1",
            ),
        ]
    return out
