"""plan(N): frontier gen N + crawldb -> fetchlist gen N, and crawldb updated to match.

Candidates are the new URLs of frontier gen N (deduped, not in crawldb) and the crawldb URLs due
in N (status queued or failed, next_gen <= N). New URLs are inserted into crawldb (queued, or
filtered with reason excluded/depth/extension/length/budget); known URLs past a budget, or
matching an operator's exclusion (revisits too), become filtered (budget, excluded); URLs past the per-host cap or the generation's top_n (each host's quota and the
top_n are filled highest score first: ``transforms.priority``), and those of slots the hosts table
holds back (a Retry-After or a down host's cool-down not over, a Crawl-delay above the maximum:
``transforms.plan.held_slots``), stay as they are with next_gen = N + 1, without an attempt.
The chosen URLs are the fetchlist of gen N. Chosen known URLs are not changed: fetch and update
will.

Idempotency. Two writes, made at once from two driver threads (their commits overlap): the
fetchlist (replaceWhere gen = N; an append on the first run) and crawldb's changes in one
commit (a MERGE; an append when every change is a new URL). The fetchlist is no input of
plan, so whichever of the two a crash leaves out, the rerun is right: without the crawldb
commit it starts from the same inputs; with it, it sees what a rerun after a complete run
sees: no new URLs (all now in crawldb), the chosen URLs (queued, next_gen <= N, last_gen
untouched), and not the ones it filtered or deferred (filtered, or next_gen = N + 1).
Because every ranking (budgets, caps) is by one total order (generate.order), a chosen URL's
rank among this subset is at most its rank among the first run's candidates and the attempted
counts behind the budgets are unchanged (plan never sets last_gen); so the rerun chooses
exactly the same URLs, writes the same fetchlist and skips the MERGE: it has nothing to change.
Its counts describe what it saw (candidates = planned), not the first run's.

With politeness.key = ip the slots come from the dns table, which plan brings up to date
(a MERGE of the answers to the names it lacked) before it decides anything: a rerun reads
the answers of the first run.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib import exclusions, tables
from crawllib.aliases import read_aliased
from crawllib.config import Config, parse_now
from crawllib.schedule import revisits
from crawllib.schemas import DNS
from crawllib.stages.base import StageResult, StageRun
from crawllib.transforms.fetch import resolved_hosts
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.plan import (
    Used,
    attempted_in_hosts,
    busiest_slot,
    candidate_hosts,
    count_decisions,
    crawldb_changes,
    due_revisits,
    held_slots,
    host_totals_from_crawldb,
    is_changed,
    plan_decisions,
    slice_count,
    to_fetchlist,
    with_filter_reason,
    with_slot,
)
from crawllib.transforms.priority import score_order
from crawllib.traps import read_trapped
from crawllib.vocab import PENDING_STATUSES, REVISITED_STATUSES, Stage, sql_list

log = logging.getLogger(__name__)

# Only plan's own decisions: a row that left the statuses plan takes since it was read is not
# touched.
_MERGE_GUARD = f"t.status IN ({sql_list(PENDING_STATUSES + REVISITED_STATUSES)})"
_MERGE_UPDATE = {c: f"s.{c}" for c in ("status", "reason", "next_gen", "updated_at")}


@dataclasses.dataclass(frozen=True)
class PlanResult(StageResult):
    """candidates: URLs considered; planned: in the fetchlist; filtered_*: filtered now, by
    reason; deferred_cap: over the per-host cap, left for gen + 1; deferred_held: of slots the
    hosts table holds back, left for gen + 1 without an attempt; deferred_time: past what
    their slot can fetch in generate.fetch_seconds; deferred_top_n: past generate.top_n, left
    for gen + 1; hosts: hosts planned;
    revisits: planned URLs that have a stored version (due again, or retried); slices: the
    fetchlist's slices (0 .. slices - 1, none empty)."""

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


