"""Stop fetching when the process that started this one is gone: a Spark executor lost.

A fetch task runs in a PySpark worker, a Python process below its executor's JVM (with the
worker daemon, Spark's default: JVM -> ``pyspark.daemon`` -> worker). When that JVM dies (the
OOM killer, a lost node, ``kill -9``), Spark runs the task again elsewhere; a worker that went
on fetching would be a second fetcher on the same hosts, and its output goes nowhere.

:class:`Watcher` is a thread that looks, every ``CHECK_SECONDS``, at the process's ancestors
from its parent up to the first one that is not this Python (the JVM): the parent changing
(``os.getppid()``), or one of them exiting or becoming a zombie, means the JVM is gone. It then
calls what was registered with :meth:`Watcher.on_lost` (the engine's cancel: in-flight
requests are dropped) and ends the process with ``os._exit``: no output, no journal write,
nothing flushed.

A check reads ``/proc/<pid>/stat`` of the watched processes (Linux); elsewhere only
``os.getppid()`` is watched, which sees the worker's parent go.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType

log = logging.getLogger(__name__)

CHECK_SECONDS = 0.2  # a lost JVM is noticed within this (the issue asks for about a second)
CANCEL_SECONDS = 0.5  # at most this long for the on_lost callbacks before the process ends
EXIT_CODE = 75  # EX_TEMPFAIL: nobody reads it (the JVM is gone), but a log line may


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a process, None if it has gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[19])


def _exe(pid: int) -> str | None:
    try:
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        return None


def ancestors() -> list[tuple[int, int]]:
    """(pid, start time) of this process's parent and of its ancestors up to and including the
    first that does not run this Python (the JVM of a PySpark worker, or of its daemon); []
    where /proc cannot tell (then only the parent pid is watched)."""
    me = _exe(os.getpid())
    if me is None or _stat(os.getpid()) is None:
        return []
    chain: list[tuple[int, int]] = []
    pid = os.getppid()
    while pid > 1:
        stat = _stat(pid)
        if stat is None:
            break
        chain.append((pid, stat[2]))
        if _exe(pid) != me:
            break
        pid = stat[1]
    return chain


def _gone(pid: int, started: int) -> bool:
    stat = _stat(pid)
    # a zombie has exited (its parent has not reaped it yet); another start time: pid reused
    return stat is None or stat[0] in ("Z", "X") or stat[2] != started


class Watcher:
    """A thread that ends this process once its JVM is gone (see the module's text).

    Use as a context manager around the work; ``exit`` is what ends the process (a test may
    pass another). ``lost`` is set once the loss is seen, before the callbacks run.
    """

    def __init__(
        self,
        interval: float = CHECK_SECONDS,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        self.interval = interval
        self._exit = exit
        self.parent = os.getppid()
        self.watched = ancestors()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None
        self.checks = 0

    def on_lost(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from the watcher's thread) once the JVM is gone; returns a
        function that unregisters it."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def jvm_gone(self) -> bool:
        """Whether the parent changed or a watched ancestor exited."""
        if os.getppid() != self.parent:
            return True
        return any(_gone(pid, started) for pid, started in self.watched)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.checks += 1
            if not self.jvm_gone():
                continue
            self.lost.set()
            with contextlib.suppress(OSError):  # stderr was a pipe to the JVM: maybe closed
                print(
                    f"crawllib: the process that started this one (pid {self.parent}) is "
                    "gone: the fetch stops, nothing written",
                    file=sys.stderr,
                    flush=True,
                )
            done = threading.Thread(target=self._call_back, daemon=True)
            done.start()
            done.join(CANCEL_SECONDS)
            self._exit(EXIT_CODE)
            return

    def _call_back(self) -> None:
        for callback in list(self._callbacks):
            with contextlib.suppress(Exception):
                callback()

    def __enter__(self) -> Watcher:
        self._thread = threading.Thread(target=self._run, name="crawllib-jvm-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
