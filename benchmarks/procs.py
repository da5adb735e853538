"""CPU seconds and peak memory of a process tree (this process, its JVM, the engine's Python
workers).

A background thread samples the tree every ``interval`` seconds (psutil). Peak memory is the
kernel's high-water mark (``VmHWM`` in ``/proc/PID/status``), so a spike between two samples
still counts; CPU is user + system seconds since the sampler started (for a process born later:
since its birth). Processes are grouped by role:

- ``driver``: the root process (the benchmark's Python: Spark's driver, or the embedded
  engine itself, DuckDB and delta-rs in this process);
- ``jvm``: Java processes (in ``local[N]`` the JVM is both Spark driver and executor);
- ``python_workers``: the engine's Python workers: Python processes under the JVM (PySpark's
  daemon and its forked workers), or the embedded engine's worker processes
  (``python -m crawllib.store.workers``, WORKER_MODULE), and the processes those start (a
  fetch task's extraction process, whose peak is also told apart: ``extraction_peak_rss``);
- ``other``: anything else (the test web when it is a child process, Scrapy, ...).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import psutil

ROLES = ("driver", "jvm", "python_workers", "other")
# What the embedded engine's worker processes run (crawllib.store.workers).
WORKER_MODULE = "crawllib.store.workers"
# What a fetch task's extraction processes run (crawllib.content.extract_worker).
EXTRACTION_MODULE = "crawllib.content.extract_worker"


@dataclass
class _Proc:
    role: str
    cpu0: float
    cpu: float = 0.0
    hwm: int = 0
    extraction: bool = False


@dataclass
class TreeFigures:
    """What a :class:`ProcessTree` saw: per role, CPU seconds, the largest single-process peak
    and the sum of peaks (an upper bound on the role's footprint at once), in bytes."""

    cpu: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    sum_peak_rss: dict[str, int] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    # python_workers told apart: the largest engine worker that is no extraction process, and
    # the largest extraction process (each has its own limit: the fetch's, extract.max_memory_mb)
    worker_peak_rss: int = 0
    extraction_peak_rss: int = 0

    def total_cpu(self, *roles: str) -> float:
        return sum(self.cpu.get(r, 0.0) for r in roles or ROLES)


class ProcessTree:
    """Context manager sampling ``pid``'s tree (default: this process)."""

    def __init__(self, pid: int | None = None, interval: float = 0.05) -> None:
        self.root = psutil.Process(pid or os.getpid())
        self.interval = interval
        self._procs: dict[tuple[int, float], _Proc] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-procs", daemon=True)
        self._lock = threading.Lock()
        self._started = 0.0

    def __enter__(self) -> ProcessTree:
        self._started = time.time()
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def figures(self) -> TreeFigures:
        with self._lock:
            procs = list(self._procs.values())
        out = TreeFigures()
        for role in ROLES:
            mine = [p for p in procs if p.role == role]
            out.cpu[role] = sum(max(0.0, p.cpu - p.cpu0) for p in mine)
            out.peak_rss[role] = max((p.hwm for p in mine), default=0)
            out.sum_peak_rss[role] = sum(p.hwm for p in mine)
            out.processes[role] = len(mine)
        workers = [p for p in procs if p.role == "python_workers"]
        out.worker_peak_rss = max((p.hwm for p in workers if not p.extraction), default=0)
        out.extraction_peak_rss = max((p.hwm for p in workers if p.extraction), default=0)
        return out

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self, first: bool = False) -> None:
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        for proc in tree:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    times = proc.cpu_times()
                    cpu = times.user + times.system
                    entry = self._procs.get(key)
                    if entry is None:
                        born_before = first or proc.create_time() < self._started
                        entry = _Proc(
                            self._role(proc),
                            cpu0=cpu if born_before else 0.0,
                            extraction=EXTRACTION_MODULE in proc.cmdline(),
                        )
                    entry.cpu = cpu
                    entry.hwm = max(entry.hwm, _hwm(proc))
            except psutil.Error:
                continue
            with self._lock:
                self._procs[key] = entry

    def _role(self, proc: psutil.Process) -> str:
        if proc.pid == self.root.pid:
            return "driver"
        name = proc.name().lower()
        if name.startswith("java"):
            return "jvm"
        if "python" in name and any(_is_worker_parent(p) for p in [proc, *proc.parents()]):
            return "python_workers"
        return "other"


def _is_worker_parent(proc: psutil.Process) -> bool:
    """Whether ``proc`` is the JVM or an embedded engine's worker process: every Python process
    at or under it is an engine worker."""
    return proc.name().lower().startswith("java") or WORKER_MODULE in proc.cmdline()


def _hwm(proc: psutil.Process) -> int:
    """Peak resident set size in bytes (``VmHWM``; the current RSS where /proc lacks it)."""
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return proc.memory_info().rss


def mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"
