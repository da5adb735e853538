"""The Spark engine: a crawl root's tables through a SparkSession with Delta (clusters:
spark-submit, EMR, the Airflow DAGs; or a local master). Relations are DataFrames; the rules'
SQL runs as it is written (``spark.sql`` binds each ``{name}`` to its DataFrame); writes go
through crawllib.store.tables (the lease, tagged commits, job cancellation)."""

from __future__ import annotations

import contextlib
import itertools
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from crawllib.config import Config
from crawllib.core.roots import normalize_root
from crawllib.store import dialect, hadoopfs, tables
from crawllib.store.db import Clause, Db, PartitionTask, Rel, table_path
from crawllib.store.schemas import Struct
from crawllib.store.spark_schemas import spark_schema
from crawllib.store.udfs import UDFS

T = TypeVar("T")
_groups = itertools.count()
_CONSTRAINTS = "spark.sql.constraintPropagation.enabled"
# On one machine each broadcast is a Spark job of its own (15 of a small generation's update),
# and a sort-merge join inside the query's job is as quick while crawldb is small; past this
# size the broadcasts the crawler asks for (crawllib.transforms.lookup, a MERGE's source) save
# shuffling all of crawldb (the plans the scale benchmark measured). A cluster always
# broadcasts.
SMALL_CRAWL_BYTES = 16 * 2**20
_BROADCAST_HINT = re.compile(r"/\*\+\s*BROADCAST\([^)]*\)\s*\*/", re.IGNORECASE)
# How Spark evaluates expressions outside whole-stage code (which a local master turns off:
# crawllib.store.session): interpreted while the crawl is small on one machine (SparkDb.
# job_group), as Janino compiles a class for each projection, predicate and ordering of every
# query (a sixth of the JVM's samples in a small generation); compiled (Spark's default,
# FALLBACK) once crawldb is large, where the compiled code pays for itself. An operator's own
# spark.conf setting of it wins.
_FACTORY_MODE = "spark.sql.codegen.factoryMode"
# The attribute a kept relation (a DataFrame) carries its row count in (SparkDb.keep)
_ROWS = "_crawllib_rows"
# How long an observation's figures may take to reach the driver after the job that computed
# them: Spark hands them to a listener on its event bus, a moment after the action returns.
_OBSERVED_WAIT_S = 30.0


def _observed(seen: Observation, name: str) -> Any | None:
    """The figure ``name`` of an observation whose action has run, or None when Spark has not
    reported it in _OBSERVED_WAIT_S (``Observation.get`` would wait for ever): the caller then
    counts with a job, as without it."""
    java = seen._jo  # no public way to wait for a bounded time
    if java is None:  # not attached to a DataFrame
        return None
    deadline = time.monotonic() + _OBSERVED_WAIT_S
    future = java.future()
    while not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.002)
    return seen.get.get(name)


def _plain_row(row: Any, drop: str | None) -> dict[str, Any]:
    out = row.asDict(recursive=True)
    if drop is not None:
        out.pop(drop, None)
    return out


def register_udfs(spark: SparkSession) -> None:
    """The rules' Python functions (crawllib.store.udfs) as SQL functions of the session."""
    for udf in UDFS:
        spark.udf.register(udf.name, udf.function, udf.spark_result)


