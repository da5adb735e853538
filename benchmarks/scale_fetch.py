"""The scale benchmark's fetch: what the fetch stage writes for a generation's fetchlist, made
up in Spark built-ins instead of fetched, and recorded as a fetch stage run.

For every fetchlist row of the generation: a fetches row whose outcome is drawn from its
url_key (mostly ``ok``; revisits partly ``not_modified``; a few redirects, HTTP errors,
errors, robots denials and deferrals); for each ``ok`` page a pages row (a few dozen bytes of
HTML), a texts row not yet marked as a duplicate (a revisit's text mostly unchanged, a few new
pages copying their host's duplicated text) and about ``links_per_text`` links: to the next
pages of its host in this fetchlist and to new URLs of its host; and the slots' hosts rows.
Written as the fetch stage writes a slice (pages, texts, links and the hosts MERGE at once,
fetches last), in one slice. Not written: robots (every host's robots.txt is in the table,
expired or not: the real fetch would refresh them), sitemaps, probes; no URL is followed in
the task. ``surt`` is null (it takes a Python function; no stage reads it).

:func:`run_fetch` records the run in the generations table as ``runner.run_stage`` does
(running, then done with its counts and the tables' versions), so update takes the fetch as
done. It runs on Spark (crawllib.store.spark_db.SparkDb), whichever engine runs the other
stages.
"""

from __future__ import annotations

import datetime as dt

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from benchmarks.scale_data import ScaleSpec, at_day, bucket, etag_of, html_of
from benchmarks.scale_history import text_columns
from benchmarks.scale_keys import with_url_key, wrapping
from crawllib.core.vocab import Outcome, Stage, StageState, words
from crawllib.runs import runner
from crawllib.stages.fetch import FetchResult
from crawllib.store import generations, integrity, tables
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import FETCHES, HOSTS, LINKS, PAGES, TEXTS, columns_of
from crawllib.transforms.fetch_inputs import HOSTS_UPDATE

KNOWN_LINKS = 0.7  # of a page's links, the share to pages of this fetchlist; the rest are new


def run_fetch(db: SparkDb, spec: ScaleSpec) -> FetchResult:
    """The fetch stage of generation spec.gen, synthetic, recorded as done."""
    gen = spec.gen
    ledger = generations.read_ledger(db)
    if not runner.should_run(ledger.states, gen, Stage.FETCH):
        raise RuntimeError(f"fetch of generation {gen} is done already")
    integrity.verify(db, ledger.versions, ledger.recorded_by)
    at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    generations.record(db, gen, Stage.FETCH, StageState.RUNNING, at)
    result = synthetic_fetch(db.spark, db.root, spec)
    versions = integrity.current_versions(db)
    generations.record(
        db, gen, Stage.FETCH, StageState.DONE, at, result.as_counts(), versions=versions
    )
    return result


def _outcomes(fetchlist: DataFrame, gen: int) -> DataFrame:
    """Fetchlist rows + outcome, http_status, error_kind, fetched_at and ``seed`` (what an ok
    page's text is made from)."""
    b = bucket(F.col("url_key"), "outcome", 1000)
    revisit = F.col("etag").isNotNull()
    outcome = (
        F.when(b < 20, F.lit(Outcome.REDIRECT))
        .when(b < 50, F.lit(Outcome.HTTP_ERROR))
        .when(b < 70, F.lit(Outcome.ERROR))
        .when(b < 80, F.lit(Outcome.ROBOTS_DENIED))
        .when(b < 85, F.lit(Outcome.DEFERRED))
        .when(revisit & (b < 400), F.lit(Outcome.NOT_MODIFIED))
        .otherwise(F.lit(Outcome.OK))
    )
    key = F.col("url_key").cast("string")
    seed = (
        F.when(revisit, F.when(b < 700, key).otherwise(F.concat(key, F.lit(f"@{gen}"))))
        .when(b % 33 == 0, F.col("host"))  # a copy of its host's duplicated text
        .otherwise(key)
    )
    return fetchlist.withColumns(
        {
            "outcome": outcome,
            "http_status": F.when(b < 20, 301)
            .when(b < 50, F.when(b % 2 == 0, 404).otherwise(503))
            .when(b < 85, F.lit(None))
            .when(revisit & (b < 400), 304)
            .otherwise(200),
            "error_kind": F.when((b >= 50) & (b < 70), F.lit("timeout")).when(
                (b >= 80) & (b < 85), F.lit("deadline")
            ),
            "fetched_at": at_day(gen, bucket(F.col("url_key"), "second", 3600)),
            "seed": seed,
            "noindex": b >= 995,
        }
    )


def _links(pages: DataFrame, spec: ScaleSpec) -> DataFrame:
    """Links rows of the ok pages: to the next pages of their host in this fetchlist, and to
    new URLs of their host."""
    known = round(spec.links_per_text * KNOWN_LINKS)
    after = Window.partitionBy("host").orderBy("url_key")
    targets = F.array(
        *[
            F.struct(
                F.lit(k).alias("k"),
                F.lead("url_key", k).over(after).alias("dst_key"),
                F.lead("url", k).over(after).alias("dst_url"),
            )
            for k in range(1, known + 1)
        ]
    )
    to_known = (
        pages.withColumn("_targets", targets)
        .select("*", F.inline("_targets"))
        .where(F.col("dst_key").isNotNull())
    )
    new_url = F.format_string(
        "http://%s/new/%d/%d-%d.html",
        F.col("host"),
        F.lit(spec.gen),
        F.pmod(F.col("url_key"), F.lit(10**12)),
        F.col("k"),
    )
    to_new = (
        pages.select(
            "*", F.explode(F.sequence(F.lit(known + 1), F.lit(spec.links_per_text))).alias("k")
        )
        .withColumn("dst_url", new_url)
        .transform(lambda df: with_url_key(df, "dst_url", "dst_key", spec.max_url_bytes))
    )
    columns = ["gen", "slice", "url_key", "url", "host", "k", "dst_key", "dst_url"]
    return (
        to_known.select(columns)
        .unionByName(to_new.select(columns))
        .select(
            *columns_of(
                LINKS,
                src_key=F.col("url_key"),
                src_url=F.col("url"),
                dst_host=F.col("host"),
                anchor=F.concat(F.lit("link "), F.col("k")),
            )
        )
    )


