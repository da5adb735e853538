"""The Airflow DAG in jobs/airflow, as Airflow itself loads it.

Airflow's pins clash with the project's, so it lives in its own venv, ``.venv-airflow``, made
by ``make airflow-env`` on first use (a no-op once made). The DAG is loaded there by
``run_dagbag.py``, which prints what it found as JSON. If the venv cannot be made, the tests
fail with make's and pip's output: they are never skipped.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_PYTHON = REPO / ".venv-airflow" / "bin" / "python"
RUN_DAGBAG = REPO / "tests" / "airflow" / "run_dagbag.py"
DAG_ID = "crawl_generation"
STAGES = ["plan", "fetch", "parse", "update"]
TASKS = [*STAGES, "maintain"]
ROOT = "s3a://bucket/crawl"


@functools.cache
def make_airflow_env() -> subprocess.CompletedProcess:
    """Run ``make airflow-env`` once per session, even when it fails (it can take minutes)."""
    return subprocess.run(
        ["make", "--no-print-directory", "airflow-env"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
    )


@pytest.fixture(scope="module")
def airflow_python() -> Path:
    """The Airflow venv's interpreter, creating the venv first if needed."""
    made = make_airflow_env()
    if made.returncode != 0:
        pytest.fail(
            f"make airflow-env failed (exit {made.returncode}):\n{made.stdout}\n{made.stderr}",
            pytrace=False,
        )
    return AIRFLOW_PYTHON


def load_dags(python: Path, *params: str) -> dict:
    """run_dagbag.py's report on jobs/airflow, templates rendered with these params."""
    ran = subprocess.run(
        [str(python), str(RUN_DAGBAG), str(REPO / "jobs" / "airflow"), *params],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ran.returncode != 0:
        pytest.fail(f"run_dagbag.py failed (exit {ran.returncode}):\n{ran.stderr}", pytrace=False)
    sys.stderr.write(ran.stderr)  # shown by pytest only when a test fails
    return json.loads(ran.stdout)


@pytest.fixture(scope="module")
def report(airflow_python: Path) -> dict:
    return load_dags(airflow_python, f"root={ROOT}")


@pytest.fixture(scope="module")
def dag(report: dict) -> dict:
    assert DAG_ID in report["dags"], f"no DAG {DAG_ID!r}; found {sorted(report['dags'])}"
    return report["dags"][DAG_ID]


def test_dag_folder_loads_without_import_errors(report: dict) -> None:
    assert report["import_errors"] == {}
    assert list(report["dags"]) == [DAG_ID]


def test_stages_run_in_order_then_maintain(dag: dict) -> None:
    tasks = dag["tasks"]
    assert [t["task_id"] for t in tasks] == TASKS
    assert [t["upstream"] for t in tasks] == [[], ["plan"], ["fetch"], ["parse"], ["update"]]


def test_each_stage_submits_its_job_for_the_generation_due(dag: dict) -> None:
    for task in dag["tasks"][: len(STAGES)]:
        stage = task["task_id"]
        assert task["is_spark_submit"], f"{stage} is a {task['operator']}"
        assert task["application"].endswith(f"/jobs/{stage}.py")
        assert task["application_args"][:3] == [ROOT, "--gen", "next"]
        assert task["application_args"][3] == "--config"
        assert task["application_args"][4].endswith("/conf/emr.toml")
        assert task["py_files"].endswith("/crawllib.zip")
        assert task["conf"]["spark.speculation"] == "false"
        assert task["conn_id"] == "spark_default"


def test_maintain_submits_its_job_every_ten_generations_by_default(dag: dict) -> None:
    task = dag["tasks"][-1]
    assert task["is_spark_submit"], task["operator"]
    assert task["application"].endswith("/jobs/maintain.py")
    assert task["application_args"][:3] == [ROOT, "--every", "10"]
    assert task["application_args"][3] == "--config"
    assert task["application_args"][4].endswith("/conf/emr.toml")
    assert task["py_files"].endswith("/crawllib.zip")
    assert task["conf"]["spark.speculation"] == "false"
    assert dag["params"]["maintain_every"] == 10


def test_one_run_at_a_time_and_retries_bounded(dag: dict) -> None:
    assert dag["max_active_runs"] == 1
    assert dag["catchup"] is False
    assert dag["schedule"] == "None"
    tasks = {t["task_id"]: t for t in dag["tasks"]}
    assert all(t["retries"] >= 1 and t["retry_delay_s"] > 0 for t in tasks.values())
    assert tasks["fetch"]["retries"] <= 2
    others = [tasks[s]["execution_timeout_s"] for s in STAGES if s != "fetch"]
    assert tasks["fetch"]["execution_timeout_s"] > max(others)


def test_params_rerun_a_given_generation_elsewhere(airflow_python: Path) -> None:
    dag = load_dags(
        airflow_python,
        "root=s3a://other/crawl",
        "gen=4",
        "artifacts=s3://bucket/artifacts",
        "config=/home/hadoop/crawl.toml",
        "conn_id=spark_emr",
        "maintain_every=3",
    )["dags"][DAG_ID]
    fetch = dag["tasks"][1]
    assert fetch["application"] == "s3://bucket/artifacts/jobs/fetch.py"
    assert fetch["py_files"] == "s3://bucket/artifacts/crawllib.zip"
    assert fetch["application_args"] == [
        "s3a://other/crawl",
        "--gen",
        "4",
        "--config",
        "/home/hadoop/crawl.toml",
    ]
    assert fetch["conn_id"] == "spark_emr"
    maintain = dag["tasks"][-1]
    assert maintain["application"] == "s3://bucket/artifacts/jobs/maintain.py"
    assert maintain["application_args"] == [
        "s3a://other/crawl",
        "--every",
        "3",
        "--config",
        "/home/hadoop/crawl.toml",
    ]
    assert maintain["conn_id"] == "spark_emr"
