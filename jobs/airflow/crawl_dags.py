"""Airflow DAGs ``crawl_<name>``, one per crawl definition: one DAG run crawls one generation.

A definition is a small TOML file in ``crawls/`` beside this file (or the folder named by the
environment variable ``CRAWLLIB_CRAWLS``); ``crawls/example.toml`` documents every key. Each
gives the crawl root, a schedule (cron or preset; none for manual runs), the config files the
Spark driver reads, where ``make dist`` was deployed, and the runner: ``spark_submit``
(SparkSubmitOperator) or ``emr`` (EmrAddStepsOperator + EmrStepSensor on a running cluster).

A run: ``resolve`` finds the generation due, once (``python -m crawllib.runs.orchestrator due``, on
the worker: it reads the generations table with delta-rs, no Spark) and pushes it to XCom;
every stage then runs ``jobs/<stage>.py ROOT --gen <that number> --config ...``, so the three
stages of a run (plan, fetch, update) work on one generation. ``plan`` runs with ``--if-work``:
when nothing is due now (retries and held hosts wait for their time) or it plans nothing, it
records no run and prints what the URLs wait for, and ``planned`` (exit 99 = skip) skips fetch
and update; a later scheduled run plans once something is due.
With ``submit = "generation"``, one ``jobs/generation.py ROOT --gen <number> --if-work`` runs
the three stages in one spark-submit: one JVM start and one warm JIT per generation instead of
three (about 12 s each on a small cluster), at the price of one task for the three stages in
Airflow's view (a retry still skips the stages already done). With nothing due it records no
run, says what the URLs wait for and succeeds.
``maintain_due`` (a short-circuit) lets ``maintain`` (``jobs/maintain.py --every K``, table
upkeep) run after the generations that are multiples of K only. The stages name the tables
they write as outlets (Assets on Airflow 3, Datasets on 2.10), so other DAGs can follow them.

The worker needs a Python with crawllib's ``sql`` extra (``worker_python``; Airflow's own pins
clash with crawllib's) and credentials for the crawl root; ``spark_submit`` needs
``apache-airflow-providers-apache-spark`` and a worker that can run ``spark-submit``; ``emr``
needs ``apache-airflow-providers-amazon``.

How a stage is submitted is one function for both runners, :func:`submit_options`: crawllib.zip
and the Delta jar on ``--py-files``, the Delta jars on ``--jars``, and the executors' Python:
the packed environment shipped with ``--archives crawllib-env.tar.gz#environment`` and
``spark.pyspark.python=./environment/bin/python`` (``environment = "archive"``, the default of
``spark_submit``), or an environment already on every node (EMR: the bootstrap unpacks it
into ``/opt/crawllib/env``, so the steps ship nothing).

A definition file that cannot be loaded (bad TOML, an unknown key, a bad cron, a name used
twice, a failure callback that cannot be imported) is an import error of this file naming the
definition; the other definitions' DAGs load as usual. The file itself imports on Python 3.8
and later (Airflow 2.10's oldest).

Param ``gen``: ``next`` (default: the generation due) or a number, to finish that generation.
Retries are safe: a stage already done for its generation skips itself, and a rerun of an
unfinished one replaces its own output. ``max_active_runs=1``, so a failed run is finished by
the next one. A stage that finds the root's writer lease held exits 2 naming the holder; with
``spark_submit`` its retry runs once the lease is free; an EMR step waits for the lease itself
(``--wait-for-lease``), since a retry of its sensor would only watch the failed step again.
The sensor is deferrable (it holds no worker slot while the step runs), and when it fails, its
time-out included, it cancels the step. An EMR step that failed fails its sensor: the next
run resubmits the stage (or clear ``<stage>_submit`` and what follows).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import shlex
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

try:
    import tomllib  # novermin
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
STAGES = ("plan", "fetch", "update")
GENERATION = "generation"  # submit = "generation": jobs/generation.py runs the three stages
# The tables each stage writes (crawllib.stages); every stage also appends to generations.
WRITES = {
    "plan": ("fetchlist", "crawldb", "hosts", "dns"),
    "fetch": ("fetches", "pages", "texts", "links", "robots", "hosts", "sitemaps", "probes"),
    "update": ("crawldb", "texts", "links", "frontier", "traps", "aliases"),
}
WRITES[GENERATION] = tuple(dict.fromkeys(t for s in STAGES for t in WRITES[s]))
GEN = "{{ ti.xcom_pull(task_ids='resolve') }}"
NOTHING_TO_FETCH = 99  # crawllib.runs.orchestrator.NOTHING_TO_FETCH
SPARK_CONF = {
    "spark.speculation": "false",  # two copies of a fetch task would hit the same hosts twice
    "spark.yarn.maxAppAttempts": "1",  # Airflow owns retries; a second attempt doubles them
}
EMR_DELTA = "/usr/share/aws/delta/lib"  # EMR's Delta jars (docs/emr.md, Amazon EMR)
EMR_ENV_PYTHON = "/opt/crawllib/env/bin/python"  # where deploy/emr/bootstrap.sh unpacks the env
ARCHIVE = "archive"  # environment = "archive": ship crawllib-env.tar.gz with the submit
# How long an EMR step waits for the crawl root's writer lease (a killed try's lease expires
# within storage.lease_seconds, 5 minutes by default).
LEASE_WAIT_SECONDS = 900


@dataclasses.dataclass(frozen=True)
class Crawl:
    """One crawl definition (crawls/example.toml explains each key)."""

    name: str
    root: str
    schedule: str | None = None
    runner: str = "spark_submit"
    submit: str = "stage"
    artifacts: str = "/opt/crawllib"
    config: tuple[str, ...] = ("conf/emr.toml",)
    conn_id: str = "spark_default"
    maintain_every: int = 10
    worker_python: str = "/opt/crawllib/venv/bin/python"
    worker_config: tuple[str, ...] = ()
    emr_cluster_id: str | None = None
    aws_conn_id: str = "aws_default"
    delta_jars: tuple[str, ...] = (f"{EMR_DELTA}/delta-spark.jar", f"{EMR_DELTA}/delta-storage.jar")
    environment: str | None = None  # "archive" or a node's Python; default by runner
    driver_python: str = ""
    owner: str = "airflow"
    dagrun_timeout_minutes: int = 0
    on_failure_callback: str = ""

    @property
    def config_paths(self) -> list[str]:
        """The driver's config files; relative ones are under ``artifacts``."""
        return [
            p if p.startswith("/") or "://" in p else f"{self.artifacts}/{p}" for p in self.config
        ]

    @property
    def executor_python(self) -> str:
        """``archive`` (ship the packed environment), or the Python every node has."""
        if self.environment:
            return self.environment
        return EMR_ENV_PYTHON if self.runner == "emr" else ARCHIVE