def run(run: StageRun) -> PlanResult:
    """Plan generation ``run.gen``: write its fetchlist and crawldb's changes."""
    spark, root, cfg, gen = run.spark, run.root, run.cfg, run.gen
    frontier = run.read("frontier").where(F.col("gen") == gen)
    crawldb = run.read("crawldb")
    # Cached for speed only. A Delta DataFrame reads the table's latest version at each
    # action: the counts run before any write, and should the fetchlist write (another
    # thread) start after the crawldb commit, its recomputation from the new version chooses
    # the same URLs (Idempotency, above).
    held = held_slots(run.read("hosts"), cfg)
    as_of = clock_of(run)
    addresses = _addresses(run, frontier, crawldb, as_of)
    used = _budget_use(run, crawldb)
    excluded = exclusions.load(cfg, spark)
    trapped = read_trapped(spark, root, cfg)
    aliased = read_aliased(spark, root, cfg)
    delays = run.read("hosts").select("slot", "delay") if cfg.generate.fetch_seconds else None
    decided = plan_decisions(
        frontier,
        crawldb,
        cfg,
        gen,
        held,
        addresses,
        used,
        as_of,
        excluded,
        trapped,
        delays,
        aliased,
    ).persist()
    try:
        # One action for the three one-row aggregates.
        row = tables.one_row(
            count_decisions(decided)
            .crossJoin(busiest_slot(decided))
            .crossJoin(
                decided.agg(
                    F.count_if(is_changed()).alias("_changes"),
                    F.count_if(is_changed() & ~F.col("is_new")).alias("_known_changes"),
                )
            )
        )
        counts = {k: int(v) for k, v in row.asDict().items()}
        busiest = counts.pop("urls")
        changes = counts.pop("_changes")
        known_changes = counts.pop("_known_changes")
        # Each slice costs a few commits: a small or short generation gets fewer, fuller slices.
        slices = slice_count(counts["planned"], busiest, cfg)
        fetchlist = to_fetchlist(decided, gen, slices, score_order(cfg))
        # Slots are dealt round-robin over the slices: the busiest one fills min(slices, busiest).
        result = PlanResult(**counts, slices=min(slices, busiest))
        log.info("plan gen %d: %s", gen, result)

        def write_fetchlist() -> None:
            run.replace_own(fetchlist, "fetchlist", f"gen = {gen}")

        def write_crawldb() -> None:
            if not known_changes:
                # Every change is a new URL, absent from the crawldb version read above: an
                # append, whatever crawldb's size, instead of a MERGE that scans crawldb.
                tables.append(crawldb_changes(decided, gen), root, "crawldb")
            else:
                tables.merge(
                    spark,
                    crawldb_changes(decided, gen),
                    root,
                    "crawldb",
                    keys=["url_key"],
                    update=_MERGE_UPDATE,
                    update_condition=_MERGE_GUARD,
                    broadcast=True,
                )

        # No crawldb write when every candidate is a known URL chosen as is (seeds, reruns).
        # Nothing planned on a first run: no fetchlist rows to write (an idle generation, only
        # retries waiting for a later one).
        writes = [write_fetchlist] if result.planned or not run.first else []
        if changes:
            writes.append(write_crawldb)
        if writes:  # at once: their commits overlap
            tables.in_parallel(spark, *writes)
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
    """Whether planning ``gen`` would choose anything: a URL queued or failed in crawldb (due
    now or later), a fetched page due again by now (crawl.now, or the real clock), or a URL
    new in gen's frontier that plan's URL rules (depth, extension, length) would not filter;
    in each case on a slot the hosts table does not hold back (`held_slots`: they wait for a
    later run, without attempts).

    A frontier holding only URLs past crawl.max_depth is the usual end of a crawl: planning it
    would only mark them filtered, at the cost of a whole generation of fixed costs. They stay
    in the frontier, so a later run with a larger max_depth plans them.
    """
    crawldb = tables.read(spark, root, "crawldb")
    held = (
        held_slots(tables.read(spark, root, "hosts"), cfg)
        if tables.exists(spark, root, "hosts")
        else None
    )
    # politeness.key = ip: the slots of the names resolved so far (others: their host)
    addresses = (
        tables.read(spark, root, "dns")
        if cfg.politeness.key == "ip" and tables.exists(spark, root, "dns")
        else None
    )

    def free(df):  # rows whose slot is not held
        if held is None:
            return df
        return with_slot(df, cfg, addresses).join(held, on="slot", how="left_anti")

    if not free(crawldb.filter(F.col("status").isin(*PENDING_STATUSES))).isEmpty():
        return True
    if revisits(cfg.recrawl):
        now = parse_now(cfg.crawl.now)
        due = due_revisits(crawldb, gen, time.time() if now is None else now)
        if not free(due).isEmpty():
            return True
    frontier = tables.read(spark, root, "frontier").filter(F.col("gen") == gen)
    excluded = exclusions.load(cfg, spark)
    plannable = with_filter_reason(frontier, cfg, excluded).where(F.col("filter_reason").isNull())
    new = plannable.join(rows_of(crawldb.select("url_key"), plannable), "url_key", "left_anti")
    return not free(new).isEmpty()
