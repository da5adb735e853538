"""The session's settings from the config: which jars it adds (Delta's, the S3A jars) from the
cache, when the S3A jars are fetched (once), and the S3A settings that reach both Spark and
the writer lease's S3 client. No JVM starts here: the fetch is replaced by a fake."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawllib.config import load_config, replace
from crawllib.store import lease, session

REPO = Path(__file__).resolve().parents[2]
DELTA_JARS = [*session._REQUIRED_JARS, "org.antlr_antlr4-runtime-4.13.1.jar"]
S3A = {
    "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
    "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    "spark.hadoop.fs.s3a.path.style.access": "true",
    "spark.hadoop.fs.s3a.access.key": "key",
    "spark.hadoop.fs.s3a.secret.key": "secret",
}
S3_JARS = ["org.apache.hadoop_hadoop-aws-3.4.1.jar", "software.amazon.awssdk_s3-2.29.52.jar"]


def manifest(packages=session.S3_PACKAGES, jars=S3_JARS) -> str:
    excludes = [f"exclude {e}" for e in session.S3_EXCLUDES]
    return "".join(f"{line}\n" for line in [*packages, *excludes, *jars])


@pytest.fixture
def cache(tmp_path) -> Path:
    """A jars cache holding Delta's jars and a completed fetch of the S3A jars."""
    (tmp_path / "jars").mkdir()
    for name in DELTA_JARS:
        (tmp_path / "jars" / name).write_bytes(b"jar")
    s3 = tmp_path / session.S3_JARS_DIR
    s3.mkdir()
    for name in S3_JARS:
        (s3 / name).write_bytes(b"jar")
    (s3 / session.S3_MANIFEST).write_text(manifest())
    return tmp_path


def config(cache: Path, *overrides: str):
    return load_config(overrides=[f"spark.jars_cache={cache}", *overrides])


def no_fetch(*args):
    raise AssertionError("the cached jars must be used, without a fetch")


def test_a_local_session_gets_delta_and_s3a_jars_from_the_cache(cache, monkeypatch):
    monkeypatch.setattr(session, "_resolve_packages", no_fetch)
    cfg = config(cache, "spark.master=local[2]")
    conf = session.spark_conf(cfg, ["s3a://bucket/crawl"])
    assert [Path(j).name for j in conf["spark.jars"].split(",")] == [*DELTA_JARS, *S3_JARS]
    assert "spark.jars.packages" not in conf  # nothing resolved: no network
    assert session.fetch_s3_jars(cfg) == [str(cache / session.S3_JARS_DIR / n) for n in S3_JARS]
    assert session.fetch_delta_jars(cfg) == [str(cache / "jars" / n) for n in sorted(DELTA_JARS)]


@pytest.mark.parametrize(
    ("uris", "overrides", "needed"),
    [
        (["/data/crawl", "seeds.txt"], [], False),  # `crawl demo`, a local crawl
        (["/data/crawl", None], [], False),
        (["/data/crawl", "s3a://bucket/seeds.txt"], [], True),
        (["s3://bucket/crawl"], [], True),
        (["/data/crawl"], ["crawl.exclude_file=s3a://bucket/exclude.txt"], True),
        (["/data/crawl"], ['spark.conf={"spark.hadoop.fs.s3a.endpoint" = "http://x"}'], True),
    ],
)
def test_the_s3a_jars_only_when_a_uri_or_the_config_needs_them(cache, uris, overrides, needed):
    cfg = config(cache, "spark.master=local[2]", *overrides)
    assert session.needs_s3(cfg, uris) is needed
    jars = session.spark_conf(cfg, uris)["spark.jars"]
    assert (session.S3_JARS_DIR in jars) is needed


def test_a_session_crawl_starts_logs_through_the_shipped_log4j_file(cache):
    user = ['spark.conf={"spark.driver.extraJavaOptions" = "-Dx=1"}']
    conf = session.spark_conf(config(cache, "spark.master=local[2]", *user))
    assert conf["spark.driver.extraJavaOptions"] == f"{session.QUIET_LOG4J} -Dx=1"
    assert session.LOG4J2.is_file()
    under_submit = session.spark_conf(config(cache, "spark.master="))
    assert "spark.driver.extraJavaOptions" not in under_submit  # spark-submit's JVM runs


