"""What a stage run costs in Spark and Delta: jobs, tasks, commits per table, files written.

A generation's fixed cost is job and commit latency, so each stage run counts them and
records the figures with its counts (``spark_jobs``, ``spark_tasks``, ``delta_commits``,
``files_written``; ``crawl status`` shows them, the benchmark checks the budgets). Jobs are
those of the run's Spark job group, read from the status tracker (driver threads started with
``tables.in_parallel`` inherit the group); commits and files are read from each table's Delta
log between the versions before and after the run, on the driver, without a Spark job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator, Mapping

from pyspark.sql import SparkSession

from crawllib.store import tables

_groups = itertools.count()


@dataclasses.dataclass
class Cost:
    """A stage run's Spark jobs and tasks, Delta commits by table and files written; the
    commits of the ``generations`` ledger are counted apart (``ledger_commits``)."""

    jobs: int = 0
    tasks: int = 0
    commits: dict[str, int] = dataclasses.field(default_factory=dict)
    files: int = 0
    ledger_commits: int = 0

    def as_counts(self) -> dict[str, int]:
        return {
            "spark_jobs": self.jobs,
            "spark_tasks": self.tasks,
            "delta_commits": sum(self.commits.values()) + self.ledger_commits,
            "files_written": self.files,
        }


@contextlib.contextmanager
def job_group(spark: SparkSession, description: str) -> Iterator[str]:
    """Run the block's Spark jobs in a job group of their own (named after ``description``,
    shown in the Spark UI); yields the group's id."""
    sc = spark.sparkContext
    group = f"crawllib-{next(_groups)}"
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


def jobs_of(spark: SparkSession, group: str) -> tuple[int, int]:
    """(jobs, tasks) Spark ran in ``group`` so far (tasks of the stages it knows)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = list(tracker.getJobIdsForGroup(group))
    tasks = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            stage_info = tracker.getStageInfo(stage)
            tasks += stage_info.numTasks if stage_info is not None else 0
    return len(jobs), tasks


def files_added(spark: SparkSession, root: str, name: str, after: int, upto: int) -> int:
    """Data files the commits of table ``name`` in versions (after, upto] added, from its log."""
    if upto <= after:
        return 0
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, tables.table_path(root, name)
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


def cost_between(
    spark: SparkSession,
    root: str,
    group: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    ledger_commits: int = 0,
) -> Cost:
    """The cost of a run: its job group's jobs and tasks, the commits between the table
    versions ``before`` and ``after`` (crawllib.store.integrity.current_versions), and the files
    they added."""
    jobs, tasks = jobs_of(spark, group)
    commits = {
        name: after[name] - before.get(name, -1)
        for name in after
        if after[name] > before.get(name, -1)
    }
    files = sum(
        files_added(spark, root, name, before.get(name, -1), after[name]) for name in commits
    )
    return Cost(jobs, tasks, commits, files, ledger_commits)
