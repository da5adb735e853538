"""Which generation is where: the ``generations`` table (one row per stage run and state).

A stage run appends a ``running`` row when it starts and a ``done`` (with counts) or ``failed``
row when it ends; the latest row of a (gen, stage) is its state (:func:`latest_of`, the one
rule that `crawl status` and the scheduler share). When one process runs stage after stage, a
``done`` row and the next stage's ``running`` row are one commit (`record`'s ``then``). Counts
go here, not into Spark accumulators, so a retried task never counts twice.

The scheduling rules over those states are pure functions of them: :func:`prerequisite`,
:func:`next_gen`, :func:`due_gen`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping

from pyspark.sql import SparkSession

from crawllib import tables
from crawllib.schemas import GENERATIONS
from crawllib.vocab import STAGES, Stage, StageState

States = dict[tuple[int, str], str]  # (gen, stage) -> state of its latest row


@dataclasses.dataclass(frozen=True)
class RunRow:
    """One row of the generations table."""

    gen: int
    stage: str
    state: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    seconds: float | None = None
    counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    versions: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def at(self) -> tuple[dt.datetime, bool]:
        """When this row's event happened (its finish, else its start); a finish sorts after
        a start at the same instant (a run's own ``running`` and ``done`` rows)."""
        return (self.finished_at or self.started_at, self.finished_at is not None)


def latest_of(rows: Iterable[RunRow]) -> dict[tuple[int, str], RunRow]:
    """(gen, stage) -> its latest row: the last event wins, so a ``--force`` rerun that is
    running, or crashed, makes its stage not done again until it finishes."""
    latest: dict[tuple[int, str], RunRow] = {}
    for row in rows:
        key = (row.gen, row.stage)
        if key not in latest or row.at > latest[key].at:
            latest[key] = row
    return latest


def read_rows(spark: SparkSession, root: str) -> list[RunRow]:
    """Every row of the table. It holds a few rows per stage run, so it is collected and
    reduced on the driver: a Spark aggregation would cost a shuffle on every call."""
    return [
        RunRow(
            r["gen"],
            r["stage"],
            r["state"],
            r["started_at"],
            r["finished_at"],
            r["seconds"],
            dict(r["counts"] or {}),
            dict(r.asDict().get("versions") or {}),  # absent from an older crawl's table
        )
        for r in tables.read(spark, root, "generations").collect()
    ]


def latest_runs(spark: SparkSession, root: str) -> dict[tuple[int, str], RunRow]:
    """(gen, stage) -> its latest row, read from the table."""
    return latest_of(read_rows(spark, root))


def stage_states(spark: SparkSession, root: str) -> States:
    """(gen, stage) -> state of its latest row."""
    return {key: row.state for key, row in latest_runs(spark, root).items()}


@dataclasses.dataclass
class Ledger:
    """What the generations table says, as the process that writes it keeps track: each stage
    run's state, and the table versions the latest recording row holds (``recorded_by``
    names it: "gen 3 fetch")."""

    states: States
    versions: dict[str, int]
    recorded_by: str = ""


def ledger_of(rows: Iterable[RunRow]) -> Ledger:
    rows = list(rows)
    states = {key: row.state for key, row in latest_of(rows).items()}
    recorded = [row for row in rows if row.versions]
    if not recorded:
        return Ledger(states, {})
    last = max(recorded, key=lambda row: row.at)
    return Ledger(states, dict(last.versions), f"gen {last.gen} {last.stage}")


def read_ledger(spark: SparkSession, root: str) -> Ledger:
    return ledger_of(read_rows(spark, root))


def prerequisite(gen: int, stage: str) -> tuple[int, str] | None:
    """The stage run that must be done before ``stage`` of ``gen`` may run: the stage before
    it, or the previous generation's update for plan (none for plan of generation 0)."""
    i = STAGES.index(stage)
    if i > 0:
        return gen, STAGES[i - 1]
    return (gen - 1, Stage.UPDATE) if gen > 0 else None


def next_gen(states: States) -> int:
    """The generation due: the first one started and not fully done (its update), else the
    one after the last done (0 on a new crawl)."""
    done = {g for (g, s), st in states.items() if s == Stage.UPDATE and st == StageState.DONE}
    for gen in sorted({g for (g, s) in states if s in STAGES}):
        if gen not in done:
            return gen
    return max(done) + 1 if done else 0


def last_done(states: States) -> int | None:
    """The latest generation whose update is done; None before the first is."""
    done = [g for (g, s), st in states.items() if s == Stage.UPDATE and st == StageState.DONE]
    return max(done) if done else None


def due_gen(states: States, stage: str) -> int:
    """The generation a stage should run next (``--gen next``): the first whose prerequisite
    is done and whose own run is not; when none is, the last it has done (running it again
    is then reported as already done)."""
    if stage == Stage.PLAN:
        return next_gen(states)
    before = STAGES[STAGES.index(stage) - 1]
    ready = sorted(
        g
        for (g, s), st in states.items()
        if s == before and st == StageState.DONE and states.get((g, stage)) != StageState.DONE
    )
    if ready:
        return ready[0]
    done = [g for (g, s), st in states.items() if s == stage and st == StageState.DONE]
    return max(done) if done else 0


def next_seed_gen(states: States) -> int:
    """The first generation not yet planned: new seeds join it."""
    planned = [gen for (gen, stage) in states if stage == Stage.PLAN]
    return max(planned) + 1 if planned else 0


def record(
    spark: SparkSession,
    root: str,
    gen: int,
    stage: str,
    state: str,
    started_at: dt.datetime,
    counts: Mapping[str, int] | None = None,
    then: tuple[int, str] | None = None,
    versions: Mapping[str, int] | None = None,
) -> dt.datetime:
    """Append a stage run's row: ``running`` (no finish), ``done`` or ``failed`` (finished
    now); return now, as the row has it.

    then: (gen, stage) of the stage run that starts next in this process, as this one
    finishes: its ``running`` row (started_at: this row's finished_at) is appended in the
    same commit (one commit for two). The commit's Delta ``userMetadata`` names its rows
    ("gen 3 fetch done, gen 3 parse running"), so `DESCRIBE HISTORY` shows which stage runs
    each version recorded. versions: the tables' Delta versions after this stage's commits.
    """
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    finished = None if state == StageState.RUNNING else now
    seconds = (finished - started_at).total_seconds() if finished else None
    counts_map = {k: int(v) for k, v in (counts or {}).items()}
    versions_map = {k: int(v) for k, v in (versions or {}).items()} or None
    rows = [(gen, stage, state, started_at, finished, seconds, counts_map, versions_map)]
    if then:
        rows.append((then[0], then[1], StageState.RUNNING, now, None, None, {}, None))
    df = spark.createDataFrame(rows, GENERATIONS)
    note = ", ".join(f"gen {r[0]} {r[1]} {r[2]}" for r in rows)
    tables.append(df, root, "generations", note=note)
    return now
