"""The traps table (URL-pattern traps: crawllib.policy.traps has the rules,
crawllib.transforms.traps their Spark side): how the stages read it and how update adds a
generation's counts."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from crawllib.config import Config
from crawllib.store import tables
from crawllib.transforms.traps import trapped_patterns

# MERGE of pattern_counts (s) into traps (t) on (host, pattern), guarded by
# tables.ONCE_PER_GEN: a generation adds its counts once.
TRAPS_UPDATE = {
    "pages": "t.pages + s.pages",
    "duplicates": "t.duplicates + s.duplicates",
    "gen": "s.gen",
    "updated_at": "s.updated_at",
}


def read_trapped(spark: SparkSession, root: str, cfg: Config) -> DataFrame | None:
    """:func:`trapped_patterns` of the crawl root's traps table; None on a root without one
    yet."""
    if not tables.exists(spark, root, "traps"):
        return None
    return trapped_patterns(tables.read(spark, root, "traps"), cfg)
