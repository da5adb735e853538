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
from collections.abc import Callable, Iterable

from crawllib.config import Config, parse_now
from crawllib.core import progress, stage_order
from crawllib.core.errors import StageOrderError
from crawllib.core.roots import normalize_root
from crawllib.core.stage_order import States
from crawllib.core.vocab import STAGES, Stage, StageState, Waiting
from crawllib.runs import metrics
from crawllib.stages import fetch, plan, seeding, update
from crawllib.stages.base import StageResult, StageRun
from crawllib.store import generations, integrity
from crawllib.store.db import Db
from crawllib.store.generations import Ledger

log = logging.getLogger(__name__)

RUNNERS: dict[str, Callable[[StageRun], StageResult]] = {
    Stage.PLAN: plan.run,
    Stage.FETCH: fetch.run,
    Stage.UPDATE: update.run,
}
RESULTS: dict[str, type[StageResult]] = {
    Stage.PLAN: plan.PlanResult,
    Stage.FETCH: fetch.FetchResult,
    Stage.UPDATE: update.UpdateResult,
}


def should_run(states: States, gen: int, stage: str, force: bool = False) -> bool:
    """Whether ``stage`` of ``gen`` runs now: False when it is already done (and not forced);
    StageOrderError when its prerequisite is not done; ValueError for an unknown stage."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are: {', '.join(STAGES)}")
    if states.get((gen, stage)) == StageState.DONE and not force:
        return False
    before = stage_order.prerequisite(gen, stage)
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
    db: Db,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    ledger: Ledger | None = None,
    if_work: bool = False,
    reextract: bool = False,
) -> StageResult | None:
    """Run one stage of one generation; None when it was already done (and not forced).

    ``ledger`` (``generations.read_ledger``), when the caller has just read it, spares a read
    of the generations table; it is updated with this stage's run. ``if_work``: a first plan
    that plans nothing records nothing (`_run_stage`).
    """
    return _run_stage(db, cfg, gen, stage, force, ledger, if_work=if_work, reextract=reextract)[0]


def _run_stage(
    db: Db,
    cfg: Config,
    gen: int,
    stage: str,
    force: bool = False,
    ledger: Ledger | None = None,
    started: Started | None = None,
    then: str | None = None,
    if_work: bool = False,
    reextract: bool = False,
) -> tuple[StageResult | None, Started | None]:
    """`run_stage`, plus: ``started``, this run's running row as the previous stage's done
    commit recorded it; ``then``, a stage of the same generation to start next, whose running
    row goes into this stage's done commit (it is returned as the next call's ``started``);
    ``if_work``: a first plan that plans nothing records nothing (its crawldb changes stay:
    a later plan of the same generation starts from them), and the result says so
    (``planned`` 0, no ``then``).

    A first plan records no running row: its writes are safe to repeat without one (the
    fetchlist append carries a Delta transaction id, crawldb's changes are guarded), so a
    plan that finds nothing to do leaves the ledger as it was.

    Before it writes anything, the stage checks that no table is behind the versions the
    ledger recorded (`crawllib.store.integrity`); its done row records the versions after it.
    """
    if ledger is None:
        ledger = generations.read_ledger(db)
    states = ledger.states
    if not should_run(states, gen, stage, force):
        log.info("gen %d %s: already done, skipped", gen, stage)
        return None, None
    before = integrity.verify(db, ledger.versions, ledger.recorded_by)
    ledger_commits = 1  # the done row (with the next stage's running row, when chained)
    if started is not None and (started.gen, started.stage) == (gen, stage):
        at = started.at
        run = StageRun(
            db,
            cfg,
            gen,
            first=started.first,
            previous=started.previous,
            frontier_open=(gen + 1, Stage.PLAN) not in states,
            force=force,
            started_at=at,
            reextract=reextract,
        )
    else:
        # Never started before: no table holds rows of this stage run yet, so the stage may
        # append where a rerun has to replace. "running" is recorded before the stage writes
        # (but by a first plan, whose appends are idempotent by themselves).
        at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        # an older root's parse of gen wrote what update writes now: not a first run
        first = (gen, stage) not in states and not (
            stage == Stage.UPDATE and (gen, Stage.PARSE) in states
        )
        run = StageRun(
            db,
            cfg,
            gen,
            first=first,
            frontier_open=(gen + 1, Stage.PLAN) not in states,
            force=force,
            started_at=at,
            reextract=reextract,
        )
        if not (first and stage == Stage.PLAN):
            generations.record(db, gen, stage, StageState.RUNNING, at)
            ledger_commits += 1
    states[(gen, stage)] = StageState.RUNNING
    t0 = time.monotonic()
    log.info("gen %d %s: started", gen, stage)
    with db.job_group(f"gen {gen} {stage}") as group:
        try:
            result = RUNNERS[stage](run)
        except BaseException:
            generations.record(db, gen, stage, StageState.FAILED, at)
            states[(gen, stage)] = StageState.FAILED
            raise
        versions = integrity.current_versions(db)
        cost = metrics.cost_between(db, group, before, versions, ledger_commits)
    if if_work and run.first and isinstance(result, plan.PlanResult) and not result.planned:
        log.info("gen %d plan: nothing to plan now; nothing recorded", gen)
        states.pop((gen, stage), None)
        return result, None
    following = None
    chain = (gen, then) if then and states.get((gen, then)) != StageState.DONE else None
    counts = {**result.as_counts(), **cost.as_counts()}
    finished = generations.record(db, gen, stage, StageState.DONE, at, counts, chain, versions)
    states[(gen, stage)] = StageState.DONE
    ledger.versions, ledger.recorded_by = versions, f"gen {gen} {stage}"
    if chain:
        following = Started(gen, chain[1], finished, chain not in states, result)
        states[chain] = StageState.RUNNING
    # the stage's own log line names its counts
    log.info(
        "gen %d %s: done in %.1fs (%s engine); %d Spark jobs, %d Delta commits",
        gen,
        stage,
        time.monotonic() - t0,
        db.engine,
        cost.jobs,
        sum(cost.commits.values()) + cost.ledger_commits,
    )
    return result, following


def run_generation(
    db: Db,
    cfg: Config,
    gen: int | None = None,
    ledger: Ledger | None = None,
    if_work: bool = False,
) -> int | None:
    """Run every stage of one generation (the next due when gen is None); return its number,
    or None when ``if_work`` and its plan planned nothing (nothing recorded, no other stage
    run: a generation that would fetch nothing is not run).

    The generations table is read once (or not at all when ``ledger`` is given): this
    process is the one running the generation's stages, so it tracks them itself.
    A stage's ``done`` row and the next stage's ``running`` row are one commit.
    """
    if ledger is None:
        ledger = generations.read_ledger(db)
    if gen is None:
        gen = stage_order.next_gen(ledger.states)
    started = None
    for i, stage in enumerate(STAGES, start=1):
        then = STAGES[i] if i < len(STAGES) else None
        result, started = _run_stage(
            db,
            cfg,
            gen,
            stage,
            ledger=ledger,
            started=started,
            then=then,
            if_work=if_work,
        )
        if if_work and stage == Stage.PLAN and result is not None and started is None:
            return None  # planned nothing
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


def nothing_left(db: Db, cfg: Config, gen: int, states: States) -> bool:
    """Whether nothing is due at ``gen`` now: no stage of it has run, and planning it would
    choose nothing (`plan.has_work`). A generation started is finished whatever it holds."""
    partly_done = any((gen, s) in states for s in STAGES)
    return not partly_done and not plan.has_work(db, cfg, gen)


def run_crawl(
    db: Db,
    cfg: Config,
    seeds: str | None,
    generations_wanted: int | None = None,
    wait: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    on_idle: Callable[[str], None] | None = None,
) -> list[int]:
    """Init if needed, seed, then run generations while something is due now: URLs queued,
    retries whose time has come, revisits due, new URLs within crawl.max_depth, on hosts the
    hosts table does not hold back (`plan.has_work`); or until ``generations_wanted`` are done
    when it is given. A generation whose plan would fetch nothing is never run. When nothing is
    due it logs what the URLs left wait for and when the first is due (`describe_waits`),
    and with ``wait`` sleeps until then and goes on (never with a fixed crawl.now).
    ``on_idle`` receives that line (the CLI prints it).

    Returns the generations run now; empty when the crawl had already done them (or has
    nothing due).
    """
    integrity.check_root(db)  # before the first write: init's upgrades, seeds
    created = db.init_tables(upgrade=True)
    if created:
        log.info("initialised crawl root %s", normalize_root(db.root))
    # Read once: from here on this process is the one recording stage runs, and
    # run_generation keeps the ledger up to date.
    ledger = generations.read_ledger(db)
    states = ledger.states
    if seeds:
        report = seeding.seed(db, seeds, cfg, stage_order.next_seed_gen(states))
        for r in report.rejected:
            log.warning("%s: invalid seed %r: %s", r.where, r.text, r.reason)
        log.info(
            "seeds: %d valid, %d new, %d invalid", report.valid, report.added, len(report.rejected)
        )
    ran = []
    while True:
        gen = stage_order.next_gen(states)
        if generations_wanted is not None and gen >= generations_wanted:
            break
        idle = nothing_left(db, cfg, gen, states)
        if not idle:
            fresh = not any((gen, s) in states for s in STAGES)
            idle = run_generation(db, cfg, gen, ledger=ledger, if_work=fresh) is None
            if not idle:
                ran.append(gen)
                continue
        waiting = plan.waits(db, cfg, gen)
        now = plan.clock_now(cfg)
        line = describe_waits(waiting, now)
        log.info("gen %d: %s", gen, line)
        if on_idle is not None:
            on_idle(line)
        due = min((w.due for w in waiting if w.due is not None), default=None)
        if not wait or due is None or parse_now(cfg.crawl.now) is not None:
            break
        log.info("waiting %.0f s for the next URL due", max(0.0, due - now))
        sleep(max(0.0, due - now))
    return ran


_WAIT_WORDS = {
    Waiting.RETRY: "a retry",
    Waiting.RETRY_AFTER: "a Retry-After",
    Waiting.DOWN: "a host's cool-down",
    Waiting.ROBOTS: "a robots.txt retry",
    Waiting.CRAWL_DELAY: "a Crawl-delay above politeness.max_crawl_delay",
    Waiting.REVISIT: "their revisit",
}


def describe_waits(waiting: Iterable[plan.Wait], now: float) -> str:
    """One line: nothing is due now; how many URLs wait, for what, the earliest of each, and
    when the first is due ("the crawl is complete" when nothing waits)."""
    waiting = list(waiting)
    if not waiting:
        return "nothing left to fetch within crawl.max_depth: the crawl is complete"

    def when(at: float | None) -> str:
        if at is None:
            return "no end"
        stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{stamp}, in {_duration(at - now)}" if at > now else f"{stamp}, now"

    parts = [
        f"{w.urls} URL{'s' if w.urls != 1 else ''} wait for {_WAIT_WORDS.get(w.reason, w.reason)}"
        + (f" (first due {when(w.due)})" if w.due is not None else "")
        for w in waiting
    ]
    due = min((w.due for w in waiting if w.due is not None), default=None)
    tail = f"; the next is due {when(due)} (`crawl run --wait` waits for it)" if due else ""
    return "nothing due now: " + "; ".join(parts) + tail


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"
