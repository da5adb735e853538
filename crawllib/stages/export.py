"""``crawl export-warc``: a generation's raw ``pages`` as WARC 1.1 files, written by the
executors, and the ``warc_index`` table that says where each capture's response record lies.

The pages of the generation (with the IP address and fetch time of the fetch that produced
each, from ``fetches``) are hash-partitioned by url_key into as many partitions as the
generation's bodies fill files of ``--max-file-bytes`` (at most one per page), each sorted by
url_key. Every task writes its partition with :mod:`crawllib.content.warc`, one record at a time, to
``crawl-gen{gen}-{partition:05d}-{seq:03d}.warc.gz`` (seq: the next file once one reaches the
size) in the output folder (:mod:`crawllib.store.filestore`: local, or an S3 prefix the task
uploads to; by default ``gen=N`` in the archive's root, ``warc.archive_root``), and returns one index row per capture. The driver writes those rows over the
generation's rows of ``warc_index``, then deletes the generation's files that this export did
not write: a rerun leaves exactly its own files and index rows.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.content import warc
from crawllib.core.output import plural
from crawllib.core.vocab import Outcome
from crawllib.store import filestore, tables
from crawllib.store.spark_schemas import WARC_INDEX

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class ExportResult:
    """pages: rows of the generation in ``pages``; written: those exported; files: by name."""

    pages: int
    written: int
    files: list[warc.FileReport]


@dataclass(frozen=True)
class ExportTask:
    """What every task of an export needs, plain values: its generation, the output folder
    (local path or URI), the config (S3 settings, user agent) and the file size to roll at."""

    gen: int
    out_dir: str
    cfg: Config
    max_bytes: int


def default_out_dir(root: str, gen: int, cfg: Config) -> str:
    """Where a generation's WARC files go unless told: ``gen=N`` in the archive's root
    (``warc.archive_root``, by default ``ROOT/warc``)."""
    return f"{filestore.archive_root(root, cfg)}/gen={gen}"


def export_partitions(pages: int, body_bytes: int, max_bytes: int) -> int:
    """Partitions (tasks, and files unless one rolls over) for pages whose bodies add up to
    body_bytes: enough for files of max_bytes before compression, at most one per page."""
    return max(1, min(pages, math.ceil(body_bytes / max_bytes)))


def fetch_facts(fetches: DataFrame, gen: int) -> DataFrame:
    """In: ``fetches``. Out: url_key, ip, fetch_ms of the latest ``ok`` fetch of gen per URL."""
    return (
        fetches.where((F.col("gen") == gen) & (F.col("outcome") == Outcome.OK))
        .groupBy("url_key")
        .agg(
            F.max_by("ip", "fetched_at").alias("ip"),
            F.max_by("fetch_ms", "fetched_at").alias("fetch_ms"),
        )
        .select("url_key", "ip", "fetch_ms")
    )


def captures_of_gen(pages: DataFrame, fetches: DataFrame, gen: int) -> DataFrame:
    """In: ``pages`` and ``fetches``. Out: one row per exportable page of gen.

    fetched_at becomes ``fetched_at_us`` (microseconds since the epoch) so a Python worker reads
    it as UTC whatever its local timezone. Pages without url, status or fetch time are left out.
    """
    return (
        pages.where(F.col("gen") == gen)
        .where(
            F.col("url").isNotNull()
            & F.col("http_status").isNotNull()
            & F.col("fetched_at").isNotNull()
        )
        .join(fetch_facts(fetches, gen), on="url_key", how="left")
        .select(
            "url",
            "url_key",
            "gen",
            F.unix_micros("fetched_at").alias("fetched_at_us"),
            "http_status",
            "content_type",
            "headers",
            "body",
            "is_truncated",
            "content_hash",
            "ip",
            "fetch_ms",
        )
    )


def to_capture(row: Row | Any) -> warc.Capture:
    """One row of :func:`captures_of_gen` as the writer's value."""
    return warc.Capture(
        url=row["url"],
        url_key=row["url_key"],
        gen=row["gen"],
        fetched_at=_EPOCH + dt.timedelta(microseconds=row["fetched_at_us"]),
        http_status=row["http_status"],
        headers=dict(row["headers"] or {}),
        body=bytes(row["body"] or b""),
        is_truncated=bool(row["is_truncated"]),
        content_hash=row["content_hash"],
        ip=row["ip"],
        fetch_ms=row["fetch_ms"],
        content_type=row["content_type"],
    )


