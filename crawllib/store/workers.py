"""The embedded engine's worker processes: a partition's task (a fetch task, an extraction)
run in a process of its own, its result rows written as an Arrow file the engine reads.

One pool per engine (crawllib.store.embedded.EmbeddedDb), started on first use and kept for the
whole command (``crawl run`` runs many generations): each worker is ``python -m
crawllib.store.workers``, a fresh interpreter (nothing of the parent's DuckDB threads or
state, no re-import of the parent's main module) that imports the engine once and then runs
one task after another, each sent as a pickle on its stdin, answering with the path of the
file it wrote (or the error) on its stdout. A worker whose parent dies reads the end of its
stdin and exits; one running a fetch task stops within a second (crawllib.engine.watch, as a
Spark task whose executor is lost), so a killed crawl leaves no fetcher behind.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from crawllib.store.db import PartitionTask
from crawllib.store.schemas import Array, Map, Prim, Struct

# Rows per Arrow batch a worker writes: its memory holds one batch of bodies at most.
BATCH_ROWS = 256
# What a worker imports as it starts, before its first task.
PRELOAD = ("crawllib.engine.partition", "crawllib.engine.task", "pyarrow")
_HEADER = struct.Struct("!Q")


class WorkerFailed(RuntimeError):
    """A worker process died, or its task raised: the message says which and why."""


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crawllib.store.workers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, job: tuple[Any, ...]) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            _send(self.process.stdin, job)
            status, value = _receive(self.process.stdout)
        except (EOFError, BrokenPipeError, OSError) as exc:
            code = self.process.wait()
            raise WorkerFailed(f"a worker process died (exit status {code})") from exc
        if status != "ok":
            raise WorkerFailed(f"a worker's task failed:\n{value}")
        return str(value)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Pool:
    """Worker processes, at most ``size`` at once."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._workers: list[_Worker] = []

    def _ready(self, count: int) -> list[_Worker]:
        self._workers = [w for w in self._workers if w.alive()]
        while len(self._workers) < min(count, self.size):
            self._workers.append(_Worker())
        return self._workers[:count]

    def run(
        self,
        task: PartitionTask,
        groups: Mapping[int, list[dict[str, Any]]],
        schema: Struct,
        folder: str,
    ) -> list[str]:
        """Run ``task`` on each partition's rows (partition -> rows), ``size`` at once; the
        Arrow files their result rows went to (one per partition with rows). The first
        failure is raised once every partition has ended."""
        jobs = [
            (task, rows, partition, schema, os.path.join(folder, f"part-{partition}.arrow"))
            for partition, rows in sorted(groups.items())
            if rows
        ]
        if not jobs:
            return []
        workers = self._ready(len(jobs))
        results: dict[int, str] = {}
        errors: list[BaseException] = []
        lock = threading.Lock()
        queue = list(enumerate(jobs))

        def serve(worker: _Worker) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    index, job = queue.pop(0)
                try:
                    path = worker.call(job)
                except BaseException as exc:
                    with lock:
                        errors.append(exc)
                    return
                with lock:
                    results[index] = path

        threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        if len(results) != len(jobs):
            raise WorkerFailed("no worker process was left to run every task")
        return [results[i] for i in range(len(jobs))]

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self._workers = []


def run_partition(
    task: PartitionTask, rows: list[dict[str, Any]], partition: int, schema: Struct, path: str
) -> str:
    """In a worker: the task's result rows for ``rows``, written to the Arrow file ``path``
    in batches as they come."""
    import pyarrow as pa

    from crawllib.store.arrow import arrow_schema

    target = arrow_schema(schema)
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, target) as writer:
        for batch in _batches(task(rows, partition, 0, True), BATCH_ROWS):
            columns = list(zip(*batch, strict=True))
            arrays = [
                pa.array([_arrow_value(v, f.type) for v in column], type=target.field(f.name).type)
                for column, f in zip(columns, schema.fields, strict=True)
            ]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
    return path


def _batches(rows: Iterable[tuple], size: int) -> Iterator[list[tuple]]:
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _arrow_value(value: Any, t: Any) -> Any:
    """A result value as pyarrow takes it: maps as (key, value) pairs, nested values alike."""
    if value is None or isinstance(t, Prim):
        return value
    if isinstance(t, Map):
        return list(value.items()) if isinstance(value, dict) else value
    if isinstance(t, Array):
        return [_arrow_value(v, t.element) for v in value]
    if isinstance(t, Struct):
        items = value.values() if isinstance(value, dict) else value
        return tuple(_arrow_value(v, f.type) for v, f in zip(items, t.fields, strict=True))
    return value


def main() -> None:
    """A worker: tasks from stdin, one at a time, until it ends."""
    import importlib
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for module in PRELOAD:
        importlib.import_module(module)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # whatever a task prints must not corrupt the answers
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return
        try:
            answer = ("ok", run_partition(*job))
        except BaseException:
            answer = ("error", traceback.format_exc())
        _send(stdout, answer)


if __name__ == "__main__":
    main()
