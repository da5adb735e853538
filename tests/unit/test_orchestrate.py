"""The generation due and plan's outcome, read without Spark from a real generations table.

The table is written with delta-rs in the schema Spark gives it (crawllib.store.schemas.GENERATIONS),
one commit per recorded event as the stages append them.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from deltalake import write_deltalake

from crawllib.core import stage_order
from crawllib.core.vocab import STAGES
from crawllib.runs import orchestrator

# crawllib.store.schemas.GENERATIONS as DuckDB types (Spark's timestamp is Delta's timestamp, in UTC).
ROW = (
    "SELECT ?::INTEGER AS gen, ?::VARCHAR AS stage, ?::VARCHAR AS state, "
    "?::TIMESTAMPTZ AS started_at, ?::TIMESTAMPTZ AS finished_at, ?::DOUBLE AS seconds, "
    "?::MAP(VARCHAR, BIGINT) AS counts, ?::MAP(VARCHAR, BIGINT) AS versions"
)
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REPO = Path(__file__).resolve().parents[2]


class Ledger:
    """A crawl root's generations table, appended to as the stages record their runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tick = 0
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")

    def append(self, *row: object) -> None:
        write_deltalake(
            str(self.root / "generations"), self.con.sql(ROW, params=row), mode="append"
        )

    def run(self, gen: int, stage: str, state: str = "done", **counts: int) -> None:
        """A stage run: its running row, then (unless still running) its finishing row, each
        one commit."""
        self.tick += 1
        start = T0 + dt.timedelta(minutes=self.tick)
        self.append(gen, stage, "running", start, None, None, {}, None)
        if state != "running":
            end = start + dt.timedelta(seconds=30)
            self.append(gen, stage, state, start, end, 30.0, counts, {"crawldb": self.tick})

    def generation(self, gen: int, planned: int = 5) -> None:
        for stage in STAGES:
            if stage == "plan":
                self.run(gen, stage, planned=planned)
            else:
                self.run(gen, stage)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path)


def spark_side(root: Path) -> int:
    """What `crawl plan ROOT --gen next` resolves to: due_gen of plan over the latest states."""
    return stage_order.due_gen(orchestrator.states_of(orchestrator.read_rows(str(root))), "plan")


def test_a_new_crawl_is_due_at_generation_zero(ledger: Ledger) -> None:
    # an initialised root: the table, no rows
    empty = ledger.con.sql(ROW + " LIMIT 0", params=(None,) * 8)
    write_deltalake(str(ledger.root / "generations"), empty)
    assert orchestrator.due_generation(str(ledger.root)) == 0
    assert orchestrator.plan_chose_urls(str(ledger.root), 0) is False


def test_finished_generations_make_the_next_one_due(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.generation(1)
    assert orchestrator.due_generation(str(ledger.root)) == 2
    assert spark_side(ledger.root) == 2
    assert orchestrator.due_generation(f"file://{ledger.root}") == 2


def test_an_unfinished_generation_stays_due_until_its_update_is_done(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.run(1, "plan", planned=3)
    ledger.run(1, "fetch", state="failed")
    assert orchestrator.due_generation(str(ledger.root)) == 1
    assert orchestrator.plan_chose_urls(str(ledger.root), 1) is True
    ledger.run(1, "fetch")
    ledger.run(1, "update", state="running")  # a try killed while updating
    assert orchestrator.due_generation(str(ledger.root)) == 1
    ledger.run(1, "update")
    assert orchestrator.due_generation(str(ledger.root)) == 2 == spark_side(ledger.root)


def test_a_forced_rerun_that_is_running_reopens_its_generation(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.generation(1)
    ledger.run(1, "update", state="running")  # `crawl update ROOT --gen 1 --force`, unfinished
    assert orchestrator.due_generation(str(ledger.root)) == 1 == spark_side(ledger.root)


def test_plan_done_with_nothing_planned_still_lets_the_generation_finish(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.run(1, "plan", planned=0)
    # Skipping fetch, parse and update would leave generation 1 open for good.
    assert orchestrator.plan_chose_urls(str(ledger.root), 1) is True
    # `crawl plan --if-work` records nothing when there is nothing to fetch: no run of gen 2.
    assert orchestrator.plan_chose_urls(str(ledger.root), 2) is False


def test_plan_running_or_failed_is_not_done(ledger: Ledger) -> None:
    ledger.run(0, "plan", state="failed")
    assert orchestrator.plan_chose_urls(str(ledger.root), 0) is False
    ledger.run(0, "plan", state="running")
    assert orchestrator.plan_chose_urls(str(ledger.root), 0) is False


def test_a_folder_without_a_generations_table_is_no_crawl_root(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no generations table"):
        orchestrator.due_generation(str(tmp_path))


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m crawllib.runs.orchestrator ARGS`` as the Airflow worker runs it."""
    return subprocess.run(
        [sys.executable, "-m", "crawllib.runs.orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_the_worker_command_prints_the_generation_due_last(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.run(1, "plan", planned=2)
    ran = run_module("due", str(ledger.root))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "1"
    given = run_module("due", str(ledger.root), "--gen", "0")
    assert given.stdout.splitlines()[-1] == "0"


def test_the_worker_command_exits_99_when_plan_recorded_no_run(ledger: Ledger) -> None:
    ledger.generation(0)
    ledger.run(1, "plan", planned=2)
    assert run_module("planned", str(ledger.root), "1").returncode == 0
    nothing = run_module("planned", str(ledger.root), "2")
    assert nothing.returncode == orchestrator.NOTHING_TO_FETCH == 99
    assert "nothing left to fetch" in nothing.stdout


def test_the_worker_command_on_no_crawl_root_says_so_in_one_line(tmp_path: Path) -> None:
    ran = run_module("due", str(tmp_path / "nowhere"))
    assert ran.returncode == 2
    assert "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"python -m crawllib.runs.orchestrator due: {tmp_path / 'nowhere'}: no generations table "
        "(not a crawl root?)"
    ]


def test_the_worker_command_needs_no_spark() -> None:
    """The Airflow worker's Python needs the sql extra, not pyspark or a JVM."""
    code = (
        "import sys, crawllib.runs.orchestrator; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j', 'delta'}))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
