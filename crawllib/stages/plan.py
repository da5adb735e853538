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

The decisions are computed once (kept) and both writes read them.

Idempotency. Two writes: the fetchlist (an append carrying the Delta transaction id
(FETCHLIST_TXN, N) on a first run, which records no running row, so a rerun's append that is
committed already is skipped; a replaceWhere gen = N on a forced rerun) and crawldb's changes
in one commit (a MERGE; an append when every change is a new URL). Without the crawldb commit
a rerun starts from the same inputs; with it, it sees no new URLs (all now in crawldb), the
chosen and the deferred URLs (queued, due, last_gen untouched), not the ones it filtered, and
the depths it lowered. Because every ranking (budgets, caps) is by one total order
(generate.order) and the attempted counts behind the budgets are unchanged (plan never sets
last_gen), the rerun chooses the same URLs and has nothing to MERGE. The generation's clock is
crawl.now or the first run's start: a rerun of a first plan that crashed takes a later one,
and may find more revisits due, which only the fetchlist it did not commit would hold.

With politeness.key = ip the slots come from the dns table, which plan brings up to date
(a MERGE of the answers to the names it lacked) before it decides anything: a rerun reads
the answers of the first run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import time
from typing import ClassVar

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
from crawllib.engine.partition import RESOLVED, ResolveTask
from crawllib.policy.revisit import revisits
from crawllib.stages.base import StageResult, StageRun
from crawllib.stages.depths import lowered_depths, mark_shortest
from crawllib.stages.traps import read_aliased, read_trapped
from crawllib.store.db import (
    DEPTH_PROPERTY,
    DEPTH_SHORTEST,
    TOTALS_COMPLETE,
    TOTALS_PROPERTY,
    Db,
    Rel,
)
from crawllib.store.schemas import DNS
from crawllib.transforms import exclusions
from crawllib.transforms.fetch_inputs import with_known_keys
from crawllib.transforms.lookup import rows_of
from crawllib.transforms.plan import (
    PlanInputs,
    attempted_in_hosts,
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
from crawllib.transforms.sqltext import is_in, lit, timestamp_of

log = logging.getLogger(__name__)

# The Delta transaction id of a first plan's fetchlist append (version: the generation): a
# first plan records no running row, so a rerun after a crash appends again, and the append it
# has already committed is skipped.
FETCHLIST_TXN = "crawllib-plan-fetchlist"
# Only plan's own decisions: a row that left the statuses plan takes since it was read is not
# touched. A URL filtered for depth takes a decision too once a shorter path brings it within
# the cap.
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
    db, cfg, gen = run.db, run.cfg, run.gen
    # A first run that crashed after its fetchlist append left no ledger row: this run's
    # clock may choose other URLs, so it replaces those rows like any rerun.
    if run.first:
        appended = db.txn_version("fetchlist", FETCHLIST_TXN)
        first = appended is None or appended < gen
    else:
        first = False
    frontier = db.table("frontier", f"gen = {gen}")
    crawldb = db.table("crawldb")
    as_of = clock_of(run)
    inputs: dict[str, Rel] = {"frontier": frontier, "crawldb": crawldb}
    hosts = db.table("hosts")
    inputs["held"] = db.sql(held_slots(cfg, hold_now(cfg.crawl.now)), hosts=hosts)
    addresses = _addresses(run, frontier, crawldb, as_of)
    if addresses is not None:
        inputs["addresses"] = addresses
    used = _budget_use(run, crawldb, hosts)
    if used is not None:
        inputs["host_used"], inputs["domain_used"] = used
    excluded = exclusions.load(cfg, db.read_file)
    trapped = read_trapped(db, cfg)
    if trapped is not None:
        inputs["trapped"] = trapped
    aliased = read_aliased(db, cfg)
    if aliased is not None:
        inputs["aliased"] = aliased
    if cfg.generate.fetch_seconds:
        inputs["delays"] = db.sql("SELECT slot, delay FROM {hosts}", hosts=hosts)
    offers = db.sql(dedup_frontier(), frontier=frontier)
    lowered = lowered_depths(
        run, offers, db.sql(new_candidates(), frontier=offers, crawldb=crawldb)
    )
    if lowered is not None:
        inputs["lowered"] = lowered.depths
    which = PlanInputs(
        held=True,
        addresses=addresses is not None,
        used=used is not None,
        as_of=as_of,
        excluded=excluded,
        trapped=trapped is not None,
        delays="delays" in inputs,
        aliased=aliased is not None,
        lowered=lowered is not None,
    )
    decided = db.keep(db.sql(plan_decisions(cfg, gen, which), **inputs))
    try:
        counts = {
            k: int(v or 0)
            for k, v in db.one_row(
                db.sql(count_decisions(cfg.generate.max_per_host), decided=decided)
            ).items()
        }
        busiest = counts.pop("urls")
        roomy = counts.pop("roomy")
        changes = counts.pop("_changes")
        known_changes = counts.pop("_known_changes")
        changed = db.sql(crawldb_changes(), decided=decided)
        if lowered is not None:  # depths that drop on URLs no decision touches
            others = db.sql(
                lowered_rows(cfg, gen), crawldb=crawldb, lowered=lowered.depths, decided=decided
            )
            changed = db.sql("SELECT * FROM {a} UNION ALL SELECT * FROM {b}", a=changed, b=others)
            changes = known_changes = max(1, known_changes)
        # Each slice costs a few commits: a small or short generation gets fewer, fuller slices.
        slices = slice_count(counts["planned"], busiest, cfg)
        fetchlist = db.sql(to_fetchlist(gen, slices, score_order(cfg)), decided=decided)
        follows = cfg.fetch.follow and cfg.fetch.extract
        if follows and roomy:  # the keys the fetch's followers skip travel with the fetchlist
            new_keys = db.sql(
                f"SELECT url_key, host, domain FROM {{decided}} WHERE {is_changed()} AND is_new",
                decided=decided,
            )
            fetchlist = db.sql(
                with_known_keys(cfg), fetchlist=fetchlist, crawldb=crawldb, new_keys=new_keys
            )
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
                db.append(fetchlist, "fetchlist", txn=(FETCHLIST_TXN, gen))
            else:
                db.replace_where(fetchlist, "fetchlist", f"gen = {gen}")

        def write_crawldb() -> None:
            if not known_changes:
                # Every change is a new URL, absent from the crawldb version read above: an
                # append, whatever crawldb's size, instead of a MERGE that scans crawldb.
                db.append(changed, "crawldb")
            else:
                db.merge(
                    changed,
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
        if writes:  # at once where the engine can: their commits overlap
            db.in_parallel(*writes)
        if lowered is not None and lowered.upgrade:
            mark_shortest(run)  # once its lowered depths are written
    finally:
        db.drop(decided)
    return result


def clock_of(run: StageRun) -> float:
    """The generation's clock, epoch seconds: crawl.now when set, else the time plan first
    started for this generation (its earliest generations row), so a rerun finds the same
    revisits due."""
    fixed = parse_now(run.cfg.crawl.now)
    return run.first_started(Stage.PLAN) if fixed is None else fixed


def _addresses(run: StageRun, frontier: Rel, crawldb: Rel, as_of: float) -> Rel | None:
    """With politeness.key = ip: the dns table, after resolving (in tasks) the candidates'
    hosts it has no answer for younger than politeness.address_ttl_seconds and MERGEing the
    answers into it. Written before any decision, so a rerun reads the same answers and
    chooses the same slots. None for the other keys."""
    if run.cfg.politeness.key != "ip":
        return None
    db = run.db
    missing = db.sql(
        "SELECT c.host FROM {hosts} c LEFT ANTI JOIN (SELECT host FROM {dns} WHERE "
        "expires_at > current_timestamp()) f ON c.host = f.host",
        hosts=db.sql(candidate_hosts(run.gen, as_of), frontier=frontier, crawldb=crawldb),
        dns=db.table("dns"),
    )
    cores = max(1, os.cpu_count() or 1)
    answers = db.map_partitions(missing, ResolveTask(run.cfg, time.time()), RESOLVED, cores)
    try:
        if not db.is_empty(answers):
            times = {"resolved_at", "expires_at"}
            resolved = db.sql(
                "SELECT "
                + ", ".join(
                    f"timestamp_seconds(`{n}`) AS `{n}`" if n in times else f"`{n}`"
                    for n in DNS.names
                )
                + " FROM {answers}",
                answers=answers,
            )
            update = {c: f"s.{c}" for c in DNS.names if c != "host"}
            db.merge(resolved, "dns", keys=["host"], update=update)
    finally:
        db.drop(answers)
    return db.table("dns")


def _budget_use(run: StageRun, crawldb: Rel, hosts: Rel) -> tuple[Rel, Rel] | None:
    """What the budgets have used up, from the hosts table's running totals when its slots
    are hosts (politeness.key = host) and its totals cover the crawl (TOTALS_PROPERTY: a root
    made with them, or filled from crawldb here, once, on an older root). None for the other
    keys (plan aggregates crawldb), which also mark the totals incomplete: their hosts rows
    are per domain or address, so a later switch back to host fills them again."""
    db = run.db
    complete = db.property_of("hosts", TOTALS_PROPERTY) == TOTALS_COMPLETE
    if run.cfg.politeness.key != "host":
        if complete:
            db.set_property("hosts", TOTALS_PROPERTY, None)
        return None
    if not complete:
        log.info("filling the hosts table's urls_tried totals from crawldb (once)")
        db.merge(
            db.sql(host_totals_from_crawldb(), crawldb=crawldb),
            "hosts",
            keys=["slot"],
            update={"urls_tried": "s.urls_tried", "domain": "coalesce(t.domain, s.domain)"},
        )
        db.set_property("hosts", TOTALS_PROPERTY, TOTALS_COMPLETE)
        hosts = db.table("hosts")
    host_used, domain_used = attempted_in_hosts()
    return db.sql(host_used, hosts=hosts), db.sql(domain_used, hosts=hosts)


def has_work(db: Db, cfg: Config, gen: int) -> bool:
    """Whether planning ``gen`` now would choose anything: a URL queued or failed in crawldb
    due now (`transforms.plan.is_due`: its retry time passed), a fetched page due again by now,
    a URL new in gen's frontier that plan's URL rules (depth, extension, length) would not
    filter, or a shorter path that brings a URL within crawl.max_depth; in each case on a slot
    the hosts table does not hold back (`held_slots`). One query. The clock is crawl.now, or
    the real one.

    A frontier holding only URLs past crawl.max_depth is the usual end of a crawl: planning it
    would only mark them filtered, at the cost of a whole generation of fixed costs. They stay
    in the frontier, so a later run with a larger max_depth plans them. URLs not due yet wait
    (`waits` says for what and until when).
    """
    if db.property_of("crawldb", DEPTH_PROPERTY) != DEPTH_SHORTEST:
        return True  # a root from before shortest paths: plan relaxes its depths once
    now = clock_now(cfg)
    crawldb = db.table("crawldb")
    frontier = db.table("frontier", f"gen = {gen}")
    excluded = exclusions.load(cfg, db.read_file)
    plannable = db.sql(
        f"SELECT * FROM ({with_filter_reason(cfg, excluded, '{frontier}')}) "
        "WHERE filter_reason IS NULL",
        frontier=frontier,
    )
    new = db.sql(new_candidates(), frontier=plannable, crawldb=crawldb)
    closer = db.sql(
        rows_of("{crawldb}", f"({reaches_closer(cfg)})"), frontier=frontier, crawldb=crawldb
    )
    due = (
        f"SELECT host, domain FROM {{crawldb}} WHERE {is_in('status', PENDING_STATUSES)} AND "
        f"{is_due(gen, now)}"
    )
    if revisits(cfg.recrawl):
        due += f" UNION ALL SELECT host, domain FROM ({due_revisits(gen, now)})"
    candidates = db.sql(
        f"{due} UNION ALL SELECT host, domain FROM {{new}} UNION ALL SELECT host, domain "
        "FROM {closer}",
        crawldb=crawldb,
        new=new,
        closer=closer,
    )
    return not db.is_empty(_free(db, cfg, candidates))


def _free(db: Db, cfg: Config, rows: Rel) -> Rel:
    """The rows (host, domain) whose slot the hosts table does not hold back."""
    if not db.exists("hosts"):
        return rows
    held = db.sql(
        f"SELECT slot, TRUE AS _held FROM ({held_slots(cfg, hold_now(cfg.crawl.now))})",
        hosts=db.table("hosts"),
    )
    slotted = db.sql(
        with_slot(cfg, "{rows}", _addresses_name(db, cfg)), **_slot_inputs(db, cfg, rows)
    )
    marked = db.sql(with_hold(("_held",), _by_host(cfg), "{df}", "{held}"), df=slotted, held=held)
    return db.sql("SELECT host, domain FROM {m} WHERE _held IS NULL", m=marked)


def _by_host(cfg: Config) -> bool:
    """Whether hosts hold back on their own inside their slot (politeness.key = ip: a slot is
    an address, each of its hosts has a hosts row of its own)."""
    return cfg.politeness.key == "ip"


def _addresses_name(db: Db, cfg: Config) -> str | None:
    """politeness.key = ip: the dns table (the slots of the names resolved so far) as the
    input ``{addresses}``; None otherwise."""
    if cfg.politeness.key == "ip" and db.exists("dns"):
        return "{addresses}"
    return None


def _slot_inputs(db: Db, cfg: Config, rows: Rel) -> dict[str, Rel]:
    inputs = {"rows": rows}
    if _addresses_name(db, cfg):
        inputs["addresses"] = db.table("dns")
    return inputs


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


def waits(db: Db, cfg: Config, gen: int) -> list[Wait]:
    """What the URLs not due in ``gen`` now wait for (one query): failed URLs their retry time
    (crawldb.not_before), URLs of held slots their host's Retry-After, cool-down, robots.txt
    retry or Crawl-delay (`transforms.plan.holds`), fetched pages their revisit
    (next_fetch_at, when recrawl revisits)."""
    now = clock_now(cfg)
    at = timestamp_of(now)
    pending = (
        f"SELECT host, domain, CASE WHEN not_before > {at} THEN {lit(Waiting.RETRY)} END AS "
        f"wait, not_before AS wait_until FROM {{crawldb}} WHERE {is_in('status', PENDING_STATUSES)}"
    )
    if revisits(cfg.recrawl):
        pending += (
            f" UNION ALL SELECT host, domain, CASE WHEN next_fetch_at > {at} THEN "
            f"{lit(Waiting.REVISIT)} END AS wait, next_fetch_at AS wait_until FROM {{crawldb}} "
            f"WHERE {is_in('status', REVISITED_STATUSES)}"
        )
    crawldb = db.table("crawldb")
    rows = db.sql(pending, crawldb=crawldb)
    if db.exists("hosts"):
        held = db.sql(holds(cfg, hold_now(cfg.crawl.now)), hosts=db.table("hosts"))
        slotted = db.sql(
            with_slot(cfg, "{rows}", _addresses_name(db, cfg)), **_slot_inputs(db, cfg, rows)
        )
        marked = db.sql(
            with_hold(("hold", "until"), _by_host(cfg), "{df}", "{held}"), df=slotted, held=held
        )
        # a URL waits for the later of its own retry and its slot's hold
        own = "(wait IS NOT NULL AND (hold IS NULL OR wait_until >= until))"
        rows = db.sql(
            f"SELECT CASE WHEN {own} THEN wait ELSE hold END AS wait, CASE WHEN {own} THEN "
            "wait_until ELSE until END AS wait_until FROM {m}",
            m=marked,
        )
    found = [
        Wait(
            r["wait"],
            int(r["urls"]),
            r["due"].replace(tzinfo=dt.UTC).timestamp() if r["due"] else None,
        )
        for r in db.collect(
            db.sql(
                "SELECT wait, count(*) AS urls, min(wait_until) AS due FROM {r} "
                "WHERE wait IS NOT NULL GROUP BY wait",
                r=rows,
            )
        )
    ]
    order = {w: i for i, w in enumerate(words(Waiting))}
    return sorted(found, key=lambda w: order.get(w.reason, len(order)))
