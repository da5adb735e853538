"""What a stage run costs in Spark and Delta: jobs, tasks, commits per table, files written.

A generation's fixed cost is job and commit latency, so each stage run counts them and
records the figures with its counts (``spark_jobs``, ``spark_tasks``, ``delta_commits``,
``files_written``; ``crawl status`` shows them, the benchmark checks the budgets). On Spark,
jobs are those of the run's Spark job group, read from the status tracker (driver threads
started with ``tables.in_parallel`` inherit the group; crawllib.store.db.Db.job_group); the
embedded engine runs none. Commits and files are read from each table's Delta log between
the versions before and after the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from crawllib.store.db import Db


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


def cost_between(
    db: Db,
    group: str,
    before: Mapping[str, int],
    after: Mapping[str, int],
    ledger_commits: int = 0,
) -> Cost:
    """The cost of a run: its job group's jobs and tasks (Spark's; none on the embedded
    engine), the commits between the table versions ``before`` and ``after``
    (crawllib.store.integrity.current_versions), and the files they added."""
    jobs, tasks = db.jobs_of(group)
    commits = {
        name: after[name] - before.get(name, -1)
        for name in after
        if after[name] > before.get(name, -1)
    }
    files = sum(db.files_added(name, before.get(name, -1), after[name]) for name in commits)
    return Cost(jobs, tasks, commits, files, ledger_commits)