def write_partition(task: ExportTask, partition: int, rows: Iterable[Row]) -> Iterator[tuple]:
    """A task's work: its rows of :func:`captures_of_gen` written to its WARC files in
    ``task.out_dir``, one capture at a time. Out: one ``warc_index`` row per capture (tuples in
    the table's column order)."""
    folder = filestore.folder_at(task.out_dir, task.cfg)
    user_agent = task.cfg.fetch.user_agent
    info = {
        "isPartOf": f"crawl-gen{task.gen}",
        "description": f"pages of crawl generation {task.gen}",
    }

    def done(report: warc.FileReport) -> None:
        report.path = folder.put(report.path)

    with folder.staging() as work:
        written = warc.write_files(
            (to_capture(r) for r in rows),
            work,
            functools.partial(warc.part_name, task.gen, partition),
            user_agent,
            max_bytes=task.max_bytes,
            info=info,
            done=done,
        )
        for w in written:
            c = w.capture
            yield (
                c.gen,
                c.url_key,
                c.url,
                c.fetched_at,
                c.http_status,
                c.content_type,
                c.is_truncated,
                warc.sha1_digest(c.body),
                folder.location(w.filename),
                w.offset,
                w.length,
                w.record_id,
            )


def export_warc(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int,
    out_dir: str | None = None,
    max_bytes: int | None = None,
) -> ExportResult:
    """Write generation gen's pages as WARC files to out_dir (a local folder or an S3 URI;
    default ``gen=N`` in the archive's root: ``warc.archive_root``, else ``ROOT/warc``) and
    their rows of ``warc_index``. No pages, no file."""
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"--max-file-bytes {max_bytes}: expected a number of bytes >= 1")
    task = ExportTask(
        gen, out_dir or default_out_dir(root, gen, cfg), cfg, max_bytes or warc.ROLLOVER_BYTES
    )
    folder = filestore.folder_at(task.out_dir, cfg)  # an unsupported scheme fails here
    pages = tables.read(spark, root, "pages")
    size = tables.one_row(
        pages.where(F.col("gen") == gen).agg(
            F.count(F.lit(1)).alias("pages"),
            F.coalesce(F.sum(F.length("body")), F.lit(0)).alias("body_bytes"),
        )
    )
    if size["pages"] == 0:
        return ExportResult(0, 0, [])
    partitions = export_partitions(size["pages"], size["body_bytes"], task.max_bytes)
    log.info(
        "generation %d: writing WARC files to %s in %s",
        gen,
        task.out_dir,
        plural(partitions, "task"),
    )
    rows = (
        captures_of_gen(pages, tables.read(spark, root, "fetches"), gen)
        .repartition(partitions, "url_key")
        .sortWithinPartitions("url_key")
    )
    index = rows.rdd.mapPartitionsWithIndex(functools.partial(write_partition, task))
    # One action: the tasks write the files while Delta writes the rows they return.
    tables.replace_where(
        spark.createDataFrame(index, WARC_INDEX), root, "warc_index", f"gen = {gen}"
    )
    sizes = folder.sizes()
    files = file_reports(spark, root, gen, sizes)
    written = {f.path.rsplit("/", 1)[-1] for f in files}
    for name in warc.stale_parts(sizes, gen, written):
        log.info(
            "removed %s, left by an earlier export of generation %d", folder.location(name), gen
        )
        folder.delete(name)
    return ExportResult(size["pages"], sum(f.captures for f in files), files)


def file_reports(
    spark: SparkSession, root: str, gen: int, sizes: Mapping[str, int]
) -> list[warc.FileReport]:
    """The files of gen's export in ``warc_index``, by name: captures, records, size (from
    sizes: name -> bytes of the folder's files)."""
    per_file = (
        tables.read(spark, root, "warc_index")
        .where(F.col("gen") == gen)
        .groupBy("warc_filename")
        .agg(F.count(F.lit(1)).alias("captures"))
        .orderBy("warc_filename")
        .collect()
    )
    reports = []
    for f in per_file:
        n = int(f["captures"])
        path = f["warc_filename"]
        records = {"warcinfo": 1, "request": n, "response": n, "metadata": n}
        reports.append(warc.FileReport(path, records, n, sizes.get(path.rsplit("/", 1)[-1], 0)))
    return reports
