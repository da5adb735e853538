"""Operator exclusions on the driver and in Spark: the rules (crawllib.policy.exclusions) read
with a SparkSession when crawl.exclude_file is not local, inlined into the config the fetch
tasks get, and matched as a Spark column (built-ins, no UDF) by plan."""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config, replace
from crawllib.core.errors import ConfigError
from crawllib.policy.exclusions import Exclusions
from crawllib.policy.exclusions import load as load_rules


def load(cfg: Config, spark: SparkSession | None = None) -> Exclusions:
    """The crawl's exclusions (crawllib.policy.exclusions.load), an exclude_file that is not
    local read with ``spark.read.text``, collected on the driver."""
    reader = functools.partial(read_with_spark, spark) if spark is not None else None
    return load_rules(cfg, reader)


def inlined(cfg: Config, spark: SparkSession | None = None) -> Config:
    """``cfg`` with the rules of crawl.exclude_file read (:func:`load`) and written into
    crawl.exclude, exclude_file empty: a config the fetch tasks use without reading any file
    (an S3 file is read once, on the driver)."""
    if not cfg.crawl.exclude_file:
        return cfg
    return replace(cfg, crawl__exclude=load(cfg, spark).rules(), crawl__exclude_file="")


def column(rules: Exclusions, url: Column, host: Column, domain: Column) -> Column:
    """:meth:`Exclusions.matches` as a Spark boolean column, built-ins only (no UDF).

    In: string columns as for :meth:`Exclusions.matches`. Out: true when any rule matches, else false
    (a null input matches nothing).
    """
    tests = []
    if rules.hosts:
        tests.append(host.isin(*sorted(rules.hosts)))
    if rules.domains:
        tests.append(domain.isin(*sorted(rules.domains)))
    tests += [url.startswith(p) for p in rules.prefixes]
    tests += [url.rlike(p) for p in rules.patterns]
    if not tests:
        return F.lit(False)
    return F.coalesce(functools.reduce(operator.or_, tests), F.lit(False))


def read_with_spark(spark: SparkSession, path: str) -> list[tuple[str, str]]:
    """(file, text) of each file Spark reads at ``path`` (one, or a folder's), by file name.
    Raises ConfigError when Spark cannot read it."""
    try:
        rows = (
            spark.read.text(path, wholetext=True)
            .select(F.col("_metadata.file_path").alias("file"), "value")
            .collect()
        )
    except Exception as exc:
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        raise ConfigError(
            f"crawl.exclude_file {path!r} cannot be read: {_first_line(exc)}"
        ) from None
    return sorted((row["file"], row["value"]) for row in rows)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "java_exception", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
