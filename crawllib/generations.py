"""Which generation is where: the ``generations`` table (one row per stage run and state).

A stage run appends a ``running`` row when it starts and a ``done`` (with counts) or ``failed``
row when it ends; the latest row of a (gen, stage) is its state. When one process runs stage
after stage, a ``done`` row and the next stage's ``running`` row are one commit (`record`'s
``then``). Counts go here, not into Spark accumulators, so a retried task never counts twice.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import tables

STAGES = ("plan", "fetch", "parse", "update")
# The count that measures a stage's throughput (items per second in `crawl status`).
THROUGHPUT_KEY = {"plan": "candidates", "fetch": "urls", "parse": "pages", "update": "urls"}


def stage_states(spark: SparkSession, root: str) -> dict[tuple[int, str], str]:
    """(gen, stage) -> state of its latest row.

    The table holds a few rows per stage run, so it is collected and reduced here: a Spark
    aggregation would cost a shuffle (about 1 s locally) on every call.
    """
    rows = (
        tables.read(spark, root, "generations")
        .select("gen", "stage", "state", "started_at", "finished_at")
        .collect()
    )
    latest: dict[tuple[int, str], tuple] = {}
    for r in rows:
        order = (r["finished_at"] is not None, r["finished_at"] or r["started_at"], r["started_at"])
        key = (r["gen"], r["stage"])
        if key not in latest or order > latest[key][0]:
            latest[key] = (order, r["state"])
    return {key: state for key, (_order, state) in latest.items()}


def next_seed_gen(spark: SparkSession, root: str) -> int:
    """The first generation not yet planned: new seeds join it."""
    planned = [gen for (gen, stage), _ in stage_states(spark, root).items() if stage == "plan"]
    return max(planned) + 1 if planned else 0


def next_gen(states: dict[tuple[int, str], str]) -> int:
    """The generation due: the first not fully done (0 on a new crawl)."""
    done = sorted({g for (g, s), st in states.items() if s == "update" and st == "done"})
    started = sorted({g for (g, _s) in states})
    for gen in started:
        if gen not in done:
            return gen
    return done[-1] + 1 if done else 0


def done_gens(states: dict[tuple[int, str], str]) -> list[int]:
    return sorted(g for (g, s), st in states.items() if s == "update" and st == "done")


def record(
    spark: SparkSession,
    root: str,
    gen: int,
    stage: str,
    state: str,
    started_at: dt.datetime,
    counts: dict[str, int] | None = None,
    then: tuple[int, str] | None = None,
) -> dt.datetime:
    """Append a stage run's row: ``running`` (no finish), ``done`` or ``failed`` (finished
    now); return now, as the row has it.

    then: (gen, stage) of the stage run that starts next in this process, as this one
    finishes: its ``running`` row (started_at: this row's finished_at) is appended in the
    same commit (one commit for two: about 0.7 s saved).
    The commit's Delta ``userMetadata`` names its rows ("gen 3 fetch done, gen 3 parse
    running"), so `DESCRIBE HISTORY` shows which stage runs each version recorded.
    """
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    finished = None if state == "running" else now
    seconds = (finished - started_at).total_seconds() if finished else None
    counts_map = {k: int(v) for k, v in (counts or {}).items()}
    rows = [(gen, stage, state, started_at, finished, seconds, counts_map)]
    if then:
        rows.append((then[0], then[1], "running", now, None, None, {}))
    df = spark.createDataFrame(
        rows,
        "gen int, stage string, state string, started_at timestamp, finished_at timestamp, "
        "seconds double, counts map<string,bigint>",
    )
    note = ", ".join(f"gen {r[0]} {r[1]} {r[2]}" for r in rows)
    tables.append(df, root, "generations", note=note)
    return now


def status_rows(spark: SparkSession, root: str) -> list[tuple]:
    """One row per (gen, stage), latest state: for `crawl status`."""
    latest = (
        tables.read(spark, root, "generations")
        .withColumn("order", F.struct(F.coalesce("finished_at", "started_at"), "started_at"))
        .groupBy("gen", "stage")
        .agg(F.max_by(F.struct("state", "seconds", "counts", "started_at"), "order").alias("r"))
        .select("gen", "stage", "r.*")
        .collect()
    )
    order = {s: i for i, s in enumerate(STAGES)}
    out = []
    for r in sorted(latest, key=lambda r: (r["gen"], order.get(r["stage"], 9))):
        counts = dict(r["counts"] or {})
        items = counts.get(THROUGHPUT_KEY.get(r["stage"], ""), None)
        rate = round(items / r["seconds"], 1) if items is not None and r["seconds"] else None
        summary = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v)
        out.append(
            (
                r["gen"],
                r["stage"],
                r["state"],
                r["seconds"] and round(r["seconds"], 1),
                rate,
                summary,
            )
        )
    return out
