"""`crawl register`: the crawl's tables and views in a local Hive metastore (Derby), registered
by `crawl` in its own process and queried by name from another new SparkSession, as an analyst
would; idempotent; another crawl's tables are refused unless --replace; Spark's in-memory
catalog and a bad database name are one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawllib import cli
from crawllib.config import config_toml, replace
from crawllib.core.vocab import LATER_TABLES, TABLE_NAMES
from crawllib.sql.views import VIEWS
from crawllib.store import lease, tables
from crawllib.store.spark_schemas import CRAWLDB

DATABASE = "crawl_test"
URLS = 5


def crawldb_rows(n: int) -> list[tuple]:
    base = {f.name: None for f in CRAWLDB.fields}
    rows = []
    for i in range(n):
        row = {**base, "url_key": i, "url": f"http://h.test/{i}", "host": "h.test"}
        row.update(status="queued", reason="seed", attempts=0, depth=0, first_gen=0, next_gen=0)
        rows.append(tuple(row[f.name] for f in CRAWLDB.fields))
    return rows


@pytest.fixture(scope="module")
def hive(spark, spark_cfg, template_root, tmp_path_factory):
    """Two crawl roots (crawldb of URLS rows, and an empty one) and a config whose sessions
    keep their catalog in a Derby metastore under the module's folder."""
    work = tmp_path_factory.mktemp("register")
    roots = {}
    for name in ("crawl", "other"):
        roots[name] = str(work / name)
        shutil.copytree(template_root, roots[name])
    with lease.hold(roots["crawl"], "pytest", spark_cfg):
        rows = spark.createDataFrame(crawldb_rows(URLS), CRAWLDB)
        tables.append(rows, roots["crawl"], "crawldb")
    conf = {
        **spark_cfg.spark.conf,
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={work / 'metastore_db'};create=true"
        ),
    }
    config = work / "hive.toml"
    config.write_text(config_toml(replace(spark_cfg, spark__conf=conf)))
    return {"work": work, "config": str(config), **roots}


def crawl(hive, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crawllib.cli", *argv, "--config", hive["config"]],
        cwd=hive["work"],  # Derby writes its derby.log here
        capture_output=True,
        text=True,
        timeout=600,
    )


