"""One page's extraction with a time and a memory limit: `crawllib.content.extract.extract_record`
in a child process, killed past ``extract.max_seconds`` (a Python thread cannot be stopped; a
process can) or past ``extract.max_memory_mb`` of resident memory.

The fetch engine's extraction threads and update's extraction UDF keep `Extractors` per process:
one `Extractor` per thread that extracts at once (a fetch task with more than one core has one
per core). Its child is a Python of its own (``python -m crawllib.content.extract_worker``: it imports
nothing of its parent's program), started on the first page; it serves page after page until
its parent ends, or until a page runs past a limit: then it is killed, and the next page
starts another. The parent samples the child's resident memory while it waits (every
TICK_SECONDS, from /proc: on Linux only), and again after each page: a child that grew past the
limit at rest (caches, a fragmented heap) is replaced before the next page, which pays no
error for it. A page allocates in C (lxml's tree) as much as in Python, which an address-space
limit inside the child would turn into failures anywhere in libxml2: the parent's sampling sees
all of it. A page costs its body's and its result's trip through a pipe; a child costs its
start (imports: about a second).

A page past the time limit gets a result with error ``extract_timeout: ...``, past the memory
limit ``extract_memory: ...``, a child that died (a crash, the system's OOM killer)
``extract_crashed: ...`` (`crawllib.core.vocab.ExtractFailure`): data, like any
page that cannot be read, and the caller goes on.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from crawllib.config import Config
from crawllib.content.extract import extract_record, failed_page, record_of
from crawllib.core.records import Extracted
from crawllib.core.vocab import ExtractFailure

log = logging.getLogger(__name__)

READY = "ready"  # what a child says once it can extract
TICK_SECONDS = 0.05  # how often the parent samples a working child's memory
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
STARTUP_SECONDS = 300.0  # a child that takes longer to start is a child that failed
WARM_UP = (
    b"<html lang=en><head><title>Warm-up</title><meta name=robots content=noindex></head>"
    b"<body><article><h1>Warm-up</h1><p>A paragraph of words, a sentence or two long, with "
    b"<a href=/next>a link</a>.</p></article></body></html>"
)


class Extractor:
    """`extract_record` of one page at a time in a child process, within cfg's
    ``extract.max_seconds`` and ``extract.max_memory_mb``; thread-safe (callers take turns)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.seconds = cfg.extract.max_seconds
        self.max_bytes = cfg.extract.max_memory_mb << 20
        self._child: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._lock = threading.Lock()

    def extract(
        self,
        body: bytes | None,
        url: str,
        charset: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> Extracted:
        with self._lock:
            try:
                if self._child is None:
                    self._start()
                assert self._send is not None and self._recv is not None
                self._send.send((body, url, charset, dict(headers) if headers else None))
                result = self._answer()
                if not isinstance(result, str):
                    if self._resident() > self.max_bytes:
                        log.info("extraction process past extract.max_memory_mb: restarted")
                        self._stop()
                    return result
                failure = result
            except (EOFError, OSError) as exc:  # the child is gone (or could not start)
                code = self._child.poll() if self._child is not None else None
                failure = (
                    f"{ExtractFailure.CRASHED}: the extraction's process ended "
                    f"(exit status {code}; {type(exc).__name__})"
                )
            self._stop()
        log.warning("extraction of %s: %s", url, failure)
        return record_of(failed_page(failure, self.cfg, headers))

    def _answer(self) -> Extracted | str:
        """The child's answer, or why it was stopped: past the time or the memory limit."""
        assert self._recv is not None
        deadline = time.monotonic() + self.seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._recv.poll(min(TICK_SECONDS, left)):
                result: Extracted = self._recv.recv()
                return result
            if self._resident() > self.max_bytes:
                return (
                    f"{ExtractFailure.MEMORY}: extraction used more than "
                    f"{self.max_bytes >> 20} MiB (extract.max_memory_mb) and was stopped"
                )
        return (
            f"{ExtractFailure.TIMEOUT}: extraction took longer than {self.seconds:g} s "
            "(extract.max_seconds) and was stopped"
        )

    def _resident(self) -> int:
        """The child's resident memory in bytes; 0 where /proc cannot say (not Linux, gone)."""
        if self._child is None:
            return 0
        try:
            with open(f"/proc/{self._child.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * PAGE_BYTES
        except (OSError, ValueError, IndexError):
            return 0

    def start(self) -> None:
        """Start the child now if it is not running (its imports take a second of CPU: a
        caller whose timing matters starts it before)."""
        with self._lock:
            if self._child is None:
                try:
                    self._start()
                except OSError:  # the first page will try again, and say so
                    self._stop()

    def _start(self) -> None:
        # the child imports crawllib from where this process does (--py-files on a cluster)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        child = subprocess.Popen(
            [sys.executable, "-m", "crawllib.content.extract_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        self._send = Connection(os.dup(child.stdin.fileno()), readable=False)
        self._recv = Connection(os.dup(child.stdout.fileno()), writable=False)
        child.stdin.close()
        child.stdout.close()
        self._child = child
        self._send.send(self.cfg)
        # its start (imports) is not the first page's time: it says when it is ready
        if not self._recv.poll(STARTUP_SECONDS) or self._recv.recv() != READY:
            raise OSError(f"the extraction process did not start within {STARTUP_SECONDS} s")

    def _stop(self) -> None:
        child, send, recv = self._child, self._send, self._recv
        self._child = self._send = self._recv = None
        for conn in (send, recv):
            if conn is not None:
                conn.close()
        if child is not None:
            child.kill()
            child.wait()

    def close(self) -> None:
        """End the child (it also ends on its own when this process does: its pipe closes)."""
        with self._lock:
            self._stop()


def serve() -> None:
    """The child: read the config, then extract each page the pipe brings until it closes.
    Its stdout carries the answers; what a library prints goes to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    answers = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    pages = Connection(0, writable=False)
    try:
        cfg: Config = pages.recv()
        # what the first page would pay (lazy imports, parsers' first use) is the start's
        extract_record(WARM_UP, "http://warm-up.invalid/", None, cfg)
        answers.send(READY)
        while True:
            body, url, charset, headers = pages.recv()
            answers.send(extract_record(body, url, charset, cfg, headers=headers))
    except (EOFError, OSError, KeyboardInterrupt):
        return


class Extractors:
    """``lanes`` extractors, each with its own child, for callers in as many threads at once
    (the fetch engine's extraction threads: a fetch task with more than one core extracts on
    each); a call takes the extractor used last that is free, so that a single caller keeps
    one child. Each child starts on its first page, or all at once with `start`."""

    def __init__(self, cfg: Config, lanes: int = 1) -> None:
        self.lanes = [Extractor(cfg) for _ in range(max(1, lanes))]
        self._free: queue.LifoQueue[Extractor] = queue.LifoQueue()
        for extractor in reversed(self.lanes):
            self._free.put(extractor)

    def extract(
        self,
        body: bytes | None,
        url: str,
        charset: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> Extracted:
        extractor = self._free.get()
        try:
            return extractor.extract(body, url, charset, headers)
        finally:
            self._free.put(extractor)

    def start(self) -> None:
        """Start every child now, at once (each start's imports take a second of CPU)."""
        threads = [threading.Thread(target=e.start, daemon=True) for e in self.lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        for extractor in self.lanes:
            extractor.close()


# This process's extractors, by the settings extraction reads (parse, robots.agent, extract) and
# their lanes: the fetch engine's runs and the extraction UDF's rows of one Python worker share
# their children.
_shared: dict[tuple[Any, ...], Extractors] = {}
_shared_lock = threading.Lock()


def shared_extractor(cfg: Config, lanes: int = 1) -> Extractors:
    """This process's extractors for ``cfg``, ``lanes`` of them (children to use at once): the
    same ones for every call with the same extraction settings and lanes."""
    key = (cfg.parse, cfg.robots.agent, cfg.extract, lanes)
    with _shared_lock:
        if key not in _shared:
            if len(_shared) >= 4:  # settings of calls gone by
                _shared.pop(next(iter(_shared))).close()
            _shared[key] = Extractors(cfg, lanes)
        return _shared[key]


if __name__ == "__main__":
    serve()
