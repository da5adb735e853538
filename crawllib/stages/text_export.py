"""``crawl export-text``: the crawl's texts as a training set's documents, in shards.

The documents (crawllib.transforms.text_export: the latest text of each URL among the chosen
generations, with text, not reserved unless asked, one per duplicate cluster, filtered by
language and a predicate over the texts columns) go to OUT as files of at most ``shard_docs``
documents each (crawllib.store.shards: Parquet, gzip JSON Lines or WET), in the document schema
datatrove and the Hugging Face datasets library read: text, id, metadata.

On the embedded engine DuckDB streams the query's rows as Arrow batches to one writer in this
process: ``part-00000.<ext>``, ``part-00001.<ext>`` ... On Spark the documents are hashed by
url_key into one partition per ``shard_docs`` of them, and each task writes its partition
(Arrow batches, ``mapInArrow``) to ``part-<partition>-<seq>.<ext>``; Spark is imported only
there. OUT is a local folder or an S3 URI (crawllib.store.filestore; on S3 a file is written on
local disk and uploaded). The export files an earlier export left in OUT that this one did not
write are deleted.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from crawllib.config import Config
from crawllib.store import filestore
from crawllib.store.db import Db, Rel
from crawllib.store.shards import SHARD_DOCS, Shard, ShardWriter, stale_shards, write_batches
from crawllib.transforms import text_export

log = logging.getLogger(__name__)

# Rows per Arrow batch the embedded engine streams.
BATCH_ROWS = 2048


@dataclass(frozen=True)
class Filters:
    """Which texts rows become documents (crawllib.transforms.text_export.documents)."""

    gens: Sequence[int] | None = None
    languages: Sequence[str] = ()
    predicate: str | None = None
    one_per_cluster: bool = True
    include_reserved: bool = False


@dataclass(frozen=True)
class ShardTask:
    """What every Spark task of an export needs, plain values."""

    out: str
    cfg: Config
    fmt: str
    shard_docs: int


def documents(db: Db, filters: Filters) -> Rel:
    """The relation of the documents to export (lazy)."""
    # the generations' partitions only; the texts read as a stream: an export reads them whole
    gens = f"gen IN ({', '.join(map(str, filters.gens))})" if filters.gens else None
    texts = db.table("texts", where=gens, stream=True)
    query = text_export.documents(
        filters.gens,
        filters.languages,
        filters.predicate,
        filters.one_per_cluster,
        filters.include_reserved,
        texts_columns=db.columns(texts),
    )
    pages = db.table("pages", where=gens, columns=["gen", "url_key", "fetched_at"])
    return db.sql(query, texts=texts, pages=pages)


def export_text(
    db: Db, out: str, fmt: str, filters: Filters, shard_docs: int = SHARD_DOCS
) -> list[Shard]:
    """Write the documents ``filters`` keep to ``out`` in ``fmt`` (parquet, jsonl, wet), files
    of at most shard_docs documents; the files written, by name. ValueError (one line) for a
    bad format, shard size, OUT or predicate."""
    if shard_docs < 1:
        raise ValueError(f"--shard-docs {shard_docs}: expected a number of documents >= 1")
    folder = filestore.folder_at(out, db.cfg)  # an unsupported scheme fails here
    try:
        rel = documents(db, filters)
        if db.engine == "spark":
            shards = _spark_shards(db, rel, ShardTask(out, db.cfg, fmt, shard_docs))
        else:
            with folder.staging() as work:
                writer = ShardWriter(work, fmt, None, shard_docs, folder.put)
                shards = write_batches(rel.to_arrow_reader(BATCH_ROWS), writer)
    except Exception as exc:  # the user's predicate cannot run (a type, a function)
        if filters.predicate is None or not _engine_error(exc):
            raise
        raise ValueError(
            f"--where {filters.predicate!r}: the query failed: {_first(exc)}"
        ) from None
    written = {s.name.rsplit("/", 1)[-1] for s in shards}
    for name in stale_shards(folder.sizes(), written):
        log.info("removed %s, left by an earlier export", folder.location(name))
        folder.delete(name)
    return sorted(shards, key=lambda s: s.name)


def _spark_shards(db: Db, rel: Rel, task: ShardTask) -> list[Shard]:
    docs = db.count(rel)
    if docs == 0:
        return []
    parts = max(1, math.ceil(docs / task.shard_docs))
    log.info("writing %d documents in %d tasks to %s", docs, parts, task.out)
    rows = rel.repartition(parts, "url_key").sortWithinPartitions("url_key")
    reports = rows.mapInArrow(
        functools.partial(write_task, task), "name string, docs long, size long"
    )
    return [Shard(r["name"], int(r["docs"]), int(r["size"])) for r in reports.collect()]


def write_task(task: ShardTask, batches: Iterator[Any]) -> Iterator[Any]:
    """A Spark task's work: its partition's Arrow batches written to its shards. Out: one
    Arrow batch of (name, docs, size), a row per file."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    folder = filestore.folder_at(task.out, task.cfg)
    with folder.staging() as work:
        writer = ShardWriter(work, task.fmt, part, task.shard_docs, folder.put)
        shards = write_batches(batches, writer)
    yield pa.RecordBatch.from_pylist(
        [{"name": s.name, "docs": s.docs, "size": s.size} for s in shards],
        schema=pa.schema([("name", pa.string()), ("docs", pa.int64()), ("size", pa.int64())]),
    )


def _engine_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb", "pyspark", "py4j")


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
