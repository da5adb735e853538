"""Running stages and generations: order, prerequisites, skip-if-done, bookkeeping.

Every stage is idempotent on its own; this module adds the rules a scheduler relies on: a stage
runs only after its predecessor is done, a stage already done is skipped (``force`` reruns it),
and each run is recorded in the ``generations`` table with its counts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import logging
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import generations, progress, seeding, tables
from crawllib.errors import StageOrderError
from crawllib.transforms.plan import PENDING_STATUSES, with_filter_reason

log = logging.getLogger(__name__)


def prerequisite(gen: int, stage: str) -> tuple[int, str] | None:
    i = generations.STAGES.index(stage)
    if i > 0:
        return gen, generations.STAGES[i - 1]
    return (gen - 1, "update") if gen > 0 else None


@dataclasses.dataclass(frozen=True)
class Started:
    """A stage run whose ``running`` row is already committed, with its predecessor's
    ``done`` row (`run_generation` chains its stages so), and that predecessor's counts."""

    gen: int
    stage: str
    at: dt.datetime
    fresh: bool
    before: dict[str, int] | None = None


def run_stage(
    spark: SparkSession,
    root: str,
    cfg: Any,
    gen: int,
    stage: str,
    force: bool = False,
    states: dict[tuple[int, str], str] | None = None,
) -> dict | None:
    """Run one stage of one generation; None when it was already done (and not forced).

    ``states`` (``generations.stage_states``), when the caller has just read them, spares a
    read of the generations table; the dict is updated with this stage's new state.
    """
    return _run_stage(spark, root, cfg, gen, stage, force, states)[0]


def _run_stage(
    spark: SparkSession,
    root: str,
    cfg: Any,
    gen: int,
    stage: str,
    force: bool = False,
    states: dict[tuple[int, str], str] | None = None,
    started: Started | None = None,
    then: str | None = None,
) -> tuple[dict | None, Started | None]:
    """`run_stage`, plus: ``started``, this run's running row as the previous stage's done
    commit recorded it; ``then``, a stage of the same generation to start next, whose running
    row goes into this stage's done commit (it is returned as the next call's ``started``).
    """
    if stage not in generations.STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are: {', '.join(generations.STAGES)}")
    if states is None:
        states = generations.stage_states(spark, root)
    if states.get((gen, stage)) == "done" and not force:
        log.info("gen %d %s: already done, skipped", gen, stage)
        return None, None
    before = prerequisite(gen, stage)
    if before and states.get(before) != "done":
        raise StageOrderError(
            f"cannot run {stage} of generation {gen}: {before[1]} of generation {before[0]} is not done"
        )
    module = importlib.import_module(f"crawllib.stages.{stage}")
    extra: dict[str, Any] = {}
    if started is not None and (started.gen, started.stage) == (gen, stage):
        at, fresh = started.at, started.fresh
        if stage == "fetch":  # plan's counts spare fetch a query of the fetchlist
            extra["plan"] = started.before
    else:
        # Never started before: no table holds rows of this stage run yet, so the stage may
        # append where a rerun has to replace. "running" is recorded before the stage writes.
        at, fresh = dt.datetime.now(dt.UTC).replace(tzinfo=None), (gen, stage) not in states
        generations.record(spark, root, gen, stage, "running", at)
    states[(gen, stage)] = "running"
    t0 = time.monotonic()
    log.info("gen %d %s: started", gen, stage)
    try:
        counts = module.run(spark, root, cfg, gen, fresh=fresh, **extra)
    except BaseException:
        generations.record(spark, root, gen, stage, "failed", at)
        states[(gen, stage)] = "failed"
        raise
    chain = bool(then) and states.get((gen, then)) != "done"
    finished = generations.record(
        spark, root, gen, stage, "done", at, counts, then=(gen, then) if chain else None
    )
    states[(gen, stage)] = "done"
    following = None
    if chain:
        following = Started(gen, then, finished, (gen, then) not in states, counts)
        states[(gen, then)] = "running"
    log.info("gen %d %s: done in %.1fs %s", gen, stage, time.monotonic() - t0, counts)
    return counts, following


