"""The Airflow DAGs of jobs/airflow (crawl_dags.py, one per crawl definition), as Airflow loads
them: the newest Airflow (3.3) and the oldest the DAGs support (2.10), each with its providers.

Airflow's pins clash with the project's, so each lives in its own venv, ``.venv-airflow`` and
``.venv-airflow2``, made by ``make airflow-env`` / ``make airflow2-env`` on first use (a no-op
once made). The DAGs are loaded there by
``run_dagbag.py``, which prints what it found as JSON, templates rendered with the XCom values
given (the generation ``resolve`` found, the step ids the EMR tasks added). If the venv cannot
be made, the tests fail with make's and pip's output: they are never skipped.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawllib.core.vocab import TABLE_NAMES

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
# Airflow version -> (its venv, the make target that makes it)
AIRFLOWS = {"3.3": (".venv-airflow", "airflow-env"), "2.10": (".venv-airflow2", "airflow2-env")}
RUN_DAGBAG = REPO / "tests" / "airflow" / "run_dagbag.py"
STAGES = ["plan", "fetch", "update"]
GEN = 7  # what resolve pushed to XCom, in every rendering below
STEP_IDS = {f"{stage}_submit": [f"s-{stage.upper()}"] for stage in [*STAGES, "maintain"]}
XCOMS = [f"xcom:resolve={GEN}", *(f"xcom:{k}={json.dumps(v)}" for k, v in STEP_IDS.items())]

NEWS = """
name = "news"
root = "s3a://bucket/news"
schedule = "0 */6 * * *"
config = ["conf/emr.toml", "/etc/crawl/site.toml"]
conn_id = "spark_yarn"
maintain_every = 3
worker_python = "/srv/crawl/bin/python"
worker_config = "/etc/crawl/worker.toml"
"""
SHOP = """
name = "shop"
root = "s3://bucket/shop"
schedule = "@daily"
runner = "emr"
artifacts = "/opt/crawllib"
emr_cluster_id = "j-2AXXXXXXGAPLF"
aws_conn_id = "aws_crawl"
"""
# one spark-submit per generation
BLOG = """
name = "blog"
root = "s3a://bucket/blog"
schedule = "@hourly"
submit = "generation"
"""


@functools.cache
def make_airflow_env(target: str) -> subprocess.CompletedProcess:
    """Run ``make TARGET`` once per session, even when it fails (it can take minutes)."""
    return subprocess.run(
        ["make", "--no-print-directory", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
    )


@pytest.fixture(scope="module", params=list(AIRFLOWS), ids=lambda v: f"airflow{v}")
def airflow_python(request) -> Path:
    """An Airflow venv's interpreter, creating the venv first if needed."""
    venv, target = AIRFLOWS[request.param]
    made = make_airflow_env(target)
    if made.returncode != 0:
        pytest.fail(
            f"make {target} failed (exit {made.returncode}):\n{made.stdout}\n{made.stderr}",
            pytrace=False,
        )
    python = REPO / venv / "bin" / "python"
    version = subprocess.run(
        [str(python), "-c", "import airflow; print(airflow.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version.startswith(request.param + "."), version
    return python


def load_dags(python: Path, crawls: Path | None, *args: str, path: str = "") -> dict:
    """run_dagbag.py's report on jobs/airflow with the definitions in ``crawls`` (None: the
    shipped crawls/ folder), templates rendered with these params and XComs; ``path`` on the
    DAG processor's PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("CRAWLLIB_CRAWLS", "PYTHONPATH")}
    if crawls is not None:
        env["CRAWLLIB_CRAWLS"] = str(crawls)
    if path:
        env["PYTHONPATH"] = path
    ran = subprocess.run(
        [str(python), str(RUN_DAGBAG), str(REPO / "jobs" / "airflow"), *XCOMS, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ran.returncode != 0:
        pytest.fail(f"run_dagbag.py failed (exit {ran.returncode}):\n{ran.stderr}", pytrace=False)
    sys.stderr.write(ran.stderr)  # shown by pytest only when a test fails
    return json.loads(ran.stdout)


def definitions(folder: Path, **files: str) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.toml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def report(airflow_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    crawls = definitions(
        tmp_path_factory.mktemp("defs") / "crawls", news=NEWS, shop=SHOP, blog=BLOG
    )
    return load_dags(airflow_python, crawls)


def tasks_of(report: dict, dag_id: str) -> dict[str, dict]:
    assert dag_id in report["dags"], f"no DAG {dag_id!r}; found {sorted(report['dags'])}"
    return {t["task_id"]: t for t in report["dags"][dag_id]["tasks"]}


def test_the_shipped_definition_loads_as_a_scheduled_dag(airflow_python: Path) -> None:
    shipped = load_dags(airflow_python, None)
    assert shipped["import_errors"] == {}
    assert list(shipped["dags"]) == ["crawl_example"]
    dag = shipped["dags"]["crawl_example"]
    # A scheduled DAG must be able to run with its params' defaults: every one has one.
    assert dag["schedule"] == "0 * * * *"  # @hourly
    assert dag["params"] == {"gen": "next"}


def test_one_dag_per_definition_with_its_schedule(report: dict) -> None:
    assert report["import_errors"] == {}
    assert sorted(report["dags"]) == ["crawl_blog", "crawl_news", "crawl_shop"]
    news, shop = report["dags"]["crawl_news"], report["dags"]["crawl_shop"]
    assert news["schedule"] == "0 */6 * * *"
    assert shop["schedule"] == "0 0 * * *"  # @daily
    for dag in (news, shop):
        assert dag["timetable"] == "CronTriggerTimetable"
        assert dag["params"] == {"gen": "next"}
        assert dag["max_active_runs"] == 1
        assert dag["catchup"] is False


def test_spark_submit_runs_resolve_then_the_stages_then_upkeep(report: dict) -> None:
    tasks = report["dags"]["crawl_news"]["tasks"]
    order = ["resolve", "plan", "planned", "fetch", "update", "maintain_due", "maintain"]
    assert [t["task_id"] for t in tasks] == order
    assert [t["upstream"] for t in tasks] == [[], *([before] for before in order[:-1])]
    kinds = {t["task_id"]: t["operator"] for t in tasks}
    assert kinds["resolve"] == kinds["planned"] == "BashOperator"
    assert kinds["maintain_due"] == "ShortCircuitOperator"
    assert {kinds[s] for s in [*STAGES, "maintain"]} == {"SparkSubmitOperator"}


def test_one_submit_per_generation_runs_the_three_stages(report: dict) -> None:
    """submit = "generation": resolve, then jobs/generation.py --if-work (it records nothing
    and succeeds when nothing is due), then upkeep; the task carries every stage's tables."""
    tasks = report["dags"]["crawl_blog"]["tasks"]
    order = ["resolve", "generation", "maintain_due", "maintain"]
    assert [t["task_id"] for t in tasks] == order
    assert [t["upstream"] for t in tasks] == [[], *([before] for before in order[:-1])]
    task = tasks_of(report, "crawl_blog")["generation"]
    assert task["operator"] == "SparkSubmitOperator"
    assert task["application"] == "/opt/crawllib/jobs/generation.py"
    assert (REPO / "jobs" / "generation.py").is_file()
    assert task["application_args"] == [
        "s3a://bucket/blog",
        *("--gen", str(GEN), "--if-work"),
        *("--config", "/opt/crawllib/conf/emr.toml"),
    ]
    stage_tables = {u for s in STAGES for u in tasks_of(report, "crawl_news")[s]["outlets"]}
    assert {u.replace("/blog/", "/news/") for u in task["outlets"]} == stage_tables
    assert task["retries"] == 2
    assert task["execution_timeout_s"] == 8 * 3600


def test_resolve_finds_the_generation_once_on_the_worker(
    report: dict, airflow_python: Path
) -> None:
    resolve = tasks_of(report, "crawl_news")["resolve"]
    assert resolve["bash_command"] == (
        "/srv/crawl/bin/python -m crawllib.runs.orchestrator due s3a://bucket/news --gen next "
        "--config /etc/crawl/worker.toml"
    )
    assert resolve["skip_on_exit_code"] == []  # a failure to resolve is a failure, not a skip
    # Param gen = a number: that generation, for every stage.
    again = load_dags(airflow_python, None, "gen=4")
    assert tasks_of(again, "crawl_example")["resolve"]["bash_command"].endswith(
        "due s3://my-bucket/crawl --gen 4"
    )


def test_every_stage_gets_the_resolved_generation(report: dict) -> None:
    tasks = tasks_of(report, "crawl_news")
    config = ["--config", "/opt/crawllib/conf/emr.toml", "--config", "/etc/crawl/site.toml"]
    for stage in STAGES:
        task = tasks[stage]
        own = ["--if-work"] if stage == "plan" else []
        assert task["application_args"] == ["s3a://bucket/news", "--gen", str(GEN), *own, *config]
        assert task["application"] == f"/opt/crawllib/jobs/{stage}.py"
        assert (REPO / "jobs" / f"{stage}.py").is_file()
        assert task["conf"]["spark.speculation"] == "false"
        assert task["conn_id"] == "spark_yarn"


def test_spark_submit_ships_what_the_emr_steps_ship(report: dict) -> None:
    """crawllib and Delta's Python module on --py-files, Delta's jars, the packed environment
    for the executors: the options of deploy/emr's steps (submit_options serves both)."""
    tasks = tasks_of(report, "crawl_news")
    delta = "/usr/share/aws/delta/lib"
    for stage in [*STAGES, "maintain"]:
        task = tasks[stage]
        assert task["py_files"] == f"/opt/crawllib/crawllib.zip,{delta}/delta-spark.jar"
        assert task["jars"] == f"{delta}/delta-spark.jar,{delta}/delta-storage.jar"
        assert task["archives"] == "/opt/crawllib/crawllib-env.tar.gz#environment"
        assert task["conf"]["spark.pyspark.python"] == "./environment/bin/python"
        assert task["conf"]["spark.yarn.maxAppAttempts"] == "1"


def test_nothing_to_fetch_skips_fetch_and_update(report: dict) -> None:
    for dag_id in ("crawl_news", "crawl_shop"):
        tasks = tasks_of(report, dag_id)
        planned = tasks["planned"]
        assert planned["upstream"] == ["plan"]
        assert planned["skip_on_exit_code"] == [99]  # crawllib.runs.orchestrator.NOTHING_TO_FETCH
        root = "s3a://bucket/news" if dag_id == "crawl_news" else "s3://bucket/shop"
        assert f"-m crawllib.runs.orchestrator planned {root} {GEN}" in planned["bash_command"]
        # A skip flows down: every later task runs only if all before it succeeded.
        later = [t for t in tasks if t not in ("resolve", "planned") and not t.startswith("plan")]
        assert later
        assert all(tasks[t]["trigger_rule"].lower().endswith("all_success") for t in later)


def test_upkeep_runs_after_every_kth_generation(report: dict) -> None:
    tasks = tasks_of(report, "crawl_news")
    assert tasks["maintain_due"]["op_kwargs"] == {"gen": str(GEN), "every": 3}
    assert tasks["maintain"]["application_args"][:3] == ["s3a://bucket/news", "--every", "3"]
    assert tasks["maintain"]["application"] == "/opt/crawllib/jobs/maintain.py"


def test_stages_name_the_tables_they_write(report: dict) -> None:
    tasks = tasks_of(report, "crawl_news")
    prefix = "s3://bucket/news/"  # s3a:// named as s3://, the Assets' scheme
    written = {s: {uri.removeprefix(prefix) for uri in tasks[s]["outlets"]} for s in STAGES}
    assert all(uri.startswith(prefix) for s in STAGES for uri in tasks[s]["outlets"])
    assert set().union(*written.values()) <= set(TABLE_NAMES)
    assert all("generations" in tables for tables in written.values())
    assert {"fetchlist", "crawldb"} <= written["plan"]
    assert {"fetches", "pages", "texts"} <= written["fetch"]
    assert {"frontier", "texts", "crawldb"} <= written["update"]
    assert {"crawldb", "frontier"} <= written["update"]
    assert tasks["maintain"]["outlets"] == []  # upkeep changes files, not data


def test_retries_bounded_and_fetch_longest(report: dict) -> None:
    tasks = tasks_of(report, "crawl_news")
    assert all(t["retries"] >= 1 and t["retry_delay_s"] > 0 for t in tasks.values())
    assert tasks["fetch"]["retries"] <= 2
    others = [tasks[s]["execution_timeout_s"] for s in STAGES if s != "fetch"]
    assert tasks["fetch"]["execution_timeout_s"] > max(others)


def test_emr_adds_a_step_per_stage_and_waits_for_it(report: dict) -> None:
    tasks = report["dags"]["crawl_shop"]["tasks"]
    ids = [t["task_id"] for t in tasks]
    stages = [*STAGES, "maintain"]
    expected = ["resolve"]
    for stage in stages:
        expected += [f"{stage}_submit", stage, *(["planned"] if stage == "plan" else [])]
    expected.insert(expected.index("maintain_submit"), "maintain_due")
    assert ids == expected
    by_id = {t["task_id"]: t for t in tasks}
    for stage in stages:
        submit, wait = by_id[f"{stage}_submit"], by_id[stage]
        assert submit["operator"] == "EmrAddStepsOperator"
        assert wait["operator"] == "EmrStepSensor"
        assert wait["upstream"] == [f"{stage}_submit"]
        assert submit["job_flow_id"] == wait["job_flow_id"] == "j-2AXXXXXXGAPLF"
        assert submit["aws_conn_id"] == wait["aws_conn_id"] == "aws_crawl"
        assert wait["step_id"] == STEP_IDS[f"{stage}_submit"][0]
        assert wait["deferrable"] is True  # no worker slot held while the step runs
        assert wait["retries"] == 0  # a retry would only watch the failed step again
        assert wait["on_failure_callback"] == ["unusual_prefix_crawl_dags.cancel_step"] or (
            wait["on_failure_callback"][0].endswith("crawl_dags.cancel_step")
        )  # a failure or a time-out cancels the step
    # The stage's overrides reach EMR too: fetch may run 8 hours and is submitted 3 times
    assert by_id["fetch"]["timeout_s"] > by_id["update"]["timeout_s"]
    assert by_id["fetch"]["timeout_s"] == 8 * 3600
    assert by_id["fetch_submit"]["retries"] == 2
    assert by_id["fetch_submit"]["execution_timeout_s"] == 8 * 3600
    # The sensor, which sees the step finish, carries the tables, as spark_submit's stage does.
    news = tasks_of(report, "crawl_news")
    for stage in stages:
        assert [u.replace("/shop/", "/news/") for u in by_id[stage]["outlets"]] == (
            news[stage]["outlets"]
        )
        assert by_id[f"{stage}_submit"]["outlets"] == []


def test_emr_steps_run_the_jobs_of_the_dist_layout(report: dict) -> None:
    tasks = tasks_of(report, "crawl_shop")
    for stage in [*STAGES, "maintain"]:
        (step,) = tasks[f"{stage}_submit"]["steps"]
        assert step["ActionOnFailure"] == "CONTINUE"
        jar = step["HadoopJarStep"]
        assert jar["Jar"] == "command-runner.jar"
        args = jar["Args"]
        # the arguments of deploy/emr's steps (run on a standalone cluster by tests/cluster)
        recipe = json.loads((REPO / "deploy" / "emr" / "steps-generation.json").read_text())
        recipe_args = recipe[0]["Args"]
        app = args.index(f"/opt/crawllib/jobs/{stage}.py")
        prefix = recipe_args[: recipe_args.index("/opt/crawllib/jobs/generation.py")]
        extra = ["--conf", "spark.speculation=false", "--conf", "spark.yarn.maxAppAttempts=1"]
        assert args[:app] == prefix and prefix[-len(extra) :] == extra  # the recipe's own
        assert "--archives" not in args  # the bootstrap unpacked the environment on every node
        py_files = args[args.index("--py-files") + 1].split(",")
        assert py_files[0] == "/opt/crawllib/crawllib.zip"  # make dist's zip
        assert (REPO / "jobs" / f"{stage}.py").is_file()
        own = ["--every", "10"] if stage == "maintain" else ["--gen", str(GEN)]
        own += ["--if-work"] if stage == "plan" else []
        own += ["--wait-for-lease", "900"]  # a held lease: the step waits, then exits 2
        config = ["--config", "/opt/crawllib/conf/emr.toml"]
        assert args[app + 1 :] == ["s3://bucket/shop", *own, *config]
        assert (REPO / "conf" / "emr.toml").is_file()
        assert step["Name"] == f"crawl shop gen {GEN} {stage}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (NEWS.replace('"0 */6 * * *"', '"every day"'), "news.toml: Exactly 5, 6 or 7 columns"),
        (NEWS + 'colour = "blue"\n', "unknown keys ['colour']"),
        (SHOP.replace('emr_cluster_id = "j-2AXXXXXXGAPLF"', ""), "runner emr needs emr_cluster_id"),
        (NEWS.replace('name = "news"', 'name = "news feed"'), "letters, digits and _ only"),
        (NEWS.replace('root = "s3a://bucket/news"', ""), "name and root are required"),
        (NEWS + "owner = [\n", "news.toml"),  # not TOML at all
        (NEWS + 'on_failure_callback = "no_such_module:alert"\n', "No module named"),
    ],
)
def test_a_bad_definition_is_an_import_error_naming_it_and_the_others_load(
    airflow_python: Path, tmp_path: Path, text: str, message: str
) -> None:
    folder = definitions(tmp_path / "crawls", news=text, shop=SHOP)
    bad = load_dags(airflow_python, folder)
    assert list(bad["dags"]) == ["crawl_shop"]
    (error,) = bad["import_errors"].values()
    assert message in error
    assert "news.toml" in error


