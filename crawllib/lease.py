"""One writer per crawl root: a lease, the file ``ROOT/_writer.lease`` (JSON).

Every command that writes holds it for as long as it runs; readers (`crawl sql`, `crawl
status`) need none. The lease names its holder (command, host, pid, since when) and expires
``storage.lease_seconds`` after its last renewal; a thread renews it every third of that.

Every change of the file is atomic, so two processes can never both hold it:
- taking a free root is an exclusive create (locally a hard link of a written temp file, which
  fails if the lease exists; on S3 a PUT with ``If-None-Match: *``);
- renewing, releasing and taking over an expired or released lease are compare-and-swap
  writes against the version read (locally under an flock, comparing content hashes; on S3 a
  PUT with ``If-Match: <ETag>``).
A second writer is refused (LeaseHeld, naming the holder). A holder whose lease was taken over
(it had expired: the process was stopped or cut off longer than the lease) learns it at its
next renewal and must not write again: `check_writable`, which the table writes call, raises
LeaseLost from then on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from crawllib.config import Config
from crawllib.errors import LeaseHeld, LeaseLost

log = logging.getLogger(__name__)

LEASE_NAME = "_writer.lease"


@dataclasses.dataclass(frozen=True)
class Holder:
    """What the lease file says."""

    token: str
    command: str
    host: str
    pid: int
    started_at: float
    expires_at: float
    released_at: float | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Holder | None:
        """None for a file that is not a lease (say, cut short): it is treated as expired."""
        try:
            fields = json.loads(data)
            return cls(**{f.name: fields.get(f.name) for f in dataclasses.fields(cls)})
        except (ValueError, TypeError):
            return None

    def free_at(self, now: float) -> bool:
        return self.released_at is not None or self.expires_at <= now

    def describe(self) -> str:
        return (
            f"`{self.command}` (pid {self.pid} on {self.host}) since {_utc(self.started_at)}; "
            f"its lease expires at {_utc(self.expires_at)} unless renewed"
        )


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Store(Protocol):
    """Where the lease lives; every write is atomic. An etag names one version of it."""

    def create(self, data: bytes) -> str | None:
        """Write the lease if there is none; its etag, or None if one exists."""

    def read(self) -> tuple[bytes, str] | None:
        """The lease and its etag, or None if there is none."""

    def swap(self, data: bytes, etag: str) -> str | None:
        """Write the lease if it is still at ``etag``; the new etag, or None if it is not."""


class LocalStore:
    """A lease file on a local (or locally mounted) file system."""

    def __init__(self, path: str) -> None:
        self.path = path

    def create(self, data: bytes) -> str | None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        temp = self._temp(data)
        try:
            os.link(temp, self.path)  # fails if the lease exists: an exclusive create
        except FileExistsError:
            return None
        finally:
            os.unlink(temp)
        return _etag(data)

    def read(self) -> tuple[bytes, str] | None:
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return None
        return data, _etag(data)

    def swap(self, data: bytes, etag: str) -> str | None:
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            current = self.read()
            if current is None or current[1] != etag:
                return None
            os.replace(self._temp(data), self.path)
        return _etag(data)

    def _temp(self, data: bytes) -> str:
        temp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(temp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return temp


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class S3Store:
    """A lease object on S3 (or an S3-compatible store): conditional PUTs (If-None-Match,
    If-Match), which S3 applies atomically."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        self.client, self.bucket, self.key = client, bucket, key

    def create(self, data: bytes) -> str | None:
        return self._put(data, IfNoneMatch="*")

    def read(self) -> tuple[bytes, str] | None:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.client.exceptions.NoSuchKey:
            return None
        return got["Body"].read(), got["ETag"]

    def swap(self, data: bytes, etag: str) -> str | None:
        return self._put(data, IfMatch=etag)

    def _put(self, data: bytes, **condition: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            put = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, **condition)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            # 412: the condition failed; 409: a concurrent conditional write won
            if status in (409, 412) or exc.response.get("Error", {}).get("Code") in (
                "PreconditionFailed",
                "ConditionalRequestConflict",
                "NoSuchKey",
            ):
                return None
            raise
        return str(put["ETag"])


def store_for(root: str, cfg: Config) -> Store:
    """The lease store of a crawl root: S3 for s3:// and s3a:// roots, else a local file."""
    from crawllib.tables import normalize_root

    root = normalize_root(root)
    scheme, _, rest = root.partition("://")
    if scheme in ("s3", "s3a"):
        bucket, _, prefix = rest.partition("/")
        key = f"{prefix.rstrip('/')}/{LEASE_NAME}" if prefix else LEASE_NAME
        return S3Store(s3_client(cfg), bucket, key)
    if "://" in root:
        if scheme != "file":
            raise ValueError(f"no writer lease for {scheme}:// crawl roots; use a local path or S3")
        root = rest
    elif root.startswith("file:"):
        root = root[len("file:") :]
    return LocalStore(os.path.join(root, LEASE_NAME))