def due_gen(states: dict[tuple[int, str], str], stage: str) -> int:
    """The generation a stage should run next: its prerequisite done, itself not done."""
    if stage == "plan":
        return generations.next_gen(states)
    before = generations.STAGES[generations.STAGES.index(stage) - 1]
    ready = sorted(
        g
        for (g, s), st in states.items()
        if s == before and st == "done" and states.get((g, stage)) != "done"
    )
    if ready:
        return ready[0]
    done = [g for (g, s), st in states.items() if s == stage and st == "done"]
    return max(done) if done else 0  # already done: run_stage will say so


def pending_urls(spark: SparkSession, root: str, cfg: Any, gen: int) -> int:
    """URLs still to fetch: queued or failed in crawldb (due now or later), or new in gen's
    frontier and not filtered by plan's URL rules (depth, extension, length).

    A frontier holding only URLs past crawl.max_depth is the usual end of a crawl: planning it
    would only mark them filtered, at the cost of a whole generation of fixed costs. They stay
    in the frontier, so a later run with a larger max_depth plans them.
    """
    crawldb = tables.read(spark, root, "crawldb")
    due = crawldb.filter(F.col("status").isin(*PENDING_STATUSES)).count()
    if due:
        return due
    frontier = tables.read(spark, root, "frontier").filter(F.col("gen") == gen)
    plannable = with_filter_reason(frontier, cfg).where(F.col("filter_reason").isNull())
    return plannable.join(crawldb.select("url_key"), on="url_key", how="left_anti").count()


def run_generation(
    spark: SparkSession,
    root: str,
    cfg: Any,
    gen: int | None = None,
    states: dict[tuple[int, str], str] | None = None,
) -> int:
    """Run every stage of one generation (the next due when gen is None); return its number.

    The generations table is read once (or not at all when ``states`` is given): this
    process is the one running the generation's stages, so it tracks their states itself.
    A stage's ``done`` row and the next stage's ``running`` row are one commit.
    """
    if states is None:
        states = generations.stage_states(spark, root)
    if gen is None:
        gen = generations.next_gen(states)
    started = None
    for i, stage in enumerate(generations.STAGES, start=1):
        then = generations.STAGES[i] if i < len(generations.STAGES) else None
        counts, started = _run_stage(
            spark, root, cfg, gen, stage, states=states, started=started, then=then
        )
        figures = {k: v for k, v in (counts or {}).items() if k in _SHOWN}
        progress.report(f"gen {gen}", i, len(generations.STAGES), **figures)
    return gen


# Counts shown in the per-generation progress line.
_SHOWN = (
    "planned",
    "ok",
    "error",
    "http_error",
    "robots_denied",
    "texts",
    "exact_duplicates",
    "near_duplicates",
    "new_frontier",
    "dead",
)


def run_crawl(
    spark: SparkSession, root: str, cfg: Any, seeds: str | None, generations_wanted: int
) -> list[int]:
    """Init if needed, seed, then run generations until ``generations_wanted`` are done.

    Returns the generations run now; empty when the crawl had already done them (or has
    nothing left to fetch).
    """
    created = tables.init_tables(spark, root)
    if created:
        log.info("initialised crawl root %s", tables.normalize_root(root))
    if seeds:
        report = seeding.seed(spark, root, seeds, cfg, generations.next_seed_gen(spark, root))
        for r in report.rejected:
            log.warning("%s: invalid seed %r: %s", r.where, r.text, r.reason)
        log.info(
            "seeds: %d valid, %d new, %d invalid", report.valid, report.added, len(report.rejected)
        )
    ran = []
    # Read once: from here on this process is the one recording stage runs, and
    # run_generation keeps the dict up to date.
    states = generations.stage_states(spark, root)
    while True:
        gen = generations.next_gen(states)
        if gen >= generations_wanted:
            break
        partly_done = any((gen, s) in states for s in generations.STAGES)
        if not partly_done and pending_urls(spark, root, cfg, gen) == 0:
            log.info(
                "gen %d: nothing left to fetch (its frontier holds only known URLs, or URLs "
                "past crawl.max_depth or filtered); the crawl is complete",
                gen,
            )
            break
        run_generation(spark, root, cfg, gen, states=states)
        ran.append(gen)
    return ran