def test_adaptive_execution_is_off_on_one_machine_unless_the_config_turns_it_on(cache):
    local = session.spark_conf(config(cache, "spark.master=local[2]"))
    assert local["spark.sql.adaptive.enabled"] == "false"
    assert local["spark.sql.autoBroadcastJoinThreshold"] == "-1"  # a broadcast is a job
    assert local["spark.sql.codegen.wholeStage"] == "false"  # compiling costs more than it saves
    assert "spark.databricks.delta.checkpointInterval" not in local  # not a Delta setting
    cluster = session.spark_conf(config(cache, "spark.master="))
    assert "spark.sql.autoBroadcastJoinThreshold" not in cluster
    assert "spark.sql.codegen.wholeStage" not in cluster
    assert "spark.sql.adaptive.enabled" not in cluster
    on = ['spark.conf={"spark.sql.adaptive.enabled" = "true"}']
    assert (
        session.spark_conf(config(cache, "spark.master=local[2]", *on))[
            "spark.sql.adaptive.enabled"
        ]
        == "true"
    )
    cluster = session.spark_conf(config(cache, "spark.master="))
    assert "spark.sql.adaptive.enabled" not in cluster  # the cluster's default (on)


@pytest.mark.parametrize(
    "overrides",
    [
        ["spark.s3_jars=provided"],  # EMR's own S3 file system
        ["spark.master=", "spark.delta_jars=provided"],  # spark-submit brings --jars
    ],
)
def test_no_s3a_jars_when_provided_or_under_spark_submit(cache, overrides):
    cfg = config(cache, *overrides)
    assert not session.adds_s3_jars(cfg, ["s3a://bucket/crawl"])
    jars = session.spark_conf(cfg, ["s3a://bucket/crawl"]).get("spark.jars", "")
    assert session.S3_JARS_DIR not in jars


def test_emr_profile_adds_no_jars():
    conf = session.spark_conf(load_config([REPO / "conf" / "emr.toml"]))
    assert "spark.jars" not in conf and "spark.jars.packages" not in conf


def test_the_s3a_settings_reach_spark_and_the_lease_client(cache):
    cfg = replace(config(cache), spark__conf=S3A)
    conf = session.spark_conf(cfg)
    assert {k: conf[k] for k in S3A} == S3A
    client = lease.s3_client(cfg)
    assert client.meta.endpoint_url == "http://127.0.0.1:9000"
    assert client.meta.region_name == "us-east-1"


@pytest.mark.parametrize(
    "change",
    ["other packages", "a jar missing", "no manifest"],
)
def test_an_incomplete_or_outdated_cache_is_fetched_again_once(cache, monkeypatch, change):
    s3 = cache / session.S3_JARS_DIR
    if change == "other packages":
        (s3 / session.S3_MANIFEST).write_text(manifest(packages=["org.apache.hadoop:x:1"]))
    elif change == "a jar missing":
        (s3 / S3_JARS[0]).unlink()
    else:
        (s3 / session.S3_MANIFEST).unlink()
    cfg = config(cache)
    assert session.cached_s3_jars(str(cache)) is None
    fetched = []

    def resolve(packages, excludes, ivy_home, cfg):
        fetched.append((packages, excludes))
        (Path(ivy_home) / "jars").mkdir()
        for name in ["b.jar", "a.jar"]:
            (Path(ivy_home) / "jars" / name).write_bytes(b"jar")

    monkeypatch.setattr(session, "_resolve_packages", resolve)
    want = [str(s3 / "a.jar"), str(s3 / "b.jar")]
    assert session.fetch_s3_jars(cfg) == want
    assert session.fetch_s3_jars(cfg) == want
    assert fetched == [(session.S3_PACKAGES, session.S3_EXCLUDES)]
    assert sorted(p.name for p in s3.iterdir()) == ["a.jar", "b.jar", session.S3_MANIFEST]
    assert [p.name for p in cache.iterdir() if p.name.startswith("s3-ivy-")] == []


def test_speculation_is_off_in_every_session_the_crawler_starts(cache):
    # a copy of a fetch task is a second fetcher of the same hosts (spark.conf refuses it)
    conf = session.spark_conf(config(cache, "spark.master=local[2]"))
    assert conf["spark.speculation"] == "false"