def _hosts(fetches: DataFrame, gen: int) -> DataFrame:
    """The slots' hosts rows of this fetch: their share of the totals (the MERGE adds it)."""
    tried = (F.col("attempts") == 0) & (F.col("outcome") != Outcome.DEFERRED)
    per_slot = fetches.groupBy("slot").agg(
        F.count_if(F.col("outcome") != Outcome.DEFERRED).alias("slice_urls"),
        F.count_if(F.col("outcome") == Outcome.OK).alias("slice_pages"),
        F.coalesce(F.sum("body_bytes"), F.lit(0)).alias("slice_bytes"),
        F.count_if(tried).alias("slice_urls_tried"),
        F.max("fetched_at").alias("last_request_at"),
        F.first("domain").alias("domain"),
    )
    zero = F.lit(0)
    given: dict[str, Column] = {
        "delay": F.lit(1.0),
        "delay_source": F.lit("default"),
        "http_failures": zero,
        "down_failures": zero,
        "robots_failures": zero,
        "robots_state": F.lit("ok"),
        "addresses": F.array().cast("array<string>"),
        "urls_attempted": F.col("slice_urls"),
        "pages": F.col("slice_pages"),
        "bytes": F.col("slice_bytes"),
        "urls_tried": F.col("slice_urls_tried"),
        "first_gen": F.lit(gen),
        "last_gen": F.lit(gen),
        "gen": F.lit(gen),
        "slice": zero,
        "updated_at": F.current_timestamp(),
    }
    blank = {f.name: F.lit(None) for f in HOSTS.fields if f.name not in given}
    return per_slot.select(*columns_of(HOSTS, **{**blank, **given}))


def synthetic_fetch(spark: SparkSession, root: str, spec: ScaleSpec) -> FetchResult:
    """Write the fetch stage's rows for fetchlist gen spec.gen; its counts."""
    gen = spec.gen
    fetchlist = tables.read(spark, root, "fetchlist").where(F.col("gen") == gen)
    with wrapping(spark):
        rows = _outcomes(fetchlist, gen).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            ok = rows.where(F.col("outcome") == Outcome.OK)
            body = html_of(F.col("url_key"))
            fetches = rows.withColumns(
                {
                    "content_type": F.when(F.col("outcome") == Outcome.OK, F.lit("text/html")),
                    "body_bytes": F.when(F.col("outcome") == Outcome.OK, F.length(body)),
                    "is_truncated": F.when(F.col("outcome") == Outcome.OK, F.lit(False)),
                    "fetch_ms": F.pmod(F.col("url_key"), F.lit(900)) + 50,
                    "redirect_to": F.when(
                        F.col("outcome") == Outcome.REDIRECT,
                        F.format_string(
                            "http://%s/moved/%d", F.col("host"), F.pmod("url_key", F.lit(10**12))
                        ),
                    ),
                    "etag": F.when(
                        F.col("outcome").isin(Outcome.OK, Outcome.NOT_MODIFIED),
                        etag_of(F.col("url_key"), gen),
                    ),
                }
            )
            pages = ok.select(
                *columns_of(
                    PAGES,
                    content_type=F.lit("text/html"),
                    charset=F.lit("utf-8"),
                    headers=F.create_map(F.lit("content-type"), F.lit("text/html; charset=utf-8")),
                    body=body,
                    is_truncated=F.lit(False),
                    content_hash=F.sha2(body, 256),
                    surt=F.lit(None),
                )
            )
            texts = ok.select(
                *columns_of(
                    TEXTS,
                    **text_columns(F.col("seed"), F.col("noindex")),
                    duplicate_of=F.lit(None),
                    duplicate_kind=F.lit(None),
                    surt=F.lit(None),
                    cluster=F.col("url_key"),
                )
            )
            writes = {"pages": pages, "texts": texts, "links": _links(ok, spec)}
            tables.in_parallel(
                spark,
                *[
                    lambda df=df, name=name: tables.append(df, root, name)
                    for name, df in writes.items()
                ],
                lambda: tables.merge(
                    spark, _hosts(fetches, gen), root, "hosts", keys=["slot"], update=HOSTS_UPDATE
                ),
            )
            blank = {
                name: F.lit(None)
                for name in (
                    "ip",
                    "retry_after",
                    "source_url",
                    "surt",
                    "mime_detected",
                    "private_domain",
                )
            }
            tables.append(fetches.select(*columns_of(FETCHES, **blank)), root, "fetches")
            counts = {r["outcome"]: r["count"] for r in rows.groupBy("outcome").count().collect()}
            slices = tables.one_row(rows.agg(F.count_distinct("slice").alias("n")))["n"]
        finally:
            rows.unpersist()
    ok_count = counts.get(Outcome.OK, 0)
    return FetchResult(
        urls=sum(counts.values()),
        slices=slices,
        slices_skipped=0,
        **{outcome: counts.get(outcome, 0) for outcome in words(Outcome)},
        pages=ok_count,
        extracted=ok_count,
        followed=0,
        followed_planned_hosts=0,
        followed_new_hosts=0,
        robots_fetched=0,
        seconds_fetching=0,
    )