def test_two_definitions_of_one_name_are_an_import_error(
    airflow_python: Path, tmp_path: Path
) -> None:
    twice = load_dags(airflow_python, definitions(tmp_path / "crawls", news=NEWS, news2=NEWS))
    assert list(twice["dags"]) == ["crawl_news"]
    (error,) = twice["import_errors"].values()
    assert "news2.toml: another definition" in error and "is named 'news'" in error


def test_owner_run_timeout_and_failure_callback_per_dag(
    airflow_python: Path, tmp_path: Path
) -> None:
    (tmp_path / "crawl_alerts.py").write_text("def page_oncall(context):\n    pass\n")
    own = 'owner = "search-team"\ndagrun_timeout_minutes = 300\n'
    own += 'on_failure_callback = "crawl_alerts:page_oncall"\n'
    folder = definitions(tmp_path / "crawls", news=NEWS + own, shop=SHOP)
    loaded = load_dags(airflow_python, folder, path=str(tmp_path))
    assert loaded["import_errors"] == {}
    news, shop = loaded["dags"]["crawl_news"], loaded["dags"]["crawl_shop"]
    assert news["dagrun_timeout_s"] == 300 * 60 and shop["dagrun_timeout_s"] is None
    assert news["on_failure_callback"] == ["crawl_alerts.page_oncall"]
    assert shop["on_failure_callback"] == []
    assert {t["owner"] for t in news["tasks"]} == {"search-team"}
    assert {t["owner"] for t in shop["tasks"]} == {"airflow"}


def test_the_dag_file_imports_on_the_pythons_of_the_airflows_supported() -> None:
    """Airflow 2.10 runs on Python 3.8 to 3.12: the file uses nothing newer (vermin reads the
    syntax and the standard library it calls; tomllib only where tomli is the fallback)."""
    dag_file = REPO / "jobs" / "airflow" / "crawl_dags.py"
    ran = subprocess.run(
        [str(Path(sys.executable).parent / "vermin"), "-t=3.8-", "--violations", "--no-tips"]
        + [str(dag_file)],
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Minimum required versions: 3.8" in ran.stdout
