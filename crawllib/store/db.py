"""A crawl root's tables on one engine: the seam between the stages and Spark or the embedded
engine.

The stages (crawllib.stages) are written once, against :class:`Db`; the crawl's rules are SQL
(crawllib.transforms: Spark SQL text with ``{name}`` placeholders for its inputs). Two
engines implement it over the same Delta tables:

- ``spark`` (crawllib.store.spark_db): a SparkSession with Delta, for clusters (spark-submit,
  EMR, the Airflow DAGs); relations are DataFrames.
- ``embedded`` (crawllib.store.embedded): DuckDB in-process over delta-rs, no JVM, the default
  on one machine; relations are DuckDB relations, the rules' SQL transpiled to DuckDB's
  dialect (crawllib.store.dialect).

A relation (``Rel``) is lazy: it is computed when an action (collect, count, a write) runs, and
a relation read from a table sees the table as it was when read (the embedded engine pins the
version; a Spark DataFrame reads the latest version at each action, so the stages `keep` what
they read before writing to the same table). Every write needs the crawl root's writer lease
(crawllib.store.lease) and tags its Delta commit as crawllib's (crawllib.store.tables.COMMIT_TAG).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from crawllib.config import Config
from crawllib.core.roots import normalize_root
from crawllib.store.schemas import TABLES, Struct

T = TypeVar("T")
# A relation of the engine: a pyspark DataFrame, or a DuckDB relation.
Rel = Any
# A partition's work (crawllib.engine.partition.FetchTask): (its rows as dicts, its number,
# the attempt, whether it runs in a task that keeps a journal) -> result tuples. Picklable.
PartitionTask = Callable[[Iterable[Mapping[str, Any]], int, int, bool], Iterator[tuple]]
# The merge clauses crawllib.store.tables.merge takes: (condition, column -> SQL expression).
Clause = tuple[str, Mapping[str, str]]

# What the userMetadata of every commit crawllib makes starts with; a note follows after ": ".
COMMIT_TAG = "crawllib"
# The table whose every commit the writer lease records (its version after the commit).
LEDGER = "generations"
# The update condition of a MERGE that adds a generation's counts to running totals (t.gen:
# the last generation added): a rerun of that generation finds t.gen = its gen, adds nothing.
ONCE_PER_GEN = "t.gen < s.gen"


def commit_note(note: str | None = None) -> str:
    """The userMetadata of a commit of crawllib's: COMMIT_TAG, and the note if any."""
    return f"{COMMIT_TAG}: {note}" if note else COMMIT_TAG


def written_by_crawllib(user_metadata: str | None) -> bool:
    """Whether a commit's userMetadata says crawllib made it."""
    text = user_metadata or ""
    return text == COMMIT_TAG or text.startswith(COMMIT_TAG + ": ")


def table_path(root: str, name: str) -> str:
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; tables are: {', '.join(TABLES)}")
    return f"{normalize_root(root)}/{name}"


# The Delta properties of the tables that have any. Deletion vectors, on crawldb only: a Spark
# MERGE marks the rows it replaces in a small file beside each data file it touches, instead
# of rewriting those files whole. delta-rs reads and MERGEs such a table (it writes no
# deletion vectors of its own: its MERGE rewrites the files it touches), so both engines
# write every table.
# A checkpoint every 50 commits (Delta's default is 10, delta-rs's 100): a commit that writes
# one costs Spark about 2 s more, and a generation commits to most tables once or twice, so at
# 10 nearly every generation paid for one; 50 JSON commits still replay in a moment on either
# engine.
CHECKPOINT_INTERVAL = "50"
TABLE_PROPERTIES = {
    name: {"delta.checkpointInterval": CHECKPOINT_INTERVAL}
    | ({"delta.enableDeletionVectors": "true"} if name == "crawldb" else {})
    for name in TABLES
}
# The hosts table's urls_tried totals cover the whole crawl, per host: set on a table made
# with crawldb, or by plan once it has filled them from crawldb; unset (or empty) after a plan
# whose slots are not hosts. Plan's budgets read the totals only while it is set.
TOTALS_PROPERTY = "crawllib.urls_tried"
TOTALS_COMPLETE = "complete"
# crawldb's depths are shortest paths (crawllib.stages.depths): set on a new root, and on an
# older one once plan has relaxed its depths from all its pages.
DEPTH_PROPERTY = "crawllib.depth"
DEPTH_SHORTEST = "shortest"


