"""Which generation is where: the ``generations`` table (one row per generation and stage)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from crawllib import tables

STAGES = ("plan", "fetch", "parse", "update")


def stage_states(spark: SparkSession, root: str) -> dict[tuple[int, str], str]:
    """(gen, stage) -> state of its latest row."""
    rows = (
        tables.read(spark, root, "generations")
        .groupBy("gen", "stage")
        .agg(F.max_by("state", "started_at").alias("state"))
        .collect()
    )
    return {(r["gen"], r["stage"]): r["state"] for r in rows}


def next_seed_gen(spark: SparkSession, root: str) -> int:
    """The first generation not yet planned: new seeds join it."""
    planned = [gen for (gen, stage), state in stage_states(spark, root).items() if stage == "plan"]
    return max(planned) + 1 if planned else 0
