"""URL-pattern traps in Spark (the rules and why: crawllib.policy.traps): the Spark twins of
the pattern and repeated-segment rules (built-ins, no UDF; a test keeps them equal to the
Python functions), a generation's pages counted per host and pattern, and the patterns judged
traps. The traps table is read and written by crawllib.stages.traps and the stages, never here.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind
from crawllib.policy.traps import DIGITS, HEX, allowed_patterns


def url_pattern_column(url: Column) -> Column:
    """:func:`crawllib.policy.traps.url_pattern` in Spark built-ins."""
    path = F.regexp_extract(url, r"^[^:/?#]+://[^/?#]*([^?#]*)", 1)
    path = F.regexp_replace(F.regexp_replace(path, HEX, "{h}"), DIGITS, "{n}")
    query = F.regexp_extract(url, r"\?([^#]*)", 1)
    names = F.array_sort(
        F.array_distinct(F.transform(F.split(query, "&"), lambda p: F.split(p, "=")[0]))
    )
    return F.when(query == "", path).otherwise(F.concat(path, F.lit("?"), F.array_join(names, "&")))


def repeats_more_than(url: Column, times: int) -> Column:
    """Spark: whether some path segment of ``url`` occurs more than ``times`` times
    (:func:`crawllib.policy.traps.repeated_segments` > times)."""
    path = F.regexp_extract(url, r"^[^:/?#]+://[^/?#]*([^?#]*)", 1)
    segments = F.filter(F.split(path, "/"), lambda s: s != "")
    counts = F.transform(
        F.array_distinct(segments), lambda s: F.size(F.filter(segments, lambda t: t == s))
    )
    return F.coalesce(F.array_max(counts), F.lit(0)) > times


def pattern_counts(pages: DataFrame, marks: DataFrame, gen: int) -> DataFrame:
    """A generation's pages counted per host and pattern: rows for the traps table.

    In: pages of gen (url_key, url, host); marks (url_key, duplicate_kind) of its duplicates.
    Out: host, pattern, pages, duplicates (exact, near or soft 404), first_gen = gen =
    ``gen``."""
    copies = marks.where(
        F.col("duplicate_kind").isin(
            DuplicateKind.EXACT, DuplicateKind.NEAR, DuplicateKind.SOFT_404
        )
    ).select("url_key", F.lit(1).alias("_copy"))
    return (
        pages.select("url_key", "host", url_pattern_column(F.col("url")).alias("pattern"))
        .join(copies, "url_key", "left")
        .groupBy("host", "pattern")
        .agg(
            F.count("*").alias("pages"),
            F.count("_copy").alias("duplicates"),
        )
        .select(
            "host",
            "pattern",
            "pages",
            "duplicates",
            F.lit(gen).alias("first_gen"),
            F.lit(gen).alias("gen"),
            F.current_timestamp().alias("updated_at"),
        )
    )


def trapped_patterns(traps: DataFrame, cfg: Config) -> DataFrame:
    """The (host, pattern) pairs whose new URLs plan filters: traps.min_pages pages or more,
    at least traps.duplicate_share of them duplicates, and not in traps.allow.
    In: traps rows. Out: host, pattern."""
    t = cfg.traps
    trapped = traps.where(
        (F.col("pages") >= t.min_pages)
        & (F.col("duplicates") >= F.col("pages") * t.duplicate_share)
    ).select("host", "pattern")
    allowed = allowed_patterns(t.allow)
    if not allowed:
        return trapped
    spark = traps.sparkSession
    kept = spark.createDataFrame(allowed, "host string, pattern string")
    return trapped.join(kept, ["host", "pattern"], "left_anti")