class Db(abc.ABC):
    """The tables of the crawl at ``root``, read, queried and written on one engine."""

    engine: ClassVar[str]
    root: str
    cfg: Config

    # -- the tables --------------------------------------------------------------------------

    @abc.abstractmethod
    def table(
        self,
        name: str,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        version: int | None = None,
        stream: bool = False,
    ) -> Rel:
        """Table ``name`` (at ``version``, else as it is now), its rows matching ``where``
        (an SQL predicate of its columns: comparisons, AND, OR, IN) and of it ``columns``.
        stream: read from storage at each use, never kept whole in memory (a read of a whole
        table's texts; the embedded engine otherwise keeps a small table's rows once read)."""

    @abc.abstractmethod
    def exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    def version_of(self, name: str) -> int:
        """Table ``name``'s latest Delta version; -1 when it does not exist."""

    @abc.abstractmethod
    def property_of(self, name: str, key: str) -> str | None:
        """A Delta table property (None if unset)."""

    @abc.abstractmethod
    def set_property(self, name: str, key: str, value: str | None) -> None:
        """Set (None: unset) a Delta table property: one commit."""

    @abc.abstractmethod
    def txn_version(self, name: str, app_id: str) -> int | None:
        """The last version table ``name`` recorded for the transaction id ``app_id``."""

    @abc.abstractmethod
    def commits(self, name: str, after: int) -> dict[int, tuple[str, str | None]]:
        """version -> (operation, userMetadata) of each commit of ``name`` after ``after``
        that its log still holds."""

    @abc.abstractmethod
    def init_tables(self, upgrade: bool = False) -> list[str]:
        """Create every table that does not exist yet, add the columns an older crawllib's
        tables lack (and with ``upgrade`` the TABLE_PROPERTIES they lack); the names created."""

    def require(self) -> None:
        """FileNotFoundError unless the root holds every table (but LATER_TABLES)."""
        from crawllib.core.vocab import LATER_TABLES

        missing = [n for n in TABLES if n not in LATER_TABLES and not self.exists(n)]
        if missing:
            raise FileNotFoundError(
                f"{normalize_root(self.root)} is not a crawl root (missing tables: "
                f"{', '.join(missing)}); run `crawl init {self.root}` first"
            )

    # -- relations ---------------------------------------------------------------------------

    @abc.abstractmethod
    def sql(self, query: str, **inputs: Rel) -> Rel:
        """The relation of ``query``, Spark SQL whose ``{name}`` placeholders are ``inputs``."""

    @abc.abstractmethod
    def rows(self, rows: Iterable[Mapping[str, Any]], schema: Struct) -> Rel:
        """Python rows (dicts; missing keys null) as a relation of ``schema``."""

    @abc.abstractmethod
    def keep(self, rel: Rel, through_losses: bool = False) -> Rel:
        """``rel`` computed once, now: later uses read these rows, whatever the tables do.
        through_losses: the rows are read by tasks that may lose their executor (the fetch's):
        a lost part is computed again from the tables (which must not change meanwhile)
        instead of failing the job, as a part held only by that executor would."""

    @abc.abstractmethod
    def drop(self, rel: Rel) -> None:
        """Free what `keep` holds for ``rel``."""

    @abc.abstractmethod
    def collect(self, rel: Rel, limit: int | None = None) -> list[dict[str, Any]]:
        """The rows of ``rel`` as dicts (at most ``limit``)."""

    def one_row(self, rel: Rel) -> dict[str, Any]:
        """The row of a one-row relation (an aggregate without grouping)."""
        rows = self.collect(rel)
        if len(rows) != 1:
            raise ValueError(f"expected one row, got {len(rows)}")
        return rows[0]

    def count(self, rel: Rel) -> int:
        return int(self.one_row(self.sql("SELECT count(*) AS n FROM {rel}", rel=rel))["n"])

    def is_empty(self, rel: Rel) -> bool:
        return not self.collect(self.sql("SELECT 1 AS one FROM {rel} LIMIT 1", rel=rel))

    @abc.abstractmethod
    def columns(self, rel: Rel) -> list[str]: ...

    @abc.abstractmethod
    def map_partitions(
        self, rel: Rel, task: PartitionTask, schema: Struct, partitions: int, by: str | None = None
    ) -> Rel:
        """The rows ``task`` yields for each partition of ``rel`` (tuples of ``schema``), the
        partitions run at once: Spark tasks, or the embedded engine's worker processes. ``by``:
        the column holding each row's partition (0 .. partitions - 1; None: any). The result is
        computed once, now (the tasks may go to the network: it is kept)."""

    @abc.abstractmethod
    def parallelism(self) -> int:
        """How many partitions the engine runs at once (Spark's default parallelism, the
        embedded engine's worker processes)."""

    @abc.abstractmethod
    def one_machine(self) -> bool:
        """Whether every partition runs on this machine (the embedded engine, a local master)."""

    @abc.abstractmethod
    def read_file(self, uri: str) -> bytes:
        """The bytes of a file at a local path or URI (a seed file, an exclude file);
        FileNotFoundError when there is none."""

    @abc.abstractmethod
    def is_file(self, uri: str) -> bool: ...

    # -- writes ------------------------------------------------------------------------------

    @abc.abstractmethod
    def append(
        self,
        rel: Rel,
        name: str,
        txn: tuple[str, int] | None = None,
        note: str | None = None,
    ) -> None:
        """Append rows (cast to the table's columns). With txn=(app_id, version) a write
        already committed is skipped; ``note`` goes into the commit's userMetadata. A commit
        to LEDGER is recorded in the writer lease."""

    @abc.abstractmethod
    def replace_where(self, rel: Rel, name: str, where: str) -> None:
        """Replace exactly the rows matching ``where`` (e.g. "gen = 3") with ``rel``."""

    @abc.abstractmethod
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
        """MERGE ``rel`` into table ``name`` on ``keys`` (the source deduplicated on them).

        update: column -> Spark SQL expression over ``t`` (target) and ``s`` (source), applied
        where ``update_condition`` holds; ``also``: more (condition, update) clauses tried after
        it in order (the first whose condition holds applies; none: the row is kept). insert:
        insert unmatched source rows (those meeting ``insert_condition``). broadcast: the
        source is a generation's rows, the table the crawl's (Spark broadcasts the source)."""

    @contextlib.contextmanager
    def job_group(self, description: str) -> Iterator[str]:
        """Run the block's jobs in a group of their own (Spark: a job group, named after
        ``description`` in the Spark UI); yields the group's id."""
        yield description

    def jobs_of(self, group: str) -> tuple[int, int]:
        """(jobs, tasks) the engine ran in ``group`` so far: none but on Spark."""
        return 0, 0

    @abc.abstractmethod
    def files_added(self, name: str, after: int, upto: int) -> int:
        """Data files the commits of table ``name`` in versions (after, upto] added."""

    def in_parallel(self, *actions: Callable[[], T]) -> list[T]:
        """Run independent actions (writes to different tables); their results in order."""
        return [action() for action in actions]

    def close(self) -> None:
        """Free the engine's resources (the embedded engine's database); Spark's session
        stays."""
        return None
