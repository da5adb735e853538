"""Update-stage steps: a generation's fetches -> new crawldb rows and redirect frontier rows.

Status of a fetched URL, from its fetch outcome:

=================================  ==========================================================
ok                                 ``gone`` (reason ``soft_404``) for a soft 404 (its text is
                                   its host's answer to a missing page), else ``noindex`` if
                                   the page asks it (texts.directives), else
                                   ``duplicate`` if texts.duplicate_of is set, else ``fetched``
redirect                           ``redirected`` (the target goes to the next frontier;
                                   reason ``bad_location`` for a target that is no http(s)
                                   URL, ``too_many_redirects`` past fetch.max_redirects hops)
http_error 4xx except 429, others  ``gone`` (reason ``http_<status>``)
http_error 429 / 5xx, error        ``failed``: attempts + 1, due again at not_before =
                                   the visit + retry_backoff_seconds * 2**(attempts - 1) (the
                                   first generation after it); ``dead`` once
                                   attempts >= max_attempts
error "decompressed_too_large"     ``dead`` at once: a decompression bomb is not retried
robots_denied                      ``robots_denied``
blocked                            ``blocked``
not_modified                       status kept (``fetched`` or ``duplicate``): the stored
                                   version stays current
deferred                           ``queued`` for gen N + 1 (a revisit keeps its status);
                                   attempts and last_gen unchanged
=================================  ==========================================================

``attempts`` counts the attempts of the current visit: a revisit (the URL was ``fetched`` or
``duplicate``) starts again from 0, so a page fetched a hundred times is not dead after one
failure. A visit that reaches the page (ok, not_modified) sets the revisit schedule
(:mod:`crawllib.policy.revisit`): fetched_at (the fetch's time, or ``crawl.now``), fetch_interval,
next_fetch_at, the validators, and counts the visit changed or unchanged (its text hash
against the stored version's; a 304 is unchanged).

A robots.txt that answered 5xx or could not be read denies the host for now, not for ever
(RFC 9309 §2.3.1.4): the engine defers those URLs (robots.txt is asked again with backoff).
Fetches written before it did ("robots_denied" with "robots_unavailable") count as failures.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from crawllib.config import Config, parse_now
from crawllib.content.sitemaps import changefreq_seconds
from crawllib.core.urls import InvalidURL, host_of, normalize_url, registered_domain, url_key
from crawllib.core.vocab import (
    PERMANENT_ERRORS,
    REVISITED_STATUSES,
    VISITED_OUTCOMES,
    Directive,
    DuplicateKind,
    ErrorKind,
    FrontierReason,
    IntervalSource,
    Outcome,
    Status,
    sql_list,
    words,
)
from crawllib.policy.revisit import HOUR, next_interval, revisits
from crawllib.store.schemas import CRAWLDB, FRONTIER, columns_of
from crawllib.transforms.depth import unknown_or_shallower
from crawllib.transforms.lookup import rows_of

_TARGET = StructType(
    [
        StructField("url", StringType(), False),
        StructField("url_key", LongType(), False),
        StructField("host", StringType(), False),
        StructField("domain", StringType(), False),
    ]
)


def redirect_target(url: str | None) -> tuple[str, int, str, str] | None:
    """(normalised URL, url_key, host, registered domain) of a redirect target, or None if the
    crawler cannot use it. The engine already normalises Location; this keeps the rule in one
    place (``crawllib.core.urls``) whatever gave the URL."""
    if not url:
        return None
    try:
        normalized = normalize_url(url)
    except InvalidURL:
        return None
    host = host_of(normalized)
    return normalized, url_key(normalized), host, registered_domain(host)


_redirect_target_udf = F.udf(redirect_target, _TARGET)
_domain_udf = F.udf(registered_domain, StringType())


def redirect_target_key(redirect_to: Column) -> Column:
    """The url_key of a redirect target as :func:`redirect_target` normalises it (null for
    one the crawler cannot use)."""
    return _redirect_target_udf(redirect_to)["url_key"]


def _retryable() -> Column:
    """Outcomes worth another attempt: errors, 429 and 5xx answers, a robots.txt that could
    not be read, and any outcome this code does not know."""
    outcome, code = F.col("outcome"), F.col("http_status")
    return (
        (outcome == Outcome.ERROR)
        | ((outcome == Outcome.HTTP_ERROR) & ((code == 429) | (code >= 500)))
        | (
            (outcome == Outcome.ROBOTS_DENIED)
            & (F.col("error_kind") == ErrorKind.ROBOTS_UNAVAILABLE)
        )
        | ~outcome.isin(*[o for o in words(Outcome) if o != Outcome.ERROR])
    )


def _soft_404() -> Column:
    """The page's text is its host's answer to a missing page (texts.duplicate_kind)."""
    return F.col("duplicate_kind").eqNullSafe(F.lit(DuplicateKind.SOFT_404))


class SparkOps:
    """:class:`crawllib.policy.revisit.Ops` on Spark columns."""

    def where(self, condition: Column, yes: Column | float, no: Column | float) -> Column:
        return F.when(condition, yes).otherwise(no)

    def clamp(self, value: Column, low: float, high: float) -> Column:
        return F.least(F.greatest(value, F.lit(low)), F.lit(high))


SPARK = SparkOps()


def crawldb_updates(
    fetches: DataFrame,
    texts: DataFrame,
    crawldb: DataFrame,
    gen: int,
    cfg: Config,
    updated_at: Column | None = None,
    cash: DataFrame | None = None,
) -> DataFrame:
    """The crawldb row of every URL fetched in generation ``gen``, after the fetch.

    In: fetches rows of gen (url_key, url, host, depth, outcome, http_status, error_kind,
    fetched_at, etag, last_modified); texts rows of gen (url_key, duplicate_of,
    duplicate_kind, content_hash); crawldb (the state before the fetch: CRAWLDB columns). A
    URL missing from crawldb gets a fresh row (first_gen = gen, domain from its host). Retries
    follow fetch.max_attempts and fetch.retry_backoff_seconds, the schedule recrawl and
    crawl.now; ``cash`` (dst_key, cash: :func:`crawllib.transforms.priority.link_cash` of
    gen) is added to the score of the URLs it names (score_gen = gen). Out: CRAWLDB columns,
    one row per fetched url_key.

    Each column group has its builder, over one :class:`_Visit` (the fetch's outcome beside
    crawldb's row before it, ``old_x``): status, reason, schedule, validators.
    """
    v = _Visit(cfg)
    schedule = _Schedule(v, cfg)
    return (
        _visits(fetches, texts, crawldb, cash)
        .withColumns(
            {
                "attempts": v.attempts,
                "status": _status(v, cfg),
                "fetch_interval": v.on_visit(schedule.interval.seconds, "old_fetch_interval"),
            }
        )
        .select(
            *columns_of(
                CRAWLDB,
                domain=F.coalesce(F.col("old_domain"), _domain_udf(F.col("host"))),
                reason=_reason(v, cfg),
                # the shortest way found: a URL followed in its task may be known deeper
                depth=F.least(F.col("old_depth"), F.col("depth")),
                first_gen=F.coalesce(F.col("old_first_gen"), F.lit(gen)),
                last_gen=F.when(v.deferred, F.col("old_last_gen")).otherwise(F.lit(gen)),
                # a failed URL is due again by time, in the first generation after not_before
                next_gen=F.when(v.is_status(Status.FAILED) | v.deferred, F.lit(gen + 1)),
                not_before=F.when(
                    v.is_status(Status.FAILED),
                    F.timestamp_seconds(F.unix_micros(schedule.at) / 1_000_000 + v.retry_in),
                ),
                updated_at=F.current_timestamp() if updated_at is None else updated_at,
                **schedule.columns(v),
                **_validators(v),
                **_score(gen),
                redirects=F.col("old_redirects"),
            )
        )
    )


def _visits(
    fetches: DataFrame, texts: DataFrame, crawldb: DataFrame, cash: DataFrame | None
) -> DataFrame:
    """One row per fetched URL: the fetch (``visited_at``, ``new_etag``, ...), its text
    (``text_hash``, ``_noindex``, duplicate marks), crawldb's row before it (``old_x``) and the
    cash it receives (``_cash``, null when none)."""
    texts = texts.select(
        "url_key",
        "duplicate_of",
        "duplicate_kind",
        F.col("content_hash").alias("text_hash"),
        F.array_contains(F.col("directives"), Directive.NOINDEX).alias("_noindex"),
    ).dropDuplicates(["url_key"])
    kept = [f.name for f in CRAWLDB.fields if f.name not in ("url_key", "url", "host")]
    before = rows_of(crawldb, fetches).select(
        "url_key", *[F.col(c).alias(f"old_{c}") for c in kept]
    )
    joined = (
        fetches.select(
            "url_key",
            "url",
            "host",
            "depth",
            "outcome",
            "http_status",
            "error_kind",
            F.col("fetched_at").alias("visited_at"),
            F.col("etag").alias("new_etag"),
            F.col("last_modified").alias("new_last_modified"),
        )
        .dropDuplicates(["url_key"])
        .join(texts, on="url_key", how="left")
        .join(before, on="url_key", how="left")
    )
    if cash is None:
        return joined.withColumn("_cash", F.lit(None).cast("double"))
    return joined.join(
        cash.select(F.col("dst_key").alias("url_key"), F.col("cash").alias("_cash")),
        on="url_key",
        how="left",
    )


class _Visit:
    """The conditions every column group of :func:`crawldb_updates` reads: what the fetch did
    (``outcome``), and crawldb's row before it (``old_x``)."""

    def __init__(self, cfg: Config) -> None:
        self.outcome = F.col("outcome")
        self.ok = self.outcome == Outcome.OK
        self.deferred = self.outcome == Outcome.DEFERRED
        self.not_modified = self.outcome == Outcome.NOT_MODIFIED
        self.visited = self.outcome.isin(*VISITED_OUTCOMES)
        self.had_version = F.col("old_status").isin(*REVISITED_STATUSES)
        old_attempts = F.coalesce(F.col("old_attempts"), F.lit(0))
        # A revisit is a new visit: its attempts count from 0.
        previous = F.when(self.had_version, F.lit(0)).otherwise(old_attempts)
        self.attempts = F.when(self.deferred, old_attempts).otherwise(previous + 1)
        self.retry_in = F.lit(cfg.fetch.retry_backoff_seconds) * F.pow(F.lit(2), self.attempts - 1)

    @staticmethod
    def is_status(status: str) -> Column:
        """The new status (the ``status`` column :func:`_status` wrote) is ``status``."""
        return F.col("status") == status

    def on_visit(self, value: Column, otherwise: str) -> Column:
        """``value`` when the fetch reached the page, else crawldb's ``otherwise`` column."""
        return F.when(self.visited, value).otherwise(F.col(otherwise))


def _status(v: _Visit, cfg: Config) -> Column:
    """crawldb's status after the fetch (docs/architecture.md, "fetch outcome | crawldb status")."""
    return (
        F.when(v.ok & _soft_404(), Status.GONE)
        .when(v.ok & F.col("_noindex"), Status.NOINDEX)
        .when(v.ok & F.col("duplicate_of").isNotNull(), Status.DUPLICATE)
        .when(v.ok, Status.FETCHED)
        .when(v.not_modified & v.had_version, F.col("old_status"))
        .when(v.not_modified, Status.FETCHED)
        .when(v.outcome == Outcome.REDIRECT, Status.REDIRECTED)
        .when(v.deferred & v.had_version, F.col("old_status"))
        .when(v.deferred, Status.QUEUED)
        .when(F.col("error_kind").isin(*PERMANENT_ERRORS), Status.DEAD)
        .when(
            _retryable(),
            F.when(v.attempts >= cfg.fetch.max_attempts, Status.DEAD).otherwise(Status.FAILED),
        )
        .when(v.outcome == Outcome.HTTP_ERROR, Status.GONE)
        .when(v.outcome == Outcome.ROBOTS_DENIED, Status.ROBOTS_DENIED)
        .when(v.outcome == Outcome.BLOCKED, Status.BLOCKED)
    )


def _reason(v: _Visit, cfg: Config) -> Column:
    """Why a URL has its status: none when fetched, the duplicate kind, the redirect's
    trouble, the soft 404, else the error kind, ``http_<status>`` or the outcome."""
    http_reason = F.concat(F.lit("http_"), F.col("http_status").cast("string"))
    return (
        F.when(F.col("status").isin(Status.FETCHED, Status.NOINDEX), F.lit(None))
        .when(v.not_modified | (v.deferred & v.had_version), F.col("old_reason"))
        .when(
            v.is_status(Status.DUPLICATE),
            F.coalesce(F.col("duplicate_kind"), F.lit(Status.DUPLICATE)),
        )
        .when(
            v.is_status(Status.REDIRECTED),
            F.coalesce(
                F.col("error_kind"),  # bad_location: a target that cannot be crawled
                F.when(
                    F.coalesce(F.col("old_redirects"), F.lit(0)) >= cfg.fetch.max_redirects,
                    F.lit(ErrorKind.TOO_MANY_REDIRECTS),
                ),
            ),
        )
        .when(v.ok & _soft_404(), F.lit(DuplicateKind.SOFT_404))
        .otherwise(F.coalesce(F.col("error_kind"), http_reason, v.outcome))
    )


class _Schedule:
    """The revisit schedule of a visit that reached the page: was the page changed, its next
    interval (crawllib.policy.revisit), the visit's time ``at`` (crawl.now when set)."""

    def __init__(self, v: _Visit, cfg: Config) -> None:
        revisit = F.col("old_fetched_at").isNotNull()
        same_text = v.not_modified | F.col("text_hash").eqNullSafe(F.col("old_content_hash"))
        self.changed = revisit & ~same_text
        self.unchanged = revisit & same_text
        self.interval = next_interval(
            cfg.recrawl,
            SPARK,
            F.coalesce(
                F.col("old_fetch_interval"), F.lit(cfg.recrawl.default_interval_hours * HOUR)
            ),
            revisit,
            self.changed,
        )
        clock = parse_now(cfg.crawl.now)
        self.at = F.col("visited_at") if clock is None else F.timestamp_seconds(F.lit(clock))
        # from the new fetch_interval column
        self.due = (
            F.timestamp_seconds(F.unix_micros(self.at) / 1_000_000 + F.col("fetch_interval"))
            if revisits(cfg.recrawl)
            else F.lit(None)
        )

    def columns(self, v: _Visit) -> dict[str, Column]:
        """The schedule's crawldb columns (fetch_interval is set before, as ``due`` reads it)."""

        def count(flag: Column, column: str) -> Column:
            return F.coalesce(F.col(column), F.lit(0)) + F.when(v.visited & flag, 1).otherwise(0)

        return {
            "fetched_at": v.on_visit(self.at, "old_fetched_at"),
            "next_fetch_at": v.on_visit(self.due, "old_next_fetch_at"),
            "interval_source": v.on_visit(self.interval.source, "old_interval_source"),
            "changed_at": v.on_visit(
                F.when(~self.unchanged, self.at).otherwise(F.col("old_changed_at")),
                "old_changed_at",
            ),
            "visits_changed": count(self.changed, "old_visits_changed"),
            "visits_unchanged": count(self.unchanged, "old_visits_unchanged"),
        }


def _validators(v: _Visit) -> dict[str, Column]:
    """What the next request sends and compares: the status, the text's hash, the validators
    (a 304 may omit them: the stored version's stand)."""
    return {
        "http_status": F.when(v.deferred | v.not_modified, F.col("old_http_status")).otherwise(
            F.col("http_status")
        ),
        "content_hash": F.when(v.ok, F.col("text_hash")).otherwise(F.col("old_content_hash")),
        "etag": F.when(v.ok, F.col("new_etag"))
        .when(v.not_modified, F.coalesce(F.col("new_etag"), F.col("old_etag")))
        .otherwise(F.col("old_etag")),
        "last_modified": F.when(v.ok, F.col("new_last_modified"))
        .when(
            v.not_modified,
            F.coalesce(F.col("new_last_modified"), F.col("old_last_modified")),
        )
        .otherwise(F.col("old_last_modified")),
    }


def _score(gen: int) -> dict[str, Column]:
    """The cash the URL's inlinks passed it this generation, added to its score."""
    passed = F.col("_cash").isNotNull()
    return {
        "score": F.when(
            passed, F.coalesce(F.col("old_score"), F.lit(0.0)) + F.col("_cash")
        ).otherwise(F.col("old_score")),
        "score_gen": F.when(passed, F.lit(gen)).otherwise(F.col("old_score_gen")),
    }


def score_updates(cash: DataFrame, fetched: DataFrame, gen: int) -> DataFrame:
    """Rows that add a generation's cash to known URLs it did not fetch: url_key, score = the
    cash, score_gen = gen, every other column null (status null tells them from
    :func:`crawldb_updates` rows in the MERGE: :func:`crawldb_merge_clauses`).

    In: cash (dst_key, cash); fetched (url_key of the URLs fetched in gen). Out: CRAWLDB
    columns."""
    rows = cash.select(F.col("dst_key").alias("url_key"), F.col("cash").alias("score"))
    given = {"score_gen": F.lit(gen)}
    blank = {f.name: F.lit(None) for f in CRAWLDB.fields if f.name not in ("url_key", "score")}
    return rows.join(fetched.select("url_key"), "url_key", "left_anti").select(
        *columns_of(CRAWLDB, **{**blank, **given})
    )


def crawldb_merge_clauses(gen: int) -> dict[str, Any]:
    """The MERGE of :func:`crawldb_updates` and :func:`score_updates` rows (``s``) into
    crawldb (``t``), as keyword arguments of ``crawllib.store.tables.merge``: a fetched URL's row
    replaces crawldb's (:func:`crawldb_update_guard`) and is inserted when new; a score row
    adds its cash to a known URL whose score has not had gen's yet (score_gen), and is never
    inserted (a URL crawldb does not know is in the next frontier, with its cash)."""
    fetched = "s.status IS NOT NULL"
    adds = (
        f"s.status IS NULL AND (t.score_gen IS NULL OR t.score_gen < {gen})",
        {
            "score": "coalesce(t.score, 0) + s.score",
            "score_gen": "s.score_gen",
            "updated_at": "current_timestamp()",
        },
    )
    return {
        "update": {f.name: f"s.{f.name}" for f in CRAWLDB.fields if f.name != "url_key"},
        "update_condition": f"{fetched} AND {crawldb_update_guard(gen)}",
        "also": [adds],
        "insert_condition": fetched,
    }


VISIT_COUNTS = ("new", "revisited", "changed", "unchanged", "not_modified")


def visit_counts(gen: int) -> list[Column]:
    """Aggregates named VISIT_COUNTS: the visits of generation ``gen`` that reached their page,
    told from crawldb after update's MERGE (so a rerun counts the same). Over crawldb rows of
    the URLs fetched in gen, with ``_visited`` (their fetch reached the page: ok or
    not_modified) and ``_not_modified`` (it was a 304)."""
    visited = (F.col("last_gen") == gen) & F.col("_visited")
    revisit = (F.col("visits_changed") + F.col("visits_unchanged")) > 0
    this_visit_changed = F.col("changed_at") == F.col("fetched_at")
    return [
        F.count_if(visited & ~revisit).alias("new"),
        F.count_if(visited & revisit).alias("revisited"),
        F.count_if(visited & revisit & this_visit_changed).alias("changed"),
        F.count_if(visited & revisit & ~this_visit_changed).alias("unchanged"),
        F.count_if(visited & F.col("_not_modified")).alias("not_modified"),
    ]


def crawldb_update_guard(gen: int) -> str:
    """MERGE condition (``t`` crawldb, ``s`` :func:`crawldb_updates`) under which a crawldb
    row takes the update: not yet updated by gen or later, and for a deferral (the one update
    that leaves last_gen before gen), not already put off to a later generation (a rerun of
    the stage then changes no row)."""
    return (
        f"(t.last_gen IS NULL OR t.last_gen < {gen}) AND NOT "
        f"(coalesce(s.last_gen, -1) < {gen} AND t.next_gen > {gen})"
    )


def redirect_frontier(
    fetches: DataFrame, crawldb: DataFrame, gen: int, max_redirects: int = 5
) -> DataFrame:
    """Frontier rows of gen + 1 for redirect targets not yet in crawldb, and for known ones at
    a greater depth than the redirecting URL's (an offer: crawllib.transforms.depth).

    In: fetches rows of gen (url_key, url, depth, outcome, redirect_to, fetched_at); crawldb
    (url_key, score, depth). Out: FRONTIER columns, reason "redirect", depth of the redirecting URL,
    one row per target (the shallowest source, then the smallest source URL), score the
    highest of its sources' (a redirect passes all of a URL's priority), redirects = the
    source's + 1 (targets past ``max_redirects``, fetch.max_redirects, are not queued: the
    chain ends there, and update records why); discovered_at is the fetch time, so a rerun
    writes the same rows.
    """
    redirects = fetches.filter(
        (F.col("outcome") == Outcome.REDIRECT) & F.col("redirect_to").isNotNull()
    )
    scores = rows_of(crawldb, redirects).select(
        "url_key",
        F.col("score").alias("_score"),
        (F.coalesce(F.col("redirects"), F.lit(0)) + 1).alias("_hops"),
    )
    targets = (
        redirects.join(scores, on="url_key", how="left")
        .select(
            _redirect_target_udf(F.col("redirect_to")).alias("target"),
            F.col("url").alias("source_url"),
            "depth",
            F.col("fetched_at").alias("discovered_at"),
            "_score",
            F.coalesce(F.col("_hops"), F.lit(1)).alias("_hops"),
        )
        .filter(F.col("target").isNotNull() & (F.col("_hops") <= max_redirects))
        .select("target.*", "source_url", "depth", "discovered_at", "_score", "_hops")
    )
    new = unknown_or_shallower(targets, crawldb, "url_key", F.col("depth"))
    first = F.min(F.struct("depth", "source_url", "discovered_at", "url", "host", "domain"))
    return (
        new.groupBy("url_key")
        .agg(
            first.alias("first"),
            F.max("_score").alias("score"),
            F.min("_hops").alias("redirects"),
        )
        .select("url_key", "first.*", "score", "redirects")
        .select(*columns_of(FRONTIER, gen=F.lit(gen + 1), reason=F.lit(FrontierReason.REDIRECT)))
    )


def followed_frontier(fetches: DataFrame, frontier: DataFrame, gen: int) -> DataFrame:
    """Frontier rows of ``gen`` for the URLs the fetch followed in its task, as if plan had
    taken them from the frontier: reason "link", the page that linked them as source_url, its
    depth + 1, discovered_at = fetch time; only those the frontier of gen does not hold yet, so
    appending them again changes nothing.

    In: fetches rows of gen (url_key, url, host, depth, fetched_at, source_url); frontier rows
    (gen, url_key). Out: FRONTIER columns, score null (update adds the cash of their links
    to their crawldb rows).
    """
    followed = fetches.where(F.col("source_url").isNotNull()).dropDuplicates(["url_key"])
    rows = followed.select(
        *columns_of(
            FRONTIER,
            gen=F.lit(gen),
            domain=_domain_udf(F.col("host")),
            reason=F.lit(FrontierReason.LINK),
            discovered_at=F.col("fetched_at"),
            score=F.lit(None),
            redirects=F.lit(None),
        )
    )
    held = frontier.where(F.col("gen") == gen).select("url_key")
    return rows.join(held, on="url_key", how="left_anti")


def sitemap_hints(sitemaps: DataFrame, cfg: Config) -> DataFrame:
    """What the sitemaps of a generation say of each URL they list, as crawldb-shaped rows for
    :data:`SITEMAP_HINTS_UPDATE`: next_fetch_at = its ``lastmod`` (the latest, if several list
    it), fetch_interval = its ``changefreq`` as seconds (crawllib.content.sitemaps.changefreq_seconds,
    within the recrawl bounds; the shortest), the other columns null.

    In: sitemaps rows (entries). Out: CRAWLDB columns, one row per url_key with a hint.
    """
    words = ("always", "hourly", "daily", "weekly", "monthly", "yearly")
    low, high = cfg.recrawl.min_interval_hours * HOUR, cfg.recrawl.max_interval_hours * HOUR
    seconds = F.lit(None).cast("double")
    for word in reversed(words):
        hint = min(max(changefreq_seconds(word) or high, low), high)
        seconds = F.when(F.lower(F.col("e.changefreq")) == word, F.lit(hint)).otherwise(seconds)
    hints = (
        sitemaps.select(F.explode("entries").alias("e"))
        .select(
            F.col("e.url_key").alias("url_key"),
            F.timestamp_seconds(F.col("e.lastmod")).alias("lastmod"),
            seconds.alias("interval"),
        )
        .where(F.col("lastmod").isNotNull() | F.col("interval").isNotNull())
        .groupBy("url_key")
        .agg(F.max("lastmod").alias("lastmod"), F.min("interval").alias("interval"))
    )
    blank = {f.name: F.lit(None) for f in CRAWLDB.fields if f.name != "url_key"}
    return hints.select(
        *columns_of(
            CRAWLDB,
            **{**blank, "next_fetch_at": F.col("lastmod"), "fetch_interval": F.col("interval")},
        )
    )


# MERGE of :func:`sitemap_hints` (``s``) into crawldb (``t``), for pages with a stored version:
# a changefreq replaces the default interval of a page not yet adapted (interval_source
# "sitemap", next_fetch_at = its visit + that interval); a lastmod after the visit makes the
# page due at once (next_fetch_at = lastmod, already past, if earlier). Replacing only a
# default interval and taking the earlier time, a rerun changes nothing.
_CHANGED_SINCE = "s.next_fetch_at > t.fetched_at"
_HINTED = f"s.fetch_interval IS NOT NULL AND t.interval_source = '{IntervalSource.DEFAULT}'"
SITEMAP_HINTS_GUARD = (
    f"t.status IN ({sql_list(REVISITED_STATUSES)}) AND t.fetched_at IS NOT NULL AND ("
    f"({_CHANGED_SINCE} AND (t.next_fetch_at IS NULL OR s.next_fetch_at < t.next_fetch_at))"
    f" OR ({_HINTED}))"
)
SITEMAP_HINTS_UPDATE = {
    "next_fetch_at": (
        f"least(CASE WHEN {_HINTED} THEN t.fetched_at + make_interval(0, 0, 0, 0, 0, 0, "
        "s.fetch_interval) ELSE t.next_fetch_at END, "
        f"CASE WHEN {_CHANGED_SINCE} THEN s.next_fetch_at END)"
    ),
    "fetch_interval": f"CASE WHEN {_HINTED} THEN s.fetch_interval ELSE t.fetch_interval END",
    "interval_source": (
        f"CASE WHEN {_HINTED} THEN '{IntervalSource.SITEMAP}' ELSE t.interval_source END"
    ),
    "updated_at": "current_timestamp()",
}
