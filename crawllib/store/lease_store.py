"""Where a crawl root's writer lease lives (`crawllib.store.lease`): a file of a local (or mounted)
file system, or an S3 object; every write atomic, and each store's own clock telling how long
ago the lease was written, so that no two machines' clocks are ever compared.
"""

from __future__ import annotations

import email.utils
import fcntl
import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from crawllib.config import Config
from crawllib.core.roots import normalize_root

LEASE_NAME = "_writer.lease"


class Stored(NamedTuple):
    """The lease as read: its bytes, its etag, and how long ago it was written by the store's
    own clock, at least (a store whose clock reads in whole seconds gives its reading less a
    second: a lease renewed just now is never judged expired)."""

    data: bytes
    etag: str
    age: float


class Store(Protocol):
    """Where the lease lives; every write is atomic. An etag names one version of it;
    ``where`` names the place (a lease copied elsewhere with its root says another)."""

    where: str

    def create(self, data: bytes) -> str | None:
        """Write the lease if there is none; its etag, or None if one exists."""

    def read(self) -> Stored | None:
        """The lease, or None if there is none."""

    def swap(self, data: bytes, etag: str) -> str | None:
        """Write the lease if it is still at ``etag``; the new etag, or None if it is not."""


class LocalStore:
    """A lease file on a local (or locally mounted) file system. Its age is the file's
    modification time against the time the file system stamps on the lock file now (on NFS,
    the server's clock). ``clock``: stamp both with it instead (tests in fake time)."""

    def __init__(self, path: str, clock: Callable[[], float] | None = None) -> None:
        self.path = path
        self.clock = clock
        self.where = os.path.abspath(path)

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

    def read(self) -> Stored | None:
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
                written = os.fstat(fh.fileno()).st_mtime
        except FileNotFoundError:
            return None
        return Stored(data, _etag(data), self._now() - written)

    def swap(self, data: bytes, etag: str) -> str | None:
        with open(self.path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            current = self.read()
            if current is None or current.etag != etag:
                return None
            os.replace(self._temp(data), self.path)
        return _etag(data)

    def _now(self) -> float:
        """The store's time now: the lock file stamped with the current time, read back."""
        if self.clock is not None:
            return self.clock()
        lock = self.path + ".lock"
        with open(lock, "a"):
            os.utime(lock, None)
        return os.stat(lock).st_mtime

    def _temp(self, data: bytes) -> str:
        temp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(temp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if self.clock is not None:
            os.utime(temp, (self.clock(), self.clock()))
        return temp


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


HTTP_DATE_RESOLUTION = 1.0  # seconds: Date and Last-Modified are HTTP dates


class S3Store:
    """A lease object on S3 (or an S3-compatible store): conditional PUTs (If-None-Match,
    If-Match), which S3 applies atomically. Its age is its LastModified against the Date of the
    same answer: both S3's clock, both in whole seconds, so the age read is a second less than
    their difference (the least the time since the last write can be; with TTL 1 s a lease
    renewed 0.1 s before a read across a second's boundary would otherwise look expired)."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        self.client, self.bucket, self.key = client, bucket, key
        self.where = f"s3://{bucket}/{key}"

    def create(self, data: bytes) -> str | None:
        return self._put(data, IfNoneMatch="*")

    def read(self) -> Stored | None:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.client.exceptions.NoSuchKey:
            return None
        headers = got["ResponseMetadata"]["HTTPHeaders"]
        now = email.utils.parsedate_to_datetime(headers["date"])
        age = (now - got["LastModified"]).total_seconds() - HTTP_DATE_RESOLUTION
        return Stored(got["Body"].read(), got["ETag"], max(0.0, age))

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


def process_identity(pid: int | None = None) -> str | None:
    """``<boot id>/<pid namespace>/<start time>`` of a process of this machine (this one by
    default): two processes with one pid differ in it (the pid was reused), and so do
    processes of another boot or container. None where Linux's /proc does not tell."""
    proc = f"/proc/{pid}" if pid is not None else "/proc/self"
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        stat = Path(f"{proc}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return f"{boot}/{namespace}/{fields[19]}" if len(fields) > 19 else None
