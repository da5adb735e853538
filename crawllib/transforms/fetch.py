"""Fetch-stage steps: a fetchlist slice -> engine input -> engine results -> table rows.

The network work happens in :func:`fetch_results`, lazily, inside ``mapPartitions``: each
task calls the fetch engine (``crawllib.fetch.fetch_rows``, imported on the executor so that
this module never imports aiohttp) on the slots of its partition and streams the records it
yields as rows of :data:`RESULT_SCHEMA`. Everything else here is plain DataFrame -> DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
)

from crawllib.schemas import B, D, I, L, S, struct_of  # noqa: E741

# A robots row as the engine takes it (its ``robots_rows``): timestamps in epoch seconds.
ENGINE_ROBOTS = struct_of(
    ("host", S),
    ("fetched_at", D),
    ("http_status", I),
    ("body", S),
    ("crawl_delay", D),
    ("sitemaps", ArrayType(S)),
    ("expires_at", D),
    ("error_kind", S),
)

# One engine record, "fetch" or "robots" (column ``record``). The fields the two kinds share
# (host, fetched_at, http_status, error_kind) are one column each; a robots.txt body (text) is
# ``robots_body`` because a page body is binary. A robots record's outcome is "new" (the host
# has no robots row yet) or "refreshed" (its row had expired).
RESULT_SCHEMA = struct_of(
    ("record", S),
    ("url_key", L),
    ("url", S),
    ("host", S),
    ("depth", I),
    ("outcome", S),
    ("fetched_at", D),
    ("http_status", I),
    ("error_kind", S),
    ("error_detail", S),
    ("redirect_to", S),
    ("content_type", S),
    ("charset", S),
    ("headers", MapType(S, S)),
    ("body", BinaryType()),
    ("body_bytes", L),
    ("is_truncated", B),
    ("fetch_ms", I),
    ("ip", S),
    ("retry_after", D),
    ("robots_body", S),
    ("crawl_delay", D),
    ("sitemaps", ArrayType(S)),
    ("expires_at", D),
)

_CONVERT: dict[type, Callable[[Any], Any]] = {
    DoubleType: float,
    IntegerType: int,
    LongType: int,
    BooleanType: bool,
}
_RESULT_CONVERTERS = tuple((f.name, _CONVERT.get(type(f.dataType))) for f in RESULT_SCHEMA.fields)


def _epoch(col: str) -> Column:
    return (F.unix_micros(F.col(col)) / 1_000_000).alias(col)


def engine_robots(robots: DataFrame) -> DataFrame:
    """Every robots row in the engine's format; an expired one without its body.

    In: the robots table. Out: ENGINE_ROBOTS columns (timestamps as epoch seconds). The engine
    uses only rows not yet expired (`crawllib.fetch.robots_fetch.fresh_rows`); an expired row
    still travels, small, so that the fetch can tell a host whose stored row its new
    robots.txt replaces (outcome "refreshed") from a host with none (outcome "new").
    """
    fresh = F.col("expires_at") > F.current_timestamp()
    return robots.select(
        "host",
        _epoch("fetched_at"),
        "http_status",
        F.when(fresh, F.col("body")).alias("body"),
        "crawl_delay",
        "sitemaps",
        _epoch("expires_at"),
        "error_kind",
    )


def fetch_inputs(slice_rows: DataFrame, robots: DataFrame) -> DataFrame:
    """The engine's input for one slice: its URLs, plus the cached robots.txt of their hosts.

    In: fetchlist rows (slot, url, url_key, host, depth); robots rows as :func:`engine_robots`
    gives them. Out: slot, url, url_key, host, depth, robots (struct ENGINE_ROBOTS): one row
    per URL with robots null, and one row per host of the slice that has a robots row (url
    null). A robots row travels once per host rather than once per URL (it can be 500 KiB).
    """
    urls = slice_rows.select(
        "slot",
        "url",
        "url_key",
        "host",
        "depth",
        F.lit(None).cast(ENGINE_ROBOTS).alias("robots"),
    )
    hosts = slice_rows.select("host", "slot").distinct()
    cached = robots.join(hosts, on="host", how="inner").select(
        "slot",
        F.lit(None).cast("string").alias("url"),
        F.lit(None).cast("long").alias("url_key"),
        "host",
        F.lit(None).cast("int").alias("depth"),
        F.struct(*[F.col(f.name) for f in ENGINE_ROBOTS.fields]).alias("robots"),
    )
    return urls.unionByName(cached)


def result_row(record: Mapping[str, Any]) -> tuple:
    """One engine record (``crawllib.fetch.FETCH_KEYS`` or ``ROBOTS_KEYS``) as a RESULT_SCHEMA
    tuple; numbers are coerced to the column types."""
    values = dict(record)
    if values.get("record") == "robots":
        values["robots_body"] = values.pop("body", None)
    out = []
    for name, convert in _RESULT_CONVERTERS:
        value = values.get(name)
        out.append(value if value is None or convert is None else convert(value))
    return tuple(out)


def partition_fetcher(cfg: Any) -> Callable[[Iterable[Row]], Iterator[tuple]]:
    """The ``mapPartitions`` function: fetch_inputs rows of some slots -> RESULT_SCHEMA tuples.

    ``cfg`` travels in the closure, by value. Records are yielded as the engine produces them
    (the engine bounds its own queue), so a partition's bodies are never held in one list.
    """

    def fetch_partition(rows: Iterable[Row]) -> Iterator[tuple]:
        from crawllib.fetch import fetch_rows  # aiohttp is imported on executors only

        urls: list[dict[str, Any]] = []
        robots: list[dict[str, Any]] = []
        for row in rows:
            if row["url"] is None:
                robots.append(row["robots"].asDict())
            else:
                urls.append(
                    {
                        "url": row["url"],
                        "url_key": row["url_key"],
                        "host": row["host"],
                        "depth": row["depth"],
                        "slot": row["slot"],
                    }
                )
        if not urls:
            return
        stored = {r["host"] for r in robots}
        for record in fetch_rows(urls, cfg, robots):
            if record["record"] == "robots":
                record = {**record, "outcome": "refreshed" if record["host"] in stored else "new"}
            yield result_row(record)

    return fetch_partition


def fetch_results(inputs: DataFrame, cfg: Any, partitions: int) -> DataFrame:
    """Fetch (lazily: when an action runs) every URL of :func:`fetch_inputs` rows.

    ``repartition(partitions, "slot")`` puts all rows of one slot (a host or a registered
    domain) into one task, so one engine enforces its politeness. Out: RESULT_SCHEMA rows.
    Persist the result before using it twice: every evaluation goes to the network.
    """
    rdd = inputs.repartition(max(1, partitions), "slot").rdd.mapPartitions(partition_fetcher(cfg))
    return inputs.sparkSession.createDataFrame(rdd, RESULT_SCHEMA, verifySchema=False)


def _fetch_records(results: DataFrame) -> DataFrame:
    return results.filter(F.col("record") == "fetch")


def pages_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Successful HTML fetches -> pages rows (content_hash: hex SHA-256 of the body)."""
    return (
        _fetch_records(results)
        .filter((F.col("outcome") == "ok") & F.col("body").isNotNull())
        .select(
            F.lit(gen).alias("gen"),
            F.lit(slice_).alias("slice"),
            "url_key",
            "url",
            "host",
            "depth",
            F.timestamp_seconds("fetched_at").alias("fetched_at"),
            "http_status",
            "content_type",
            "charset",
            "headers",
            "body",
            "is_truncated",
            F.sha2(F.col("body"), 256).alias("content_hash"),
        )
    )


def fetches_from_results(results: DataFrame, gen: int, slice_: int) -> DataFrame:
    """Every fetch record (failures and deferrals included) -> fetches rows."""
    return _fetch_records(results).select(
        F.lit(gen).alias("gen"),
        F.lit(slice_).alias("slice"),
        "url_key",
        "url",
        "host",
        "depth",
        "outcome",
        F.timestamp_seconds("fetched_at").alias("fetched_at"),
        "http_status",
        "error_kind",
        "redirect_to",
        "content_type",
        "body_bytes",
        "is_truncated",
        "fetch_ms",
        "ip",
        "retry_after",
    )


def robots_from_results(results: DataFrame) -> DataFrame:
    """robots.txt records -> robots rows (one per host fetched)."""
    return results.filter(F.col("record") == "robots").select(
        "host",
        F.timestamp_seconds("fetched_at").alias("fetched_at"),
        "http_status",
        F.col("robots_body").alias("body"),
        "crawl_delay",
        "sitemaps",
        F.timestamp_seconds("expires_at").alias("expires_at"),
        "error_kind",
    )
