"""``fetch_rows``: the engine as a plain iterator, for a Spark ``mapPartitions`` function.

The asyncio loop runs in a background thread; records come back through a queue bounded both
in records and in body bytes (``MAX_QUEUED_RECORDS``, ``MAX_QUEUED_BYTES``), so a slow consumer
slows the fetchers down instead of letting fetched pages pile up in memory. Closing the
iterator early cancels the fetch and waits for the thread to finish; so does a ``watcher``
(:mod:`crawllib.engine.watch`) that sees the process's JVM gone, before it ends the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from crawllib.config import Config
from crawllib.core.records import EngineRecord, HostState, Resume
from crawllib.engine.engine import fetch_async
from crawllib.engine.follow import Owner
from crawllib.engine.watch import Watcher

MAX_QUEUED_RECORDS = 256
MAX_QUEUED_BYTES = 64 * 1024 * 1024
_DONE = object()


class _Budget:
    """An asyncio gate on records and bytes handed to the consumer thread but not yet taken."""

    def __init__(self, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records = 0
        self.bytes = 0
        self.freed = asyncio.Event()

    async def take(self, size: int) -> None:
        while self.records and (
            self.records >= self.max_records or self.bytes + size > self.max_bytes
        ):
            self.freed.clear()
            await self.freed.wait()
        self.records += 1
        self.bytes += size

    def give_back(self, records: int, size: int) -> None:
        """Called in the loop's thread (``call_soon_threadsafe``) once records were consumed."""
        self.records -= records
        self.bytes -= size
        self.freed.set()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _size(record: EngineRecord) -> int:
    body = record.get("body")
    return len(body) if isinstance(body, bytes | str) else 0


def fetch_rows(
    rows: Iterable[Mapping[str, Any]],
    cfg: Config,
    robots_rows: Iterable[Mapping[str, Any]] = (),
    now: Callable[[], float] = time.time,
    follow_rows: Iterable[Mapping[str, Any]] = (),
    host_rows: Iterable[HostState] = (),
    retried: bool = False,
    resume: Resume | None = None,
    checkpoint_seconds: float = 0.0,
    on_request: Callable[[int], object] | None = None,
    watcher: Watcher | None = None,
    deadline_seconds: float | None = None,
    owner: Owner | None = None,
) -> Iterator[EngineRecord]:
    """Fetch `rows` (see :mod:`crawllib.engine.engine`, also for ``resume``,
    ``checkpoint_seconds``, ``on_request``, ``deadline_seconds`` and ``owner``) and yield their fetch, robots and host records
    as they are produced. Raises only if the engine itself fails. ``watcher``: cancel the
    fetch when it sees the JVM gone."""
    rows = list(rows)  # read the partition here, not from the loop's thread
    robots_rows = list(robots_rows)
    follow_rows = list(follow_rows)
    host_rows = list(host_rows)
    # Records cross to this thread in batches, one per loop iteration at most: a thread
    # handoff per record would fight the fetch loop for the GIL.
    out: queue.SimpleQueue[Any] = queue.SimpleQueue()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        budget = _Budget(MAX_QUEUED_RECORDS, MAX_QUEUED_BYTES)
        batch: list[EngineRecord] = []
        state.update(budget=budget, task=asyncio.current_task(), loop=loop)
        ready.set()

        def flush() -> None:
            if batch:
                out.put(batch.copy())
                batch.clear()

        async def emit(record: EngineRecord) -> None:
            await budget.take(_size(record))
            if not batch:
                loop.call_soon(flush)
            batch.append(record)

        try:
            await fetch_async(
                rows,
                cfg,
                robots_rows,
                emit,
                now,
                follow_rows,
                host_rows,
                retried,
                resume,
                checkpoint_seconds,
                on_request,
                deadline_seconds,
                owner,
            )
        finally:
            flush()

    def run() -> None:
        try:
            asyncio.run(main())
            out.put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            out.put(_Failure(exc))
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="crawllib-fetch", daemon=True)
    thread.start()
    ready.wait()

    def cancel() -> None:
        """Cancel the engine's run (its requests in flight are dropped); from any thread."""
        if "task" in state:
            with contextlib.suppress(RuntimeError):  # the loop has finished already
                state["loop"].call_soon_threadsafe(state["task"].cancel)

    unwatch = watcher.on_lost(cancel) if watcher is not None else None
    finished = False
    try:
        while True:
            item = out.get()
            if item is _DONE:
                finished = True
                return
            if isinstance(item, _Failure):
                finished = True
                raise item.exc
            yield from item
            try:
                give_back = state["budget"].give_back
                state["loop"].call_soon_threadsafe(give_back, len(item), sum(map(_size, item)))
            except RuntimeError:  # the loop has finished: nobody waits for room any more
                pass
    finally:
        if unwatch is not None:
            unwatch()
        if not finished and thread.is_alive():
            cancel()
        thread.join()