def s3_client(cfg: Config) -> Any:
    """A boto3 S3 client configured like Spark's s3a (``spark.conf`` keys
    ``spark.hadoop.fs.s3a.endpoint``, ``.access.key``, ``.secret.key``,
    ``.path.style.access``), else boto3's own defaults (environment, instance profile)."""
    import boto3
    from botocore.config import Config as BotoConfig

    conf = {k: str(v) for k, v in cfg.spark.conf.items()}
    s3a = "spark.hadoop.fs.s3a."
    options: dict[str, Any] = {}
    if conf.get(s3a + "endpoint"):
        options["endpoint_url"] = conf[s3a + "endpoint"]
    if conf.get(s3a + "access.key"):
        options["aws_access_key_id"] = conf[s3a + "access.key"]
        options["aws_secret_access_key"] = conf.get(s3a + "secret.key")
    if conf.get(s3a + "endpoint.region"):
        options["region_name"] = conf[s3a + "endpoint.region"]
    path_style = conf.get(s3a + "path.style.access", "").lower() == "true"
    boto = BotoConfig(s3={"addressing_style": "path" if path_style else "auto"})
    return boto3.client("s3", config=boto, **options)


class Lease:
    """A held lease; renew() keeps it, release() gives it up. ``lost`` once it was taken over."""

    def __init__(
        self, store: Store, holder: Holder, etag: str, ttl: float, clock: Callable[[], float]
    ) -> None:
        self.store, self.holder, self.etag, self.ttl, self.clock = store, holder, etag, ttl, clock
        self.lost = False

    def renew(self) -> bool:
        """Push the expiry ``ttl`` from now; False (and ``lost``) if the lease is not ours."""
        if self.lost:
            return False
        holder = dataclasses.replace(self.holder, expires_at=self.clock() + self.ttl)
        etag = self.store.swap(holder.to_bytes(), self.etag)
        if etag is None:
            self.lost = True
            log.error("writer lease lost: another process took it over after it expired")
            return False
        self.holder, self.etag = holder, etag
        return True

    def release(self) -> None:
        if self.lost:
            return
        released = dataclasses.replace(self.holder, released_at=self.clock())
        if self.store.swap(released.to_bytes(), self.etag) is None:
            self.lost = True
            log.warning("writer lease was taken over before it was released")


def acquire(
    store: Store, command: str, ttl: float, clock: Callable[[], float] = time.time
) -> Lease:
    """Take the lease: create it, or take over one that expired or was released; LeaseHeld
    naming the holder when it is held."""
    now = clock()
    holder = Holder(
        token=uuid.uuid4().hex,
        command=command,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=now,
        expires_at=now + ttl,
    )
    data = holder.to_bytes()
    etag = store.create(data)
    if etag is not None:
        return Lease(store, holder, etag, ttl, clock)
    current = store.read()
    if current is None:  # released and removed in between: one more try
        etag = store.create(data)
        if etag is not None:
            return Lease(store, holder, etag, ttl, clock)
        current = store.read()
    if current is not None:
        previous = Holder.from_bytes(current[0])
        if previous is None or previous.free_at(now):
            etag = store.swap(data, current[1])
            if etag is not None:
                if previous is not None and previous.released_at is None:
                    log.warning("took over the expired writer lease of %s", previous.describe())
                return Lease(store, holder, etag, ttl, clock)
            current = store.read()  # another process took it first
    previous = Holder.from_bytes(current[0]) if current else None
    who = previous.describe() if previous else "another process"
    raise LeaseHeld(
        f"the crawl root is being written by {who}. One writer at a time: wait for it to "
        "finish; if that process is dead, run this again once its lease has expired"
    )


# Roots this process holds a lease on (normalised root -> lease): table writes check it.
_held: dict[str, Lease] = {}
_held_lock = threading.Lock()


def check_writable(root: str) -> None:
    """Raise LeaseLost if this process held the root's lease and lost it."""
    from crawllib.tables import normalize_root

    with _held_lock:
        lease = _held.get(normalize_root(root))
    if lease is not None and lease.lost:
        raise LeaseLost(
            "this process's writer lease on the crawl root was taken over after it expired; "
            "it stops before writing again (the other writer owns the root now)"
        )


@contextlib.contextmanager
def hold(root: str, command: str, cfg: Config) -> Iterator[Lease]:
    """Hold the writer lease of ``root`` for the block: renewed in the background, released
    at the end (also on an error)."""
    from crawllib.tables import normalize_root

    ttl = cfg.storage.lease_seconds
    lease = acquire(store_for(root, cfg), command, ttl)
    key = normalize_root(root)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not lease.renew():
                    return
            except Exception:  # a passing storage error: the next turn tries again
                log.warning("could not renew the writer lease", exc_info=True)

    thread = threading.Thread(target=renew, name="lease-renewal", daemon=True)
    with _held_lock:
        _held[key] = lease
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join()
        with _held_lock:
            _held.pop(key, None)
        lease.release()