# A new process, a new SparkSession on the same metastore: register again (nothing to do),
# query the tables by name, then try to register another crawl under the same names.
ANALYST = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from crawllib import cli
    from crawllib.config import load_config
    from crawllib.store.session import get_spark

    config, database, root, other, elsewhere = sys.argv[1:]
    spark = get_spark(load_config([config]))
    out = {}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out["again"] = cli.main(["register", root, "--database", database, "--format", "json",
                                 "--config", config])
    out["again_rows"] = [json.loads(s) for s in buf.getvalue().splitlines() if s.strip()]
    out["crawldb"] = spark.sql(f"SELECT count(*) AS n FROM {database}.crawldb").first()["n"]
    out["queued"] = spark.sql(
        f"SELECT count_if(status = 'queued') AS n FROM {database}.crawldb").first()["n"]
    out["latest_texts"] = spark.sql(f"SELECT count(*) AS n FROM {database}.latest_texts").first()["n"]
    out["listed"] = sorted(r["tableName"] for r in spark.sql(f"SHOW TABLES IN {database}").collect())
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        out["other"] = cli.main(["register", other, "--database", database, "--config", config])
    out["other_err"] = err.getvalue()
    with contextlib.redirect_stdout(io.StringIO()):
        out["replaced"] = cli.main(["register", other, "--database", database, "--replace",
                                    "--config", config])
    out["crawldb_after"] = spark.sql(f"SELECT count(*) AS n FROM {database}.crawldb").first()["n"]

    # --replace never drops what is not an external Delta table's entry (issue 37)
    guard = database + "_guard"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {guard}")

    def refused():
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["register", root, "--database", guard, "--replace", "--config",
                             config])
        listed = sorted(r["tableName"] for r in spark.sql(f"SHOW TABLES IN {guard}").collect())
        return code, err.getvalue(), listed

    spark.sql(f"CREATE TABLE {guard}.crawldb (x INT) USING parquet")  # managed, with data
    spark.sql(f"INSERT INTO {guard}.crawldb VALUES (1), (2), (3)")
    out["managed"] = refused()
    out["managed_rows"] = spark.sql(f"SELECT count(*) AS n FROM {guard}.crawldb").first()["n"]
    spark.sql(f"DROP TABLE {guard}.crawldb")
    spark.sql(f"CREATE TABLE {guard}.frontier (x INT) USING parquet LOCATION '{elsewhere}'")
    out["parquet"] = refused()
    spark.sql(f"DROP TABLE {guard}.frontier")
    spark.sql(f"CREATE TABLE {guard}.latest_texts (x INT) USING parquet")
    out["view_name"] = refused()
    print("RESULT " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def registered(hive):
    first = crawl(hive, "register", hive["crawl"], "--database", DATABASE, "--format", "json")
    assert first.returncode == 0, first.stderr[-4000:]
    analyst = subprocess.run(
        [
            sys.executable,
            "-c",
            ANALYST,
            hive["config"],
            DATABASE,
            hive["crawl"],
            hive["other"],
            str(hive["work"] / "parquet"),
        ],  # fmt: skip
        cwd=hive["work"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert analyst.returncode == 0, analyst.stderr[-4000:]
    line = next(s for s in analyst.stdout.splitlines() if s.startswith("RESULT "))
    rows = [json.loads(s) for s in first.stdout.splitlines() if s.strip()]  # JSON lines
    return rows, json.loads(line.removeprefix("RESULT "))


def test_register_creates_every_table_and_view_at_the_root(registered, hive):
    rows, _ = registered
    present = [t for t in TABLE_NAMES if t not in LATER_TABLES or Path(hive["crawl"], t).exists()]
    tables_done = [r for r in rows if r["kind"] == "table"]
    assert [r["name"] for r in tables_done] == [f"{DATABASE}.{t}" for t in present]
    assert all(r["action"] == "created" for r in rows)
    assert [r["location"] for r in tables_done] == [f"{hive['crawl']}/{t}" for t in present]
    assert [r["name"] for r in rows if r["kind"] == "view"] == [f"{DATABASE}.{v}" for v in VIEWS]


def test_a_new_session_queries_the_tables_by_name_and_registering_again_changes_nothing(
    registered, hive
):
    rows, out = registered
    assert out["again"] == 0
    again = {r["name"]: r["action"] for r in out["again_rows"] if r["kind"] == "table"}
    assert set(again.values()) == {"unchanged"} and len(again) == len(
        [r for r in rows if r["kind"] == "table"]
    )
    assert out["crawldb"] == URLS and out["queued"] == URLS
    assert out["latest_texts"] == 0
    assert set(out["listed"]) == {r["name"].split(".")[1] for r in rows}


def test_another_crawls_tables_are_refused_unless_replace(registered):
    _, out = registered
    assert out["other"] == 2
    assert "already registered at" in out["other_err"] and "--replace" in out["other_err"]
    assert len(out["other_err"].strip().splitlines()) == 1
    assert out["replaced"] == 0
    assert out["crawldb_after"] == 0  # the other (empty) crawl's crawldb now


def test_replace_refuses_managed_tables_other_formats_and_tables_in_place_of_views(registered):
    _, out = registered
    for case, says in (
        ("managed", "crawl_test_guard.crawldb is a managed parquet table, not an external Delta"),
        ("parquet", "crawl_test_guard.frontier is an external parquet table, not an external"),
        ("view_name", "crawl_test_guard.latest_texts is a table (managed), not a view"),
    ):
        code, err, listed = out[case]
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (case, err)
        assert "Nothing was registered" in err
        assert len(listed) == 1, (case, listed)  # only the table the test made
    assert out["managed_rows"] == 3  # its data is still there


def test_in_memory_catalog_and_bad_names_are_one_line_errors(new_root, capsys):
    # the test session keeps Spark's in-memory catalog
    assert cli.main(["register", new_root, "--database", DATABASE]) == 2
    err = capsys.readouterr().err.strip()
    assert "spark.sql.catalogImplementation" in err and len(err.splitlines()) == 1
    assert cli.main(["register", new_root, "--database", "bad-name; DROP"]) == 2
    err = capsys.readouterr().err.strip()
    assert "database name" in err and len(err.splitlines()) == 1
