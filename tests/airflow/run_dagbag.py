"""Load a DAG folder into an Airflow DagBag and print what the tests check, as JSON.

Runs inside the Airflow venv (``.venv-airflow``), not the project's:

    .venv-airflow/bin/python tests/airflow/run_dagbag.py DAG_FOLDER [param=value ...]

The params given (numbers as numbers, the rest as text) override the DAGs' defaults when the
templated fields are rendered.
Output: ``{"airflow_version", "import_errors", "dags": {dag_id: {..., "tasks": [...]}}}``
with the tasks in topological order, each with its upstream ids, operator class and
rendered ``application``, ``application_args``, ``py_files``, ``conf`` and connection id.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
import tempfile
from datetime import UTC, datetime

# Before airflow is imported: a throwaway home, no examples, no database needed to parse.
HOME = tempfile.TemporaryDirectory(prefix="airflow-home-")  # removed at exit
os.environ["AIRFLOW_HOME"] = HOME.name
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# Airflow logs to stdout; the JSON report alone goes there.
REPORT_OUT, sys.stdout = sys.stdout, sys.stderr

import airflow  # noqa: E402

try:  # Airflow >= 3.1
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402


def load(folder: str) -> DagBag:
    kwargs = {"dag_folder": folder}
    if "include_examples" in inspect.signature(DagBag.__init__).parameters:  # Airflow 2
        kwargs["include_examples"] = False
    return DagBag(**kwargs)


def rendered(task, overrides: dict[str, object]) -> dict:
    """The task's templated fields rendered with the DAG's default params plus overrides."""
    params = copy.deepcopy(task.params)
    for key, value in overrides.items():
        params[key] = value  # validated against the Param's schema
    now = datetime.now(UTC)
    context = {
        "params": params.validate(),
        "dag": task.dag,
        "task": task,
        "run_id": "manual__test",
        "ds": now.date().isoformat(),
        "logical_date": now,
    }
    task.render_template_fields(context)
    return {
        "application": task.application,
        "application_args": [str(arg) for arg in task.application_args],
        "py_files": task.py_files,
        "conf": task.conf,
        "conn_id": task._conn_id,
        "name": task.name,
    }


def describe(dag, overrides: dict[str, object]) -> dict:
    tasks = []
    for task in dag.topological_sort():
        info = {
            "task_id": task.task_id,
            "upstream": sorted(task.upstream_task_ids),
            "operator": type(task).__name__,
            "is_spark_submit": isinstance(task, SparkSubmitOperator),
            "retries": task.retries,
            "retry_delay_s": task.retry_delay.total_seconds(),
            "execution_timeout_s": task.execution_timeout.total_seconds()
            if task.execution_timeout
            else None,
        }
        if info["is_spark_submit"]:
            info.update(rendered(task, overrides))
        tasks.append(info)
    return {
        "schedule": str(getattr(dag, "schedule", getattr(dag, "schedule_interval", None))),
        "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs,
        "params": dag.params.dump(),
        "tasks": tasks,
    }


def _value(text: str):
    """A param value as a trigger's JSON conf gives it: a number for "3", else the text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float) else text


def main(argv: list[str]) -> int:
    folder, pairs = argv[0], argv[1:]
    overrides = {key: _value(text) for key, text in (pair.split("=", 1) for pair in pairs)}
    bag = load(folder)
    report = {
        "airflow_version": airflow.__version__,
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "dags": {dag_id: describe(dag, overrides) for dag_id, dag in bag.dags.items()},
    }
    print(json.dumps(report, indent=2, default=str), file=REPORT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
