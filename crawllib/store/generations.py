"""Which generation is where: the ``generations`` table (one row per stage run and state).

A stage run appends a ``running`` row when it starts and a ``done`` (with counts) or ``failed``
row when it ends; the latest row of a (gen, stage) is its state (``latest_of``, the one rule
that `crawl status` and the scheduler share, in crawllib.core.stage_order). When one process
runs stage after stage, a ``done`` row and the next stage's ``running`` row are one commit
(`record`'s ``then``). Counts go here, not into Spark accumulators, so a retried task never
counts twice.

The scheduling rules over those states are pure functions of them, in crawllib.core.stage_order
(prerequisite, next_gen, due_gen): the Spark jobs and an orchestrator's worker share them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping

from crawllib.core.stage_order import RunRow, States, latest_of
from crawllib.core.vocab import StageState
from crawllib.store.db import Db
from crawllib.store.schemas import GENERATIONS


def read_rows(db: Db) -> list[RunRow]:
    """Every row of the table. It holds a few rows per stage run, so it is collected and
    reduced here: a Spark aggregation would cost a shuffle on every call."""
    return [RunRow.of(r) for r in db.collect(db.table("generations"))]


def latest_runs(db: Db) -> dict[tuple[int, str], RunRow]:
    """(gen, stage) -> its latest row, read from the table."""
    return latest_of(read_rows(db))


def stage_states(db: Db) -> States:
    """(gen, stage) -> state of its latest row."""
    return {key: row.state for key, row in latest_runs(db).items()}


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


def read_ledger(db: Db) -> Ledger:
    return ledger_of(read_rows(db))


def record(
    db: Db,
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
    ("gen 3 fetch done, gen 3 update running"), so `DESCRIBE HISTORY` shows which stage runs
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
    note = ", ".join(f"gen {r[0]} {r[1]} {r[2]}" for r in rows)
    rel = db.rows([dict(zip(GENERATIONS.names, r, strict=True)) for r in rows], GENERATIONS)
    db.append(rel, "generations", note=note)
    return now
