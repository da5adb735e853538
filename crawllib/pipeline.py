"""Running stages and generations: order, prerequisites, skip-if-done, bookkeeping.

Every stage is idempotent on its own; this module adds the rules a scheduler relies on: a stage
runs only after its predecessor is done, a stage already done is skipped (``force`` reruns it),
and each run is recorded in the ``generations`` table with its counts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from crawllib import generations, integrity, progress, seeding, tables
from crawllib.config import Config, parse_now
from crawllib.errors import StageOrderError
from crawllib.generations import Ledger, States
from crawllib.schedule import freshness_query
from crawllib.stages import fetch, parse, plan, update
from crawllib.stages.base import StageResult, StageRun
from crawllib.vocab import ACCEPT_STATE, STAGES, Stage, StageState

log = logging.getLogger(__name__)

RUNNERS: dict[str, Callable[[StageRun], StageResult]] = {
    Stage.PLAN: plan.run,
    Stage.FETCH: fetch.run,
    Stage.PARSE: parse.run,
    Stage.UPDATE: update.run,
}
RESULTS: dict[str, type[StageResult]] = {
    Stage.PLAN: plan.PlanResult,
    Stage.FETCH: fetch.FetchResult,
    Stage.PARSE: parse.ParseResult,
    Stage.UPDATE: update.UpdateResult,
}


def should_run(states: States, gen: int, stage: str, force: bool = False) -> bool:
    """Whether ``stage`` of ``gen`` runs now: False when it is already done (and not forced);
    StageOrderError when its prerequisite is not done; ValueError for an unknown stage."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
    if states.get((gen, stage)) == StageState.DONE and not force:
        return False
    before = generations.prerequisite(gen, stage)
    if before and states.get(before) != StageState.DONE:
        raise StageOrderError(
            f"cannot run {stage} of generation {gen}: {before[1]} of generation {before[0]} is not done"
        )
    if stage == Stage.PLAN and (gen, Stage.FETCH) in states:
        # The fetchlist is what fetch works from (its committed slices): replanning it now
        # would record a plan that is not the one fetched.
        raise StageOrderError(
            f"cannot run plan of generation {gen} again: its fetch has started; rerun fetch "
            f"(it skips committed slices) or go on with generation {gen + 1}"
        )
    return True


@dataclasses.dataclass(frozen=True)
class Started:
    """A stage run whose ``running`` row is already committed, with its predecessor's
    ``done`` row (`run_generation` chains its stages so), and that predecessor's result."""

    gen: int
    stage: str
    at: dt.datetime
    first: bool
    previous: StageResult


def run_stage(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    ledger: Ledger | None = None,
) -> StageResult | None:
    """Run one stage of one generation; None when it was already done (and not forced).

    ``ledger`` (``generations.read_ledger``), when the caller has just read it, spares a read
    of the generations table; it is updated with this stage's run.
    """
    return _run_stage(spark, root, cfg, gen, stage, force, ledger)[0]


def _run_stage(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    ledger: Ledger | None = None,
    started: Started | None = None,
    then: str | None = None,
) -> tuple[StageResult | None, Started | None]:
    """`run_stage`, plus: ``started``, this run's running row as the previous stage's done
    commit recorded it; ``then``, a stage of the same generation to start next, whose running
    row goes into this stage's done commit (it is returned as the next call's ``started``).

    Before it writes anything, the stage checks that no table is behind the versions the
    ledger recorded (`crawllib.integrity`); its done row records the versions after it.
    """
    if ledger is None:
        ledger = generations.read_ledger(spark, root)
    states = ledger.states
    if not should_run(states, gen, stage, force):
        log.info("gen %d %s: already done, skipped", gen, stage)
        return None, None
    integrity.verify(spark, root, ledger.versions, ledger.recorded_by)
    if started is not None and (started.gen, started.stage) == (gen, stage):
        at = started.at
        run = StageRun(
            spark,
            root,
            cfg,
            gen,
            first=started.first,
            previous=started.previous,
            frontier_open=(gen + 1, Stage.PLAN) not in states,
            force=force,
            started_at=at,
        )
    else:
        # Never started before: no table holds rows of this stage run yet, so the stage may
        # append where a rerun has to replace. "running" is recorded before the stage writes.
        at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        run = StageRun(
            spark,
            root,
            cfg,
            gen,
            first=(gen, stage) not in states,
            frontier_open=(gen + 1, Stage.PLAN) not in states,
            force=force,
            started_at=at,
        )
        generations.record(spark, root, gen, stage, StageState.RUNNING, at)
    states[(gen, stage)] = StageState.RUNNING
    t0 = time.monotonic()
    log.info("gen %d %s: started", gen, stage)
    try:
        result = RUNNERS[stage](run)
    except BaseException:
        generations.record(spark, root, gen, stage, StageState.FAILED, at)
        states[(gen, stage)] = StageState.FAILED
        raise
    following = None
    chain = (gen, then) if then and states.get((gen, then)) != StageState.DONE else None
    versions = integrity.current_versions(spark, root)
    finished = generations.record(
        spark, root, gen, stage, StageState.DONE, at, result.as_counts(), chain, versions
    )
    states[(gen, stage)] = StageState.DONE
    ledger.versions, ledger.recorded_by = versions, f"gen {gen} {stage}"
    if chain:
        following = Started(gen, chain[1], finished, chain not in states, result)
        states[chain] = StageState.RUNNING
    log.info("gen %d %s: done in %.1fs %s", gen, stage, time.monotonic() - t0, result)
    return result, following


