"""Airflow DAGs ``crawl_<name>``, one per crawl definition: one DAG run crawls one generation.

A definition is a small TOML file in ``crawls/`` beside this file (or the folder named by the
environment variable ``CRAWLLIB_CRAWLS``); ``crawls/example.toml`` documents every key. Each
gives the crawl root, a schedule (cron or preset; none for manual runs), the config files the
Spark driver reads, where ``make dist`` was deployed, and the runner: ``spark_submit``
(SparkSubmitOperator) or ``emr`` (EmrAddStepsOperator + EmrStepSensor on a running cluster).

A run: ``resolve`` finds the generation due, once (``python -m crawllib.orchestrate due``, on
the worker: it reads the generations table with delta-rs, no Spark) and pushes it to XCom;
every stage then runs ``jobs/<stage>.py ROOT --gen <that number> --config ...``, so the four
stages of a run work on one generation. ``plan`` runs with ``--if-work``: when nothing is left
to fetch it records no run, and ``planned`` (exit 99 = skip) skips fetch, parse and update.
``maintain_due`` (a short-circuit) lets ``maintain`` (``jobs/maintain.py --every K``, table
upkeep) run after the generations that are multiples of K only. The stages name the tables
they write as outlets (Assets on Airflow 3, Datasets on 2.10), so other DAGs can follow them.

The worker needs a Python with crawllib's ``sql`` extra (``worker_python``; Airflow's own pins
clash with crawllib's) and credentials for the crawl root; ``spark_submit`` needs
``apache-airflow-providers-apache-spark`` and a worker that can run ``spark-submit``; ``emr``
needs ``apache-airflow-providers-amazon``.

Param ``gen``: ``next`` (default: the generation due) or a number, to finish that generation.
Retries are safe: a stage already done for its generation skips itself, and a rerun of an
unfinished one replaces its own output. ``max_active_runs=1``, so a failed run is finished by
the next one. A stage that finds the root's writer lease held exits 2 naming the holder; with
``spark_submit`` its retry runs once the lease is free. An EMR step that failed fails its
sensor: the next run resubmits the stage (or clear ``<stage>_submit`` and what follows).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10 (Airflow 2.10)
    import tomli as tomllib

try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import ShortCircuitOperator
    from airflow.sdk import DAG, Asset, Param
except ImportError:  # Airflow 2.10
    from airflow import DAG
    from airflow.datasets import Dataset as Asset
    from airflow.models.param import Param
    from airflow.operators.bash import BashOperator
    from airflow.operators.python import ShortCircuitOperator

CRAWLS = Path(os.environ.get("CRAWLLIB_CRAWLS") or Path(__file__).with_name("crawls"))
STAGES = ("plan", "fetch", "parse", "update")
# The tables each stage writes (crawllib.stages); every stage also appends to generations.
WRITES = {
    "plan": ("fetchlist", "crawldb", "hosts", "dns"),
    "fetch": ("fetches", "pages", "texts", "links", "robots", "hosts", "sitemaps", "probes"),
    "parse": ("texts", "frontier", "traps", "aliases"),
    "update": ("crawldb", "frontier"),
}
GEN = "{{ ti.xcom_pull(task_ids='resolve') }}"
NOTHING_TO_FETCH = 99  # crawllib.orchestrate.NOTHING_TO_FETCH
SPARK_CONF = {
    "spark.speculation": "false",  # two copies of a fetch task would hit the same hosts twice
    "spark.yarn.maxAppAttempts": "1",  # Airflow owns retries; a second attempt doubles them
}
EMR_DELTA = "/usr/share/aws/delta/lib"  # EMR's Delta jars (README, Amazon EMR)


@dataclasses.dataclass(frozen=True)
class Crawl:
    """One crawl definition (crawls/example.toml explains each key)."""

    name: str
    root: str
    schedule: str | None = None
    runner: str = "spark_submit"
    artifacts: str = "/opt/crawllib"
    config: tuple[str, ...] = ("conf/emr.toml",)
    conn_id: str = "spark_default"
    maintain_every: int = 10
    worker_python: str = "/opt/crawllib/venv/bin/python"
    worker_config: tuple[str, ...] = ()
    emr_cluster_id: str | None = None
    aws_conn_id: str = "aws_default"

    @property
    def config_paths(self) -> list[str]:
        """The driver's config files; relative ones are under ``artifacts``."""
        return [
            p if p.startswith("/") or "://" in p else f"{self.artifacts}/{p}" for p in self.config
        ]


