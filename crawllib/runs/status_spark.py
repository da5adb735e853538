"""`crawl status` read with Spark, where the ``sql`` extra (delta-rs and DuckDB) is missing: the
same rows and freshness as crawllib.runs.status reads without a JVM."""

from __future__ import annotations

from pyspark.sql import SparkSession

from crawllib.config import Config
from crawllib.runs import status
from crawllib.store import generations, tables


def status_rows(spark: SparkSession, root: str) -> list[tuple]:
    """`crawl status`'s rows read with Spark (crawllib.runs.status.status_rows)."""
    return status.status_rows(generations.read_rows(spark, root))


def freshness(spark: SparkSession, root: str, cfg: Config) -> tuple[int, int, float]:
    """(pages with a stored version, due now, estimated freshness) by the crawl's clock
    (crawl.now, or the real one): crawllib.policy.revisit.freshness_query over crawldb."""
    tables.read(spark, root, "crawldb").createOrReplaceTempView("crawldb")
    row = tables.one_row(spark.sql(status.freshness_sql(cfg)))
    return int(row["pages"]), int(row["due"]), float(row["freshness"] or 0.0)
