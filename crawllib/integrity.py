"""Tables that cannot silently go back in time.

After a stage commits, the Delta version of every table (but ``generations``, which holds the
record) is stored with the stage's ``done`` row. Before a stage writes, each table's current
version is compared with the latest record: a table behind it lost commits (its newest log
file deleted, a partial copy, a manual restore), and working on would refetch what was fetched
and duplicate rows, so the stage stops (TableBehind) naming the table, both versions and the
repair: restore the table, or accept its state with `crawl accept-state`. A table ahead of the
record is normal (a stage that crashed after some of its commits).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from crawllib import tables
from crawllib.errors import TableBehind

# The tables whose versions are recorded: generations holds the record itself; warc_index is
# written by `crawl export-warc`, outside the stages, and no stage reads it.
CHECKED = tuple(name for name in tables.TABLES if name not in ("generations", "warc_index"))


def current_versions(spark: SparkSession, root: str) -> dict[str, int]:
    """table -> its latest Delta version, from each table's log (a listing, no Spark job)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    return {
        name: int(
            delta_log.forTableWithSnapshot(spark._jsparkSession, tables.table_path(root, name))
            ._2()
            .version()
        )
        for name in CHECKED
    }


def behind(current: Mapping[str, int], recorded: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """table -> (current, recorded) for every table older than its record."""
    return {
        name: (current[name], version)
        for name, version in recorded.items()
        if name in current and current[name] < version
    }


def verify(
    spark: SparkSession, root: str, recorded: Mapping[str, int], recorded_by: str
) -> dict[str, int]:
    """The current versions, or TableBehind if a table is older than ``recorded`` (what
    ``recorded_by``, e.g. "gen 3 fetch", recorded after its commits)."""
    current = current_versions(spark, root)
    lost = behind(current, recorded)
    if lost:
        name, (now, then) = sorted(lost.items())[0]
        more = f" (also: {', '.join(sorted(lost)[1:])})" if len(lost) > 1 else ""
        raise TableBehind(
            f"table {name} is at version {now}, but {recorded_by} recorded version {then} "
            f"after committing to it{more}: commits are missing (a deleted log file, a partial "
            f"copy or a restore). Nothing was written. Restore the table to version {then} "
            f"or later, or accept the tables as they are with `crawl accept-state ROOT` (then "
            f"rerun with --force the stages whose output is gone)"
        )
    return current