def load_crawl(path: Path) -> Crawl:
    """The definition in ``path``; ValueError naming the file for an unknown key or bad value."""
    with path.open("rb") as f:
        values: dict[str, Any] = tomllib.load(f)
    known = {field.name for field in dataclasses.fields(Crawl)}
    if unknown := sorted(set(values) - known):
        raise ValueError(f"{path}: unknown keys {unknown}; known: {sorted(known)}")
    for key in ("config", "worker_config"):
        if isinstance(values.get(key), str):
            values[key] = [values[key]]
        if key in values:
            values[key] = tuple(values[key])
    try:
        crawl = Crawl(**values)
    except TypeError:  # a required key missing
        raise ValueError(f"{path}: name and root are required") from None
    problems = []
    if not re.fullmatch(r"[A-Za-z0-9_]+", str(crawl.name)):
        problems.append(f"name {crawl.name!r}: letters, digits and _ only (it names the DAG)")
    if crawl.runner not in ("spark_submit", "emr"):
        problems.append(f"runner {crawl.runner!r}: spark_submit or emr")
    if crawl.runner == "emr" and not crawl.emr_cluster_id:
        problems.append("runner emr needs emr_cluster_id")
    if not isinstance(crawl.maintain_every, int) or crawl.maintain_every < 1:
        problems.append(f"maintain_every {crawl.maintain_every!r}: a whole number >= 1")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return crawl


def table_asset(root: str, table: str) -> Asset:
    """The Asset (Dataset) of one table of the crawl: its folder's URI (s3a:// as s3://)."""
    uri = re.sub(r"^s3a://", "s3://", root.rstrip("/"))
    if "://" not in uri:
        uri = f"file://{uri}"
    return Asset(f"{uri}/{table}")


def outlets(crawl: Crawl, stage: str) -> list[Asset]:
    return [table_asset(crawl.root, t) for t in (*WRITES[stage], "generations")]


def worker_command(crawl: Crawl, *args: str) -> str:
    """``worker_python -m crawllib.orchestrate ARGS`` as a shell command (args quoted except
    templates, which render to a number or ``next``)."""
    config = [a for path in crawl.worker_config for a in ("--config", shlex.quote(path))]
    quoted = [a if a.startswith("{{") else shlex.quote(a) for a in args]
    return (
        shlex.join([crawl.worker_python, "-m", "crawllib.orchestrate"])
        + " "
        + " ".join([*quoted, *config])
    )


def stage_args(crawl: Crawl, stage: str) -> list[str]:
    """The arguments of ``jobs/<stage>.py``: the root, the generation or upkeep, the config."""
    if stage == "maintain":
        own = ["--every", str(crawl.maintain_every)]
    else:
        own = ["--gen", GEN, *(["--if-work"] if stage == "plan" else [])]
    config = [a for path in crawl.config_paths for a in ("--config", path)]
    return [crawl.root, *own, *config]


def spark_submit_task(crawl: Crawl, stage: str, **overrides: Any) -> Any:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=stage,
        conn_id=crawl.conn_id,
        application=f"{crawl.artifacts}/jobs/{stage}.py",
        py_files=f"{crawl.artifacts}/crawllib.zip",
        application_args=stage_args(crawl, stage),
        conf=dict(SPARK_CONF),
        name=f"crawl-{crawl.name}-{stage}",
        outlets=outlets(crawl, stage) if stage in WRITES else [],
        **overrides,
    )


def emr_step(crawl: Crawl, stage: str) -> dict[str, Any]:
    """The EMR step running ``jobs/<stage>.py`` with spark-submit, as the steps of
    ``deploy/emr/`` do (bootstrap.sh copies the artifacts to every node): client mode, the
    executors in the packed environment of ``make dist``."""
    settings = {"spark.pyspark.python": "./environment/bin/python", **SPARK_CONF}
    conf = [a for key, value in settings.items() for a in ("--conf", f"{key}={value}")]
    return {
        "Name": f"crawl {crawl.name} gen {GEN} {stage}",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {
            "Jar": "command-runner.jar",
            "Args": [
                "spark-submit",
                "--deploy-mode",
                "client",
                "--py-files",
                f"{crawl.artifacts}/crawllib.zip,{EMR_DELTA}/delta-spark.jar",
                "--jars",
                f"{EMR_DELTA}/delta-spark.jar,{EMR_DELTA}/delta-storage.jar",
                "--archives",
                f"{crawl.artifacts}/crawllib-env.tar.gz#environment",
                *conf,
                f"{crawl.artifacts}/jobs/{stage}.py",
                *stage_args(crawl, stage),
            ],
        },
    }


