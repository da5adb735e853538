"""One attempt of a fetch task: the engine run with its watcher and its journal.

:func:`task_records` is what a fetch task does with the rows of its partition, minus Spark: the
partition function (``crawllib.transforms.fetch_inputs.partition_fetcher``) calls it with the task's
partition and attempt number, and a test calls it directly in a process of its own.

- ``watch``: a :class:`~crawllib.engine.watch.Watcher` ends the process once its parent (the
  executor's JVM) is gone; the engine's requests in flight are cancelled, nothing is written.
- ``journal``: the task's journal (``crawllib.store.journal``). The attempt waits while another
  attempt of the task holds it, yields what earlier attempts wrote there, and fetches only the
  rest, writing what it fetches every ``journal.seconds``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from crawllib.config import Config
from crawllib.core.records import EngineRecord, HostState
from crawllib.engine.follow import Owner
from crawllib.engine.stream import fetch_rows
from crawllib.engine.watch import Watcher
from crawllib.store.journal import DONE, JournalSpec, TaskJournal


def task_records(
    urls: list[dict[str, Any]],
    cfg: Config,
    robots: Iterable[Mapping[str, Any]] = (),
    follow: Iterable[Mapping[str, Any]] = (),
    hosts: Iterable[HostState] = (),
    *,
    attempt: int = 0,
    journal: JournalSpec | None = None,
    partitions: int = 1,
    partition: int = 0,
    watch: bool = True,
    deadline_seconds: float | None = None,
    owner: Owner | None = None,
) -> Iterator[EngineRecord]:
    """The engine's records for ``urls`` (and the other engine inputs: crawllib.engine.stream),
    as this attempt (``attempt``: 0 for the first) of task ``partition`` of ``partitions``
    yields them; see the module's text. ``owner``: the new slots the task may take
    (crawllib.engine.follow.Owner)."""
    with contextlib.ExitStack() as stack:
        watcher = stack.enter_context(Watcher()) if watch else None
        kept = None
        if journal is not None:
            kept = TaskJournal.open(journal, cfg, partitions, partition, watcher)
        if kept is not None and kept.complete:
            kept.close(DONE)
            yield from kept.stored()
            return
        # A retried attempt's hosts may have been requested by the failed one an instant ago;
        # so may those of an attempt that follows another in the journal (a stage's new
        # attempt, or a lost partition computed again, counts its attempts from 0).
        records = fetch_rows(
            urls,
            cfg,
            robots,
            follow_rows=follow,
            host_rows=hosts,
            retried=attempt > 0 or (kept is not None and kept.earlier),
            resume=kept.resume if kept is not None else None,
            checkpoint_seconds=kept.seconds if kept is not None else 0.0,
            on_request=kept.requested if kept is not None else None,
            watcher=watcher,
            deadline_seconds=deadline_seconds,
            owner=owner,
        )
        if kept is not None:
            records = itertools.chain(kept.stored(), kept.journaled(records))
        yield from records
