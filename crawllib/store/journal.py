"""A fetch task's journal: what its attempts fetched, on the crawl root's storage, so that a
later attempt of the same task goes on from there instead of fetching it again, and never
fetches beside an attempt still running.

Spark runs a task again when its executor is lost (the OOM killer, a spot reclaim, ``kill
-9``), when its worker dies, and when a later job needs a persisted partition that was lost
with an executor. After an executor loss it may also run a task twice at once: the lost
shuffle output fails the stage (FetchFailed), and the stage's new attempt starts every task not
yet finished while the old attempt's tasks go on running (Spark kills none of them). Each of
those is a fetcher of the same hosts; the journal makes them take turns and share their work.

Layout, per task (``parts``: the slice's task count, ``part``: the task's partition)::

    ROOT/_fetch_journal/gen=N/slice=S/parts=P/part=I/claim         which attempt fetches
    ROOT/_fetch_journal/gen=N/slice=S/parts=P/part=I/0001-000003.chunk  records, in order

The **claim** is a small JSON file changed only by atomic create and compare-and-swap
(``crawllib.store.lease``'s stores: a local file under flock, or S3 conditional PUTs). An attempt
takes it when there is none, when its holder released it, when its holder stopped renewing it
(3 × ``fetch.journal_seconds``) or when its holder is a process of this machine that has
exited; otherwise it waits, asking every second. The holder renews it every half
``fetch.journal_seconds`` (between two chunks, and with each) with the url_keys it has
requested whose records are not written yet.

A **chunk** is written every ``fetch.journal_seconds`` by the holder: the records its engine
emitted since the previous chunk and every slot's state at that moment (a checkpoint), and a
last one when the engine is done, with the slots' host records; the claim then says ``done``.
Chunks are zlib-compressed pickles of plain values (dicts, lists, bytes, str, numbers), read
with an unpickler that refuses every class.

An attempt that takes the claim reads the chunks: with the claim ``done`` it yields their
records and fetches nothing; else it yields the records and the engine goes on from there
(``crawllib.engine.resume``): nothing with a record is fetched again, and only what the lost
attempt fetched after its last chunk (at most ``fetch.journal_seconds``) is. The claim's
url_keys tell which of those requests are repeats (``refetched``).

An attempt whose JVM is gone stops without writing (``crawllib.engine.watch``); one whose claim
was taken over (it stopped renewing it for too long) stops with :class:`JournalLost` before
it writes again. The fetch stage deletes a slice's journal once the slice is committed.
Writing it costs no Spark job and no Delta commit: a PUT per chunk and per renewal.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import pickle
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from crawllib.config import Config
from crawllib.core.records import EngineRecord, Resume, hosts_of
from crawllib.core.roots import normalize_root
from crawllib.core.vocab import Record
from crawllib.store.filestore import Folder, folder_at
from crawllib.store.lease import Store

if TYPE_CHECKING:  # the engine's modules (aiohttp) are imported on executors only
    from crawllib.engine.watch import Watcher

log = logging.getLogger(__name__)

JOURNAL_FOLDER = "_fetch_journal"
CLAIM = "claim"
CHUNK_SUFFIX = ".chunk"
EXPIRY_TURNS = 3  # a claim not renewed for this many journal intervals is free
POLL_SECONDS = 1.0  # how often a waiting attempt asks again


class JournalLost(RuntimeError):
    """Another attempt took this one's claim over: it must stop fetching."""


@dataclasses.dataclass(frozen=True)
class JournalSpec:
    """Where a slice's tasks keep their journals (a folder URI or path) and how often they
    write (seconds). Travels to the executors in the partition function's closure."""

    folder: str
    seconds: float

    def task_folder(self, partitions: int, partition: int) -> str:
        return f"{self.folder}/parts={partitions}/part={partition}"


def generation_folder(root: str, gen: int) -> str:
    return f"{normalize_root(root)}/{JOURNAL_FOLDER}/gen={gen}"


