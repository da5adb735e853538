"""A folder of files that any process, driver or executor, writes without Spark's JVM: a local
folder (also given as a ``file:`` URI) or an S3 prefix (``s3a://``, ``s3://``, ``s3n://``).

S3 is reached with boto3, configured like S3A from the config's ``spark.hadoop.fs.s3a.*`` keys
(`crawllib.store.lease.s3_client`: endpoint, region, keys, path-style addressing; else boto3's own
chain: environment, profile, instance role). The export's tasks put the WARC files they write
here, the fetch tasks their journals (crawllib.store.journal); the driver lists and deletes. Files
appear whole: a local file is renamed into place, an S3 object exists only once its upload
completes. ``lease_store`` gives a file of the folder that changes only by atomic create and
compare-and-swap (crawllib.store.lease's stores).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawllib.config import Config
from crawllib.core.roots import normalize_root
from crawllib.store.lease import LocalStore, S3Store, s3_client

S3_SCHEMES = ("s3a", "s3", "s3n")


@dataclass(frozen=True)
class LocalFolder:
    """A folder on this machine's file system (on a cluster: one every node mounts)."""

    path: str

    def location(self, name: str) -> str:
        return os.path.join(self.path, name)

    @contextlib.contextmanager
    def staging(self) -> Iterator[str]:
        """Where to write files before ``put``: the folder itself (a rename is atomic)."""
        os.makedirs(self.path, exist_ok=True)
        yield self.path

    def put(self, local_path: str) -> str:
        """Move a file written under ``staging`` into the folder (same name); its location."""
        target = self.location(os.path.basename(local_path))
        if os.path.abspath(local_path) != os.path.abspath(target):
            os.replace(local_path, target)
        return target

    def sizes(self) -> dict[str, int]:
        """name -> bytes of the folder's files; none when it does not exist."""
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            return {}
        return {e.name: e.stat().st_size for e in entries if e.is_file()}

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.location(name))

    def write(self, name: str, data: bytes) -> None:
        """A file of ``data``, whole or not at all (written aside, then renamed)."""
        os.makedirs(self.path, exist_ok=True)
        temp = self.location(f".{name}.{uuid.uuid4().hex}.tmp")
        with open(temp, "wb") as fh:
            fh.write(data)
        os.replace(temp, self.location(name))

    def read(self, name: str) -> bytes | None:
        """A file's bytes, None if there is none."""
        try:
            with open(self.location(name), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def remove(self) -> None:
        """Delete the folder and everything under it."""
        shutil.rmtree(self.path, ignore_errors=True)

    def lease_store(self, name: str) -> LocalStore:
        return LocalStore(self.location(name))


@dataclass(frozen=True)
class S3Folder:
    """The objects under ``prefix`` (no trailing slash) of an S3 bucket; uri as given."""

    uri: str
    bucket: str
    prefix: str
    cfg: Config

    def location(self, name: str) -> str:
        return f"{self.uri}/{name}"

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _client(self) -> Any:
        return s3_client(self.cfg)

    @contextlib.contextmanager
    def staging(self) -> Iterator[str]:
        """A local temporary folder (in the task's temporary space) for files to upload."""
        with tempfile.TemporaryDirectory(prefix="crawllib-warc-") as folder:
            yield folder

    def put(self, local_path: str) -> str:
        """Upload a local file under its name (multipart for large files: the object appears
        once complete, replacing one of the same name), then delete it; its location."""
        name = os.path.basename(local_path)
        self._client().upload_file(local_path, self.bucket, self._key(name))
        os.remove(local_path)
        return self.location(name)

    def sizes(self) -> dict[str, int]:
        """name -> bytes of the objects directly under the prefix."""
        start = self._key("")
        pages = self._client().get_paginator("list_objects_v2")
        out: dict[str, int] = {}
        for page in pages.paginate(Bucket=self.bucket, Prefix=start, Delimiter="/"):
            for obj in page.get("Contents", []):
                out[obj["Key"][len(start) :]] = int(obj["Size"])
        return out

    def delete(self, name: str) -> None:
        self._client().delete_object(Bucket=self.bucket, Key=self._key(name))

    def write(self, name: str, data: bytes) -> None:
        """An object of ``data`` (a PUT: whole or not at all)."""
        self._client().put_object(Bucket=self.bucket, Key=self._key(name), Body=data)

    def read(self, name: str) -> bytes | None:
        """An object's bytes, None if there is none."""
        client = self._client()
        try:
            got = client.get_object(Bucket=self.bucket, Key=self._key(name))
        except client.exceptions.NoSuchKey:
            return None
        return bytes(got["Body"].read())

    def remove(self) -> None:
        """Delete every object under the prefix (subfolders included)."""
        client = self._client()
        pages = client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.bucket, Prefix=self._key("")):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            if keys:  # a page holds at most 1000 keys, what one DeleteObjects takes
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def lease_store(self, name: str) -> S3Store:
        return S3Store(self._client(), self.bucket, self._key(name))


Folder = LocalFolder | S3Folder


def folder_at(location: str, cfg: Config) -> Folder:
    """The folder at a local path, ``file:`` URI or S3 URI; ValueError for other schemes."""
    if "://" not in location and not location.startswith("file:"):
        return LocalFolder(os.path.abspath(os.path.expanduser(location)))
    parts = urlsplit(location)
    if parts.scheme == "file":
        return LocalFolder(parts.path)
    if parts.scheme in S3_SCHEMES and parts.netloc:
        uri = location.rstrip("/")
        return S3Folder(uri, parts.netloc, parts.path.strip("/"), cfg)
    raise ValueError(
        f"{location}: files go to a local folder, a file: URI or an S3 URI "
        f"({', '.join(s + '://' for s in S3_SCHEMES)})"
    )


def archive_root(root: str, cfg: Config) -> str:
    """The folder the crawl at ``root`` archives its WARC files under: ``warc.archive_root``,
    or ``ROOT/warc`` when that is empty (local path or URI, no trailing slash)."""
    given = cfg.warc.archive_root
    return given.rstrip("/") or given or f"{normalize_root(root)}/warc"


def archive_prefix(root: str, cfg: Config) -> str:
    """How the location of a file under the archive root begins, as the export writes it
    (``Folder.location``: an absolute path, or the URI as given), ending in ``/``."""
    where = archive_root(root, cfg)
    try:
        return folder_at(where, cfg).location("")
    except ValueError:  # a scheme the export cannot write to: no file of it can be there
        return f"{where}/"
