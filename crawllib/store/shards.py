"""Shards of a text export: documents written to files of at most ``shard_docs`` documents each,
one Arrow batch at a time (never the whole export in memory), by the embedded engine in its
process and by Spark's tasks.

In: Arrow batches of the export's query (crawllib.transforms.text_export: text, gen, url_key,
url, fetched_us, language, language_detected, quality, cluster, tdm_reserved). Each becomes a
batch of the document schema that datatrove's readers and the Hugging Face datasets library
read as they are (:func:`documents`): ``text``, ``id`` (``<gen>/<url_key>``) and ``metadata``.

Formats: ``parquet`` (``part-….parquet``), ``jsonl`` (one JSON object a line, gzip:
``part-….jsonl.gz``) and ``wet`` (WARC/1.0 conversion records, :mod:`crawllib.content.wet`:
``part-….warc.wet.gz``). A file is written under a ``.part`` name and renamed when complete,
then handed to ``done`` (which may move it, e.g. upload it to S3).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from crawllib.content import wet

FORMATS = {"parquet": "parquet", "jsonl": "jsonl.gz", "wet": "warc.wet.gz"}
SHARD_DOCS = 10_000
_NAME = re.compile(r"part-\d{5}(-\d{5})?\.(parquet|jsonl\.gz|warc\.wet\.gz)(\.part)?")


def shard_name(fmt: str, part: int | None, seq: int) -> str:
    """File ``seq`` of a writer: ``part-<seq>.<ext>`` for the only writer (the embedded
    engine), ``part-<part>-<seq>.<ext>`` for Spark's task ``part``."""
    stem = f"part-{seq:05d}" if part is None else f"part-{part:05d}-{seq:05d}"
    return f"{stem}.{FORMATS[fmt]}"


def stale_shards(names: Iterable[str], written: Collection[str]) -> list[str]:
    """The export files among ``names`` (any format, and ``.part`` files) not in ``written``:
    what an earlier export to the same folder left."""
    return sorted(n for n in names if _NAME.fullmatch(n) is not None and n not in written)


def documents(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of the export's query as documents: text, id, and metadata (url, date: the fetch
    time in ISO 8601 UTC, language, language_detected, quality, cluster, tdm_reserved, gen,
    url_key)."""
    col = batch.column
    gen, key = col("gen"), col("url_key")
    ids = pc.binary_join_element_wise(pc.cast(gen, pa.string()), pc.cast(key, pa.string()), "/")
    seconds = pc.divide(col("fetched_us"), 1_000_000)  # whole seconds, as Common Crawl's dates
    when = pc.cast(seconds, pa.timestamp("s", tz="UTC"))
    date = pc.strftime(when, format="%Y-%m-%dT%H:%M:%SZ")
    metadata = pa.StructArray.from_arrays(
        [
            col("url"),
            date,
            col("language"),
            col("language_detected"),
            col("quality"),
            pc.cast(col("cluster"), pa.int64()),
            col("tdm_reserved"),
            pc.cast(gen, pa.int32()),
            pc.cast(key, pa.int64()),
        ],
        names=[
            "url", "date", "language", "language_detected", "quality", "cluster",
            "tdm_reserved", "gen", "url_key",
        ],
    )  # fmt: skip
    return pa.RecordBatch.from_arrays(
        [col("text"), ids, metadata], names=["text", "id", "metadata"]
    )


class _File(Protocol):
    def write(self, docs: pa.RecordBatch) -> None: ...
    def close(self) -> None: ...


class _Parquet:
    def __init__(self, path: str, schema: pa.Schema, name: str) -> None:
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")

    def write(self, docs: pa.RecordBatch) -> None:
        self.writer.write_batch(docs)

    def close(self) -> None:
        self.writer.close()


class _Jsonl:
    def __init__(self, path: str, schema: pa.Schema, name: str) -> None:
        self.out = gzip.open(path, "wb", compresslevel=6)

    def write(self, docs: pa.RecordBatch) -> None:
        lines = (json.dumps(d, ensure_ascii=False) + "\n" for d in docs.to_pylist())
        self.out.write("".join(lines).encode("utf-8", errors="replace"))

    def close(self) -> None:
        self.out.close()


class _Wet:
    def __init__(self, path: str, schema: pa.Schema, name: str) -> None:
        self.out: BinaryIO = open(path, "wb")
        self.now = dt.datetime.now(dt.UTC)
        info = {"isPartOf": "crawllib text export", "description": "extracted main texts"}
        self.out.write(wet.warcinfo(name, self.now, info))

    def write(self, docs: pa.RecordBatch) -> None:
        for d in docs.to_pylist():
            meta = d["metadata"]
            # a record needs a WARC-Date: a text whose page row is gone gets the file's
            when = (
                dt.datetime.strptime(meta["date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
                if meta["date"] is not None
                else self.now
            )
            doc = wet.Document(meta["url"], when, d["text"], meta["language"])
            self.out.write(wet.conversion(doc))

    def close(self) -> None:
        self.out.close()


_WRITERS: dict[str, Callable[[str, pa.Schema, str], _File]] = {
    "parquet": _Parquet,
    "jsonl": _Jsonl,
    "wet": _Wet,
}


@dataclass(frozen=True)
class Shard:
    """One file written: its name (or location, once ``done`` moved it), documents, bytes."""

    name: str
    docs: int
    size: int


class ShardWriter:
    """Writes documents to ``folder/name(seq)`` for seq 0, 1, ..., at most ``shard_docs`` each.
    No documents, no file."""

    def __init__(
        self,
        folder: str,
        fmt: str,
        part: int | None,
        shard_docs: int = SHARD_DOCS,
        done: Callable[[str], str] | None = None,
    ) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
        os.makedirs(folder, exist_ok=True)
        self.folder, self.fmt, self.part, self.shard_docs = folder, fmt, part, shard_docs
        self.done = done
        self.shards: list[Shard] = []
        self._file: _File | None = None
        self._name, self._docs = "", 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Write a batch of the export's query (module docstring), rolling files as they fill."""
        docs = documents(batch)
        start = 0
        while start < docs.num_rows:
            if self._file is None:
                self._name = shard_name(self.fmt, self.part, len(self.shards))
                path = os.path.join(self.folder, self._name) + ".part"
                self._file = _WRITERS[self.fmt](path, docs.schema, self._name)
            take = min(self.shard_docs - self._docs, docs.num_rows - start)
            self._file.write(docs.slice(start, take))
            self._docs += take
            start += take
            if self._docs >= self.shard_docs:
                self._finish()

    def close(self) -> list[Shard]:
        """Finish the last file; the files written."""
        if self._file is not None:
            self._finish()
        return self.shards

    def abort(self) -> None:
        """After an error: close the open file and remove it (no complete-looking file)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            path = os.path.join(self.folder, self._name) + ".part"
            if os.path.exists(path):
                os.remove(path)

    def _finish(self) -> None:
        assert self._file is not None
        self._file.close()
        path = os.path.join(self.folder, self._name)
        os.replace(path + ".part", path)
        size = os.path.getsize(path)
        where = self.done(path) if self.done is not None else self._name
        self.shards.append(Shard(where, self._docs, size))
        self._file, self._docs = None, 0


def write_batches(batches: Iterable[pa.RecordBatch], writer: ShardWriter) -> list[Shard]:
    """All ``batches`` through ``writer``; the files written (an error removes the open one)."""
    try:
        for batch in batches:
            writer.write(batch)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
