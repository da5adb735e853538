"""URL-pattern traps: URLs that only a crawler would follow for ever.

Two rules, each with its reason ``trap_pattern`` in crawldb:

- **Repeated segments** (one URL): a path segment that occurs more than
  ``traps.max_segment_repeats`` times (``/a/b/a/b/a/b``: relative links resolved against the
  wrong base, include loops). Heritrix's PathologicalPathDecideRule and Nutch's default
  regex-urlfilter have the same rule.
- **Patterns of near-identical pages** (a host's history): a URL's *pattern* is its path with
  every run of digits written ``{n}`` and every long hexadecimal run ``{h}``, plus the sorted
  names of its query parameters (values dropped): ``/cal/2026/11`` and ``/cal/1999/2`` are
  ``/cal/{n}/{n}``, ``/shop?size=m&color=red`` is ``/shop?color&size``. Calendars, counters,
  faceted search and parameters with ever-new values give one pattern endless URLs whose
  pages say nearly the same thing; so parse counts, per host and pattern, the pages fetched
  and those marked duplicates (exact or near), in the ``traps`` table, and once a pattern has
  ``traps.min_pages`` pages of which ``traps.duplicate_share`` or more are duplicates, plan
  filters its new URLs. A pattern of real articles (``/news/{n}.html``) has distinct texts
  and is never trapped, however many URLs it has. An operator keeps a pattern crawled with
  ``traps.allow`` (``host pattern`` lines, as the table shows them).

Every rule has a Python function and a Spark twin (built-ins, no UDF); a test keeps them equal.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib import tables
from crawllib.config import Config
from crawllib.vocab import DuplicateKind

_HEX = r"[0-9a-fA-F]{12,}"  # ids, hashes: long runs of hexadecimal digits
_DIGITS = r"[0-9]+"
_SEGMENT = re.compile(r"[^/]+")


def url_pattern(url: str) -> str:
    """The pattern of a normalised URL (module docstring): its path with ``{h}`` for each run
    of 12 or more hexadecimal digits, then ``{n}`` for each run of digits, and ``?`` plus its
    query's parameter names, sorted and each once, joined by ``&``."""
    parts = urlsplit(url)
    path = re.sub(_DIGITS, "{n}", re.sub(_HEX, "{h}", parts.path))
    if not parts.query:
        return path
    names = sorted({pair.split("=", 1)[0] for pair in parts.query.split("&")})
    return f"{path}?{'&'.join(names)}"


def url_pattern_column(url: Column) -> Column:
    """:func:`url_pattern` in Spark built-ins."""
    path = F.regexp_extract(url, r"^[^:/?#]+://[^/?#]*([^?#]*)", 1)
    path = F.regexp_replace(F.regexp_replace(path, _HEX, "{h}"), _DIGITS, "{n}")
    query = F.regexp_extract(url, r"\?([^#]*)", 1)
    names = F.array_sort(
        F.array_distinct(F.transform(F.split(query, "&"), lambda p: F.split(p, "=")[0]))
    )
    return F.when(query == "", path).otherwise(F.concat(path, F.lit("?"), F.array_join(names, "&")))


def repeated_segments(url: str) -> int:
    """How many times the most frequent segment of the URL's path occurs (0 for ``/``)."""
    segments = _SEGMENT.findall(urlsplit(url).path)
    return max((segments.count(s) for s in set(segments)), default=0)


def repeats_more_than(url: Column, times: int) -> Column:
    """Spark: whether some path segment of ``url`` occurs more than ``times`` times
    (:func:`repeated_segments` > times)."""
    path = F.regexp_extract(url, r"^[^:/?#]+://[^/?#]*([^?#]*)", 1)
    segments = F.filter(F.split(path, "/"), lambda s: s != "")
    counts = F.transform(
        F.array_distinct(segments), lambda s: F.size(F.filter(segments, lambda t: t == s))
    )
    return F.coalesce(F.array_max(counts), F.lit(0)) > times


def allowed_patterns(lines: tuple[str, ...]) -> list[tuple[str, str]]:
    """traps.allow lines (``host pattern``) as (host, pattern) pairs; raises ValueError for a
    line that is not two fields."""
    pairs = []
    for line in lines:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{line!r}: expected 'host pattern', as the traps table shows them")
        pairs.append((fields[0].lower(), fields[1]))
    return pairs


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


# MERGE of pattern_counts (s) into traps (t) on (host, pattern), guarded by
# tables.ONCE_PER_GEN: a generation adds its counts once.
TRAPS_UPDATE = {
    "pages": "t.pages + s.pages",
    "duplicates": "t.duplicates + s.duplicates",
    "gen": "s.gen",
    "updated_at": "s.updated_at",
}


def read_trapped(spark: SparkSession, root: str, cfg: Config) -> DataFrame | None:
    """:func:`trapped_patterns` of the crawl root's traps table; None on a root without one
    yet."""
    if not tables.exists(spark, root, "traps"):
        return None
    return trapped_patterns(tables.read(spark, root, "traps"), cfg)


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
