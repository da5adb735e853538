"""What every stage takes and returns: a :class:`StageRun` in, a :class:`StageResult` out.

A stage's ``run(run: StageRun) -> <Stage>Result`` reads and writes through the run, so the
rules that hold for every stage live here once:

- ``first``: no run of this stage has ever started for this generation (the generations table
  has no row of it; ``running`` is recorded before the stage writes anything). Such a run has
  nothing of its own to replace, so :meth:`StageRun.replace_own` appends, which is cheaper
  than a ``replaceWhere``; any later run (a rerun after a crash, or ``--force``) replaces.
- ``previous``: the result of the stage before it, when that ran in the same process just
  before (``crawl generation``, ``crawl run``): what it knows need not be read back.
- ``force``: asked to run although done (``--force``).
- ``reextract``: update extracts every page of the generation again from its raw pages
  (``crawl parse --force``), without refetching.
- ``started_at``: when this run started (its ``running`` row's started_at), if known.
- ``frontier_open``: the next generation has not been planned yet. Once it has, its frontier
  rows were consumed (their URLs are in crawldb), so a rerun of parse or update (``--force``)
  leaves them as they are: recomputed now they would shrink to the URLs crawldb does not know.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import ClassVar, Self

from crawllib.config import Config
from crawllib.core.output import counts_line
from crawllib.store import generations
from crawllib.store.db import Db, Rel


@dataclasses.dataclass(frozen=True)
class StageResult:
    """A stage's counts: one int field per count, as recorded in ``generations.counts``."""

    # The count that measures the stage's throughput (items per second in `crawl status`).
    THROUGHPUT: ClassVar[str] = ""

    def as_counts(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def __str__(self) -> str:
        """The non-zero counts in one line (``planned 39, hosts 12``), what logs print; the
        dataclass repr stays for debugging."""
        return counts_line(self.as_counts())

    @classmethod
    def nothing(cls) -> Self:
        """The result of a run that had nothing to do: every count 0."""
        return cls(**{f.name: 0 for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class StageRun:
    """One run of one stage for generation ``gen`` of the crawl at ``root``."""

    db: Db
    cfg: Config
    gen: int
    first: bool = False
    previous: StageResult | None = None
    frontier_open: bool = True
    force: bool = False
    started_at: dt.datetime | None = None  # this run's start, as its running row records it
    reextract: bool = False  # update: extract every page again from the raw pages

    def first_started(self, stage: str) -> float:
        """When ``stage`` first started for this generation, epoch seconds: this run's start
        if it is the first, else the earliest generations row of (gen, stage); now if none.
        What a rerun must see as a first run saw it (plan's clock, the fetch deadline)."""
        if self.first and self.started_at is not None:
            return self.started_at.replace(tzinfo=dt.UTC).timestamp()
        starts = [
            r.started_at
            for r in generations.read_rows(self.db)
            if r.gen == self.gen and r.stage == stage
        ]
        first = min(starts) if starts else dt.datetime.now(dt.UTC).replace(tzinfo=None)
        return first.replace(tzinfo=dt.UTC).timestamp()

    @property
    def root(self) -> str:
        return self.db.root

    def read(self, name: str, where: str | None = None) -> Rel:
        """The table ``name`` (its rows matching ``where``) as it is now."""
        return self.db.table(name, where)

    def sql(self, query: str, **inputs: Rel) -> Rel:
        return self.db.sql(query, **inputs)

    def replace_own(self, rel: Rel, name: str, where: str) -> None:
        """Write ``rel`` as this stage's rows of table ``name``, the rows matching ``where``:
        replaced on a rerun, appended by a first run (there is nothing to replace)."""
        if self.first:
            self.db.append(rel, name)
        else:
            self.db.replace_where(rel, name, where)
