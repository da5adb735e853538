"""Load a DAG folder into an Airflow DagBag and print what the tests check, as JSON.

Runs inside the Airflow venv (``.venv-airflow``), not the project's:

    .venv-airflow/bin/python tests/airflow/run_dagbag.py DAG_FOLDER [param=value ...]
        [xcom:task_id=value ...]

The params given (numbers as numbers, the rest as text) override the DAGs' defaults when the
templated fields are rendered; ``ti.xcom_pull(task_ids=...)`` answers with the xcom values
given (JSON: a number, a list, else text). The DAG folder's module reads its environment
(``CRAWLLIB_CRAWLS``) as Airflow's DAG processor would.
Output: ``{"airflow_version", "import_errors", "dags": {dag_id: {..., "tasks": [...]}}}``
with the tasks in topological order, each with its upstream ids, operator class, trigger rule,
outlets (Asset URIs) and its templated fields rendered (``application_args``,
``bash_command``, ``steps``, ``op_kwargs``, ...: REPORTED).
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


# Templated fields reported, rendered, when a task has them (Spark, Bash, EMR, Python tasks).
REPORTED = (
    "application",
    "application_args",
    "py_files",
    "jars",
    "_archives",
    "conf",
    "_conn_id",
    "name",
    "bash_command",
    "steps",
    "job_flow_id",
    "step_id",
    "aws_conn_id",
    "op_kwargs",
)


class TaskInstance:
    """What the templates ask of ``ti``: the XCom values given on the command line."""

    def __init__(self, xcoms: dict[str, object]) -> None:
        self.xcoms = xcoms

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> object:
        if task_ids not in self.xcoms:
            raise KeyError(f"no XCom given for {task_ids!r} (pass xcom:{task_ids}=VALUE)")
        return self.xcoms[task_ids]


def rendered(task, overrides: dict[str, object], xcoms: dict[str, object]) -> dict:
    """The task's templated fields rendered with the DAG's default params plus overrides,
    and ``ti.xcom_pull`` answering with ``xcoms``."""
    params = copy.deepcopy(task.params)
    for key, value in overrides.items():
        params[key] = value  # validated against the Param's schema
    now = datetime.now(UTC)
    context = {
        "params": params.validate(),
        "dag": task.dag,
        "task": task,
        "ti": TaskInstance(xcoms),
        "run_id": "manual__test",
        "ds": now.date().isoformat(),
        "logical_date": now,
    }
    task.render_template_fields(context)
    spark_own = ("_conn_id", "name", "jars", "_archives")  # reported whether templated or not
    return {
        name.lstrip("_"): getattr(task, name)
        for name in REPORTED
        if name in task.template_fields
        or name in spark_own
        and isinstance(task, SparkSubmitOperator)
    }


def describe(dag, overrides: dict[str, object], xcoms: dict[str, object]) -> dict:
    tasks = []
    for task in dag.topological_sort():
        info = {
            "task_id": task.task_id,
            "upstream": sorted(task.upstream_task_ids),
            "operator": type(task).__name__,
            "is_spark_submit": isinstance(task, SparkSubmitOperator),
            "trigger_rule": str(task.trigger_rule),
            "outlets": sorted(str(getattr(o, "uri", o)) for o in task.outlets),
            "retries": task.retries,
            "retry_delay_s": task.retry_delay.total_seconds(),
            "execution_timeout_s": task.execution_timeout.total_seconds()
            if task.execution_timeout
            else None,
            "skip_on_exit_code": sorted(getattr(task, "skip_on_exit_code", None) or []),
            "mode": getattr(task, "mode", None),
            "deferrable": getattr(task, "deferrable", None),
            "timeout_s": getattr(task, "timeout", None),
            "owner": task.owner,
            "on_failure_callback": _names(task.on_failure_callback),
        }
        info.update(rendered(task, overrides, xcoms))
        tasks.append(info)
    return {
        "schedule": getattr(dag.timetable, "summary", None),  # NullTimetable has none
        "timetable": type(dag.timetable).__name__,
        "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs,
        "params": dag.params.dump(),
        "tags": sorted(dag.tags),
        "dagrun_timeout_s": dag.dagrun_timeout.total_seconds() if dag.dagrun_timeout else None,
        "on_failure_callback": _names(dag.on_failure_callback),
        "tasks": tasks,
    }


def _names(callbacks) -> list:
    """module.name of each callback (Airflow keeps one or a list)."""
    if not callbacks:
        return []
    if not isinstance(callbacks, list | tuple):
        callbacks = [callbacks]
    return [f"{c.__module__}.{c.__qualname__}" for c in callbacks]


def _value(text: str):
    """A value as JSON gives it (a number for "3", a list for '["s-1"]'), else the text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float | list) else text


def main(argv: list[str]) -> int:
    folder, pairs = argv[0], [pair.split("=", 1) for pair in argv[1:]]
    overrides = {key: _value(text) for key, text in pairs if not key.startswith("xcom:")}
    xcoms = {key[5:]: _value(text) for key, text in pairs if key.startswith("xcom:")}
    bag = load(folder)
    report = {
        "airflow_version": airflow.__version__,
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "dags": {dag_id: describe(dag, overrides, xcoms) for dag_id, dag in bag.dags.items()},
    }
    print(json.dumps(report, indent=2, default=str), file=REPORT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
