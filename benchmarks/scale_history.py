"""The scale benchmark's history tables, derived from its crawldb (benchmarks.scale_build):
what earlier generations would have written for the URLs crawldb holds.

Each function takes crawldb rows and returns rows of one table, in Spark built-ins. A URL's
rows are in the generation of its last visit (``last_gen``; the frontier: the one it was
found in), slice ``url_key mod 4``. Only the latest version of a page is kept. ``surt`` is
null (it takes a Python function; no stage reads it).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from benchmarks.scale_data import (
    KNOWN_IN_FRONTIER,
    STATUS_MIX,
    STORED,
    T0,
    ScaleSpec,
    at_day,
    by_status,
    host_of,
    html_of,
    text_of,
    uniform,
    url_of,
)
from benchmarks.scale_keys import with_url_key
from crawllib.core.vocab import STAGES, DuplicateKind, FrontierReason, StageState, Status
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import (
    FETCHES,
    FETCHLIST,
    FRONTIER,
    GENERATIONS,
    HOSTS,
    LINKS,
    PAGES,
    ROBOTS,
    TEXTS,
    columns_of,
)
from crawllib.transforms.traps import pattern_counts

SLICES = 4


def _attempted(crawldb: DataFrame) -> DataFrame:
    return crawldb.where(F.col("last_gen").isNotNull())


def _stored(crawldb: DataFrame) -> DataFrame:
    return crawldb.where(F.col("status").isin(*STORED))


def _slice() -> F.Column:
    return F.pmod(F.col("url_key"), F.lit(SLICES))


def home_page(host: F.Column) -> F.Column:
    return F.concat(F.lit("http://"), host, F.lit("/"))


def fetchlist_rows(crawldb: DataFrame) -> DataFrame:
    """The fetchlist row of each attempted URL's last attempt."""
    return _attempted(crawldb).select(
        *columns_of(
            FETCHLIST,
            gen=F.col("last_gen"),
            slice=_slice(),
            slot=F.col("host"),
            attempts=F.col("attempts") - 1,
            etag=F.lit(None),
            known=F.lit(None),
        )
    )


def fetches_rows(crawldb: DataFrame) -> DataFrame:
    """The fetches row of each attempted URL's last attempt, its outcome the status's."""
    ok = F.col("status").isin(*STORED)
    return _attempted(crawldb).select(
        *columns_of(
            FETCHES,
            gen=F.col("last_gen"),
            slice=_slice(),
            outcome=by_status({m.status: F.lit(m.outcome) for m in STATUS_MIX if m.outcome}),
            fetched_at=F.coalesce(F.col("fetched_at"), F.col("updated_at")),
            error_kind=by_status(
                {m.status: F.lit(m.error_kind) for m in STATUS_MIX if m.error_kind}
            ),
            redirect_to=F.when(
                F.col("status") == Status.REDIRECTED,
                F.format_string(
                    "http://%s/moved/%d", F.col("host"), F.pmod("url_key", F.lit(10**12))
                ),
            ),
            content_type=F.when(ok, F.lit("text/html")),
            body_bytes=F.when(ok, F.length(html_of(F.col("url_key")))),
            is_truncated=F.when(ok, F.lit(False)),
            fetch_ms=F.pmod(F.col("url_key"), F.lit(900)) + 50,
            ip=F.lit(None),
            retry_after=F.lit(None),
            source_url=F.lit(None),
            surt=F.lit(None),
            mime_detected=F.when(ok, F.lit("text/html")),
            private_domain=F.lit(None),
        )
    )


def pages_rows(crawldb: DataFrame) -> DataFrame:
    """A pages row (a few dozen bytes of HTML) per URL with a stored version."""
    body = html_of(F.col("url_key"))
    return _stored(crawldb).select(
        *columns_of(
            PAGES,
            gen=F.col("last_gen"),
            slice=_slice(),
            http_status=F.lit(200),
            content_type=F.lit("text/html"),
            charset=F.lit("utf-8"),
            headers=F.create_map(F.lit("content-type"), F.lit("text/html; charset=utf-8")),
            body=body,
            is_truncated=F.lit(False),
            content_hash=F.sha2(body, 256),
            surt=F.lit(None),
        )
    )


