"""Which generation and stage are due: pure rules over the generations table's rows.

No Spark and no I/O: the Spark jobs (crawllib.store.generations reads the table with Spark) and an
orchestrator's worker (crawllib.runs.orchestrator reads it with delta-rs) resolve ``--gen next``
with the same functions.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from crawllib.core.vocab import STAGES, Stage, StageState

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

    @classmethod
    def of(cls, r: Mapping[str, Any]) -> RunRow:
        """The row from a table row as a mapping (Spark's Row.asDict(), DuckDB's columns)."""
        return cls(
            r["gen"],
            r["stage"],
            r["state"],
            r["started_at"],
            r["finished_at"],
            r["seconds"],
            dict(r["counts"] or {}),
            dict(r.get("versions") or {}),  # absent from an older crawl's table
        )

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
