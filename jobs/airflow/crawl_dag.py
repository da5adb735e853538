"""Airflow DAG ``crawl_generation``: one DAG run crawls one generation.

Four ``spark-submit`` tasks, ``plan >> fetch >> parse >> update``; each runs
``jobs/<stage>.py ROOT --gen GEN --config CONFIG`` with the crawllib zip on ``--py-files``.
Then ``maintain`` runs ``jobs/maintain.py ROOT --every K --config CONFIG``: table upkeep
(`crawl maintain`), which does nothing unless the latest finished generation is a multiple of
K (``maintain_every``).

Install: copy this file into the DAGs folder of an Airflow (2.10+ or 3.x) that has
``apache-airflow-providers-apache-spark``; give the ``spark_default`` connection (or another,
see ``conn_id``) the cluster's master (e.g. ``yarn``) and make ``spark-submit`` runnable by the
worker. Deploy ``jobs/``, ``conf/`` and the ``crawllib.zip`` from ``make dist`` under one folder,
``artifacts``. The driver reads the config file, so ``config`` must be a path it can open.

Params (the trigger form, or ``airflow dags trigger crawl_generation -c '{...}'``):
  root       crawl root, e.g. ``s3a://bucket/crawl`` (required)
  gen        ``next`` (default: each stage takes the generation due for it) or a number,
             to rerun the stages of that generation that are not done
  artifacts  folder holding ``jobs/``, ``conf/`` and ``crawllib.zip`` (default /opt/crawllib)
  jobs_dir, py_files, config   override ``{artifacts}/jobs``, ``{artifacts}/crawllib.zip``,
             ``{artifacts}/conf/emr.toml``
  conn_id    Spark connection id (default ``spark_default``)
  maintain_every   upkeep after generations 0, K, 2K, ... (default 10)

Retries are safe: each stage skips itself when its generation is already done, and a rerun of
an unfinished stage replaces that stage's own output (fetch also skips its committed slices).
``max_active_runs=1`` keeps two runs from working on the crawl at once, so with ``gen=next``
a failed run is finished by the next one. Speculative execution stays off (two copies of a
fetch task would hit the same hosts twice).

One writer per crawl root: each stage holds the root's writer lease while it runs. A task that
finds it held (a manual ``crawl`` run, or a killed try whose lease has not expired yet) exits 2
naming the holder; its retry runs once the root is free (a dead holder's lease expires within
``storage.lease_seconds``, 5 minutes by default, shorter than the retry delay).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

try:  # Airflow 3
    from airflow.sdk import DAG, Param
except ImportError:  # Airflow 2.10
    from airflow import DAG
    from airflow.models.param import Param
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

SCHEDULE = None  # e.g. "@hourly": with gen=next and one run at a time, runs just follow on
STAGES = ("plan", "fetch", "parse", "update")
JOBS_DIR = "{{ params.jobs_dir or params.artifacts ~ '/jobs' }}"
PY_FILES = "{{ params.py_files or params.artifacts ~ '/crawllib.zip' }}"
CONFIG = "{{ params.config or params.artifacts ~ '/conf/emr.toml' }}"


class StageSubmit(SparkSubmitOperator):
    """SparkSubmitOperator whose connection id is templated as well (it is a DAG param)."""

    template_fields = (*SparkSubmitOperator.template_fields, "_conn_id")


def _optional(text: str) -> Param:
    return Param(None, type=["null", "string"], description=text)


def submit(task_id: str, args: list[str], **overrides: object) -> StageSubmit:
    """``spark-submit jobs/<task_id>.py ROOT ARGS --config CONFIG``, in the DAG being defined."""
    return StageSubmit(
        task_id=task_id,
        conn_id="{{ params.conn_id }}",
        application=f"{JOBS_DIR}/{task_id}.py",
        py_files=PY_FILES,
        application_args=["{{ params.root }}", *args, "--config", CONFIG],
        conf={
            "spark.speculation": "false",
            # Airflow owns retries; a second YARN attempt would only double them.
            "spark.yarn.maxAppAttempts": "1",
        },
        name=f"crawl-{task_id}",
        **overrides,
    )


with DAG(
    dag_id="crawl_generation",
    description="One crawl generation: plan, fetch, parse, update, maintain (spark-submit)",
    doc_md=__doc__,
    schedule=SCHEDULE,
    start_date=datetime(2025, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["crawl"],
    params={
        "root": Param(type="string", minLength=1, description="crawl root, s3a://bucket/crawl"),
        "gen": Param(
            "next",
            type=["string", "integer"],
            pattern=r"^(next|[0-9]+)$",
            description="'next' (the generation due) or a generation number to rerun",
        ),
        "artifacts": Param("/opt/crawllib", type="string", description="deployed make dist"),
        "jobs_dir": _optional("folder of plan.py etc.; default {artifacts}/jobs"),
        "py_files": _optional("crawllib zip; default {artifacts}/crawllib.zip"),
        "config": _optional("config TOML read by the driver; default {artifacts}/conf/emr.toml"),
        "conn_id": Param("spark_default", type="string", description="Spark connection id"),
        "maintain_every": Param(
            10,
            type="integer",
            minimum=1,
            description="table upkeep (compaction, VACUUM) after the generations that are "
            "multiples of this",
        ),
    },
    default_args={
        "retries": 3,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": True,
        "execution_timeout": timedelta(hours=2),
    },
) as dag:
    tasks = [
        submit(
            stage,
            ["--gen", "{{ params.gen }}"],
            # Fetch is network-bound and long; a retry redoes only its uncommitted slices.
            **({"retries": 2, "execution_timeout": timedelta(hours=8)} if stage == "fetch" else {}),
        )
        for stage in STAGES
    ]
    # Table upkeep after the generation's update; the job itself skips unless the latest
    # finished generation is a multiple of maintain_every (it reads the generations table).
    tasks.append(submit("maintain", ["--every", "{{ params.maintain_every }}"]))
    for upstream, downstream in zip(tasks, tasks[1:], strict=False):
        upstream >> downstream