def text_columns(seed: F.Column, noindex: F.Column) -> dict[str, F.Column]:
    """What an extraction says of a page whose text is made from ``seed``: a noindex page
    keeps no text, only its fingerprints."""
    text = text_of(seed)
    return {
        "title": F.when(~noindex, F.concat(F.lit("Page "), seed)),
        "text": F.when(~noindex, text),
        "language": F.lit("en"),
        "language_detected": F.lit("en"),
        "text_chars": F.when(noindex, F.lit(0)).otherwise(F.length(text)),
        "content_hash": F.sha2(text, 256),
        "simhash": F.xxhash64(text),
        "error": F.lit(None),
        "directives": F.when(noindex, F.array(F.lit("noindex"))).otherwise(
            F.array().cast("array<string>")
        ),
        "tdm_reserved": F.lit(False),
        "canonical_url": F.lit(None),
        "quality": F.lit(None),  # the signals are the extraction's: none for a made-up text
        "non_document": F.lit(None),
    }


def texts_rows(crawldb: DataFrame) -> DataFrame:
    """A texts row per URL with a stored version; a host's duplicates copy one text and are
    marked exact duplicates of the first of them (lowest gen, url_key)."""
    duplicate = F.col("status") == Status.DUPLICATE
    seed = F.when(duplicate, F.col("host")).otherwise(F.col("url_key").cast("string"))
    first = F.min(F.when(duplicate, F.struct(F.col("last_gen"), F.col("url_key")))).over(
        Window.partitionBy("host")
    )
    copy = duplicate & (first["url_key"] != F.col("url_key"))
    return (
        _stored(crawldb)
        .withColumn("_first", first)
        .select(
            *columns_of(
                TEXTS,
                gen=F.col("last_gen"),
                slice=_slice(),
                **text_columns(seed, F.col("status") == Status.NOINDEX),
                surt=F.lit(None),
                duplicate_of=F.when(copy, F.col("_first.url_key")),
                duplicate_kind=F.when(copy, F.lit(DuplicateKind.EXACT)),
                cluster=F.when(copy, F.col("_first.url_key")).otherwise(F.col("url_key")),
            )
        )
    )


def links_rows(crawldb: DataFrame, per_page: int) -> DataFrame:
    """A stored page's links: to the ``per_page`` URLs after it on its host (in url_key
    order, whatever their status), fewer for the last ones."""
    after = Window.partitionBy("host").orderBy("url_key")
    targets = F.array(
        *[
            F.struct(
                F.lit(k).alias("k"),
                F.lead("url_key", k).over(after).alias("dst_key"),
                F.lead("url", k).over(after).alias("dst_url"),
            )
            for k in range(1, per_page + 1)
        ]
    )
    return (
        crawldb.select("url_key", "url", "host", "status", "last_gen", targets.alias("_targets"))
        .where(F.col("status").isin(*STORED))
        .select("*", F.inline("_targets"))
        .where(F.col("dst_key").isNotNull())
        .select(
            *columns_of(
                LINKS,
                gen=F.col("last_gen"),
                slice=_slice(),
                src_key=F.col("url_key"),
                src_url=F.col("url"),
                dst_host=F.col("host"),
                anchor=F.concat(F.lit("link "), F.col("k")),
            )
        )
    )


def robots_rows(crawldb: DataFrame, gen: int) -> DataFrame:
    """Each host's robots.txt, fetched in generation ``gen``."""
    fetched = at_day(gen)
    return (
        crawldb.select("host")
        .distinct()
        .select(
            *columns_of(
                ROBOTS,
                fetched_at=fetched,
                http_status=F.lit(200),
                body=F.lit("User-agent: *\nDisallow: /private/\n"),
                crawl_delay=F.lit(None),
                sitemaps=F.array().cast("array<string>"),
                expires_at=at_day(gen + 1),
                error_kind=F.lit(None),
            )
        )
    )


