"""plan(N): frontier gen N + crawldb -> fetchlist gen N, and crawldb updated to match.

Candidates are the new URLs of frontier gen N (deduped, not in crawldb) and the crawldb URLs due
in N (status queued or failed, next_gen <= N). New URLs are inserted into crawldb (queued, or
filtered with reason depth/extension/length/budget); known URLs past a budget become filtered
(budget); URLs past the per-host cap of the generation stay as they are with next_gen = N + 1.
The chosen URLs are the fetchlist of gen N. Chosen known URLs are not changed: fetch and update
will.

Idempotency. Two writes, made at once from two driver threads (their commits overlap): the
fetchlist (replaceWhere gen = N; an append on the first run) and crawldb's changes in one
commit (a MERGE; an append when every change is a new URL). The fetchlist is no input of
plan, so whichever of the two a crash leaves out, the rerun is right: without the crawldb
commit it starts from the same inputs; with it, it sees what a rerun after a complete run
sees: no new URLs (all now in crawldb), the chosen URLs (queued, next_gen <= N, last_gen
untouched), and not the ones it filtered or deferred (filtered, or next_gen = N + 1).
Because every ranking (budgets, cap) is by the total order (depth, url_key), a chosen URL's
rank among this subset is at most its rank among the first run's candidates and the attempted
counts behind the budgets are unchanged (plan never sets last_gen); so the rerun chooses
exactly the same URLs, writes the same fetchlist and skips the MERGE: it has nothing to change.
Its counts describe what it saw (candidates = planned), not the first run's.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import config, tables
from crawllib.transforms.plan import (
    PENDING_STATUSES,
    busiest_slot,
    count_decisions,
    crawldb_changes,
    is_changed,
    plan_decisions,
    slice_count,
    to_fetchlist,
)

log = logging.getLogger(__name__)

# Only plan's own decisions: a row that left queued/failed since it was read is not touched.
_MERGE_GUARD = "t.status IN ({})".format(", ".join(f"'{s}'" for s in PENDING_STATUSES))
_MERGE_UPDATE = {c: f"s.{c}" for c in ("status", "reason", "next_gen", "updated_at")}


def run(spark: SparkSession, root: str, cfg: Any, gen: int, fresh: bool = False) -> dict[str, int]:
    """Plan generation ``gen``; return the counts (candidates, planned, filtered_depth,
    filtered_extension, filtered_length, filtered_budget, deferred_cap, hosts, slices).

    fresh: this stage run is the generation's first (`crawllib.pipeline.run_stage`): the
    fetchlist is appended, there is nothing of gen to replace.
    """
    frontier = tables.read(spark, root, "frontier").where(F.col("gen") == gen)
    crawldb = tables.read(spark, root, "crawldb")
    # Cached for speed only. A Delta DataFrame reads the table's latest version at each
    # action: the counts run before any write, and should the fetchlist write (another
    # thread) start after the crawldb commit, its recomputation from the new version chooses
    # the same URLs (Idempotency, above).
    decided = plan_decisions(frontier, crawldb, cfg, gen).persist()
    try:
        # One action for the three one-row aggregates.
        row = (
            count_decisions(decided, cfg)
            .crossJoin(busiest_slot(decided, cfg))
            .crossJoin(
                decided.agg(
                    F.count_if(is_changed()).alias("_changes"),
                    F.count_if(is_changed() & ~F.col("is_new")).alias("_known_changes"),
                )
            )
            .first()
        )
        counts = {k: int(v) for k, v in row.asDict().items()}
        busiest = counts.pop("urls")
        changes = counts.pop("_changes")
        known_changes = counts.pop("_known_changes")
        # Each slice costs a few commits: a small or short generation gets fewer, fuller slices.
        slices = slice_count(counts["planned"], busiest, cfg)
        fetchlist = to_fetchlist(decided, config.replace(cfg, storage__fetch_slices=slices), gen)
        # Slots are dealt round-robin over the slices: the busiest one fills min(slices, busiest).
        counts["slices"] = min(slices, busiest)
        log.info("plan gen %d: %s", gen, counts)

        def write_fetchlist() -> None:
            tables.replace_where(fetchlist, root, "fetchlist", f"gen = {gen}", fresh)

        def write_crawldb() -> None:
            if changes and not known_changes:
                # Every change is a new URL, absent from the crawldb version read above: an
                # append (0.6 s, whatever crawldb's size) instead of a MERGE that scans crawldb.
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
                )

        # No crawldb write when every candidate is a known URL chosen as is (seeds, reruns).
        if changes:  # both at once: their commits overlap
            tables.in_parallel(spark, write_fetchlist, write_crawldb)
        else:
            write_fetchlist()
    finally:
        decided.unpersist()
    return counts