def load_crawl(path: Path) -> Crawl:
    """The definition in ``path``; ValueError naming the file for an unknown key or bad value."""
    with path.open("rb") as f:
        values: dict[str, Any] = tomllib.load(f)
    known = {field.name for field in dataclasses.fields(Crawl)}
    if unknown := sorted(set(values) - known):
        raise ValueError(f"{path}: unknown keys {unknown}; known: {sorted(known)}")
    for key in ("config", "worker_config", "delta_jars"):
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
    if crawl.submit not in ("stage", GENERATION):
        problems.append(f"submit {crawl.submit!r}: stage or generation")
    if crawl.runner == "emr" and not crawl.emr_cluster_id:
        problems.append("runner emr needs emr_cluster_id")
    if not isinstance(crawl.maintain_every, int) or crawl.maintain_every < 1:
        problems.append(f"maintain_every {crawl.maintain_every!r}: a whole number >= 1")
    if not isinstance(crawl.dagrun_timeout_minutes, int) or crawl.dagrun_timeout_minutes < 0:
        problems.append(
            f"dagrun_timeout_minutes {crawl.dagrun_timeout_minutes!r}: minutes >= 0 (0: none)"
        )
    env = crawl.environment
    if env is not None and env != ARCHIVE and not str(env).startswith("/"):
        problems.append(f"environment {env!r}: 'archive' or the absolute path of a Python")
    if crawl.on_failure_callback:
        try:
            failure_callback(crawl)
        except (ImportError, AttributeError, ValueError) as exc:
            problems.append(f"on_failure_callback {crawl.on_failure_callback!r}: {exc}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return crawl


def failure_callback(crawl: Crawl) -> Callable[..., Any] | None:
    """The definition's ``on_failure_callback``, ``module:function`` (or ``module.function``)
    imported; None when it names none."""
    text = crawl.on_failure_callback
    if not text:
        return None
    module, sep, name = text.partition(":") if ":" in text else text.rpartition(".")
    if not module or not name:
        raise ValueError("expected module:function")
    function = getattr(importlib.import_module(module), name)
    if not callable(function):
        raise ValueError(f"{text} is not callable")
    return function


def table_asset(root: str, table: str) -> Asset:
    """The Asset (Dataset) of one table of the crawl: its folder's URI (s3a:// as s3://)."""
    uri = re.sub(r"^s3a://", "s3://", root.rstrip("/"))
    if "://" not in uri:
        uri = f"file://{uri}"
    return Asset(f"{uri}/{table}")


def outlets(crawl: Crawl, stage: str) -> list[Asset]:
    return [table_asset(crawl.root, t) for t in (*WRITES[stage], "generations")]


def worker_command(crawl: Crawl, *args: str) -> str:
    """``worker_python -m crawllib.runs.orchestrator ARGS`` as a shell command (args quoted except
    templates, which render to a number or ``next``)."""
    config = [a for path in crawl.worker_config for a in ("--config", shlex.quote(path))]
    quoted = [a if a.startswith("{{") else shlex.quote(a) for a in args]
    return (
        shlex.join([crawl.worker_python, "-m", "crawllib.runs.orchestrator"])
        + " "
        + " ".join([*quoted, *config])
    )


def stage_args(crawl: Crawl, stage: str) -> list[str]:
    """The arguments of ``jobs/<stage>.py``: the root, the generation or upkeep, the config;
    an EMR step also waits for a held writer lease (its sensor cannot retry it)."""
    if stage == "maintain":
        own = ["--every", str(crawl.maintain_every)]
    else:
        own = ["--gen", GEN, *(["--if-work"] if stage in ("plan", GENERATION) else [])]
    if crawl.runner == "emr":
        own += ["--wait-for-lease", str(LEASE_WAIT_SECONDS)]
    config = [a for path in crawl.config_paths for a in ("--config", path)]
    return [crawl.root, *own, *config]


@dataclasses.dataclass(frozen=True)
class SubmitOptions:
    """What spark-submit gets besides the master: the same for SparkSubmitOperator and an EMR
    step (deploy/emr's steps are these for the defaults of ``runner = "emr"``)."""

    py_files: list[str]
    jars: list[str]
    archives: list[str]
    conf: dict[str, str]
    application: str
    application_args: list[str]

    def args(self) -> list[str]:
        """As spark-submit's command line, after ``spark-submit --deploy-mode client``."""
        out = ["--py-files", ",".join(self.py_files), "--jars", ",".join(self.jars)]
        if self.archives:
            out += ["--archives", ",".join(self.archives)]
        for key, value in self.conf.items():
            out += ["--conf", f"{key}={value}"]
        return [*out, self.application, *self.application_args]


def submit_options(crawl: Crawl, stage: str) -> SubmitOptions:
    """crawllib.zip and the Delta jar (it holds the ``delta`` Python module) on ``--py-files``,
    the Delta jars on ``--jars``, and the executors' Python: the packed environment shipped
    (``--archives``, ``./environment/bin/python``) or the one on every node."""
    spark_jar = next((j for j in crawl.delta_jars if "delta-spark" in j), crawl.delta_jars[0])
    conf: dict[str, str] = {}
    archives: list[str] = []
    if crawl.executor_python == ARCHIVE:
        archives = [f"{crawl.artifacts}/crawllib-env.tar.gz#environment"]
        conf["spark.pyspark.python"] = "./environment/bin/python"
    elif crawl.runner != "emr":  # on EMR configurations.json sets it for every node
        conf["spark.pyspark.python"] = crawl.executor_python
    if crawl.driver_python:
        conf["spark.pyspark.driver.python"] = crawl.driver_python
    conf.update(SPARK_CONF)
    return SubmitOptions(
        py_files=[f"{crawl.artifacts}/crawllib.zip", spark_jar],
        jars=list(crawl.delta_jars),
        archives=archives,
        conf=conf,
        application=f"{crawl.artifacts}/jobs/{stage}.py",
        application_args=stage_args(crawl, stage),
    )


def spark_submit_task(crawl: Crawl, stage: str, **overrides: Any) -> Any:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    options = submit_options(crawl, stage)
    return SparkSubmitOperator(
        task_id=stage,
        conn_id=crawl.conn_id,
        application=options.application,
        py_files=",".join(options.py_files),
        jars=",".join(options.jars),
        archives=",".join(options.archives) or None,
        application_args=options.application_args,
        conf=dict(options.conf),
        name=f"crawl-{crawl.name}-{stage}",
        outlets=outlets(crawl, stage) if stage in WRITES else [],
        **overrides,
    )


def emr_step(crawl: Crawl, stage: str) -> dict[str, Any]:
    """The EMR step running ``jobs/<stage>.py`` with spark-submit, as the steps of
    ``deploy/emr/`` do (bootstrap.sh copies the artifacts and unpacks the environment on every
    node): client mode, so the driver's log is the step's."""
    args = ["spark-submit", "--deploy-mode", "client", *submit_options(crawl, stage).args()]
    return {
        "Name": f"crawl {crawl.name} gen {GEN} {stage}",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": args},
    }


def cancel_step(context: dict[str, Any]) -> None:
    """on_failure_callback of a step's sensor (a time-out included): cancel the step, so that
    a stage Airflow gave up on stops writing (EMR interrupts a running step)."""
    from airflow.providers.amazon.aws.hooks.emr import EmrHook

    task = context["task"]
    step_ids = context["ti"].xcom_pull(task_ids=f"{task.task_id}_submit") or []
    if not step_ids:
        return
    EmrHook(aws_conn_id=task.aws_conn_id).conn.cancel_steps(
        ClusterId=task.job_flow_id,
        StepIds=list(step_ids),
        StepCancellationOption="SEND_INTERRUPT",
    )


def emr_tasks(crawl: Crawl, stage: str, **overrides: Any) -> tuple[Any, Any]:
    """``<stage>_submit`` adds the step; ``<stage>`` waits for it (deferred: it holds no
    worker slot while the step runs), carries the stage's outlets, and cancels the step when
    it fails or times out. The stage's overrides (fetch: its retries and time-out) apply to
    the submit; the sensor waits as long as the stage may run."""
    from airflow.providers.amazon.aws.operators.emr import EmrAddStepsOperator
    from airflow.providers.amazon.aws.sensors.emr import EmrStepSensor

    timeout = overrides.get("execution_timeout", timedelta(hours=2))
    submit = EmrAddStepsOperator(
        task_id=f"{stage}_submit",
        job_flow_id=crawl.emr_cluster_id,
        aws_conn_id=crawl.aws_conn_id,
        steps=[emr_step(crawl, stage)],
        **overrides,
    )
    wait = EmrStepSensor(
        task_id=stage,
        job_flow_id=crawl.emr_cluster_id,
        step_id=f"{{{{ ti.xcom_pull(task_ids='{stage}_submit')[0] }}}}",
        aws_conn_id=crawl.aws_conn_id,
        deferrable=True,
        poke_interval=60,
        timeout=timeout.total_seconds(),
        execution_timeout=timeout + timedelta(minutes=10),
        retries=0,  # a failed step fails for good: a retry would only watch it again
        on_failure_callback=cancel_step,
        outlets=outlets(crawl, stage) if stage in WRITES else [],
    )
    submit >> wait
    return submit, wait


def _gen_due(gen: str, every: int) -> bool:
    return int(gen) % every == 0


def timetable(schedule: str | None) -> Any:
    """A cron expression or preset as a run at each time it names (CronTriggerTimetable, in
    UTC), the same on Airflow 2.10 (which reads a cron string as data intervals) and 3."""
    if schedule is None or schedule in ("@once", "@continuous"):
        return schedule
    from airflow.timetables.trigger import CronTriggerTimetable

    return CronTriggerTimetable(schedule, timezone="UTC")


def build_dag(crawl: Crawl) -> DAG:
    """The DAG ``crawl_<name>`` of one definition."""
    timeout = crawl.dagrun_timeout_minutes
    with DAG(
        dag_id=f"crawl_{crawl.name}",
        description=f"One generation of crawl {crawl.name} ({crawl.root}) with {crawl.runner}",
        doc_md=__doc__,
        schedule=timetable(crawl.schedule),
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        # only the module's globals are DAGs: one whose definition failed is not registered
        auto_register=False,
        dagrun_timeout=timedelta(minutes=timeout) if timeout else None,
        on_failure_callback=failure_callback(crawl),
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
            "owner": crawl.owner,
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
        maintain_due = ShortCircuitOperator(
            task_id="maintain_due",
            python_callable=_gen_due,
            op_kwargs={"gen": GEN, "every": crawl.maintain_every},
        )
        chain: list[Any] = [resolve]
        stages = STAGES if crawl.submit == "stage" else (GENERATION,)
        for stage in (*stages, "maintain"):
            # Fetch is network-bound and long; a retry redoes only its uncommitted slices (and
            # a generation's retry skips the stages it finished).
            long = stage in ("fetch", GENERATION)
            overrides: dict[str, Any] = (
                {"retries": 2, "execution_timeout": timedelta(hours=8)} if long else {}
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
                planned = BashOperator(
                    task_id="planned",
                    bash_command=worker_command(crawl, "planned", crawl.root, GEN),
                    skip_on_exit_code=NOTHING_TO_FETCH,
                )
                last >> planned
                chain.append(planned)
    return dag


def load_crawls(folder: Path) -> tuple[dict[Path, Crawl], dict[Path, str]]:
    """Every definition in ``folder`` by file, and the problem of each file that is not one
    (a second definition of a name included), naming the file."""
    crawls: dict[Path, Crawl] = {}
    broken: dict[Path, str] = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            crawl = load_crawl(path)
        except (ValueError, OSError, tomllib.TOMLDecodeError) as exc:
            broken[path] = str(exc) if str(path) in str(exc) else f"{path}: {exc}"
            continue
        if any(other.name == crawl.name for other in crawls.values()):
            broken[path] = f"{path}: another definition in {folder} is named {crawl.name!r}"
            continue
        crawls[path] = crawl
    return crawls, broken


def broken_dag(path: Path, problem: str) -> DAG:
    """A DAG that Airflow refuses when it validates it, with ``problem``: Airflow records it
    as an import error of this file and goes on with the file's other DAGs."""
    from airflow.timetables.simple import NullTimetable

    class BrokenDefinition(NullTimetable):
        def validate(self) -> None:
            raise ValueError(problem)

    return DAG(
        dag_id=f"crawl_definition_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}",
        schedule=BrokenDefinition(),
        start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
        auto_register=False,
    )


def _dags(folder: Path) -> dict[str, DAG]:
    crawls, broken = load_crawls(folder)
    dags = {}
    for path, crawl in crawls.items():
        try:
            dag = build_dag(crawl)
            dag.timetable.validate()  # a bad cron, named with its file rather than found later
        except Exception as exc:
            dag = broken_dag(path, f"{path}: {exc}")
        dags[dag.dag_id] = dag
    for path, problem in broken.items():
        dag = broken_dag(path, problem)
        dags[dag.dag_id] = dag
    return dags


globals().update(_dags(CRAWLS))