class SparkDb(Db):
    """The tables of the crawl at ``root`` through ``spark`` (module docstring)."""

    engine = "spark"

    def __init__(self, spark: SparkSession, root: str, cfg: Config) -> None:
        self.spark = spark
        self.root = normalize_root(root)
        self.cfg = cfg
        # SMALL_CRAWL_BYTES; whether this stage's crawl is large (judged once per job group)
        self.small_crawl_bytes = SMALL_CRAWL_BYTES
        self._large: bool | None = None
        register_udfs(spark)

    # -- the tables --------------------------------------------------------------------------

    def table(
        self,
        name: str,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        version: int | None = None,
        stream: bool = False,
    ) -> Rel:
        if version is None:
            df = tables.read(self.spark, self.root, name)
        else:
            df = tables.read_version(self.spark, self.root, name, version)
        if where:
            df = df.where(where)
        return df.select(*columns) if columns else df

    def exists(self, name: str) -> bool:
        return tables.exists(self.spark, self.root, name)

    def version_of(self, name: str) -> int:
        return tables.version_of(self.spark, self.root, name)

    def property_of(self, name: str, key: str) -> str | None:
        return tables.property_of(self.spark, self.root, name, key) or None

    def set_property(self, name: str, key: str, value: str | None) -> None:
        tables.set_property(self.spark, self.root, name, key, value)

    def txn_version(self, name: str, app_id: str) -> int | None:
        return tables.txn_version(self.spark, self.root, name, app_id)

    def commits(self, name: str, after: int) -> dict[int, tuple[str, str | None]]:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, table_path(self.root, name)
        )
        # to the latest version (an end bound would need a boxed Long, which py4j cannot make)
        history = delta_log.history().getHistory(
            after + 1, jvm.scala.Option.empty(), jvm.scala.Option.empty()
        )
        out: dict[int, tuple[str, str | None]] = {}
        for i in range(history.length()):
            commit = history.apply(i)
            note = commit.userMetadata()
            out[int(commit.getVersion())] = (
                str(commit.operation()),
                str(note.get()) if note.isDefined() else None,
            )
        return out

    def init_tables(self, upgrade: bool = False) -> list[str]:
        return tables.init_tables(self.spark, self.root, upgrade)

    # -- relations ---------------------------------------------------------------------------

    def large_crawl(self) -> bool:
        """On a cluster, or while crawldb holds at least small_crawl_bytes (SMALL_CRAWL_BYTES;
        from its log, once per stage): the broadcasts the rules ask for are made, and
        expressions are compiled (_FACTORY_MODE)."""
        if self._large is None:
            self._large = not self.one_machine() or self._crawldb_bytes() >= (
                self.small_crawl_bytes
            )
        return self._large

    def _crawldb_bytes(self) -> float:
        try:
            return int(tables.snapshot_of(self.spark, self.root, "crawldb").sizeInBytes())
        except Exception:  # no crawldb yet (a root being made): as a large one
            return float("inf")

    def sql(self, query: str, **inputs: Rel) -> Rel:
        if "BROADCAST" in query.upper() and not self.large_crawl():
            query = _BROADCAST_HINT.sub("", query)
        # Each input a temp view of its own for the query's analysis (as spark.sql's own
        # {name} binding does, which would also take a regex's {12,} for a name).
        names = {key: f"crawl_in_{uuid.uuid4().hex}" for key in inputs}
        for key, rel in inputs.items():
            rel.createOrReplaceTempView(names[key])
        try:
            return self.spark.sql(dialect.bind(query, names))
        finally:
            for name in names.values():
                self.spark.catalog.dropTempView(name)

    def rows(self, rows: Iterable[Mapping[str, Any]], schema: Struct) -> Rel:
        names = schema.names
        values = [tuple(r.get(n) for n in names) for r in rows]
        return self.spark.createDataFrame(values, spark_schema(schema))

    def keep(self, rel: Rel, through_losses: bool = False) -> Rel:
        # The rows are counted as they are computed (an observation of the same job), so
        # `count` and `is_empty` of a kept relation cost no Spark job.
        seen = Observation()
        observed = rel.observe(seen, F.count(F.lit(1)).alias("rows"))
        if through_losses:  # cached, not checkpointed: a lost block is recomputed
            kept = observed.persist(StorageLevel.MEMORY_AND_DISK)
            kept.count()
        else:
            kept = self._checkpoint(observed)
        rows = _observed(seen, "rows")
        if rows is not None:
            setattr(kept, _ROWS, int(rows))
        return kept

    def _checkpoint(self, rel: Rel) -> Rel:
        # A checkpoint carries its plan's constraints (isnotnull(url_key#1)...), which Spark
        # (4.0) does not rewrite when a query renews the checkpoint's attributes: a UNION of
        # two kept relations holding the same attribute (both read crawldb's url_key) then
        # fails ("key not found: url_key#1"). So kept relations carry none: their plan is
        # optimized afresh (select) with constraint propagation off. It is an optimization
        # only: a query running meanwhile at most infers fewer filters.
        conf = self.spark.conf
        before = conf.get(_CONSTRAINTS, "true") or "true"
        conf.set(_CONSTRAINTS, "false")
        try:
            return rel.select("*").localCheckpoint(eager=True)
        finally:
            conf.set(_CONSTRAINTS, before)

    def drop(self, rel: Rel) -> None:
        rel.unpersist()

    def collect(self, rel: Rel, limit: int | None = None) -> list[dict[str, Any]]:
        df: DataFrame = rel if limit is None else rel.limit(limit)
        return [_plain(r.asDict(recursive=True)) for r in df.collect()]

    def count(self, rel: Rel) -> int:
        rows = getattr(rel, _ROWS, None)
        return int(rel.count()) if rows is None else rows

    def is_empty(self, rel: Rel) -> bool:
        rows = getattr(rel, _ROWS, None)
        return bool(rel.isEmpty()) if rows is None else rows == 0

    def columns(self, rel: Rel) -> list[str]:
        return list(rel.columns)

    def map_partitions(
        self, rel: Rel, task: PartitionTask, schema: Struct, partitions: int, by: str | None = None
    ) -> Rel:
        partitions = max(1, partitions)
        rows = rel.rdd
        if by is not None:  # the partition is the row's own number: an identity partitioner
            rows = rows.map(lambda r: (r[by], r)).partitionBy(partitions, lambda k: k).values()
            drop = by
        else:
            rows = rows.repartition(partitions)
            drop = None

        def run(part: Iterable[Any]) -> Iterator[tuple]:
            from pyspark import TaskContext

            context = TaskContext.get()
            dicts = (_plain_row(r, drop) for r in part)
            if context is None:
                yield from task(dicts, 0, 0, False)
            else:
                yield from task(dicts, context.partitionId(), context.attemptNumber(), True)

        out = self.spark.createDataFrame(
            rows.mapPartitions(run), spark_schema(schema), verifySchema=False
        )
        return out.persist(StorageLevel.DISK_ONLY)

    def parallelism(self) -> int:
        return int(self.spark.sparkContext.defaultParallelism)

    def one_machine(self) -> bool:
        return str(self.spark.sparkContext.master).startswith("local")

    def read_file(self, uri: str) -> bytes:
        if hadoopfs.is_uri(uri):
            return hadoopfs.read_bytes(self.spark, uri)
        with open(uri, "rb") as fh:
            return fh.read()

    def is_file(self, uri: str) -> bool:
        if hadoopfs.is_uri(uri):
            return hadoopfs.is_file(self.spark, uri)
        import os

        return os.path.isfile(uri)

    # -- writes ------------------------------------------------------------------------------

    def append(
        self,
        rel: Rel,
        name: str,
        txn: tuple[str, int] | None = None,
        note: str | None = None,
    ) -> None:
        tables.append(rel, self.root, name, txn=txn, note=note)

    def replace_where(self, rel: Rel, name: str, where: str) -> None:
        tables.replace_where(rel, self.root, name, where)

    def merge(
        self,
        rel: Rel,
        name: str,
        keys: Sequence[str],
        update: Mapping[str, str] | None = None,
        insert: bool = True,
        update_condition: str | None = None,
        also: Sequence[Clause] = (),
        insert_condition: str | None = None,
        broadcast: bool = False,
    ) -> None:
        tables.merge(
            self.spark,
            rel,
            self.root,
            name,
            keys=keys,
            update=update,
            insert=insert,
            update_condition=update_condition,
            also=also,
            insert_condition=insert_condition,
            broadcast=broadcast and self.large_crawl(),
        )

    @contextlib.contextmanager
    def job_group(self, description: str) -> Iterator[str]:
        sc = self.spark.sparkContext
        group = f"crawllib-{next(_groups)}"
        self._large = None  # a stage judges crawldb's size afresh
        if self.one_machine() and _FACTORY_MODE not in self.cfg.spark.conf:
            self.spark.conf.set(_FACTORY_MODE, "FALLBACK" if self.large_crawl() else "NO_CODEGEN")
        before = sc.getLocalProperty("spark.jobGroup.id")
        before_description = sc.getLocalProperty("spark.job.description")
        sc.setJobGroup(group, description)
        try:
            yield group
        finally:
            if before is None:
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
            else:
                sc.setJobGroup(before, before_description or "")

    def jobs_of(self, group: str) -> tuple[int, int]:
        tracker = self.spark.sparkContext.statusTracker()
        jobs = list(tracker.getJobIdsForGroup(group))
        tasks = 0
        for job in jobs:
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                stage_info = tracker.getStageInfo(stage)
                tasks += stage_info.numTasks if stage_info is not None else 0
        return len(jobs), tasks

    def files_added(self, name: str, after: int, upto: int) -> int:
        if upto <= after:
            return 0
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.spark._jsparkSession, table_path(self.root, name)
        )
        added = 0
        changes = log.getChanges(after + 1, False)
        while changes.hasNext():
            version_actions = changes.next()
            if version_actions._1() > upto:
                break
            actions = version_actions._2()
            for i in range(actions.size()):
                if actions.apply(i).getClass().getSimpleName() == "AddFile":
                    added += 1
        return added

    def in_parallel(self, *actions: Callable[[], T]) -> list[T]:
        return tables.in_parallel(self.spark, *actions)


def _plain(value: Any) -> Any:
    """A collected value as the embedded engine gives it: binary as bytes (PySpark's is a
    bytearray), inside lists, maps and structs too."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
