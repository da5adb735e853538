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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.exclusions import Exclusions
from crawllib.schedule import revisits
from crawllib.schemas import CRAWLDB, FETCHLIST, FRONTIER, HOSTS, columns_of
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.priority import score_order
from crawllib.traps import repeats_more_than, url_pattern_column
from crawllib.vocab import (
    PENDING_STATUSES,
    REVISITED_STATUSES,
    FilterReason,
    Status,
    WaitReason,
    words,
)

_CRAWLDB_COLUMNS = [f.name for f in CRAWLDB.fields]
CANDIDATE_COLUMNS = [*_CRAWLDB_COLUMNS, "is_new"]
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
    return queued_rows(frontier, gen).withColumn("is_new", F.lit(True))


def pending_from_crawldb(crawldb: DataFrame, gen: int) -> DataFrame:
    """Known URLs due in ``gen``: status queued or failed and next_gen <= gen (null: due).

    In: crawldb columns. Out: CANDIDATE_COLUMNS with is_new false.
    """
    due = F.coalesce(F.col("next_gen"), F.lit(gen)) <= gen
    return crawldb.where(F.col("status").isin(*PENDING_STATUSES) & due).select(
        *_CRAWLDB_COLUMNS, F.lit(False).alias("is_new")
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
        *_CRAWLDB_COLUMNS, F.lit(False).alias("is_new")
    )


def is_revisit() -> Column:
    """A candidate with a stored version (a revisit, or the retry of one)."""
    return F.col("fetched_at").isNotNull()


def extension_of(url: Column) -> Column:
    """Lowercase extension of a normalised URL's last path segment, or ''.

    The built-in twin of ``crawllib.urls.url_extension`` (a test keeps them in step): the path
    ends at '?' (normalised URLs carry no fragment), the segment at ';', and a dot only counts
    after a non-empty stem.
    """
    path = F.regexp_extract(url, r"^[^:/?]+://[^/?#]*([^?#]*)", 1)
    segment = F.regexp_extract(path, r"([^/;]*)(;[^/]*)?$", 1)
    return F.lower(F.regexp_extract(segment, r"^.+\.([^.]*)$", 1))


def filter_trapped(df: DataFrame, trapped: DataFrame | None) -> DataFrame:
    """Set filter_reason trap_pattern on rows without one whose (host, URL pattern) is in
    ``trapped`` (crawllib.traps.trapped_patterns). In: url, host, filter_reason. Out: same
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
    (crawllib.aliases.alias_hosts). In: host, filter_reason. Out: same columns."""
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
    crawllib.exclusions.load), depth (> crawl.max_depth), extension (in
    crawl.skip_extensions), length (> crawl.max_url_length), trap_pattern (a path segment
    repeated more than traps.max_segment_repeats times: crawllib.traps), first match wins,
    else null. In: url, host, domain, depth.
    """
    extension = extension_of(F.col("url"))
    skip = [e.lower() for e in cfg.crawl.skip_extensions]
    rules = excluded or Exclusions()
    reason = (
        F.when(
            rules.column(F.col("url"), F.col("host"), F.col("domain")),
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
    Crawl-delay or backoff) and at least politeness.default_delay. Revisits first (most
    overdue), then ``order``; they are ``deferred`` too.
    In: slot, filter_reason, deferred, fetched_at, next_fetch_at and what ``order`` reads.
    Out: + over_time."""
    seconds = cfg.generate.fetch_seconds
    if seconds <= 0:
        return df.withColumn("over_time", F.lit(False))
    default = cfg.politeness.default_delay
    if delays is None:
        joined = df.withColumn("_delay", F.lit(None).cast("double"))
    else:
        known = delays.select(F.col("slot").alias("_delay_slot"), F.col("delay").alias("_delay"))
        joined = df.join(known, F.col("slot") == F.col("_delay_slot"), "left")
    delay = F.greatest(F.lit(default), F.coalesce(F.col("_delay"), F.lit(default)))
    quota = F.when(delay > 0, F.floor(F.lit(seconds) / delay) + 1)
    planned = is_planned()
    overdue = F.when(is_revisit(), F.unix_micros(F.col("next_fetch_at")))
    rank = F.row_number().over(
        Window.partitionBy(planned, F.col("slot")).orderBy(overdue.asc_nulls_last(), *order)
    )
    over = planned & quota.isNotNull() & (rank > quota)
    return joined.withColumns({"over_time": over, "deferred": F.col("deferred") | over}).select(
        *df.columns, "over_time"
    )


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


def held_slots(hosts: DataFrame, cfg: Config) -> DataFrame:
    """The slots whose URLs wait, without an attempt, for a later generation: a Retry-After
    that ends more than fetch.slice_grace_seconds from now (hosts.not_before), a down host's
    cool-down or a robots.txt retry not over, or a Crawl-delay above politeness.max_crawl_delay
    not honoured
    (crawllib.fetch.slots). In: hosts rows. Out: slot."""
    grace = cfg.fetch.slice_grace_seconds
    held = F.col("not_before") > F.expr(
        f"current_timestamp() + make_interval(0, 0, 0, 0, 0, 0, {grace})"
    )
    # the engine defers a cooling-down host or one waiting for its robots.txt at once, grace
    # or not: planning it would only spend a generation
    waits = F.col("not_before_reason").isin(WaitReason.DOWN, WaitReason.ROBOTS)
    held = held | (waits & (F.col("not_before") > F.current_timestamp()))
    if not cfg.politeness.honor_long_crawl_delay:
        held = held | (F.col("crawl_delay") > F.lit(cfg.politeness.max_crawl_delay))
    return hosts.where(held).select("slot").distinct()