def hosts_rows(crawldb: DataFrame, gen: int) -> DataFrame:
    """Each host's politeness row and running totals, as of the last slice of ``gen``."""
    tried = F.col("last_gen").isNotNull()
    totals = crawldb.groupBy("host").agg(
        F.count_if(tried).alias("urls_tried"),
        F.count_if(F.col("status").isin(*STORED)).alias("pages"),
        F.min("first_gen").alias("first_gen"),
        F.max("last_gen").alias("last_gen"),
    )
    zero = F.lit(0)
    return totals.select(
        *columns_of(
            HOSTS,
            slot=F.col("host"),
            kind=F.lit("host"),
            address=F.lit(None),
            response_seconds=F.lit(None),
            adaptive_delay=F.lit(None),
            last_request_at=at_day(gen, 3600),
            delay=F.lit(1.0),
            delay_source=F.lit("default"),
            crawl_delay=F.lit(None),
            http_failures=zero,
            down_failures=zero,
            robots_failures=zero,
            not_before=F.lit(None),
            not_before_reason=F.lit(None),
            down_until=F.lit(None),
            robots_state=F.lit("ok"),
            addresses=F.array().cast("array<string>"),
            urls_attempted=F.col("urls_tried"),
            bytes=F.col("pages") * 50,
            slice_urls=zero,
            slice_pages=zero,
            slice_bytes=zero,
            slice_urls_tried=zero,
            domain=F.col("host"),
            gen=F.lit(gen),
            slice=zero,
            updated_at=at_day(gen, 3600),
        )
    )


def frontier_rows(crawldb: DataFrame) -> DataFrame:
    """The frontier row by which each URL was found: a seed in generation 0, else a link
    from its host's home page."""
    seed = F.col("first_gen") == 0
    return crawldb.select(
        *columns_of(
            FRONTIER,
            gen=F.col("first_gen"),
            source_url=F.when(~seed, home_page(F.col("host"))),
            reason=F.when(seed, F.lit(FrontierReason.SEED)).otherwise(F.lit(FrontierReason.LINK)),
            discovered_at=at_day(F.col("first_gen"), -3600),
        )
    )


def next_frontier(spark: SparkSession, spec: ScaleSpec, crawldb: DataFrame) -> DataFrame:
    """The measured generation's frontier: spec.due["new"] new URLs (numbers from rows on),
    and about KNOWN_IN_FRONTIER * urls URLs crawldb knows already."""
    i = F.col("id")
    new = (
        spark.range(spec.rows, spec.rows + spec.due["new"])
        .withColumn("host", host_of(i, spec.host_count))
        .withColumn("url", url_of(i, F.col("host")))
        .transform(lambda df: with_url_key(df, "url", "url_key", spec.max_url_bytes))
        .select(
            "url", "url_key", "host", F.col("host").alias("domain"), F.lit(spec.gen).alias("depth")
        )
    )
    share = KNOWN_IN_FRONTIER * spec.urls / spec.rows
    known = crawldb.where(uniform(F.col("url_key"), "frontier") < share).select(
        "url", "url_key", "host", "domain", F.lit(spec.gen).alias("depth")
    )
    return new.unionByName(known).select(
        *columns_of(
            FRONTIER,
            gen=F.lit(spec.gen),
            source_url=home_page(F.col("host")),
            reason=F.lit(FrontierReason.LINK),
            discovered_at=at_day(spec.gen, -7200),
            score=F.lit(0.5),
            redirects=F.lit(None),
        )
    )


def traps_rows(db: SparkDb, texts: DataFrame, gen: int) -> DataFrame:
    """The traps table's counts of the stored pages (``texts``: their duplicate marks) per
    host and URL pattern, as of generation ``gen`` (the traps rule, crawllib.transforms.traps,
    run by ``db``)."""
    marks = texts.where(F.col("duplicate_kind").isNotNull()).select("url_key", "duplicate_kind")
    result: DataFrame = db.sql(
        pattern_counts(gen), pages=texts.select("url_key", "url", "host"), marks=marks
    )
    return result


def generations_rows(spark: SparkSession, spec: ScaleSpec, versions: dict[str, int]) -> DataFrame:
    """Every stage of the generations before the measured one, done; the last row records
    the tables' versions (crawllib.store.integrity)."""
    rows: list[tuple] = []
    for gen in range(spec.gen):
        for k, stage in enumerate(STAGES):
            start = (T0 + dt.timedelta(days=gen, minutes=10 * k)).replace(tzinfo=None)
            end = start + dt.timedelta(minutes=5)
            last = (gen, stage) == (spec.gen - 1, STAGES[-1])
            rows.append(
                (gen, stage, StageState.DONE, start, end, 300.0, {}, versions if last else None)
            )
    return spark.createDataFrame(rows, GENERATIONS)