def for_slice(root: str, gen: int, slice_: int, cfg: Config) -> JournalSpec | None:
    """The journal of a slice's fetch tasks; None when ``fetch.journal_seconds`` is 0 or the
    crawl root is on storage the tasks cannot write without the JVM (not local, file: or S3)."""
    if cfg.fetch.journal_seconds <= 0:
        return None
    folder = f"{generation_folder(root, gen)}/slice={slice_}"
    try:
        folder_at(folder, cfg)
    except ValueError:
        log.warning("no fetch journal on %s: a lost fetch task is fetched again whole", root)
        return None
    return JournalSpec(folder, cfg.fetch.journal_seconds)


def clear(location: str | None, cfg: Config) -> None:
    """Delete a journal folder (a slice's once it is committed, a generation's once fetched)."""
    if location is not None:
        try:
            folder_at(location, cfg).remove()
        except Exception:  # leftovers cost storage only: the next rerun replays or ignores them
            log.warning("could not delete the fetch journal %s", location, exc_info=True)


# -- claims -----------------------------------------------------------------------------------

FETCHING, RELEASED, DONE = "fetching", "released", "done"


def _machine() -> str:
    """This machine and pid namespace: a pid means the same process only under the same one."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            parts.append(fh.read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        parts.append("?")
    return "|".join(parts)


def _started(pid: int) -> int | None:
    """A process's start time (clock ticks since boot), None if it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


@dataclasses.dataclass(frozen=True)
class Claim:
    """The claim file: the attempt that fetches (token, machine, pid and its start time), the
    sequence number of its turn, when it expires, its state and the url_keys it requested
    whose records are not in a chunk yet."""

    token: str
    turn: int
    machine: str
    pid: int
    pid_started: int | None
    expires_at: float
    state: str = FETCHING
    requested: tuple[int, ...] = ()

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Claim | None:
        try:
            fields = json.loads(data)
            fields["requested"] = tuple(fields.get("requested") or ())
            return cls(**fields)
        except (ValueError, TypeError):
            return None

    def free(self, now: float) -> bool:
        """Whether another attempt may take it: released, done, expired, or held by a process
        of this machine that is gone (or is this one: a worker runs one task at a time, so an
        attempt of this process that holds it was cut short)."""
        if self.state != FETCHING or self.expires_at <= now:
            return True
        if self.machine == _machine() and "?" not in self.machine:
            return self.pid == os.getpid() or _started(self.pid) != self.pid_started
        return False


# -- pickles of plain values -------------------------------------------------------------------


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a journal holds plain values only, not {module}.{name}")


def _dump(records: list[Any]) -> bytes:
    return zlib.compress(pickle.dumps(records, protocol=5), 1)


def _load(data: bytes) -> list[Any]:
    loaded = _PlainUnpickler(io.BytesIO(zlib.decompress(data))).load()
    if not isinstance(loaded, list):
        raise pickle.UnpicklingError("a journal chunk is a list of records")
    return loaded


# -- a task's journal ---------------------------------------------------------------------------


