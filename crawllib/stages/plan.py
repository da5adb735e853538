"""plan(N): frontier gen N + crawldb -> fetchlist gen N, and crawldb updated to match.

Candidates are the new URLs of frontier gen N (deduped, not in crawldb), the crawldb URLs due
in N (status queued or failed, next_gen <= N and, for a retry, its not_before passed by the
generation's clock) and the revisits due. Known URLs a shorter path reaches get their lower
depth first (crawllib.stages.depths). New URLs are inserted into crawldb (queued, or
filtered with reason excluded/depth/extension/length/budget); known URLs past a budget, or
matching an operator's exclusion (revisits too), become filtered (budget, excluded); URLs
past the per-host cap or the generation's top_n (each host's quota and the top_n are filled
highest score first: ``transforms.priority``), and those of slots the hosts table holds back
(a Retry-After or a down host's cool-down not over, a Crawl-delay above the maximum:
``transforms.plan.holds``), are not written: they stay due, without an attempt, and the next
plan ranks them again. The chosen URLs are the fetchlist of gen N. Chosen known URLs are not
changed: fetch and update will.

Idempotency. Two writes, made at once from two driver threads (their commits overlap): the
fetchlist (an append carrying the Delta transaction id (FETCHLIST_TXN, N) on a first run,
which records no running row, so Delta skips a rerun's append it has committed; a
replaceWhere gen = N on a forced rerun) and crawldb's changes in one commit (a MERGE; an
append when every change is a new URL). Without the crawldb commit a rerun starts from the
same inputs; with it, it sees no new URLs (all now in crawldb), the chosen and the deferred
URLs (queued, due, last_gen untouched), not the ones it filtered, and the depths it lowered.
Because every ranking (budgets, caps) is by one total order (generate.order) and the attempted
counts behind the budgets are unchanged (plan never sets last_gen), the rerun chooses the same
URLs and has nothing to MERGE. The generation's clock is crawl.now or the first run's start:
a rerun of a first plan that crashed takes a later one, and may find more revisits due, which
only the fetchlist it did not commit would hold.

With politeness.key = ip the slots come from the dns table, which plan brings up to date
(a MERGE of the answers to the names it lacked) before it decides anything: a rerun reads
the answers of the first run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config, hold_now, parse_now
from crawllib.core.vocab import (
    PENDING_STATUSES,
    REVISITED_STATUSES,
    FilterReason,
    Stage,
    Status,
    Waiting,
    sql_list,
    words,
)
from crawllib.policy.revisit import revisits
from crawllib.stages.base import StageResult, StageRun
from crawllib.stages.depths import lowered_depths, mark_shortest
from crawllib.stages.traps import read_trapped
from crawllib.store import tables
from crawllib.store.aliases import read_aliased
from crawllib.store.schemas import DNS
from crawllib.transforms import exclusions
from crawllib.transforms.fetch_inputs import resolved_hosts, with_known_keys
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.plan import (
    PlanInputs,
    Used,
    attempted_in_hosts,
    busiest_slot,
    candidate_hosts,
    count_decisions,
    crawldb_changes,
    dedup_frontier,
    due_revisits,
    held_slots,
    holds,
    host_totals_from_crawldb,
    is_changed,
    is_due,
    lowered_rows,
    new_candidates,
    plan_decisions,
    reaches_closer,
    slice_count,
    to_fetchlist,
    with_filter_reason,
    with_hold,
    with_slot,
)
from crawllib.transforms.priority import score_order

log = logging.getLogger(__name__)

# Only plan's own decisions: a row that left the statuses plan takes since it was read is not
# touched.
# The Delta transaction id of a first plan's fetchlist append (version: the generation): a
# first plan records no running row, so a rerun after a crash appends again, and Delta skips
# the append it has already committed.
FETCHLIST_TXN = "crawllib-plan-fetchlist"
# A URL filtered for depth takes a decision too once a shorter path brings it within the cap.
_MERGE_GUARD = (
    f"t.status IN ({sql_list(PENDING_STATUSES + REVISITED_STATUSES)}) OR (t.status = "
    f"'{Status.FILTERED}' AND t.reason = '{FilterReason.DEPTH}' AND s.depth < t.depth)"
)
_MERGE_UPDATE = {
    **{c: f"s.{c}" for c in ("status", "reason", "next_gen", "updated_at")},
    "depth": "least(t.depth, s.depth)",
}
# Any other row takes only a depth a shorter path lowered (crawllib.stages.depths).
_DEPTH_ONLY = ("s.depth < t.depth", {"depth": "s.depth", "updated_at": "s.updated_at"})


@dataclasses.dataclass(frozen=True)
class PlanResult(StageResult):
    """candidates: URLs considered; planned: in the fetchlist; filtered_*: filtered now, by
    reason; deferred_cap: over the per-host cap, left for gen + 1; deferred_held: of slots the
    hosts table holds back, left for gen + 1 without an attempt; deferred_time: past what
    their slot can fetch in generate.fetch_seconds; deferred_top_n: past generate.top_n, left
    for gen + 1; hosts: hosts planned; depth_lowered: known URLs whose depth a shorter path
    lowered (crawllib.stages.depths);
    revisits: planned URLs that have a stored version (due again, or retried); slices: the
    fetchlist's slices (0 .. slices - 1, none empty); follow_slots: slots with room to follow
    links, whose known keys the fetchlist carries (the count is absent from an older
    crawllib's plan, whose fetch read them from crawldb)."""

    THROUGHPUT: ClassVar[str] = "candidates"

    candidates: int
    planned: int
    filtered_depth: int
    filtered_extension: int
    filtered_length: int
    filtered_budget: int
    filtered_excluded: int
    filtered_trap_pattern: int
    filtered_alias: int
    deferred_cap: int
    deferred_held: int
    deferred_time: int
    deferred_top_n: int
    hosts: int
    revisits: int
    slices: int
    depth_lowered: int = 0
    follow_slots: int = 0


def run(run: StageRun) -> PlanResult:
    """Plan generation ``run.gen``: write its fetchlist and crawldb's changes."""
    spark, root, cfg, gen = run.spark, run.root, run.cfg, run.gen
    # A first run that crashed after its fetchlist append left no ledger row: this run's
    # clock may choose other URLs, so it replaces those rows like any rerun.
    if run.first:
        appended = tables.txn_version(spark, root, "fetchlist", FETCHLIST_TXN)
        first = appended is None or appended < gen
    else:
        first = False
    frontier = run.read("frontier").where(F.col("gen") == gen)
    crawldb = run.read("crawldb")
    # Cached for speed only. A Delta DataFrame reads the table's latest version at each
    # action: the counts run before any write, and should the fetchlist write (another
    # thread) start after the crawldb commit, its recomputation from the new version chooses
    # the same URLs (Idempotency, above).
    held = held_slots(run.read("hosts"), cfg, hold_now(cfg.crawl.now))
    as_of = clock_of(run)
    addresses = _addresses(run, frontier, crawldb, as_of)
    used = _budget_use(run, crawldb)
    excluded = exclusions.load(cfg, spark)
    trapped = read_trapped(spark, root, cfg)
    aliased = read_aliased(spark, root, cfg)
    delays = run.read("hosts").select("slot", "delay") if cfg.generate.fetch_seconds else None
    offers = dedup_frontier(frontier)
    lowered = lowered_depths(run, offers, new_candidates(offers, crawldb))
    inputs = PlanInputs(
        held=held,
        addresses=addresses,
        used=used,
        as_of=as_of,
        excluded=excluded,
        trapped=trapped,
        delays=delays,
        aliased=aliased,
        lowered=lowered,
    )
    decided = plan_decisions(frontier, crawldb, cfg, gen, inputs).persist()
    try:
        # One action for the three one-row aggregates.
        row = tables.one_row(
            count_decisions(decided)
            .crossJoin(busiest_slot(decided, cfg.generate.max_per_host))
            .crossJoin(
                decided.agg(
                    F.count_if(is_changed()).alias("_changes"),
                    F.count_if(is_changed() & ~F.col("is_new")).alias("_known_changes"),
                )
            )
        )
        counts = {k: int(v) for k, v in row.asDict().items()}
        busiest = counts.pop("urls")
        roomy = counts.pop("roomy")
        changes = counts.pop("_changes")
        known_changes = counts.pop("_known_changes")
        changed = crawldb_changes(decided, gen)
        if lowered is not None:  # depths that drop on URLs no decision touches
            changed = changed.unionByName(lowered_rows(crawldb, lowered, decided, cfg, gen))
            changes = known_changes = max(1, known_changes)
        # Each slice costs a few commits: a small or short generation gets fewer, fuller slices.
        slices = slice_count(counts["planned"], busiest, cfg)
        fetchlist = to_fetchlist(decided, gen, slices, score_order(cfg))
        follows = cfg.fetch.follow and cfg.fetch.extract
        if follows and roomy:  # the keys the fetch's followers skip travel with the fetchlist
            new_keys = decided.where(is_changed() & F.col("is_new"))
            fetchlist = with_known_keys(fetchlist, crawldb, new_keys, cfg)
        # Slots are dealt round-robin over the slices: the busiest one fills min(slices, busiest).
        result = PlanResult(
            **counts,
            slices=min(slices, busiest),
            depth_lowered=lowered.urls if lowered else 0,
            follow_slots=roomy if follows else 0,
        )
        log.info("plan gen %d: %s", gen, result)

        def write_fetchlist() -> None:
            if first:  # no running row: the transaction id makes a retry's append a no-op
                tables.append(fetchlist, root, "fetchlist", txn=(FETCHLIST_TXN, gen))
            else:
                tables.replace_where(fetchlist, root, "fetchlist", f"gen = {gen}")

        def write_crawldb() -> None:
            if not known_changes:
                # Every change is a new URL, absent from the crawldb version read above: an
                # append, whatever crawldb's size, instead of a MERGE that scans crawldb.
                tables.append(changed, root, "crawldb")
            else:
                tables.merge(
                    spark,
                    changed,
                    root,
                    "crawldb",
                    keys=["url_key"],
                    update=_MERGE_UPDATE,
                    update_condition=_MERGE_GUARD,
                    also=[_DEPTH_ONLY],
                    broadcast=lowered is None or lowered.small,
                )

        # No crawldb write when every candidate is a known URL chosen as is (seeds, reruns).
        # Nothing planned on a first run: no fetchlist rows to write (an idle generation, only
        # retries waiting for a later one).
        writes = [write_fetchlist] if result.planned or not first else []
        if changes:
            writes.append(write_crawldb)
        if writes:  # at once: their commits overlap
            tables.in_parallel(spark, *writes)
        if lowered is not None and lowered.upgrade:
            mark_shortest(run)  # once its lowered depths are written
    finally:
        decided.unpersist()
    return result


def clock_of(run: StageRun) -> float:
    """The generation's clock, epoch seconds: crawl.now when set, else the time plan first
    started for this generation (its earliest generations row), so a rerun finds the same
    revisits due."""
    fixed = parse_now(run.cfg.crawl.now)
    return run.first_started(Stage.PLAN) if fixed is None else fixed


def _addresses(
    run: StageRun, frontier: DataFrame, crawldb: DataFrame, as_of: float
) -> DataFrame | None:
    """With politeness.key = ip: the dns table, after resolving (in tasks) the candidates'
    hosts it has no answer for younger than politeness.address_ttl_seconds and MERGEing the
    answers into it. Written before any decision, so a rerun reads the same answers and
    chooses the same slots. None for the other keys."""
    if run.cfg.politeness.key != "ip":
        return None
    fresh = run.read("dns").where(F.col("expires_at") > F.current_timestamp()).select("host")
    missing = candidate_hosts(frontier, crawldb, run.gen, as_of).join(
        fresh, on="host", how="left_anti"
    )
    resolved = resolved_hosts(missing, run.cfg, time.time()).persist()  # asked once
    try:
        if not resolved.isEmpty():
            update = {c: f"s.{c}" for c in DNS.fieldNames() if c != "host"}
            tables.merge(run.spark, resolved, run.root, "dns", keys=["host"], update=update)
    finally:
        resolved.unpersist()
    return run.read("dns")


def _budget_use(run: StageRun, crawldb: DataFrame) -> Used | None:
    """What the budgets have used up, from the hosts table's running totals when its slots
    are hosts (politeness.key = host) and its totals cover the crawl (tables.TOTALS_PROPERTY:
    a root made with them, or filled from crawldb here, once, on an older root). None for the
    other keys (plan aggregates crawldb), which also mark the totals incomplete: their hosts
    rows are per domain or address, so a later switch back to host fills them again."""
    spark, root = run.spark, run.root
    complete = (
        tables.property_of(spark, root, "hosts", tables.TOTALS_PROPERTY) == tables.TOTALS_COMPLETE
    )
    if run.cfg.politeness.key != "host":
        if complete:
            tables.set_property(spark, root, "hosts", tables.TOTALS_PROPERTY, None)
        return None
    if not complete:
        log.info("filling the hosts table's urls_tried totals from crawldb (once)")
        tables.merge(
            spark,
            host_totals_from_crawldb(crawldb),
            root,
            "hosts",
            keys=["slot"],
            update={"urls_tried": "s.urls_tried", "domain": "coalesce(t.domain, s.domain)"},
        )
        tables.set_property(spark, root, "hosts", tables.TOTALS_PROPERTY, tables.TOTALS_COMPLETE)
    return attempted_in_hosts(run.read("hosts"))


def has_work(spark: SparkSession, root: str, cfg: Config, gen: int) -> bool:
    """Whether planning ``gen`` now would choose anything: a URL queued or failed in crawldb
    due now (`transforms.plan.is_due`: its retry time passed), a fetched page due again by now,
    a URL new in gen's frontier that plan's URL rules (depth, extension, length) would not
    filter, or a shorter path that brings a URL within crawl.max_depth; in each case on a slot
    the hosts table does not hold back (`held_slots`). One Spark action. The clock is
    crawl.now, or the real one.

    A frontier holding only URLs past crawl.max_depth is the usual end of a crawl: planning it
    would only mark them filtered, at the cost of a whole generation of fixed costs. They stay
    in the frontier, so a later run with a larger max_depth plans them. URLs not due yet wait
    (`waits` says for what and until when).
    """
    if tables.property_of(spark, root, "crawldb", tables.DEPTH_PROPERTY) != tables.DEPTH_SHORTEST:
        return True  # a root from before shortest paths: plan relaxes its depths once
    now = clock_now(cfg)
    crawldb = tables.read(spark, root, "crawldb")
    frontier = tables.read(spark, root, "frontier").filter(F.col("gen") == gen)
    excluded = exclusions.load(cfg, spark)
    plannable = with_filter_reason(frontier, cfg, excluded).where(F.col("filter_reason").isNull())
    new = plannable.join(rows_of(crawldb.select("url_key"), plannable), "url_key", "left_anti")
    closer = rows_of(crawldb, reaches_closer(frontier, crawldb, cfg))
    hosts = ["host", "domain"]
    due = crawldb.where(F.col("status").isin(*PENDING_STATUSES) & is_due(gen, now)).select(hosts)
    if revisits(cfg.recrawl):
        due = due.unionByName(due_revisits(crawldb, gen, now).select(hosts))
    candidates = due.unionByName(new.select(hosts)).unionByName(closer.select(hosts))
    return not _free(spark, root, cfg, candidates).isEmpty()


def _free(spark: SparkSession, root: str, cfg: Config, rows: DataFrame) -> DataFrame:
    """The rows (host, domain) whose slot the hosts table does not hold back."""
    if not tables.exists(spark, root, "hosts"):
        return rows
    held = held_slots(tables.read(spark, root, "hosts"), cfg, hold_now(cfg.crawl.now))
    slotted = with_slot(rows, cfg, _addresses_known(spark, root, cfg))
    marked = with_hold(slotted, held.select("slot", F.lit(True).alias("_held")), _by_host(cfg))
    return marked.where(F.col("_held").isNull()).drop("_held")


def _by_host(cfg: Config) -> bool:
    """Whether hosts hold back on their own inside their slot (politeness.key = ip: a slot is
    an address, each of its hosts has a hosts row of its own)."""
    return cfg.politeness.key == "ip"


def _addresses_known(spark: SparkSession, root: str, cfg: Config) -> DataFrame | None:
    """politeness.key = ip: the dns table (the slots of the names resolved so far)."""
    if cfg.politeness.key == "ip" and tables.exists(spark, root, "dns"):
        return tables.read(spark, root, "dns")
    return None


def clock_now(cfg: Config) -> float:
    """The crawl's clock now: crawl.now when set, else the real time (epoch seconds)."""
    fixed = parse_now(cfg.crawl.now)
    return time.time() if fixed is None else fixed


@dataclasses.dataclass(frozen=True)
class Wait:
    """URLs that are not due yet, by what they wait for (``reason``: a
    crawllib.core.vocab.Waiting word): how many, and the earliest time one is due (epoch seconds;
    None: no time, a Crawl-delay above the maximum honoured)."""

    reason: str
    urls: int
    due: float | None


def waits(spark: SparkSession, root: str, cfg: Config, gen: int) -> list[Wait]:
    """What the URLs not due in ``gen`` now wait for (one Spark action): failed URLs their
    retry time (crawldb.not_before), URLs of held slots their host's Retry-After, cool-down,
    robots.txt retry or Crawl-delay (`transforms.plan.holds`), fetched pages their revisit
    (next_fetch_at, when recrawl revisits)."""
    now = clock_now(cfg)
    at = F.timestamp_seconds(F.lit(now))
    crawldb = tables.read(spark, root, "crawldb")
    pending = crawldb.where(F.col("status").isin(*PENDING_STATUSES)).select(
        "host",
        "domain",
        F.when(F.col("not_before") > at, F.lit(Waiting.RETRY)).alias("wait"),
        F.col("not_before").alias("wait_until"),
    )
    if revisits(cfg.recrawl):
        stored = crawldb.where(F.col("status").isin(*REVISITED_STATUSES)).select(
            "host",
            "domain",
            F.when(F.col("next_fetch_at") > at, F.lit(Waiting.REVISIT)).alias("wait"),
            F.col("next_fetch_at").alias("wait_until"),
        )
        pending = pending.unionByName(stored)
    if tables.exists(spark, root, "hosts"):
        held = holds(tables.read(spark, root, "hosts"), cfg, hold_now(cfg.crawl.now))
        slotted = with_slot(pending, cfg, _addresses_known(spark, root, cfg))
        # a URL waits for the later of its own retry and its slot's hold
        own = F.col("wait").isNotNull() & (
            F.col("hold").isNull() | (F.col("wait_until") >= F.col("until"))
        )
        pending = with_hold(slotted, held, _by_host(cfg)).select(
            F.when(own, F.col("wait")).otherwise(F.col("hold")).alias("wait"),
            F.when(own, F.col("wait_until")).otherwise(F.col("until")).alias("wait_until"),
        )
    rows = (
        pending.where(F.col("wait").isNotNull())
        .groupBy("wait")
        .agg(F.count(F.lit(1)).alias("urls"), F.min("wait_until").alias("due"))
        .collect()
    )
    found = [
        Wait(
            r["wait"],
            int(r["urls"]),
            r["due"].replace(tzinfo=dt.UTC).timestamp() if r["due"] else None,
        )
        for r in rows
    ]
    order = {w: i for i, w in enumerate(words(Waiting))}
    return sorted(found, key=lambda w: order.get(w.reason, len(order)))