def emr_tasks(crawl: Crawl, stage: str, **overrides: Any) -> tuple[Any, Any]:
    """``<stage>_submit`` adds the step; ``<stage>`` waits for it (rescheduled between pokes,
    so a long fetch holds no worker slot) and carries the stage's outlets."""
    from airflow.providers.amazon.aws.operators.emr import EmrAddStepsOperator
    from airflow.providers.amazon.aws.sensors.emr import EmrStepSensor

    submit = EmrAddStepsOperator(
        task_id=f"{stage}_submit",
        job_flow_id=crawl.emr_cluster_id,
        aws_conn_id=crawl.aws_conn_id,
        steps=[emr_step(crawl, stage)],
    )
    timeout = overrides.get("execution_timeout", timedelta(hours=2))
    wait = EmrStepSensor(
        task_id=stage,
        job_flow_id=crawl.emr_cluster_id,
        step_id=f"{{{{ ti.xcom_pull(task_ids='{stage}_submit')[0] }}}}",
        aws_conn_id=crawl.aws_conn_id,
        mode="reschedule",
        poke_interval=60,
        timeout=timeout.total_seconds(),
        retries=0,  # a failed step fails for good: a retry would only poke it again
        outlets=outlets(crawl, stage) if stage in WRITES else [],
    )
    submit >> wait
    return submit, wait


def _gen_due(gen: str, every: int) -> bool:
    return int(gen) % every == 0


def build_dag(crawl: Crawl) -> DAG:
    """The DAG ``crawl_<name>`` of one definition."""
    with DAG(
        dag_id=f"crawl_{crawl.name}",
        description=f"One generation of crawl {crawl.name} ({crawl.root}) with {crawl.runner}",
        doc_md=__doc__,
        schedule=crawl.schedule,
        start_date=datetime(2025, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        tags=["crawl", crawl.runner],
        params={
            "gen": Param(
                "next",
                type=["string", "integer"],
                pattern=r"^(next|[0-9]+)$",
                description="'next' (the generation due) or a generation number to finish",
            ),
        },
        default_args={
            "retries": 3,
            "retry_delay": timedelta(minutes=5),
            "retry_exponential_backoff": True,
            "execution_timeout": timedelta(hours=2),
        },
    ) as dag:
        resolve = BashOperator(
            task_id="resolve",
            bash_command=worker_command(crawl, "due", crawl.root, "--gen", "{{ params.gen }}"),
            skip_on_exit_code=None,  # BashOperator skips on 99 by default: here it fails
        )
        planned = BashOperator(
            task_id="planned",
            bash_command=worker_command(crawl, "planned", crawl.root, GEN),
            skip_on_exit_code=NOTHING_TO_FETCH,
        )
        maintain_due = ShortCircuitOperator(
            task_id="maintain_due",
            python_callable=_gen_due,
            op_kwargs={"gen": GEN, "every": crawl.maintain_every},
        )
        chain: list[Any] = [resolve]
        for stage in (*STAGES, "maintain"):
            # Fetch is network-bound and long; a retry redoes only its uncommitted slices.
            overrides: dict[str, Any] = (
                {"retries": 2, "execution_timeout": timedelta(hours=8)} if stage == "fetch" else {}
            )
            if crawl.runner == "emr":
                first, last = emr_tasks(crawl, stage, **overrides)
            else:
                first = last = spark_submit_task(crawl, stage, **overrides)
            if stage == "maintain":
                chain[-1] >> maintain_due
                chain.append(maintain_due)
            chain[-1] >> first
            chain.append(last)
            if stage == "plan":
                last >> planned
                chain.append(planned)
    return dag


def load_crawls(folder: Path) -> dict[Path, Crawl]:
    """Every definition in ``folder``, by file name; ValueError for two of one name."""
    crawls: dict[Path, Crawl] = {}
    for path in sorted(folder.glob("*.toml")):
        crawl = load_crawl(path)
        if any(other.name == crawl.name for other in crawls.values()):
            raise ValueError(f"{path}: another definition in {folder} is named {crawl.name!r}")
        crawls[path] = crawl
    return crawls


for _path, _crawl in load_crawls(CRAWLS).items():
    try:
        _dag = build_dag(_crawl)
        _dag.timetable.validate()  # a bad cron, named with its file rather than found later
    except Exception as exc:
        raise ValueError(f"{_path}: {exc}") from exc
    globals()[_dag.dag_id] = _dag