def hold(df: DataFrame, held: DataFrame | None) -> DataFrame:
    """Add ``held``: the row's slot is in ``held`` (:func:`held_slots`); a held row without a
    filter_reason is ``deferred`` too. In: slot, filter_reason, deferred. Out: + held."""
    if held is None:
        return df.withColumn("held", F.lit(False))
    marks = held.select(F.col("slot").alias("_held_slot"), F.lit(True).alias("held"))
    joined = df.join(marks, F.col("slot") == F.col("_held_slot"), "left").drop("_held_slot")
    is_held = F.coalesce(F.col("held"), F.lit(False))
    return joined.withColumns(
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
    known = pending_from_crawldb(crawldb, gen)
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


def plan_decisions(
    frontier: DataFrame,
    crawldb: DataFrame,
    cfg: Config,
    gen: int,
    held: DataFrame | None = None,
    addresses: DataFrame | None = None,
    used: Used | None = None,
    as_of: float | None = None,
    excluded: Exclusions | None = None,
    trapped: DataFrame | None = None,
    delays: DataFrame | None = None,
    aliased: DataFrame | None = None,
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
    generation (generate.top_n), in generate.order. In: frontier rows of gen, crawldb. Out:
    DECIDED_COLUMNS.
    """
    new = frontier_as_crawldb_rows(new_candidates(dedup_frontier(frontier), crawldb), gen).select(
        CANDIDATE_COLUMNS
    )
    known = pending_from_crawldb(crawldb, gen)
    if as_of is not None and revisits(cfg.recrawl):
        known = known.unionByName(due_revisits(crawldb, gen, as_of))
    share = cfg.generate.revisit_share
    order = score_order(cfg)
    return (
        new.unionByName(known.select(CANDIDATE_COLUMNS))
        .transform(lambda df: with_slot(df, cfg, addresses))
        .transform(lambda df: with_filter_reason(df, cfg, excluded))
        .transform(lambda df: filter_trapped(df, trapped))
        .withColumn(
            "filter_reason",
            F.when(
                ~is_revisit() | (F.col("filter_reason") == FilterReason.EXCLUDED),
                F.col("filter_reason"),
            ),
        )
        .transform(lambda df: filter_aliases(df, aliased))
        .transform(lambda df: apply_budgets(df, used or attempted_in_crawldb(crawldb), cfg))
        .transform(lambda df: cap_per_host(df, cfg.generate.max_per_host, share, order))
        .transform(lambda df: hold(df, held))
        .transform(lambda df: cap_by_time(df, delays, cfg, order))
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


def busiest_slot(decided: DataFrame) -> DataFrame:
    """One row, one column ``urls``: the planned URLs of the slot with most of them (0 if none).
    In: DECIDED_COLUMNS."""
    per_slot = decided.where(is_planned()).groupBy("slot").count()
    return per_slot.agg(F.coalesce(F.max("count"), F.lit(0)).alias("urls"))


def to_fetchlist(
    decided: DataFrame, gen: int, slices: int, order: list[Column] | None = None
) -> DataFrame:
    """The chosen rows (no filter_reason, not deferred) as fetchlist rows of ``gen``, dealt
    over ``slices`` slices (:func:`slice_count`) in ``order`` (:func:`with_slice`).

    In: DECIDED_COLUMNS. Out: fetchlist columns.
    """
    return (
        decided.where(is_planned())
        .transform(lambda df: with_slice(df, slices, order))
        .withColumn("gen", F.lit(gen))
        .select([f.name for f in FETCHLIST.fields])
    )


def crawldb_changes(decided: DataFrame, gen: int) -> DataFrame:
    """Rows to MERGE into crawldb: every new URL (queued, or filtered with its reason), known
    URLs newly filtered (status filtered, reason), deferred URLs (next_gen = gen + 1, status
    kept). Filtered rows get next_gen null: they are never due again. Chosen known URLs do not
    change (fetch and update will).
    In: DECIDED_COLUMNS. Out: crawldb columns.
    """
    filtered = F.col("filter_reason").isNotNull()
    return (
        decided.where(is_changed())
        .withColumns(
            {
                "status": F.when(filtered, F.lit(Status.FILTERED)).otherwise(F.col("status")),
                "reason": F.coalesce(F.col("filter_reason"), F.col("reason")),
                "next_gen": F.when(filtered, F.lit(None).cast("int"))
                .when(F.col("deferred"), F.lit(gen + 1))
                .otherwise(F.col("next_gen")),
                "updated_at": F.current_timestamp(),
            }
        )
        .select(_CRAWLDB_COLUMNS)
    )


def is_changed() -> Column:
    """The decided rows that crawldb_changes keeps: new, newly filtered or deferred."""
    return F.col("is_new") | F.col("filter_reason").isNotNull() | F.col("deferred")


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
