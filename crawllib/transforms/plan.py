"""Plan steps: frontier of a generation + crawldb -> decided candidates -> fetchlist rows and
crawldb changes. Pure DataFrame -> DataFrame functions; the stage (crawllib.stages.plan) reads
and writes.

A *candidate* has the crawldb columns (new URLs are shaped as the crawldb rows they would
become) plus ``is_new`` (not yet in crawldb); a *revisit* is a candidate with a stored version
(``fetched_at`` set: due by its ``next_fetch_at``, or a failed revisit due for a retry). The decision steps add ``filter_reason`` (depth,
extension, length, budget or null), ``deferred`` (over this generation's per-host cap, or held)
and ``held`` (its slot is held back by the hosts table: :func:`held_slots`); ``slot`` is the
row's politeness key (:func:`with_slot`). The name is
``filter_reason`` rather than ``reason`` because crawldb already has a ``reason``.

Every ranking is a total order, so a rerun decides the same way: generate.order for new URLs
(highest score, then depth, then url_key: :func:`crawllib.transforms.priority.score_order`),
(next_fetch_at, then that order) for revisits (most overdue first).
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.vocab import (
    PENDING_STATUSES,
    REVISITED_STATUSES,
    FilterReason,
    Status,
    Waiting,
    WaitReason,
    words,
)
from crawllib.policy.exclusions import Exclusions
from crawllib.policy.revisit import revisits
from crawllib.store.schemas import CRAWLDB, FETCHLIST, FRONTIER, HOSTS, columns_of
from crawllib.transforms.depth import Lowered, expands, with_lowered_depths
from crawllib.transforms.exclusions import column as excluded_column
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.priority import score_order
from crawllib.transforms.traps import repeats_more_than, url_pattern_column

_CRAWLDB_COLUMNS = [f.name for f in CRAWLDB.fields]
# lowered: a known URL whose depth a shorter path lowered in this plan (crawllib.transforms.depth)
CANDIDATE_COLUMNS = [*_CRAWLDB_COLUMNS, "is_new", "lowered"]
DECIDED_COLUMNS = [
    *CANDIDATE_COLUMNS,
    "slot",
    "filter_reason",
    "deferred",
    "held",
    "over_time",
    "over_top",
]


def dedup_frontier(frontier: DataFrame) -> DataFrame:
    """One row per url_key: the lowest depth, then the earliest discovered, then source_url.

    In: frontier rows (frontier columns). Out: frontier columns, url_key unique.
    """
    first = Window.partitionBy("url_key").orderBy(
        F.col("depth").asc(),
        F.col("discovered_at").asc_nulls_last(),
        F.col("source_url").asc_nulls_last(),
    )
    return (
        frontier.withColumn("_rank", F.row_number().over(first))
        .where(F.col("_rank") == 1)
        .select([f.name for f in FRONTIER.fields])
    )


def new_candidates(frontier: DataFrame, crawldb: DataFrame) -> DataFrame:
    """Frontier rows whose url_key is not in crawldb. In/out: frontier columns."""
    known = rows_of(crawldb.select("url_key"), frontier)
    return frontier.join(known, on="url_key", how="left_anti").select(
        [f.name for f in FRONTIER.fields]
    )


def queued_rows(frontier: DataFrame, gen: int) -> DataFrame:
    """Frontier rows -> the crawldb rows their URLs get when first known: queued for ``gen``
    (first_gen = next_gen = gen), reason = the frontier reason, no attempt yet, no schedule.

    In: frontier columns. Out: crawldb columns.
    """
    given = {
        "status": F.lit(Status.QUEUED),
        "attempts": F.lit(0),
        "first_gen": F.lit(gen),
        "next_gen": F.lit(gen),
        "updated_at": F.current_timestamp(),
    }
    unknown = {f.name: F.lit(None) for f in CRAWLDB.fields if f.name not in FRONTIER.fieldNames()}
    return frontier.select(*columns_of(CRAWLDB, **{**unknown, **given}))


def frontier_as_crawldb_rows(frontier: DataFrame, gen: int) -> DataFrame:
    """New URLs as the queued crawldb rows they become (:func:`queued_rows`).

    In: frontier columns. Out: CANDIDATE_COLUMNS with is_new true.
    """
    return queued_rows(frontier, gen).withColumns({"is_new": F.lit(True), "lowered": F.lit(False)})


def is_due(gen: int, as_of: float | None) -> Column:
    """A queued or failed URL is due in ``gen`` at ``as_of`` (epoch seconds, the generation's
    clock; None: any time): its next_gen has come (null: at once), and its not_before (a
    failed URL's retry time) has passed. A failed URL an older crawllib put off to a later
    generation, without a not_before, is due at once: retries are due by time."""
    status, next_gen, not_before = F.col("status"), F.col("next_gen"), F.col("not_before")
    old_retry = (status == Status.FAILED) & not_before.isNull()
    reached = (F.coalesce(next_gen, F.lit(gen)) <= gen) | old_retry
    if as_of is None:
        return reached
    return reached & (not_before.isNull() | (not_before <= F.timestamp_seconds(F.lit(as_of))))


def pending_from_crawldb(crawldb: DataFrame, gen: int, as_of: float | None = None) -> DataFrame:
    """Known URLs due in ``gen`` (:func:`is_due`): status queued or failed.

    In: crawldb columns. Out: CANDIDATE_COLUMNS with is_new false.
    """
    due = is_due(gen, as_of)
    return crawldb.where(F.col("status").isin(*PENDING_STATUSES) & due).select(
        *_CRAWLDB_COLUMNS, F.lit(False).alias("is_new"), _lowered(crawldb)
    )


def due_revisits(crawldb: DataFrame, gen: int, as_of: float) -> DataFrame:
    """Fetched pages due again in ``gen``: status fetched or duplicate, next_fetch_at at or
    before ``as_of`` (epoch seconds: the generation's clock), and not deferred to a later
    generation (next_gen).

    In: crawldb columns. Out: CANDIDATE_COLUMNS with is_new false.
    """
    due = (F.col("next_fetch_at") <= F.timestamp_seconds(F.lit(as_of))) & (
        F.coalesce(F.col("next_gen"), F.lit(gen)) <= gen
    )
    return crawldb.where(F.col("status").isin(*REVISITED_STATUSES) & due).select(
        *_CRAWLDB_COLUMNS, F.lit(False).alias("is_new"), _lowered(crawldb)
    )


def _lowered(crawldb: DataFrame) -> Column:
    """The ``lowered`` mark of crawldb rows (transforms.depth.with_lowered_depths), false
    where none was applied."""
    mark = F.col("lowered") if "lowered" in crawldb.columns else F.lit(False)
    return mark.alias("lowered")


def is_revisit() -> Column:
    """A candidate with a stored version (a revisit, or the retry of one)."""
    return F.col("fetched_at").isNotNull()


def extension_of(url: Column) -> Column:
    """Lowercase extension of a normalised URL's last path segment, or ''.

    The built-in twin of ``crawllib.core.urls.url_extension`` (a test keeps them in step): the path
    ends at '?' (normalised URLs carry no fragment), the segment at ';', and a dot only counts
    after a non-empty stem.
    """
    path = F.regexp_extract(url, r"^[^:/?]+://[^/?#]*([^?#]*)", 1)
    segment = F.regexp_extract(path, r"([^/;]*)(;[^/]*)?$", 1)
    return F.lower(F.regexp_extract(segment, r"^.+\.([^.]*)$", 1))


def filter_trapped(df: DataFrame, trapped: DataFrame | None) -> DataFrame:
    """Set filter_reason trap_pattern on rows without one whose (host, URL pattern) is in
    ``trapped`` (crawllib.stages.traps.trapped_patterns). In: url, host, filter_reason. Out: same
    columns."""
    if trapped is None:
        return df
    marks = trapped.select(
        F.col("host").alias("_trap_host"),
        F.col("pattern").alias("_trap_pattern"),
        F.lit(True).alias("_trapped"),
    )
    joined = df.withColumn("_pattern", url_pattern_column(F.col("url"))).join(
        F.broadcast(marks),
        (F.col("host") == F.col("_trap_host")) & (F.col("_pattern") == F.col("_trap_pattern")),
        "left",
    )
    reason = F.when(
        F.col("filter_reason").isNull() & F.col("_trapped").isNotNull(),
        F.lit(FilterReason.TRAP_PATTERN),
    ).otherwise(F.col("filter_reason"))
    return joined.withColumn("filter_reason", reason).select(df.columns)


def filter_aliases(df: DataFrame, aliased: DataFrame | None) -> DataFrame:
    """Set filter_reason alias on rows without one whose host is an alias of another
    (crawllib.store.aliases.alias_hosts). In: host, filter_reason. Out: same columns."""
    if aliased is None:
        return df
    marks = aliased.select(F.col("host").alias("_alias_host"), F.lit(True).alias("_alias"))
    joined = df.join(F.broadcast(marks), F.col("host") == F.col("_alias_host"), "left")
    reason = F.when(
        F.col("filter_reason").isNull() & F.col("_alias").isNotNull(), F.lit(FilterReason.ALIAS)
    ).otherwise(F.col("filter_reason"))
    return joined.withColumn("filter_reason", reason).select(df.columns)


def with_filter_reason(df: DataFrame, cfg: Config, excluded: Exclusions | None = None) -> DataFrame:
    """Add ``filter_reason``: excluded (an operator's rule: ``excluded``, from
    crawllib.transforms.exclusions.load), depth (> crawl.max_depth), extension (in
    crawl.skip_extensions), length (> crawl.max_url_length), trap_pattern (a path segment
    repeated more than traps.max_segment_repeats times: crawllib.stages.traps), first match wins,
    else null. In: url, host, domain, depth.
    """
    extension = extension_of(F.col("url"))
    skip = [e.lower() for e in cfg.crawl.skip_extensions]
    rules = excluded or Exclusions()
    reason = (
        F.when(
            excluded_column(rules, F.col("url"), F.col("host"), F.col("domain")),
            F.lit(FilterReason.EXCLUDED),
        )
        .when(F.col("depth") > cfg.crawl.max_depth, F.lit(FilterReason.DEPTH))
        .when(extension.isin(*skip) if skip else F.lit(False), F.lit(FilterReason.EXTENSION))
        .when(F.length("url") > cfg.crawl.max_url_length, F.lit(FilterReason.LENGTH))
        .when(
            repeats_more_than(F.col("url"), cfg.traps.max_segment_repeats),
            F.lit(FilterReason.TRAP_PATTERN),
        )
    )
    return df.withColumn("filter_reason", reason.cast("string"))


# URLs of each host (host, _host_used) and of each registered domain (domain, _domain_used)
# that have had an attempt: what the budgets have used up.
Used = tuple[DataFrame, DataFrame]


def attempted_in_crawldb(crawldb: DataFrame) -> Used:
    """Budget use counted in crawldb: its rows with last_gen set, per host and per domain (an
    aggregation of the whole table)."""
    tried = crawldb.where(F.col("last_gen").isNotNull())
    return (
        tried.groupBy("host").agg(F.count("*").alias("_host_used")),
        tried.groupBy("domain").agg(F.count("*").alias("_domain_used")),
    )


def attempted_in_hosts(hosts: DataFrame) -> Used:
    """Budget use from the hosts table's running totals (politeness.key = host: one row per
    host, urls_tried = its crawldb rows with last_gen set), per host and summed per domain."""
    tried = hosts.where(F.col("urls_tried") > 0)
    return (
        tried.select(F.col("slot").alias("host"), F.col("urls_tried").alias("_host_used")),
        tried.groupBy("domain").agg(F.sum("urls_tried").alias("_domain_used")),
    )


def host_totals_from_crawldb(crawldb: DataFrame) -> DataFrame:
    """Hosts rows that set the running totals budgets read (urls_tried, domain) to what
    crawldb says: the other columns null. In: crawldb. Out: HOSTS rows."""
    tried = crawldb.where(F.col("last_gen").isNotNull()).groupBy("host")
    totals = tried.agg(F.count("*").alias("urls_tried"), F.first("domain").alias("domain"))
    given = {"slot": F.col("host"), "urls_tried": F.col("urls_tried"), "domain": F.col("domain")}
    blank = {f.name: F.lit(None) for f in HOSTS.fields if f.name not in given}
    return totals.select(*columns_of(HOSTS, **blank, **given))


def apply_budgets(candidates: DataFrame, used: Used, cfg: Config) -> DataFrame:
    """Set filter_reason 'budget' on URLs past generate.host_budget or generate.domain_budget.

    A budget counts URLs, not attempts: URLs already attempted (``used``:
    :func:`attempted_in_crawldb` or :func:`attempted_in_hosts`) use it up and are never cut
    themselves (a retry is no new URL). Not-yet-attempted candidates without a filter_reason
    take the rest in generate.order (:func:`crawllib.transforms.priority.score_order`), first
    per host, then per domain among those the host budget let through.
    In: url_key, host, domain, depth, score, last_gen, filter_reason. Out: same columns.
    """
    by_host, by_domain = used
    columns = candidates.columns
    spends = F.col("filter_reason").isNull() & F.col("last_gen").isNull()
    order = score_order(cfg)
    host_rank = F.row_number().over(Window.partitionBy("_spends", "host").orderBy(*order))
    domain_rank = F.row_number().over(
        Window.partitionBy("_spends", "_over_host", "domain").orderBy(*order)
    )
    df = (
        candidates.withColumn("_spends", spends)
        .join(by_host, on="host", how="left")
        .join(by_domain, on="domain", how="left")
        .withColumn(
            "_over_host",
            F.col("_spends")
            & (F.coalesce(F.col("_host_used"), F.lit(0)) + host_rank > cfg.generate.host_budget),
        )
        .withColumn(
            "_over_domain",
            F.col("_spends")
            & ~F.col("_over_host")
            & (
                F.coalesce(F.col("_domain_used"), F.lit(0)) + domain_rank
                > cfg.generate.domain_budget
            ),
        )
        .withColumn(
            "filter_reason",
            F.when(
                F.col("_over_host") | F.col("_over_domain"), F.lit(FilterReason.BUDGET)
            ).otherwise(F.col("filter_reason")),
        )
    )
    return df.select(columns)


def cap_per_host(
    df: DataFrame,
    max_per_host: int,
    revisit_share: float = 0.0,
    order: list[Column] | None = None,
) -> DataFrame:
    """Add ``deferred``: true for rows past their host's share of max_per_host. Revisits
    (:func:`is_revisit`) have ``floor(max_per_host * revisit_share)`` places, most overdue
    first (next_fetch_at, then ``order``); the other URLs the rest, in ``order`` (default
    (depth, url_key); plan passes generate.order's); a kind with fewer URLs than its places
    leaves them to the other. Rows with a filter_reason are not ranked and never deferred.
    In: url_key, host, depth, fetched_at, next_fetch_at, filter_reason (and what ``order``
    reads). Out: + deferred.
    """
    eligible = F.col("filter_reason").isNull()
    revisit = is_revisit()
    overdue = F.when(revisit, F.unix_micros(F.col("next_fetch_at")))
    order = order or [F.col("depth").asc(), F.col("url_key").asc()]
    kind = Window.partitionBy(eligible, F.col("host"), revisit)
    rank = F.row_number().over(kind.orderBy(overdue.asc(), *order))
    mine = F.count("*").over(kind)
    others = F.count("*").over(Window.partitionBy(eligible, F.col("host"))) - mine
    revisit_places = int(max_per_host * revisit_share)
    places = F.when(revisit, F.lit(revisit_places)).otherwise(F.lit(max_per_host - revisit_places))
    left_by_others = F.greatest(F.lit(0), F.lit(max_per_host) - places - others)
    return df.withColumn("deferred", eligible & (rank > places + left_by_others))


def cap_by_time(
    df: DataFrame, delays: DataFrame | None, cfg: Config, order: list[Column]
) -> DataFrame:
    """Add ``over_time``: planned rows (no filter_reason, not deferred) past what their slot
    can fetch in generate.fetch_seconds (0: no limit) at its delay: 1 + fetch_seconds /
    delay URLs, the delay being the slot's in the hosts table (``delays``: slot, delay; its
    Crawl-delay, adaptive delay or backoff) and at least politeness.default_delay. With
    politeness.key = ip each host is capped so at its own row's delay, then the address at
    its row's (at least politeness.address_delay, else min_address_delay). Revisits first
    (most overdue), then ``order``; they are ``deferred`` too.
    In: slot, host, filter_reason, deferred, fetched_at, next_fetch_at and what ``order``
    reads. Out: + over_time."""
    seconds = cfg.generate.fetch_seconds
    if seconds <= 0:
        return df.withColumn("over_time", F.lit(False))
    p = cfg.politeness
    by_host = p.key == "ip"
    if delays is None:
        delays = df.sparkSession.createDataFrame([], "slot string, delay double")
    joined = with_hold(df, delays.select("slot", "delay"))
    overdue = F.when(is_revisit(), F.unix_micros(F.col("next_fetch_at")))

    def over(planned: Column, key: str, least: float, delay: Column) -> Column:
        delay = F.greatest(F.lit(least), F.coalesce(delay, F.lit(least)))
        quota = F.when(delay > 0, F.floor(F.lit(seconds) / delay) + 1)
        rank = F.row_number().over(
            Window.partitionBy(planned, F.col(key)).orderBy(overdue.asc_nulls_last(), *order)
        )
        return planned & quota.isNotNull() & (rank > quota)

    if not by_host:
        over_slot = over(is_planned(), "slot", p.default_delay, F.col("delay"))
        return joined.withColumns(
            {"over_time": over_slot, "deferred": F.col("deferred") | over_slot}
        ).select(*df.columns, "over_time")
    host_delays = delays.select(F.col("slot").alias("host"), F.col("delay").alias("_host_delay"))
    joined = joined.join(host_delays, on="host", how="left")
    over_host = over(is_planned(), "host", p.default_delay, F.col("_host_delay"))
    joined = joined.withColumn("_over_host", over_host)
    least = p.address_delay or p.min_address_delay
    over_address = over(is_planned() & ~F.col("_over_host"), "slot", least, F.col("delay"))
    over_any = F.col("_over_host") | over_address
    return joined.withColumns(
        {"over_time": over_any, "deferred": F.col("deferred") | over_any}
    ).select(*df.columns, "over_time")


def cap_generation(df: DataFrame, top_n: int, order: list[Column]) -> DataFrame:
    """Add ``over_top``: planned rows (no filter_reason, not deferred) past the first
    ``top_n`` of the whole generation in ``order`` (generate.top_n; 0: no cap); they are
    ``deferred`` too. One ranking over all hosts: its planned rows meet in one task, which a
    generation's size (millions of rows at most) allows.
    In: filter_reason, deferred and what ``order`` reads. Out: + over_top."""
    if top_n <= 0:
        return df.withColumn("over_top", F.lit(False))
    planned = is_planned()
    rank = F.row_number().over(Window.partitionBy(planned).orderBy(*order))
    over = planned & (rank > top_n)
    return df.withColumns({"over_top": over, "deferred": F.col("deferred") | over})


def held_slots(hosts: DataFrame, cfg: Config, now: float | None = None) -> DataFrame:
    """The slots whose URLs wait, without an attempt, for a later generation
    (:func:`holds`). In: hosts rows. Out: slot."""
    return holds(hosts, cfg, now).select("slot").distinct()


def holds(hosts: DataFrame, cfg: Config, now: float | None = None) -> DataFrame:
    """Why and until when a slot's URLs wait, without an attempt, for a later generation: a
    Retry-After that ends more than fetch.slice_grace_seconds from now (hosts.not_before), a
    down host's cool-down or a robots.txt retry not over (crawllib.engine.slots), or a
    Crawl-delay above politeness.max_crawl_delay not honoured (no end).
    ``now``: the crawl's clock (epoch seconds; None: the real one).
    In: hosts rows. Out: slot, hold (a crawllib.core.vocab.Waiting word), until (null: no end)."""
    grace = cfg.fetch.slice_grace_seconds
    at = F.current_timestamp() if now is None else F.timestamp_seconds(F.lit(now))
    later = F.col("not_before") > at + F.expr(f"make_interval(0, 0, 0, 0, 0, 0, {grace})")
    # the engine defers a cooling-down host or one waiting for its robots.txt at once, grace
    # or not: planning it would only spend a generation
    waits = F.col("not_before_reason").isin(WaitReason.DOWN, WaitReason.ROBOTS)
    timed = later | (waits & (F.col("not_before") > at))
    too_slow = (
        F.col("crawl_delay") > F.lit(cfg.politeness.max_crawl_delay)
        if not cfg.politeness.honor_long_crawl_delay
        else F.lit(False)
    )
    return hosts.where(timed | too_slow).select(
        "slot",
        F.when(timed, F.coalesce(F.col("not_before_reason"), F.lit(Waiting.RETRY_AFTER)))
        .otherwise(F.lit(Waiting.CRAWL_DELAY))
        .alias("hold"),
        F.when(timed, F.col("not_before")).alias("until"),
    )


def with_hold(df: DataFrame, held: DataFrame, by_host: bool = False) -> DataFrame:
    """Add the columns of ``held`` (rows keyed by a hosts row's slot: :func:`holds`,
    :func:`held_slots`) but its slot: those of the row's slot, else, with ``by_host``
    (politeness.key = ip: each host of an address has a hosts row of its own), of its host.
    In: slot (and host). Out: + held's other columns, null where neither is held."""
    others = [c for c in held.columns if c != "slot"]

    def keyed(tag: str) -> DataFrame:
        return held.select(
            F.col("slot").alias(f"_{tag}_key"), *[F.col(c).alias(f"_{tag}_{c}") for c in others]
        )

    out = df.join(keyed("s"), F.col("slot") == F.col("_s_key"), "left")
    if not by_host:
        return out.select(*df.columns, *[F.col(f"_s_{c}").alias(c) for c in others])
    out = out.join(keyed("h"), F.col("host") == F.col("_h_key"), "left")
    by_slot = F.col("_s_key").isNotNull()
    return out.select(
        *df.columns,
        *[F.when(by_slot, F.col(f"_s_{c}")).otherwise(F.col(f"_h_{c}")).alias(c) for c in others],
    )


def hold(df: DataFrame, held: DataFrame | None, by_host: bool = False) -> DataFrame:
    """Add ``held``: the row's slot, or with ``by_host`` its host, is in ``held``
    (:func:`held_slots`, :func:`with_hold`); a held row without a filter_reason is
    ``deferred`` too. In: slot, host, filter_reason, deferred. Out: + held."""
    if held is None:
        return df.withColumn("held", F.lit(False))
    marks = held.select("slot", F.lit(True).alias("held"))
    is_held = F.coalesce(F.col("held"), F.lit(False))
    return with_hold(df, marks, by_host).withColumns(
        {
            "held": is_held,
            "deferred": F.col("deferred") | (is_held & F.col("filter_reason").isNull()),
        }
    )


def with_slot(df: DataFrame, cfg: Config, addresses: DataFrame | None = None) -> DataFrame:
    """Add ``slot``, the politeness key of a row (politeness.key): its host, its registered
    domain, or with ``ip`` its host's address in ``addresses`` (dns rows: host, address), the
    host itself when it has none (a failed lookup: fetch records the failure per URL).
    In: host, domain. Out: + slot."""
    key = cfg.politeness.key
    if key == "domain":
        return df.withColumn("slot", F.col("domain"))
    if key != "ip" or addresses is None:
        return df.withColumn("slot", F.col("host"))
    known = addresses.where(F.col("address").isNotNull()).select(
        F.col("host").alias("_dns_host"), F.col("address").alias("_address")
    )
    return (
        df.join(known, F.col("host") == F.col("_dns_host"), "left")
        .withColumn("slot", F.coalesce(F.col("_address"), F.col("host")))
        .drop("_dns_host", "_address")
    )


def candidate_hosts(
    frontier: DataFrame, crawldb: DataFrame, gen: int, as_of: float | None = None
) -> DataFrame:
    """The distinct hosts plan_decisions may choose URLs of (new frontier URLs, due crawldb
    URLs, due revisits when ``as_of`` is given): the names to resolve for politeness.key = ip.
    Out: host."""
    new = new_candidates(dedup_frontier(frontier), crawldb).select("host")
    known = pending_from_crawldb(crawldb, gen, as_of)
    if as_of is not None:
        known = known.unionByName(due_revisits(crawldb, gen, as_of))
    return new.unionByName(known.select("host")).distinct()


def with_slice(df: DataFrame, slices: int, order: list[Column] | None = None) -> DataFrame:
    """Add ``slice``: the slot's URLs in ``order`` (default (depth, url_key); plan passes
    generate.order's, so a slot's best URLs come in its first slices) dealt round-robin over
    ``slices`` slices, the same on every run.

    Every slice holds every slot (that has URLs enough), so each slice keeps all hosts in
    flight at once and lasts about 1/slices of the politeness-bound time: slices that held
    whole slots each would run one after the other, each as long as its busiest host.
    In: slot, depth, url_key (and what ``order`` reads). Out: + slice (int).
    """
    order = order or [F.col("depth").asc(), F.col("url_key").asc()]
    rank = F.row_number().over(Window.partitionBy("slot").orderBy(*order))
    return df.withColumn("slice", F.pmod(rank - 1, F.lit(slices)).cast("int"))


@dataclasses.dataclass(frozen=True)
class PlanInputs:
    """What :func:`plan_decisions` decides with, beside the frontier and crawldb; each is
    optional (None: that rule does not apply, or its default).

    ``held``: slots held back (:func:`held_slots`); ``addresses``: the slots' addresses
    (:func:`with_slot`); ``used``: the budgets' use (default :func:`attempted_in_crawldb`);
    ``as_of``: the generation's clock, epoch seconds (revisits are due by it); ``excluded``:
    the operator's exclusions; ``trapped``: URL patterns judged traps; ``delays``: each slot's
    delay (:func:`cap_by_time`); ``aliased``: hosts judged aliases; ``lowered``: the depths
    shorter paths lower (crawllib.stages.depths)."""

    held: DataFrame | None = None
    addresses: DataFrame | None = None
    used: Used | None = None
    as_of: float | None = None
    excluded: Exclusions | None = None
    trapped: DataFrame | None = None
    delays: DataFrame | None = None
    aliased: DataFrame | None = None
    lowered: Lowered | None = None


def plan_decisions(
    frontier: DataFrame,
    crawldb: DataFrame,
    cfg: Config,
    gen: int,
    inputs: PlanInputs = PlanInputs(),
) -> DataFrame:
    """Candidates of ``gen`` with every decision: new frontier URLs (deduped, not in crawldb),
    due crawldb URLs and, when ``as_of`` (the generation's clock, epoch seconds) is given and
    recrawl.policy revisits, due revisits (:func:`due_revisits`); given their slot
    (``addresses``: :func:`with_slot`), filtered (``excluded``: the operator's exclusions,
    which apply to revisits too; the other rules never to a revisit: it was fetched under the
    rules of its time; ``trapped``: URL patterns judged traps; ``aliased``: hosts judged
    aliases, whose revisits are filtered too), budgeted (``used``: the budgets' use, by default
    :func:`attempted_in_crawldb`), capped per host (generate.revisit_share of each host's
    places kept for revisits), held (``held``: slots, :func:`held_slots`), capped by time
    (generate.fetch_seconds at each slot's delay, ``delays``: :func:`cap_by_time`) and per
    generation (generate.top_n), in generate.order. ``lowered``: the depths shorter paths
    lower (crawllib.stages.depths), applied to new and known URLs before any decision (a
    URL filtered for depth that comes within crawl.max_depth is a candidate again). The
    names in double backquotes are the fields of ``inputs`` (:class:`PlanInputs`). In:
    frontier rows of gen, crawldb. Out: DECIDED_COLUMNS.
    """
    fresh = new_candidates(dedup_frontier(frontier), crawldb)
    if inputs.lowered is not None:
        fresh = with_depths(fresh, inputs.lowered)
        crawldb = with_lowered_depths(
            crawldb, inputs.lowered.depths, cfg, gen, inputs.lowered.small
        )
    new = frontier_as_crawldb_rows(fresh, gen).select(CANDIDATE_COLUMNS)
    known = pending_from_crawldb(crawldb, gen, inputs.as_of)
    if inputs.as_of is not None and revisits(cfg.recrawl):
        known = known.unionByName(due_revisits(crawldb, gen, inputs.as_of))
    share = cfg.generate.revisit_share
    order = score_order(cfg)
    return (
        new.unionByName(known.select(CANDIDATE_COLUMNS))
        .transform(lambda df: with_slot(df, cfg, inputs.addresses))
        .transform(lambda df: with_filter_reason(df, cfg, inputs.excluded))
        .transform(lambda df: filter_trapped(df, inputs.trapped))
        .withColumn(
            "filter_reason",
            F.when(
                ~is_revisit() | (F.col("filter_reason") == FilterReason.EXCLUDED),
                F.col("filter_reason"),
            ),
        )
        .transform(lambda df: filter_aliases(df, inputs.aliased))
        .transform(lambda df: apply_budgets(df, inputs.used or attempted_in_crawldb(crawldb), cfg))
        .transform(lambda df: cap_per_host(df, cfg.generate.max_per_host, share, order))
        .transform(lambda df: hold(df, inputs.held, cfg.politeness.key == "ip"))
        .transform(lambda df: cap_by_time(df, inputs.delays, cfg, order))
        .transform(lambda df: cap_generation(df, cfg.generate.top_n, order))
        .select(DECIDED_COLUMNS)
    )


def is_planned() -> Column:
    return F.col("filter_reason").isNull() & ~F.col("deferred")


def slice_count(planned: int, busiest_slot: int, cfg: Config) -> int:
    """Slices for a generation of ``planned`` URLs whose busiest slot has ``busiest_slot``:
    at most storage.fetch_slices, and few enough that each holds storage.min_slice_urls URLs
    and lasts storage.min_slice_seconds at politeness.default_delay (every slice holds every
    slot, so it lasts about busiest_slot * delay / slices)."""
    s = cfg.storage
    by_urls = -(-planned // s.min_slice_urls)
    seconds = busiest_slot * cfg.politeness.default_delay
    by_time = int(seconds // s.min_slice_seconds) if s.min_slice_seconds > 0 else s.fetch_slices
    return max(1, min(s.fetch_slices, by_urls, by_time))


def busiest_slot(decided: DataFrame, max_per_host: int) -> DataFrame:
    """One row: ``urls``, the planned URLs of the slot with most of them (0 if none), and
    ``roomy``, the slots that planned fewer than max_per_host URLs (room to follow links).
    In: DECIDED_COLUMNS."""
    per_slot = decided.where(is_planned()).groupBy("slot").count()
    return per_slot.agg(
        F.coalesce(F.max("count"), F.lit(0)).alias("urls"),
        F.count_if(F.col("count") < max_per_host).alias("roomy"),
    )


def to_fetchlist(
    decided: DataFrame, gen: int, slices: int, order: list[Column] | None = None
) -> DataFrame:
    """The chosen rows (no filter_reason, not deferred) as fetchlist rows of ``gen``, dealt
    over ``slices`` slices (:func:`slice_count`) in ``order`` (:func:`with_slice`).

    In: DECIDED_COLUMNS. Out: fetchlist columns (known null: :func:`with_known_keys` of
    crawllib.transforms.fetch_inputs sets it).
    """
    return (
        decided.where(is_planned())
        .transform(lambda df: with_slice(df, slices, order))
        .select(*columns_of(FETCHLIST, gen=F.lit(gen), known=F.lit(None)))
    )


def crawldb_changes(decided: DataFrame, gen: int) -> DataFrame:
    """Rows to MERGE into crawldb: every new URL (queued, or filtered with its reason), known
    URLs newly filtered (status filtered, reason), known URLs whose depth dropped. Filtered
    rows get next_gen null: they are never due again. A deferred URL is not written: it stays
    due, and the next plan ranks it again by the same total order; chosen known URLs do not
    change either (fetch and update will).
    In: DECIDED_COLUMNS. Out: crawldb columns.
    """
    filtered = F.col("filter_reason").isNotNull()
    return (
        decided.where(is_changed())
        .withColumns(
            {
                "status": F.when(filtered, F.lit(Status.FILTERED)).otherwise(F.col("status")),
                "reason": F.coalesce(F.col("filter_reason"), F.col("reason")),
                "next_gen": F.when(filtered, F.lit(None).cast("int")).otherwise(F.col("next_gen")),
                "updated_at": F.current_timestamp(),
            }
        )
        .select(_CRAWLDB_COLUMNS)
    )


def is_changed() -> Column:
    """The decided rows that crawldb_changes keeps: new, newly filtered, or with a depth a
    shorter path lowered."""
    return F.col("is_new") | F.col("filter_reason").isNotNull() | F.col("lowered")


def reaches_closer(frontier: DataFrame, crawldb: DataFrame, cfg: Config) -> DataFrame:
    """Frontier rows offering a known URL a depth that changes what plan does: a URL filtered
    for depth brought within crawl.max_depth, or a page (transforms.depth.expands) brought
    close enough that its links are within it. In: frontier rows; crawldb. Out: url_key."""
    offers = frontier.select("url_key", F.col("depth").alias("_offer"))
    known = rows_of(crawldb, offers)
    max_depth = cfg.crawl.max_depth
    revives = (F.col("status") == Status.FILTERED) & (F.col("reason") == FilterReason.DEPTH)
    return (
        known.join(offers, "url_key")
        .where(
            (F.col("_offer") < F.col("depth"))
            & (
                (revives & (F.col("_offer") <= max_depth))
                | (expands(cfg) & (F.col("_offer") < max_depth))
            )
        )
        .select("url_key")
    )


def with_depths(df: DataFrame, lowered: Lowered) -> DataFrame:
    """Rows (url_key, depth, ...) with the smaller of their depth and ``lowered``'s."""
    marks = lowered.depths.select("url_key", F.col("depth").alias("_lowered_depth"))
    marks = F.broadcast(marks) if lowered.small else marks
    return (
        df.join(marks, "url_key", "left")
        .withColumn("depth", F.least(F.col("depth"), F.col("_lowered_depth")))
        .select(df.columns)
    )


def lowered_rows(
    crawldb: DataFrame, lowered: Lowered, decided: DataFrame, cfg: Config, gen: int
) -> DataFrame:
    """crawldb rows whose depth ``lowered`` lowers and that are no candidate of ``decided``
    (fetched pages, URLs filtered or gone...): their depth is all that changes (a URL filtered
    for depth stays filtered if still past crawl.max_depth). In: crawldb; DECIDED_COLUMNS.
    Out: crawldb columns."""
    rows = with_lowered_depths(
        rows_of(crawldb, lowered.depths), lowered.depths, cfg, gen, lowered.small
    ).where(F.col("lowered"))
    return rows.join(decided.select("url_key"), "url_key", "left_anti").select(_CRAWLDB_COLUMNS)


def count_decisions(decided: DataFrame) -> DataFrame:
    """One row of counts: candidates, planned, filtered_<reason>, deferred_cap (per-host cap),
    deferred_held, deferred_time (generate.fetch_seconds), deferred_top_n (generate.top_n),
    hosts, revisits (planned URLs with a stored version).

    In: DECIDED_COLUMNS. Out: one row, one long column per count.
    """
    planned = is_planned()
    return decided.agg(
        F.count("*").alias("candidates"),
        F.count_if(planned).alias("planned"),
        *[
            F.count_if(F.col("filter_reason") == r).alias(f"filtered_{r}")
            for r in words(FilterReason)
        ],
        F.count_if(
            F.col("deferred") & ~F.col("held") & ~F.col("over_time") & ~F.col("over_top")
        ).alias("deferred_cap"),
        F.count_if(F.col("deferred") & F.col("held")).alias("deferred_held"),
        F.count_if(F.col("over_time")).alias("deferred_time"),
        F.count_if(F.col("over_top")).alias("deferred_top_n"),
        F.count_distinct(F.when(planned, F.col("host"))).alias("hosts"),
        F.count_if(planned & is_revisit()).alias("revisits"),
    )
