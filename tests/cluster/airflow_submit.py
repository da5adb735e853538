"""The spark-submit command SparkSubmitOperator runs for one task of a crawl DAG, printed as
JSON. Runs in an Airflow venv, not the project's:

    .venv-airflow/bin/python tests/cluster/airflow_submit.py DAG_FOLDER DAG_ID TASK_ID GEN

The DAG folder's definitions come from ``CRAWLLIB_CRAWLS``, the Spark connection from
``AIRFLOW_CONN_<ID>``, as on a worker. The task's templates are rendered with ``resolve``'s
XCom = GEN, and the command is the one its hook builds (the master from the connection).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

HOME = tempfile.TemporaryDirectory(prefix="airflow-home-")
os.environ["AIRFLOW_HOME"] = HOME.name
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
OUT, sys.stdout = sys.stdout, sys.stderr  # Airflow logs to stdout; the command alone goes there

import inspect  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

try:  # Airflow >= 3.1
    from airflow.dag_processing.dagbag import DagBag
except ImportError:
    from airflow.models.dagbag import DagBag


class TaskInstance:
    def __init__(self, gen: str) -> None:
        self.gen = gen

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> object:
        assert task_ids == "resolve", task_ids
        return self.gen


def main(folder: str, dag_id: str, task_id: str, gen: str) -> int:
    kwargs = {"dag_folder": folder}
    if "include_examples" in inspect.signature(DagBag.__init__).parameters:  # Airflow 2
        kwargs["include_examples"] = False
    bag = DagBag(**kwargs)
    assert not bag.import_errors, bag.import_errors
    task = bag.dags[dag_id].get_task(task_id)
    now = datetime.now(UTC)
    task.render_template_fields(
        {"params": task.params.validate(), "ti": TaskInstance(gen), "logical_date": now}
    )
    command = task._get_hook()._build_spark_submit_command(task.application)
    print(json.dumps(command), file=OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