class TaskJournal:
    """One attempt's hold on its task's journal (see the module's text). :meth:`open` waits for
    the claim and reads what earlier attempts wrote; :meth:`journaled` writes what the engine
    emits as it passes and filters the checkpoints out."""

    def __init__(self, folder: Folder, store: Store, seconds: float, watcher: Watcher | None):
        self.folder, self.store, self.seconds, self.watcher = folder, store, seconds, watcher
        self.token = uuid.uuid4().hex
        self.claim: Claim | None = None
        self.etag = ""
        self.earlier = False  # an earlier attempt took the claim before this one
        self.complete = False  # ... and finished: its chunks hold every record
        self._names: list[str] = []  # the chunks earlier attempts wrote, in order
        self.resume: Resume | None = None  # ... as the engine goes on from it (not complete)
        self.lost = False
        self._chunks = 0
        self._buffer: list[EngineRecord] = []
        self._pending: set[int] = set()  # requested, record not in a chunk yet
        self._lock = threading.Lock()  # the claim's etag, the pending keys
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @classmethod
    def open(
        cls,
        spec: JournalSpec,
        cfg: Config,
        partitions: int,
        partition: int,
        watcher: Watcher | None,
    ) -> TaskJournal:
        folder = folder_at(spec.task_folder(partitions, partition), cfg)
        journal = cls(folder, folder.lease_store(CLAIM), spec.seconds, watcher)
        previous = journal._take_claim()
        journal._read(previous)
        journal._renewer = threading.Thread(
            target=journal._renew_loop, name="crawllib-journal", daemon=True
        )
        journal._renewer.start()
        return journal

    # -- the claim

    def _mine(self, turn: int, state: str = FETCHING, requested: Iterable[int] = ()) -> Claim:
        return Claim(
            token=self.token,
            turn=turn,
            machine=_machine(),
            pid=os.getpid(),
            pid_started=_started(os.getpid()),
            expires_at=time.time() + EXPIRY_TURNS * self.seconds,
            state=state,
            requested=tuple(sorted(requested)),
        )

    def _take_claim(self) -> Claim | None:
        """Wait for the claim and take it; the claim it replaced (None: there was none)."""
        waited = False
        while True:
            current = self.store.read()
            if current is None:
                mine = self._mine(0)
                etag = self.store.create(mine.to_bytes())
                if etag is not None:
                    self.claim, self.etag = mine, etag
                    return None
                continue
            data, etag = current.data, current.etag
            other = Claim.from_bytes(data)
            if other is None or other.free(time.time()):
                mine = self._mine(other.turn + 1 if other else 1)
                new = self.store.swap(mine.to_bytes(), etag)
                if new is not None:
                    self.claim, self.etag = mine, new
                    if waited:
                        log.warning("fetch journal %s: the other attempt is done, going on", self)
                    return other
                continue
            if not waited:
                log.warning(
                    "fetch journal %s: another attempt of this task is fetching (pid %d on %s): "
                    "waiting for it",
                    self,
                    other.pid,
                    other.machine.split("|")[0],
                )
                waited = True
            time.sleep(POLL_SECONDS)

    def _swap(self, state: str) -> bool:
        """Rewrite the claim (renewed, the pending keys, ``state``); False once it is lost."""
        with self._lock:
            if self.lost or self.claim is None:
                return False
            mine = self._mine(self.claim.turn, state, self._pending)
            etag = self.store.swap(mine.to_bytes(), self.etag)
            if etag is None:
                self.lost = True
                log.error("fetch journal %s: another attempt took the claim over", self)
                return False
            self.claim, self.etag = mine, etag
            return True

    def _renew_loop(self) -> None:
        # twice an interval: the claim names the requests of the first half of an interval
        # whose chunk the loss prevented (refetched); those of the second half go unnamed
        while not self._stop.wait(self.seconds / 2):
            if self._silenced():
                return
            try:
                if not self._swap(FETCHING):
                    return
            except Exception:  # a passing storage error: the next turn tries again
                log.warning("fetch journal %s: could not renew the claim", self, exc_info=True)

    def _silenced(self) -> bool:
        """Whether nothing may be written any more: the JVM is gone, or the claim."""
        return self.lost or (self.watcher is not None and self.watcher.lost.is_set())

    # -- reading

    def _read(self, previous: Claim | None) -> None:
        """What the chunks hold, as the engine resumes from it; their records stay in storage
        until :meth:`stored` reads them again (a task's pages may not fit in memory)."""
        self._names = sorted(n for n in self.folder.sizes() if n.endswith(CHUNK_SUFFIX))
        self.earlier = previous is not None or bool(self._names)
        done: list[EngineRecord] = []  # without page bodies and texts: what the engine needs
        checkpoints = []
        for record in self._stored(checkpoints=True):
            kind = record["record"]
            if kind == Record.CHECKPOINT:
                checkpoints.append(record)
            else:
                done.append(_light(record))
        # host records are the engine's last: their chunk is the last, and holds every record
        self.complete = any(r["record"] == Record.HOST for r in done)
        if not self.complete:
            fetched = {r["url_key"] for r in done if r["record"] == Record.FETCH}
            requested = frozenset(previous.requested if previous else ()) - fetched
            self.resume = Resume(tuple(done), hosts_of(checkpoints), requested)
            self._pending = set(requested)
        if done:
            log.warning(
                "fetch journal %s: going on from %d records of earlier attempts%s",
                self,
                len(done),
                " (complete)" if self.complete else "",
            )

    def _stored(self, checkpoints: bool = False) -> Iterator[EngineRecord]:
        """The chunks' records, in order; one per URL, host or document, should a stale
        attempt's chunk repeat one."""
        seen: set[tuple[str, object]] = set()
        for name in self._names:
            data = self.folder.read(name)
            for record in _load(data) if data is not None else ():
                if record["record"] == Record.CHECKPOINT:
                    if checkpoints:
                        yield record
                    continue
                ident = _identity(record)
                if ident not in seen:
                    seen.add(ident)
                    yield record

    def stored(self) -> Iterator[EngineRecord]:
        """What earlier attempts emitted, in order, read from storage again."""
        return self._stored()

    # -- writing

    def requested(self, url_key: int) -> None:
        """The engine is about to request ``url_key`` (from its loop's thread)."""
        with self._lock:
            self._pending.add(url_key)

    def _write_chunk(self, records: list[EngineRecord]) -> None:
        if self._silenced():
            return
        assert self.claim is not None
        self.folder.write(f"{self.claim.turn:04d}-{self._chunks:06d}{CHUNK_SUFFIX}", _dump(records))
        self._chunks += 1
        written = {r["url_key"] for r in records if r["record"] == Record.FETCH}
        with self._lock:
            self._pending -= written

    def journaled(self, records: Iterable[EngineRecord]) -> Iterator[EngineRecord]:
        """Pass the engine's records on, writing them to the journal: a chunk at each
        checkpoint (which is not passed on), the last one at the end, then the claim ``done``.
        Raises JournalLost once another attempt has taken the claim over."""
        try:
            for record in records:
                if self.lost:
                    raise JournalLost(f"another attempt of the fetch task took {self} over")
                if record["record"] == Record.CHECKPOINT:
                    if self._buffer:
                        self._write_chunk([*self._buffer, record])
                        self._buffer.clear()
                        self._swap(FETCHING)
                    continue
                self._buffer.append(record)
                yield record
            self._write_chunk(self._buffer)
            self._buffer.clear()
        except BaseException:  # the engine failed, or the task's output is not wanted any more
            self.close(RELEASED)
            raise
        self.close(DONE)

    def close(self, state: str = RELEASED) -> None:
        """Stop renewing and leave the claim ``state`` (released: a later attempt goes on
        from the chunks; done: they are complete). Nothing is written once silenced."""
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()
        if not self._silenced():
            try:
                self._swap(state)
            except Exception:  # the claim expires by itself
                log.warning("fetch journal %s: could not release the claim", self, exc_info=True)

    def __str__(self) -> str:
        return self.folder.location("")


def _light(record: EngineRecord) -> EngineRecord:
    """A record as the engine resumes from it: a page without its body, its extraction only
    its links (what the follower reads)."""
    if record["record"] != Record.FETCH:
        return record
    extracted = record["extracted"]
    light = {**record, "body": None}
    if extracted is not None:
        light["extracted"] = {"links": extracted["links"]}
    return light  # type: ignore[return-value]


def _identity(record: Mapping[str, Any]) -> tuple[str, object]:
    kind = record["record"]
    if kind == Record.FETCH:
        return kind, record.get("url_key")
    if kind in (Record.ROBOTS, Record.PROBE):
        return kind, record.get("host")
    if kind == Record.HOST:
        return kind, record.get("slot")
    return kind, record.get("url")
