"""deploy/emr/ as docs/emr.md uses it: every step is a spark-submit of a job in jobs/ with files
that ``make dist`` writes (or EMR's Delta jars), a profile in conf/ and arguments the `crawl`
parser takes; the configurations give PySpark the environment the bootstrap unpacks.
tests/cluster/test_standalone.py runs the same steps on a local standalone cluster."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from crawllib.cli import build_parser
from tools import build_dist

REPO = Path(__file__).resolve().parents[2]
EMR = REPO / "deploy" / "emr"
OPT = "/opt/crawllib/"  # where the bootstrap copies the uploaded dist/, jobs/ and conf/
EMR_DELTA = {
    "/usr/share/aws/delta/lib/delta-spark.jar",
    "/usr/share/aws/delta/lib/delta-storage.jar",
}
ENV_PYTHON = "/opt/crawllib/env/bin/python"  # the bootstrap unpacks the packed env there
STEP_FILES = sorted(EMR.glob("steps-*.json"))
# What make dist writes into dist/ (uploaded to the prefix the bootstrap copies to /opt/crawllib).
DIST_FILES = {"crawllib.zip", "requirements.txt", "bootstrap.sh", build_dist.ENV_ARCHIVE}


def load_steps(path: Path) -> list[dict]:
    steps = json.loads(path.read_text())
    assert isinstance(steps, list) and steps, path
    return steps


def submit_args(step: dict) -> list[str]:
    """The spark-submit command line of a step: command-runner.jar's, or a Spark step's."""
    if step.get("Type") == "Spark":
        return ["spark-submit", *step["Args"]]
    assert step["Type"] == "CUSTOM_JAR" and step["Jar"] == "command-runner.jar", step
    assert step["Args"][0] == "spark-submit", step["Args"]
    return list(step["Args"])


def split_submit(args: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    """spark-submit options (name -> values, in order), the application and its arguments."""
    options: dict[str, list[str]] = {}
    i = 1
    while args[i].startswith("--"):
        options.setdefault(args[i], []).append(args[i + 1])
        i += 2
    return options, args[i], args[i + 1 :]


def local_path(emr_path: str) -> Path:
    """The repository file an /opt/crawllib path comes from (jobs/, conf/) or None for dist/."""
    assert emr_path.startswith(OPT), emr_path
    return REPO / emr_path.removeprefix(OPT)


def test_the_recipe_has_its_files():
    names = ["steps-generation.json", "steps-register.json", "steps-start.json"]
    assert [p.name for p in STEP_FILES] == names
    assert (EMR / "configurations.json").is_file()
    assert (EMR / "bootstrap.sh").stat().st_mode & 0o111, "bootstrap.sh is not executable"
    assert build_dist.BOOTSTRAP == EMR / "bootstrap.sh"  # make dist ships this one


@pytest.mark.parametrize("path", STEP_FILES, ids=lambda p: p.name)
def test_each_step_submits_a_job_with_the_dist_files(path):
    for step in load_steps(path):
        assert step["ActionOnFailure"] in {"CONTINUE", "CANCEL_AND_WAIT", "TERMINATE_CLUSTER"}
        options, app, app_args = split_submit(submit_args(step))
        # one value per comma-separated option: a list survives the CLI's JSON, not shorthand
        # nothing shipped but crawllib.zip: the bootstrap unpacked the environment on every node
        assert set(options) == {"--deploy-mode", "--py-files", "--jars", "--conf"}
        assert options["--deploy-mode"] == ["client"]  # the driver's logs are the step's
        # what the Airflow DAG's EMR steps set too (issue 51: the recipe lacked them): no
        # speculative second fetcher of a host, no second attempt behind the scheduler's back
        assert options["--conf"] == ["spark.speculation=false", "spark.yarn.maxAppAttempts=1"]
        py_files = options["--py-files"][0].split(",")
        assert py_files[0] == OPT + "crawllib.zip"
        # the Delta jar also holds the `delta` Python module crawllib.store.tables imports
        assert set(py_files[1:]) == {"/usr/share/aws/delta/lib/delta-spark.jar"}
        assert set(options["--jars"][0].split(",")) == EMR_DELTA
        for value in py_files:
            if value.startswith(OPT):
                assert value.removeprefix(OPT) in DIST_FILES, value

        job = local_path(app)
        assert job.parent == REPO / "jobs" and job.is_file(), app
        command = re.search(r'main\(\["([a-z-]+)"', job.read_text())
        assert command, f"{job} does not call crawllib.cli.main"
        args = build_parser().parse_args([command.group(1), *app_args])
        assert args.root == "s3://BUCKET/crawl"
        assert [local_path(c) for c in args.config] == [REPO / "conf" / "emr.toml"]
        assert all(local_path(c).is_file() for c in args.config)


def test_the_start_step_seeds_and_the_generation_step_continues():
    (start,) = load_steps(EMR / "steps-start.json")
    (generation,) = load_steps(EMR / "steps-generation.json")
    assert split_submit(submit_args(start))[1] == OPT + "jobs/run.py"
    assert "--seeds" in start["Args"] and "--generations" in start["Args"]
    assert split_submit(submit_args(generation))[1] == OPT + "jobs/generation.py"


def test_the_register_step_puts_the_tables_in_the_catalog_the_profile_names():
    from crawllib.config import load_config

    (register,) = load_steps(EMR / "steps-register.json")
    _, app, app_args = split_submit(submit_args(register))
    assert app == OPT + "jobs/register.py"
    args = build_parser().parse_args(["register", *app_args])
    assert args.database == "crawl"
    cfg = load_config([str(local_path(c)) for c in args.config])
    # a catalog that outlives the session: EMR's metastore, which spark-hive-site makes Glue
    assert cfg.spark.conf["spark.sql.catalogImplementation"] == "hive"


def test_create_cluster_keeps_the_logs_and_ends_an_idle_cluster():
    script = (EMR / "create-cluster.sh").read_text()
    subprocess.run(["bash", "-n", str(EMR / "create-cluster.sh")], check=True)
    assert (EMR / "create-cluster.sh").stat().st_mode & 0o111
    assert "--release-label emr-spark-8.0.0" in script
    assert '--log-uri "${LOG_URI}"' in script  # the client-mode drivers' logs
    assert "--auto-termination-policy" in script and "IdleTimeout=" in script
    # the logs beside the prefix, not under it: the bootstrap copies the prefix to every node
    assert 'LOG_URI="${2:-${DIST}-logs/}"' in script


def test_the_bootstrap_copies_what_the_steps_use_and_no_logs():
    script = (EMR / "bootstrap.sh").read_text()
    copy = script[script.index("aws s3 cp") :].split("/opt/crawllib\n")[0]
    assert '--exclude "*"' in copy
    included = set(re.findall(r'--include "([^"]+)"', copy))
    assert included == {"crawllib.zip", "crawllib-env.tar.gz", "jobs/*", "conf/*"}
    assert "configurations.json" in script and "bootstrap.sh" in script


def test_configurations_enable_delta_glue_and_give_pyspark_the_packed_environment():
    by_name = {
        c["Classification"]: c for c in json.loads((EMR / "configurations.json").read_text())
    }
    assert set(by_name) == {"delta-defaults", "spark-env", "spark-defaults", "spark-hive-site"}
    assert by_name["delta-defaults"]["Properties"] == {"delta.enabled": "true"}
    (export,) = by_name["spark-env"]["Configurations"]
    assert export["Classification"] == "export"
    assert export["Properties"] == {"PYSPARK_PYTHON": ENV_PYTHON}
    # The driver (client mode) and the executors run the environment the bootstrap unpacked.
    assert by_name["spark-defaults"]["Properties"] == {
        "spark.pyspark.python": ENV_PYTHON,
        "spark.pyspark.driver.python": ENV_PYTHON,
    }
    glue = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
    assert by_name["spark-hive-site"]["Properties"] == {"hive.metastore.client.factory.class": glue}


def test_bootstrap_unpacks_the_environment_where_the_configurations_point():
    script = (EMR / "bootstrap.sh").read_text()
    subprocess.run(["bash", "-n", str(EMR / "bootstrap.sh")], check=True)
    assert f"-C {ENV_PYTHON.removesuffix('/bin/python')}" in script
    assert build_dist.ENV_ARCHIVE in script
    assert build_dist.ENV_PYTHON in script  # the interpreter the packed env links to
    assert "pip install" not in script  # nodes need nothing from PyPI


def test_emr_profile_leaves_master_jars_and_credentials_to_the_cluster_and_keeps_the_ui():
    from crawllib.config import load_config

    cfg = load_config([str(REPO / "conf" / "emr.toml")])
    assert cfg.spark.master == ""
    assert (cfg.spark.delta_jars, cfg.spark.s3_jars) == ("provided", "provided")
    assert cfg.spark.ui is True
    # EMR's own credentials chain (runtime roles, Lake Formation) is not overridden
    assert not [k for k in cfg.spark.conf if "credentials" in k]


def test_packed_environment_links_python_and_holds_site_packages(tmp_path):
    import tarfile

    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("X = 1\n")
    (site / "pkg" / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"")
    (site / "bin").mkdir()
    (site / "bin" / "tool").write_text("#!/bin/sh\n")
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    build_dist.pack_env(site, "/usr/bin/python3.11", first)
    build_dist.pack_env(site, "/usr/bin/python3.11", second)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        members = {m.name: m for m in tar.getmembers()}
        cfg = tar.extractfile("pyvenv.cfg").read().decode()
    assert members["bin/python"].linkname == "/usr/bin/python3.11"
    assert members["bin/python3.11"].linkname == "python"
    assert "home = /usr/bin\n" in cfg and "include-system-site-packages = false" in cfg
    assert set(members) == {
        "pyvenv.cfg",
        "bin/python",
        "bin/python3",
        "bin/python3.11",
        "lib/python3.11/site-packages/pkg/__init__.py",
    }
