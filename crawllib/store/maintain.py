"""Table upkeep of a crawl root (`crawl maintain`): compact small files, delete the files no
recent version uses, write a checkpoint; one table after another.

Every generation adds files to the tables it writes: an append per slice, the files a MERGE
rewrites and its deletion vectors (`tables.TABLE_PROPERTIES`). Each file costs a task and an
open to every read and an entry in every snapshot, so small files slow each later stage and
query. Per table:

1. files and bytes per partition (a generation; the whole table when it has no partitions),
   from the Delta log, no data read;
2. OPTIMIZE of the partitions holding more than ``maintain.min_files`` files, one commit per
   table. Within them OPTIMIZE also rewrites the files whose rows are mostly deleted by deletion
   vectors (Delta's ``optimize.maxDeletedRowsRatio``);
3. VACUUM: the files no version of the last ``maintain.vacuum_hours`` uses are deleted (those an
   OPTIMIZE or a MERGE replaced long enough ago, and those of writes that never committed), so a
   run deletes what runs at least that long before it compacted;
4. a checkpoint: the next snapshot is read from it instead of replaying the commits since the
   last one.

Safe between generations: it holds the writer lease like every command that writes. OPTIMIZE
changes files, never rows, so a stage's rerun, replaceWhere or MERGE after it sees the same rows;
VACUUM deletes only files older versions used, which only time travel and a reader running
longer than ``vacuum_hours`` could need. A table behind the generations record stops it before
anything (`crawllib.store.integrity`): VACUUM would delete the files a restore of the lost commits
needs. Idempotent: a second run finds no partition to compact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core import stage_order
from crawllib.core.errors import ConfigError
from crawllib.core.stage_order import States
from crawllib.store import generations, integrity, tables
from crawllib.store.generations import Ledger
from crawllib.store.spark_db import SparkDb
from crawllib.store.spark_schemas import TABLES

log = logging.getLogger(__name__)

# Below Delta's default retention (delta.deletedFileRetentionDuration, one week) VACUUM refuses
# unless this check is turned off: the operator's explicit word that no reader runs that long.
SAFE_RETENTION_HOURS = 168.0
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# VACUUM records its START and END, with the files it deleted, as commits in the table's history
# only when this is on; one writer per root makes those commits as safe as any other.
VACUUM_LOGGING = "spark.databricks.delta.vacuum.logging.enabled"

Partition = tuple[str | None, ...]  # a partition's values, as the Delta log holds them


@dataclasses.dataclass(frozen=True)
class TableUpkeep:
    """What `crawl maintain` did to one table."""

    table: str
    files_before: int
    bytes_before: int
    partitions_compacted: int
    files_compacted: int  # the files OPTIMIZE replaced
    files_vacuumed: int  # the files VACUUM deleted from storage
    bytes_vacuumed: int
    files_after: int
    bytes_after: int
    seconds: float


COLUMNS = tuple(f.name for f in dataclasses.fields(TableUpkeep))


def check_retention(spark: SparkSession, hours: float) -> None:
    """ConfigError when ``hours`` is below one week and Delta's retention check is on: VACUUM
    would refuse, after the compactions; better to say so before anything is done."""
    check = str(spark.conf.get(RETENTION_CHECK, "true")).lower() != "false"
    if hours < SAFE_RETENTION_HOURS and check:
        raise ConfigError(
            f"config key 'maintain.vacuum_hours': {hours:g} is below Delta's minimum of "
            f"{SAFE_RETENTION_HOURS:g} hours, so VACUUM could delete files a stage or reader "
            f'running longer still uses; if none does, set "{RETENTION_CHECK}" = "false" '
            "in the config's [spark.conf]"
        )


def skip_reason(states: States, every: int) -> str | None:
    """Why `crawl maintain --every K` does nothing now: the latest finished generation is not a
    multiple of K (or there is none yet); None when it is due."""
    latest = stage_order.last_done(states)
    if latest is None:
        return "no generation has finished yet"
    if latest % every:
        return f"the latest finished generation, {latest}, is not a multiple of {every}"
    return None


def maintain(
    db: SparkDb,
    cfg: Config,
    ledger: Ledger | None = None,
    names: Sequence[str] = tuple(TABLES),
) -> list[TableUpkeep]:
    """Compact, vacuum and checkpoint the tables ``names`` (all by default), in order, with
    Spark (``db``).

    ConfigError before anything when ``maintain.vacuum_hours`` is too short for Delta's check;
    TableBehind when a table lost commits the generations table (``ledger``) recorded.
    """
    spark, root = db.spark, db.root
    check_retention(spark, cfg.maintain.vacuum_hours)
    ledger = ledger or generations.read_ledger(db)
    integrity.verify(db, ledger.versions, ledger.recorded_by)
    done = []
    for i, name in enumerate(names, 1):
        upkeep = maintain_table(spark, root, name, cfg)
        log.info(
            "maintain %d/%d %s: %d -> %d files, %d partitions compacted, %d files vacuumed",
            i,
            len(names),
            name,
            upkeep.files_before,
            upkeep.files_after,
            upkeep.partitions_compacted,
            upkeep.files_vacuumed,
        )
        done.append(upkeep)
    return done


@dataclasses.dataclass(frozen=True)
class TablePlan:
    """What `crawl maintain` would do to one table (``--dry-run``): the partitions it would
    compact (``gen=3``; ``*`` for a table without partitions) and their files, and the files
    VACUUM would delete."""

    table: str
    files: int
    bytes: int
    partitions_to_compact: tuple[str, ...]
    files_to_compact: int
    files_to_delete: tuple[str, ...]


PLAN_COLUMNS = tuple(f.name for f in dataclasses.fields(TablePlan))


def plan(
    spark: SparkSession, root: str, cfg: Config, names: Sequence[str] = tuple(TABLES)
) -> list[TablePlan]:
    """What `maintain` would do to the tables ``names``, reading their logs and listing their
    folders only: nothing is written (VACUUM's DRY RUN commits nothing). ConfigError, as
    `maintain`, when ``maintain.vacuum_hours`` is too short for Delta's check."""
    check_retention(spark, cfg.maintain.vacuum_hours)
    planned = []
    for name in names:
        path = tables.table_path(root, name)
        columns = TABLES[name][1]
        counts = file_counts(spark, path, columns)
        chosen = to_compact(counts, cfg.maintain.min_files)
        planned.append(
            TablePlan(
                table=name,
                files=sum(files for files, _ in counts.values()),
                bytes=sum(size for _, size in counts.values()),
                partitions_to_compact=tuple(_named(columns, p) for p in sorted(chosen, key=str)),
                files_to_compact=sum(counts[p][0] for p in chosen),
                files_to_delete=to_vacuum(spark, path, cfg.maintain.vacuum_hours),
            )
        )
    return planned


def _named(columns: Sequence[str], partition: Partition) -> str:
    if not columns:
        return "*"
    return ",".join(f"{c}={v}" for c, v in zip(columns, partition, strict=True))


def to_vacuum(spark: SparkSession, path: str, hours: float) -> tuple[str, ...]:
    """The files VACUUM with ``hours`` of retention would delete from the table, sorted."""
    with console_to_stderr(spark):
        found = spark.sql(f"VACUUM delta.`{path}` RETAIN {hours:g} HOURS DRY RUN").collect()
    return tuple(sorted(str(row[0]) for row in found))


def maintain_table(spark: SparkSession, root: str, name: str, cfg: Config) -> TableUpkeep:
    """Compact the partitions of table ``name`` with more than ``maintain.min_files`` files,
    vacuum it, checkpoint it."""
    started = time.monotonic()
    path = tables.table_path(root, name)
    columns = TABLES[name][1]
    before = file_counts(spark, path, columns)
    chosen = to_compact(before, cfg.maintain.min_files)
    partitions = compacted = 0
    # its commits (OPTIMIZE, VACUUM START and END) are crawllib's, like a stage's
    if chosen:
        with tables.committing(spark, root):
            condition = where(columns, chosen) if columns else None
            partitions, compacted = compact(spark, path, condition)
    with tables.committing(spark, root):
        vacuumed, vacuumed_bytes = vacuum(spark, path, cfg.maintain.vacuum_hours)
    with tables.committing(spark, root):
        checkpoint(spark, path)
    # VACUUM's commits add and remove no file: without a compaction the files are as before
    after = file_counts(spark, path, columns) if compacted else before
    return TableUpkeep(
        table=name,
        files_before=sum(files for files, _ in before.values()),
        bytes_before=sum(size for _, size in before.values()),
        partitions_compacted=partitions,
        files_compacted=compacted,
        files_vacuumed=vacuumed,
        bytes_vacuumed=vacuumed_bytes,
        files_after=sum(files for files, _ in after.values()),
        bytes_after=sum(size for _, size in after.values()),
        seconds=round(time.monotonic() - started, 1),
    )


def _delta_log(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The table's DeltaLog and its latest snapshot (JVM objects)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pair = jvm.org.apache.spark.sql.delta.DeltaLog.forTableWithSnapshot(spark._jsparkSession, path)
    return pair._1(), pair._2()


def file_counts(
    spark: SparkSession, path: str, columns: Sequence[str]
) -> dict[Partition, tuple[int, int]]:
    """Partition values (by ``columns``) -> (files, bytes) of the table's latest version, read
    from its log; ``()`` -> the whole table's when it has no partition columns."""
    snapshot = _delta_log(spark, path)[1]
    files = DataFrame(snapshot.allFiles().toDF(), spark)
    counts = (
        files.groupBy(*[F.col("partitionValues")[c].alias(c) for c in columns])
        .agg(F.count("*").alias("files"), F.sum("size").alias("bytes"))
        .collect()
    )
    return {
        tuple(row[c] for c in columns): (int(row["files"]), int(row["bytes"] or 0))
        for row in counts
        if row["files"]
    }


def to_compact(counts: Mapping[Partition, tuple[int, int]], min_files: int) -> list[Partition]:
    """The partitions holding more than ``min_files`` files."""
    return [partition for partition, (files, _) in counts.items() if files > min_files]


def where(columns: Sequence[str], partitions: Iterable[Partition]) -> str:
    """A SQL condition that holds on exactly these partitions."""

    def equals(column: str, value: str | None) -> str:
        if value is None:
            return f"`{column}` IS NULL"
        quoted = value.replace("\\", "\\\\").replace("'", "\\'")
        return f"`{column}` = '{quoted}'"

    return " OR ".join(
        "(" + " AND ".join(equals(c, v) for c, v in zip(columns, values, strict=True)) + ")"
        for values in partitions
    )


def compact(spark: SparkSession, path: str, condition: str | None) -> tuple[int, int]:
    """OPTIMIZE the table (only the partitions ``condition`` selects, when given): one commit.
    Returns (partitions compacted, files replaced)."""
    sql = f"OPTIMIZE delta.`{path}`" + (f" WHERE {condition}" if condition else "")
    metrics = tables.one_row(spark.sql(sql))["metrics"]
    return int(metrics["partitionsOptimized"]), int(metrics["numFilesRemoved"])


def vacuum(spark: SparkSession, path: str, hours: float) -> tuple[int, int]:
    """VACUUM the table, keeping what the versions of the last ``hours`` use; (files, bytes)
    deleted, as the VACUUM END and START commits record them."""
    spark.conf.set(VACUUM_LOGGING, "true")
    table = DeltaTable.forPath(spark, path)
    with console_to_stderr(spark):
        table.vacuum(hours)
    recorded = {row["operation"]: row["operationMetrics"] for row in table.history(2).collect()}
    end, start = recorded.get("VACUUM END"), recorded.get("VACUUM START")
    if end is None or start is None:
        raise RuntimeError(f"VACUUM of {path} left no VACUUM START and END in its history")
    return int(end["numDeletedFiles"]), int(start["sizeOfDataToDelete"])


@contextlib.contextmanager
def console_to_stderr(spark: SparkSession) -> Iterator[None]:
    """Scala's println goes to the JVM's stderr during the block (in the JVM thread serving
    this Python thread, where a command runs): VACUUM prints a line per table, which would mix
    into what the command prints on stdout (`--format json`)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    console = getattr(getattr(jvm.scala, "Console$"), "MODULE$")
    out = console.out()
    console.setOutDirect(console.err())
    try:
        yield
    finally:
        console.setOutDirect(out)


def checkpoint(spark: SparkSession, path: str) -> None:
    """Write a checkpoint of the table's latest version."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log, snapshot = _delta_log(spark, path)
    delta_log.checkpoint(snapshot, jvm.scala.Option.empty())


def plan_summary(planned: Sequence[TablePlan]) -> str:
    """One line over all tables of a dry run, for people."""
    return (
        f"dry run, nothing written: would compact {sum(len(p.partitions_to_compact) for p in planned)} "
        f"partitions ({sum(p.files_to_compact for p in planned)} files) and delete "
        f"{sum(len(p.files_to_delete) for p in planned)} old files"
    )


def summary(done: Sequence[TableUpkeep]) -> str:
    """One line over all tables, for people."""
    seconds = sum(u.seconds for u in done)
    return (
        f"{sum(u.files_before for u in done)} files before, {sum(u.files_after for u in done)} "
        f"after: {sum(u.partitions_compacted for u in done)} partitions compacted "
        f"({sum(u.files_compacted for u in done)} files replaced), "
        f"{sum(u.files_vacuumed for u in done)} old files deleted "
        f"({sum(u.bytes_vacuumed for u in done)} bytes), {seconds:.0f} s"
    )
