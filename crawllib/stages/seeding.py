"""Seeding: a file of URLs -> frontier rows of the next generation to plan, and crawldb rows.

Input: a text file (one URL a line, ``#`` comments, blank lines ignored) or a CSV/Parquet path
with a ``url`` column, local or at a URI (``s3a://bucket/seeds.txt``). Every URL is normalised; invalid ones are reported with their line (or
row) number and reason and the valid ones still land. Seeding is idempotent: URLs already in
crawldb, or already in the target generation of the frontier, are not added again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.urls import (
    InvalidURL,
    host_of,
    normalize_url,
    registered_domain,
    url_extension,
    url_key,
)
from crawllib.core.vocab import FrontierReason
from crawllib.policy.netsafety import host_problem
from crawllib.store import hadoopfs, tables
from crawllib.store.schemas import FRONTIER, columns_of
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.plan import queued_rows

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Rejected:
    where: str  # "FILE:LINE" for a text file, "FILE row N" for a CSV/Parquet table
    text: str
    reason: str


@dataclasses.dataclass
class SeedReport:
    gen: int
    read: int = 0
    valid: int = 0
    added: int = 0
    rejected: list[Rejected] = dataclasses.field(default_factory=list)


def check_url(text: str, cfg: Config) -> tuple[str | None, str | None]:
    """(normalised URL, None) or (None, reason) for one candidate URL."""
    try:
        url = normalize_url(text)
    except InvalidURL as exc:
        return None, str(exc)
    if len(url) > cfg.crawl.max_url_length:
        return None, f"longer than crawl.max_url_length ({len(url)} > {cfg.crawl.max_url_length})"
    ext = url_extension(url)
    if ext and ext in cfg.crawl.skip_extensions:
        return None, f"extension .{ext} is in crawl.skip_extensions"
    host = urlsplit(url).hostname or ""
    # what fetch would refuse before any request (network.resolve's names are trusted there)
    if host not in {h.lower().strip("[]").rstrip(".") for h in cfg.network.resolve}:
        problem = host_problem(host, cfg.network.allow_private)
        if problem:
            return None, f"fetch would block it ({problem}; see network.allow_private)"
    if any(label.startswith("-") or label.endswith("-") for label in host.split(".")):
        return None, "invalid host name (a label starts or ends with '-')"
    return url, None


def read_text_seeds(spark: SparkSession, path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank, non-comment line of a local or URI text file."""
    with contextlib.ExitStack() as stack:
        lines: Iterable[str]
        if hadoopfs.is_uri(path):
            data = hadoopfs.read_bytes(spark, path)
            lines = data.decode("utf-8", errors="replace").splitlines()
        else:
            lines = stack.enter_context(open(path, encoding="utf-8", errors="replace"))
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if text and not text.startswith("#"):
                yield number, text


def read_table_seeds(spark: SparkSession, path: str) -> Iterator[tuple[int, str]]:
    """(row number, url) from a CSV (with header) or Parquet path with a ``url`` column."""
    if path.endswith(".csv") or (
        os.path.isdir(path) and any(n.endswith(".csv") for n in os.listdir(path))
    ):
        df = spark.read.option("header", True).csv(path)
    else:
        df = spark.read.parquet(path)
    if "url" not in df.columns:
        raise ValueError(
            f"seed table {path} has no 'url' column (columns: {', '.join(df.columns)})"
        )
    for number, row in enumerate(df.select("url").toLocalIterator(), start=1):
        yield number, (row["url"] or "").strip()


def is_text_file(spark: SparkSession, path: str) -> bool:
    """A file (not a folder of part files) that is neither CSV nor Parquet."""
    if path.endswith((".csv", ".parquet")):
        return False
    return hadoopfs.is_file(spark, path) if hadoopfs.is_uri(path) else os.path.isfile(path)


def seed(spark: SparkSession, root: str, path: str, cfg: Config, gen: int) -> SeedReport:
    """Normalise, dedup and write seeds as frontier rows of ``gen`` plus queued crawldb rows."""
    if not (hadoopfs.exists(spark, path) if hadoopfs.is_uri(path) else os.path.exists(path)):
        raise FileNotFoundError(f"seed file {path} does not exist")
    text_file = is_text_file(spark, path)
    lines: Iterable[tuple[int, str]] = (
        read_text_seeds(spark, path) if text_file else read_table_seeds(spark, path)
    )
    report = SeedReport(gen=gen)
    rows: dict[int, tuple] = {}
    for number, text in lines:
        report.read += 1
        url, reason = check_url(text, cfg)
        if url is None:
            where = f"{path}:{number}" if text_file else f"{path} row {number}"
            report.rejected.append(Rejected(where, text, reason or "invalid"))
            continue
        report.valid += 1
        host = host_of(url)
        rows.setdefault(url_key(url), (url, url_key(url), host, registered_domain(host)))
    if not rows:
        return report
    df = spark.createDataFrame(
        list(rows.values()), "url string, url_key long, host string, domain string"
    )
    # Seeds crawldb holds deeper than 0 are offered depth 0 (plan lowers it) but not queued.
    crawldb = tables.read(spark, root, "crawldb")
    seeds = unknown_or_shallower(df, crawldb, "url_key", F.lit(0)).cache()
    new = seeds.join(rows_of(crawldb.select("url_key"), seeds), "url_key", "left_anti")
    counts = tables.one_row(
        seeds.agg(F.count(F.lit(1)).alias("seeds")).crossJoin(
            new.agg(F.count(F.lit(1)).alias("added"))
        )
    )
    report.added = int(counts["added"])
    if not counts["seeds"]:
        seeds.unpersist()
        return report
    frontier = seeds.select(
        *columns_of(
            FRONTIER,
            gen=F.lit(gen),
            depth=F.lit(0),
            source_url=F.lit(None),
            reason=F.lit(FrontierReason.SEED),
            discovered_at=F.current_timestamp(),
            score=F.lit(cfg.generate.seed_score),
            redirects=F.lit(None),
        )
    )
    # Frontier first, crawldb second: a crash in between leaves URLs that a rerun seeds again,
    # and the anti-join on the seed rows of gen keeps them from being queued twice. Two
    # appends, not MERGEs (a MERGE costs several appends): the URLs are new to crawldb (or
    # offers of depth 0), and the frontier gets only the seed rows it does not hold (a URL a
    # link already queued keeps its link row beside its seed row; plan takes the shallower).
    queued = (
        tables.read(spark, root, "frontier")
        .where((F.col("gen") == gen) & (F.col("reason") == FrontierReason.SEED))
        .select("url_key")
    )
    tables.append(frontier.join(queued, on="url_key", how="left_anti"), root, "frontier")
    if report.added:
        tables.append(
            queued_rows(frontier.join(new.select("url_key"), "url_key"), gen), root, "crawldb"
        )
    seeds.unpersist()
    return report
