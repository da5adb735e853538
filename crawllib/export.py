"""``crawl export-warc``: a generation's raw ``pages`` as WARC 1.1 files, in a local folder or
at a URI (``s3a://bucket/warc``).

The pages of the generation (with the IP address and fetch time of the fetch that produced
each, from ``fetches``) are streamed to the driver ordered by url_key with ``toLocalIterator``,
one partition in memory at a time, and handed to :mod:`crawllib.warc`, which writes them on
the driver's disk. For a URI each file is written to a temporary folder and uploaded as soon
as it is complete, so the driver holds one file at a time.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from crawllib import hadoopfs, tables, warc
from crawllib.config import Config
from crawllib.vocab import Outcome

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_PROGRESS_EVERY = 10_000


@dataclass(frozen=True)
class ExportResult:
    """pages: rows of the generation in ``pages``; written: those exported; files: in order."""

    pages: int
    written: int
    files: list[warc.FileReport]


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
    """In: ``pages`` and ``fetches``. Out: one row per exportable page of gen, ordered by url_key.

    fetched_at becomes ``fetched_at_us`` (microseconds since the epoch) so the driver reads it
    as UTC whatever its local timezone. Pages without url, status or fetch time are left out.
    """
    return (
        pages.where(F.col("gen") == gen)
        .where(
            F.col("url").isNotNull()
            & F.col("http_status").isNotNull()
            & F.col("fetched_at").isNotNull()
        )
        .join(fetch_facts(fetches, gen), on="url_key", how="left")
        .orderBy("url_key")
        .select(
            "url",
            "url_key",
            "gen",
            F.unix_micros("fetched_at").alias("fetched_at_us"),
            "http_status",
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
    )


def _with_progress(captures: Iterable[warc.Capture], gen: int) -> Iterator[warc.Capture]:
    for n, capture in enumerate(captures, start=1):
        if n % _PROGRESS_EVERY == 0:
            log.info("generation %d: %d pages written to WARC", gen, n)
        yield capture


def export_warc(
    spark: SparkSession,
    root: str,
    cfg: Config,
    gen: int,
    out_dir: str,
    max_bytes: int | None = None,
) -> ExportResult:
    """Write generation gen's pages to ``out_dir/crawl-gen{gen}-{part:05d}.warc.gz``.

    out_dir is a local folder or a URI Hadoop writes (``s3a://bucket/warc``). No pages, no file.
    """
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"--max-file-bytes {max_bytes}: expected a number of bytes >= 1")
    pages = tables.read(spark, root, "pages")
    total = pages.where(F.col("gen") == gen).count()
    if total == 0:
        return ExportResult(0, 0, [])
    rows = captures_of_gen(pages, tables.read(spark, root, "fetches"), gen)
    captures = _with_progress(
        (to_capture(r) for r in rows.toLocalIterator(prefetchPartitions=False)), gen
    )
    write = functools.partial(
        warc.write_files,
        captures,
        gen=gen,
        user_agent=cfg.fetch.user_agent,
        max_bytes=max_bytes or warc.ROLLOVER_BYTES,
        info={"isPartOf": f"crawl-gen{gen}", "description": f"pages of crawl generation {gen}"},
    )
    files = (
        _write_at_uri(spark, write, out_dir, gen) if hadoopfs.is_uri(out_dir) else write(out_dir)
    )
    return ExportResult(total, sum(f.captures for f in files), files)


def _write_at_uri(
    spark: SparkSession, write: Callable[..., list[warc.FileReport]], uri: str, gen: int
) -> list[warc.FileReport]:
    """``write(folder, done=...)`` into a temporary folder, each file uploaded to uri once it is
    complete; then gen's parts that an earlier, longer export left at uri are removed."""
    base = uri.rstrip("/")

    def upload(report: warc.FileReport) -> None:
        target = f"{base}/{os.path.basename(report.path)}"
        hadoopfs.upload(spark, report.path, target)
        report.path = target

    with tempfile.TemporaryDirectory(prefix="crawllib-warc-") as folder:
        files = write(folder, done=upload)
    for name in warc.stale_parts(hadoopfs.list_names(spark, base), gen, len(files)):
        log.info("removed %s/%s, left by an earlier export of generation %d", base, name, gen)
        hadoopfs.delete(spark, f"{base}/{name}")
    return files