def run_generation(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int | None = None,
    ledger: Ledger | None = None,
) -> int:
    """Run every stage of one generation (the next due when gen is None); return its number.

    The generations table is read once (or not at all when ``ledger`` is given): this
    process is the one running the generation's stages, so it tracks them itself.
    A stage's ``done`` row and the next stage's ``running`` row are one commit.
    """
    if ledger is None:
        ledger = generations.read_ledger(spark, root)
    if gen is None:
        gen = generations.next_gen(ledger.states)
    started = None
    for i, stage in enumerate(STAGES, start=1):
        then = STAGES[i] if i < len(STAGES) else None
        result, started = _run_stage(
            spark, root, cfg, gen, stage, ledger=ledger, started=started, then=then
        )
        counts = result.as_counts() if result else {}
        figures = {k: v for k, v in counts.items() if k in _SHOWN}
        progress.report(f"gen {gen}", i, len(STAGES), **figures)
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


def nothing_left(spark: SparkSession, root: str, cfg: Config, gen: int, states: States) -> bool:
    """Whether the crawl is complete at ``gen``: no stage of it has run, and planning it would
    choose nothing (`plan.has_work`). A generation started is finished whatever it holds."""
    partly_done = any((gen, s) in states for s in STAGES)
    return not partly_done and not plan.has_work(spark, root, cfg, gen)


def run_crawl(
    spark: SparkSession,
    root: str,
    cfg: Config,
    seeds: str | None,
    generations_wanted: int | None = None,
) -> list[int]:
    """Init if needed, seed, then run generations until nothing is left to fetch within
    crawl.max_depth (URLs queued, or failed and waiting for a retry, included; but not those of
    hosts the hosts table holds back: `plan.has_work`), or until
    ``generations_wanted`` are done when it is given.

    Returns the generations run now; empty when the crawl had already done them (or has
    nothing left to fetch).
    """
    created = tables.init_tables(spark, root, upgrade=True)
    if created:
        log.info("initialised crawl root %s", tables.normalize_root(root))
    # Read once: from here on this process is the one recording stage runs, and
    # run_generation keeps the ledger up to date.
    ledger = generations.read_ledger(spark, root)
    states = ledger.states
    if seeds:
        report = seeding.seed(spark, root, seeds, cfg, generations.next_seed_gen(states))
        for r in report.rejected:
            log.warning("%s: invalid seed %r: %s", r.where, r.text, r.reason)
        log.info(
            "seeds: %d valid, %d new, %d invalid", report.valid, report.added, len(report.rejected)
        )
    ran = []
    while True:
        gen = generations.next_gen(states)
        if generations_wanted is not None and gen >= generations_wanted:
            break
        if nothing_left(spark, root, cfg, gen, states):
            log.info(
                "gen %d: nothing left to fetch (its frontier holds only known URLs, or URLs "
                "past crawl.max_depth or filtered; URLs of hosts held back by a Retry-After, a "
                "cool-down or a Crawl-delay above the maximum wait for a later run: see the "
                "hosts table); the crawl is complete",
                gen,
            )
            break
        run_generation(spark, root, cfg, gen, ledger=ledger)
        ran.append(gen)
    return ran


def status_rows(spark: SparkSession, root: str) -> list[tuple]:
    """One row per (gen, stage), its latest run: gen, stage, state, seconds, items per second
    (of the stage's throughput count), counts. For `crawl status`."""
    order = {s: i for i, s in enumerate(STAGES)}
    out = []
    latest = generations.latest_runs(spark, root)
    for (gen, stage), r in sorted(
        latest.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))
    ):
        result_type = RESULTS.get(stage)
        items = r.counts.get(result_type.THROUGHPUT) if result_type else None
        rate = round(items / r.seconds, 1) if items is not None and r.seconds else None
        summary = ", ".join(f"{k}={v}" for k, v in sorted(r.counts.items()) if v)
        seconds = round(r.seconds, 1) if r.seconds is not None else None
        out.append((gen, stage, r.state, seconds, rate, summary))
    return out


def freshness(spark: SparkSession, root: str, cfg: Config) -> tuple[int, int, float]:
    """(pages with a stored version, due now, estimated freshness) by the crawl's clock
    (crawl.now, or the real one): crawllib.schedule.freshness_query over crawldb."""
    now = parse_now(cfg.crawl.now)
    at = "current_timestamp()" if now is None else f"timestamp_seconds({now})"
    tables.read(spark, root, "crawldb").createOrReplaceTempView("crawldb")
    row = tables.one_row(spark.sql(freshness_query(at)))
    return int(row["pages"]), int(row["due"]), float(row["freshness"] or 0.0)


def accept_state(spark: SparkSession, root: str) -> dict[str, int]:
    """Record the tables' current versions as the crawl's state (after a lost log file or a
    restore that `crawllib.integrity` stopped a stage on); return them. The stages whose output
    is gone have to be rerun with force: this records, it repairs nothing."""
    ledger = generations.read_ledger(spark, root)
    versions = integrity.current_versions(spark, root)
    gen = generations.next_gen(ledger.states)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(spark, root, gen, ACCEPT_STATE, StageState.DONE, now, versions=versions)
    log.warning("accepted the tables as they are: %s (was: %s)", versions, ledger.versions)
    return versions
