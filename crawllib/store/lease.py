"""One writer per crawl root: a lease, the file ``ROOT/_writer.lease`` (JSON).

Every command that writes holds it for as long as it runs; readers (`crawl sql`, `crawl
status`) need none. The lease names its holder (command, host, pid, since when, its process's
start) and lasts ``storage.lease_seconds`` after its last write; a thread renews it every third
of that.

Every change of the file is atomic, so two processes can never both hold it:
- taking a free root is an exclusive create (locally a hard link of a written temp file, which
  fails if the lease exists; on S3 a PUT with ``If-None-Match: *``);
- renewing, releasing and taking over are compare-and-swap writes against the version read
  (locally under an flock, comparing content hashes; on S3 a PUT with ``If-Match: <ETag>``).

Who may take a lease over is judged without comparing two machines' clocks: a lease has
expired when the store's own clock (S3's LastModified against its Date; the file server's
modification times) says it was last written ``ttl`` ago or more. A lease whose holder ran on
this machine (same boot, same process namespace) and whose process is gone (its pid is not
alive, or is another process since it started later) is taken over once the processes it
started (its Spark JVM, its fetch workers) are gone too, at once when they are. A second writer
is refused otherwise (LeaseHeld, naming the holder).

The holder stops writing before anyone may take over: `check_writable` (every table write
calls it, and `crawllib.store.tables` again cancels a write's Spark jobs when it no longer holds)
raises LeaseNotHeld when this process holds no lease on the root, and LeaseLost once the lease
was taken over or could not be renewed for 2/3 of its length, which leaves a third of it for a
commit already under way.

The lease also records the version of the ``generations`` table after this crawl's last commit
to it (``ledger``), carried from holder to holder, so that a lost newest commit of the ledger
itself shows (`crawllib.store.integrity`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from crawllib.config import Config
from crawllib.core.errors import LeaseHeld, LeaseLost, LeaseNotHeld
from crawllib.core.roots import normalize_root
from crawllib.store.lease_store import (
    LEASE_NAME,
    LocalStore,
    S3Store,
    Store,
    Stored,
    process_identity,
    s3_client,
    store_for,
)

__all__ = [
    "LEASE_NAME",
    "Holder",
    "Lease",
    "LocalStore",
    "Renewer",
    "S3Store",
    "Store",
    "Stored",
    "acquire",
    "check_writable",
    "give_back",
    "held",
    "hold",
    "ledger_version",
    "process_identity",
    "record_ledger",
    "s3_client",
    "store_for",
    "take",
]

log = logging.getLogger(__name__)

# A holder that could not renew for this share of its lease stops writing: the rest of the
# lease is the room for a commit already under way, before another writer may take over.
WRITABLE_SHARE = 2 / 3


@dataclasses.dataclass(frozen=True)
class Holder:
    """What the lease file says."""

    token: str
    command: str
    host: str
    pid: int
    started_at: float
    expires_at: float  # by the holder's clock: shown to people, never compared with another
    released_at: float | None = None
    ttl: float | None = None  # the lease lasts this long after its last write, by the store's clock
    process: str | None = None  # the holder's process: `process_identity`
    serial: int = 0  # one more at every write: no two writes of one holder are alike
    ledger: int | None = None  # the generations table's version after its last commit
    where: str | None = None  # the lease's own place (`Store.where`): a copy's says another

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Holder | None:
        """None for a file that is not a lease (say, cut short): it is treated as expired."""
        try:
            fields = json.loads(data)
            holder = cls(
                **{f.name: fields[f.name] for f in dataclasses.fields(cls) if f.name in fields}
            )
        except (ValueError, TypeError, KeyError):
            return None
        return holder if isinstance(holder.token, str) else None

    def describe(self) -> str:
        return (
            f"`{self.command}` (pid {self.pid} on {self.host}) since {_utc(self.started_at)}; "
            f"its lease expires at {_utc(self.expires_at)} unless renewed"
        )


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _machine(identity: str) -> str:
    return identity.rsplit("/", 1)[0]


# Tokens of the leases this process holds now: a lease naming this process but none of them
# was copied with its root, or left by a hold that ended without releasing.
_live_tokens: set[str] = set()


def holder_gone(holder: Holder, where: str | None = None) -> bool:
    """Whether ``holder`` ran on this machine and its process no longer holds the lease at
    ``where``: the pid is not alive, or is another process (started at another time), or is
    this process, which does not hold that lease (a lease copied with its root names the
    original's place). On another machine nothing can tell: False."""
    if holder.process is None or holder.host != socket.gethostname():
        return False
    mine = process_identity()
    if mine is None or _machine(mine) != _machine(holder.process):
        return False
    if holder.pid == os.getpid() and holder.process == mine:
        copied = holder.where is not None and where is not None and holder.where != where
        return copied or holder.token not in _live_tokens
    now = process_identity(holder.pid)
    return now is None or now != holder.process


class Lease:
    """A held lease; renew() keeps it, release() gives it up. ``lost`` once it was taken over.

    ``clock``: wall time for what the file says (epoch seconds); ``monotonic``: for how long it
    has not been renewed."""

    def __init__(
        self,
        store: Store,
        holder: Holder,
        etag: str,
        ttl: float,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        written: float | None = None,
    ) -> None:
        self.store, self.holder, self.etag, self.ttl = store, holder, etag, ttl
        self.clock, self.monotonic = clock, monotonic
        # when the last write that succeeded was sent: the store's expiry counts from later
        self.renewed = monotonic() if written is None else written
        self.lost = False
        self.error: str | None = None  # the last renewal's failure
        self.watchers: dict[int, Callable[[], None]] = {}
        self._lock = threading.RLock()
        _live_tokens.add(holder.token)

    def renew(self) -> bool:
        """Push the expiry ``ttl`` from now; False (and ``lost``) if the lease is not ours.
        A storage error propagates (the lease stays held until it is unwritable)."""
        return self._write(lambda h: dataclasses.replace(h, expires_at=self.clock() + self.ttl))

    def record_ledger(self, version: int) -> None:
        """Record the generations table's version after this writer's last commit to it."""
        try:
            self._write(lambda h: dataclasses.replace(h, ledger=version))
        except Exception:  # a stale record errs on the safe side: the ledger looks ahead
            log.warning("could not record the ledger's version in the writer lease", exc_info=True)

    def _write(self, change: Callable[[Holder], Holder]) -> bool:
        with self._lock:
            if self.lost:
                return False
            sent = self.monotonic()
            try:
                holder = dataclasses.replace(change(self.holder), serial=self.holder.serial + 1)
                etag = self.store.swap(holder.to_bytes(), self.etag)
                if etag is None and self._adopt_own():  # a write of ours landed unanswered
                    holder = dataclasses.replace(change(self.holder), serial=self.holder.serial + 1)
                    etag = self.store.swap(holder.to_bytes(), self.etag)
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                raise
            if etag is None:
                self.lost = True
                _live_tokens.discard(self.holder.token)
                log.error("writer lease lost: another process took it over")
                return False
            self.holder, self.etag, self.renewed, self.error = holder, etag, sent, None
            return True

    def _adopt_own(self) -> bool:
        """After a refused swap: whether the lease is still this holder's (a write of ours
        whose answer was lost changed its etag); then its etag is taken as ours."""
        current = self.store.read()
        holder = Holder.from_bytes(current.data) if current else None
        if current is None or holder is None or holder.token != self.holder.token:
            return False
        if holder.released_at is not None:
            return False
        self.holder, self.etag = holder, current.etag
        return True

    def unwritable(self) -> str | None:
        """Why this holder must not write now, or None while it may."""
        if self.lost:
            return (
                "this process's writer lease on the crawl root was taken over (it had expired); "
                "it stops before writing again (the other writer owns the root now)"
            )
        stale = self.monotonic() - self.renewed
        if stale >= WRITABLE_SHARE * self.ttl:
            return (
                f"this process could not renew its writer lease for {stale:.0f} s (2/3 of its "
                f"{self.ttl:g} s; {self.error or 'no renewal ran'}): another writer may take the "
                "root over once it expires, so this one stops before writing again"
            )
        return None

    def check(self) -> None:
        """LeaseLost unless this holder may write now."""
        reason = self.unwritable()
        if reason:
            raise LeaseLost(reason)

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Have the renewal thread call ``callback`` while the lease is unwritable; returns the
        function that stops it."""
        key = id(callback)
        with self._lock:
            self.watchers[key] = callback

        def stop() -> None:
            self.watchers.pop(key, None)

        return stop

    def release(self) -> None:
        with self._lock:
            _live_tokens.discard(self.holder.token)
            if self.lost:
                return
            released = dataclasses.replace(
                self.holder, released_at=self.clock(), serial=self.holder.serial + 1
            )
            try:
                done = self.store.swap(released.to_bytes(), self.etag) is not None
            except Exception:  # it expires on its own
                log.warning("could not release the writer lease", exc_info=True)
                return
            if not done:
                self.lost = True
                log.warning("writer lease was taken over before it was released")


class Renewer:
    """What the renewal thread does at each tick: renew once a third of the lease has passed
    since the last renewal (sooner again after a failure), and while the lease is unwritable,
    call its watchers (which cancel the writes in flight)."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.next_try = lease.renewed + lease.ttl / 3

    def tick(self) -> None:
        lease = self.lease
        now = lease.monotonic()
        if not lease.lost and now >= self.next_try:
            try:
                lease.renew()
                self.next_try = lease.renewed + lease.ttl / 3
            except Exception:  # a storage error: tried again soon, until the lease is unwritable
                log.warning("could not renew the writer lease: %s", lease.error)
                self.next_try = now + lease.ttl / 12
        if lease.unwritable():
            for callback in list(lease.watchers.values()):
                try:
                    callback()
                except Exception:
                    log.warning("a writer lease watcher failed", exc_info=True)


def acquire(
    store: Store,
    command: str,
    ttl: float,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> Lease:
    """Take the lease: create it, or take over one that expired (by the store's clock), was
    released, or whose process on this machine is gone; LeaseHeld naming the holder when it is
    held."""
    now = clock()
    holder = Holder(
        token=uuid.uuid4().hex,
        command=command,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=now,
        expires_at=now + ttl,
        ttl=ttl,
        process=process_identity(),
        where=getattr(store, "where", None),
    )
    if holder.process is not None:  # the processes this one starts from now on carry it
        os.environ[WRITER_ENV] = _writer_mark(holder)
    # live before it is written: a thread of this process that reads it then must not judge
    # it a lease this process does not hold
    _live_tokens.add(holder.token)
    try:
        return _take_over(store, holder, ttl, clock, monotonic)
    except BaseException:
        _live_tokens.discard(holder.token)
        raise


def _take_over(
    store: Store,
    holder: Holder,
    ttl: float,
    clock: Callable[[], float],
    monotonic: Callable[[], float],
) -> Lease:
    """`acquire`'s writes: create, or swap a free lease; LeaseHeld otherwise."""
    now = holder.started_at
    sent = monotonic()
    etag = store.create(holder.to_bytes())
    if etag is not None:
        return Lease(store, holder, etag, ttl, clock, monotonic, sent)
    current = store.read()
    if current is None:  # removed in between: one more try
        sent = monotonic()
        etag = store.create(holder.to_bytes())
        if etag is not None:
            return Lease(store, holder, etag, ttl, clock, monotonic, sent)
        current = store.read()
    if current is not None:
        previous = Holder.from_bytes(current.data)
        why = _free(previous, current.age, now, getattr(store, "where", None))
        if why is not None:
            # the ledger's version goes from holder to holder
            mine = dataclasses.replace(holder, ledger=previous.ledger if previous else None)
            sent = monotonic()
            etag = store.swap(mine.to_bytes(), current.etag)
            if etag is not None:
                if previous is not None and why:
                    log.warning("took over the writer lease of %s: %s", previous.describe(), why)
                return Lease(store, mine, etag, ttl, clock, monotonic, sent)
            current = store.read()  # another process took it first
    previous = Holder.from_bytes(current.data) if current else None
    who = previous.describe() if previous else "another process"
    raise LeaseHeld(
        f"the crawl root is being written by {who}. One writer at a time: wait for it to "
        "finish; if that process is dead, run this again once its lease has expired"
    )


def _free(previous: Holder | None, age: float, now: float, where: str | None) -> str | None:
    """Why a lease may be taken ("" when it was released), or None while it is held."""
    if previous is None:
        return "the lease file is not a lease"
    if previous.released_at is not None:
        return ""
    if previous.ttl is not None:
        if age >= previous.ttl:
            return f"it expired (last renewed {age:.0f} s ago by the store's clock)"
    elif previous.expires_at <= now:  # a lease of an older crawllib: its own expiry
        return "it expired"
    if holder_gone(previous, where):
        left = _wait_for_survivors(previous)
        if left:
            log.warning(
                "the writer lease's process (pid %d) is gone but processes it started still "
                "run after %.0f s (pids %s): the lease stays theirs",
                previous.pid,
                SURVIVOR_WAIT_SECONDS,
                ", ".join(map(str, left)),
            )
            return None
        return f"its process (pid {previous.pid} on {previous.host}) is gone"
    return None


# A holder's process may die while processes it started live on: its Spark JVM (which writes the
# Delta commits of a local master) notices its parent's end only when its stdin closes, a fetch
# worker when its pipe does. They carry WRITER_ENV in their environment (set before they were
# started), and a lease is taken over only once they are gone too, waiting for up to
# SURVIVOR_WAIT_SECONDS: a takeover never overlaps a dying JVM's commit.
WRITER_ENV = "CRAWLLIB_WRITER"
SURVIVOR_WAIT_SECONDS = 30.0


def _writer_mark(holder: Holder) -> str:
    return f"{holder.pid}:{holder.process}"


def survivors(holder: Holder) -> list[int]:
    """The live processes of this machine that ``holder``'s process started (module comment
    above); none where /proc does not tell."""
    needle = f"{WRITER_ENV}={_writer_mark(holder)}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def _wait_for_survivors(holder: Holder) -> list[int]:
    """`survivors` of ``holder`` once they are gone ([]) or SURVIVOR_WAIT_SECONDS passed;
    none when the holder is this very process (a lease copied with its root names it: the
    processes it started are its own, and write for the leases it holds)."""
    if holder.pid == os.getpid() and holder.process == process_identity():
        return []
    deadline = time.monotonic() + SURVIVOR_WAIT_SECONDS
    left = survivors(holder)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = survivors(holder)
    return left


@dataclasses.dataclass
class _Held:
    lease: Lease
    depth: int  # takes not given back yet
    stop: threading.Event
    thread: threading.Thread


# Roots this process holds a lease on (normalised root -> lease): table writes check it.
_held: dict[str, _Held] = {}
_held_lock = threading.Lock()


def held(root: str) -> Lease | None:
    """The lease this process holds on ``root``, if any."""
    with _held_lock:
        entry = _held.get(normalize_root(root))
    return entry.lease if entry is not None else None


def check_writable(root: str) -> Lease:
    """The lease this process holds on ``root`` if it may write now; LeaseNotHeld when it
    holds none, LeaseLost when it was taken over or not renewed for 2/3 of its length."""
    lease = held(root)
    if lease is None:
        raise LeaseNotHeld(
            f"this process holds no writer lease on {root}: every write needs one (the crawl "
            "commands take it; in a program or notebook, write inside "
            "`with crawllib.store.lease.hold(root, 'what', cfg):`)"
        )
    lease.check()
    return lease


def record_ledger(root: str, version: int) -> None:
    """Record in the held lease of ``root`` the generations table's version just committed."""
    lease = held(root)
    if lease is not None:
        lease.record_ledger(version)


def ledger_version(root: str) -> int | None:
    """The generations table's version recorded with the lease this process holds on
    ``root`` (the last commit of this crawl to it, by any holder), or None when unknown."""
    lease = held(root)
    return lease.holder.ledger if lease is not None else None


def take(root: str, command: str, cfg: Config, store: Store | None = None) -> Lease:
    """Take the writer lease of ``root`` for this process until `give_back` (or until it
    exits): renewed in the background. The way for a notebook or a benchmark that writes in
    many calls; `hold` is the block form. Taken again while held, it is the same lease (and
    must be given back as often)."""
    key = normalize_root(root)
    with _held_lock:
        entry = _held.get(key)
        if entry is not None and not entry.lease.lost:
            entry.depth += 1
            return entry.lease
        if entry is not None:  # lost: its renewals end, a new lease is taken
            entry.stop.set()
    lease = acquire(store or store_for(root, cfg), command, cfg.storage.lease_seconds)
    renewer = Renewer(lease)
    stop = threading.Event()
    tick = min(lease.ttl / 12, 1.0)

    def renew() -> None:
        while not stop.wait(tick):
            renewer.tick()

    thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
    with _held_lock:
        _held[key] = _Held(lease, 1, stop, thread)
    thread.start()
    return lease


def give_back(root: str) -> None:
    """Give back a lease `take` took: released once given back as often as taken."""
    key = normalize_root(root)
    with _held_lock:
        entry = _held.get(key)
        if entry is None:
            return
        entry.depth -= 1
        if entry.depth > 0:
            return
        del _held[key]
    entry.stop.set()
    entry.thread.join()
    entry.lease.release()


@atexit.register
def _give_back_all() -> None:
    for key in list(_held):
        with _held_lock:
            if key in _held:
                _held[key].depth = 1
        give_back(key)


@contextlib.contextmanager
def hold(root: str, command: str, cfg: Config, store: Store | None = None) -> Iterator[Lease]:
    """Hold the writer lease of ``root`` for the block (`take`, then `give_back`, also on an
    error). Within a block that holds it, this process holding it again is the same lease (the
    crawl commands a program calls hold it themselves)."""
    lease = take(root, command, cfg, store)
    try:
        yield lease
    finally:
        give_back(root)
