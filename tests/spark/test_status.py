"""`crawl status` reads the ledger and crawldb with delta-rs and DuckDB: no JVM (the command
runs with no Java on its PATH), the same rows and freshness as the engine that wrote them reads
(each engine in turn: the ``db`` fixture)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys

from crawllib.config import replace
from crawllib.runs import status
from crawllib.store import generations
from crawllib.store.schemas import CRAWLDB

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
NOW = "2026-01-02T12:00:00Z"


def ledger_root(db) -> str:
    """Generation 0 done, generation 1 planned and fetching; two pages fetched a day ago."""
    counts = {
        "plan": {"candidates": 10, "planned": 8, "hosts": 2},
        "fetch": {"urls": 8, "ok": 6, "http_error": 2, "pages": 6},
        "parse": {"pages": 6, "texts": 6, "new_frontier": 12},
        "update": {"urls": 8, "fetched": 6, "failed": 2},
    }
    for stage, stage_counts in counts.items():
        at = T0 + dt.timedelta(minutes=len(stage))
        generations.record(db, 0, stage, "running", at)
        generations.record(db, 0, stage, "done", at, stage_counts)
    generations.record(db, 1, "plan", "done", T0, {"candidates": 12, "planned": 12})
    generations.record(db, 1, "fetch", "running", T0)
    base = {f.name: None for f in CRAWLDB.fields}
    rows = []
    for i, changed in enumerate((0, 3)):
        row = {**base, "url_key": i, "url": f"http://h.test/{i}", "host": "h.test"}
        row.update(status="fetched", reason="ok", attempts=1, depth=0, first_gen=0, next_gen=1)
        row.update(fetched_at=T0, fetch_interval=86400.0 * (i + 1), visits_changed=changed)
        row.update(next_fetch_at=T0 + dt.timedelta(days=i + 1), visits_unchanged=1)
        rows.append(row)
    db.append(db.rows(rows, CRAWLDB), "crawldb")
    return db.root


def engine_status_rows(db) -> list[tuple]:
    """`crawl status`'s rows from the ledger as the engine reads it."""
    return status.status_rows(generations.read_rows(db))


def engine_freshness(db, cfg) -> tuple[int, int, float]:
    """(pages with a stored version, due, freshness): status's query over crawldb, run by the
    engine (Spark SQL as it is on Spark, translated on the embedded engine)."""
    query = status.freshness_sql(cfg).replace("FROM crawldb", "FROM {crawldb}")
    row = db.one_row(db.sql(query, crawldb=db.table("crawldb")))
    return int(row["pages"]), int(row["due"]), float(row["freshness"] or 0.0)


def without_java() -> dict[str, str]:
    """This environment with no java on PATH and no JAVA_HOME: a JVM could not start."""
    java = shutil.which("java")
    assert java, "the test needs to know where java is, to hide it"
    hidden = {os.path.dirname(java), os.path.dirname(os.path.realpath(java))}
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p not in hidden]
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = os.pathsep.join(path)
    return env


def crawl_status(root: str, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "crawllib.cli", "status", root, "--now", NOW, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=without_java(), timeout=120)


def test_status_without_a_jvm_gives_the_rows_the_engine_reads(db, spark_cfg):
    root = ledger_root(db)
    done = crawl_status(root, "--format", "json")
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    want = [dict(zip(status.JSON_COLUMNS, row, strict=True)) for row in engine_status_rows(db)]
    assert got == want and len(got) == 6
    plan = got[0]
    assert (plan["gen"], plan["stage"], plan["state"]) == (0, "plan", "done")
    # a program reads the counts as a map of numbers, items per second by a plain name
    assert plan["counts"] == {"candidates": 10, "hosts": 2, "planned": 8}
    assert "items_per_second" in plan and "items/s" not in plan
    assert got[-1]["stage"] == "fetch" and got[-1]["state"] == "running"

    table = crawl_status(root)
    assert table.returncode == 0, table.stderr
    cfg = replace(spark_cfg, crawl__now=NOW)
    pages, due, fresh = engine_freshness(db, cfg)
    assert (pages, due) == (2, 1)  # the page of a day's interval is due a day later
    assert 0 < fresh < 1
    assert status.read_without_spark(root, cfg)[1] == (pages, due, fresh)
    assert status.freshness_line(pages, due, fresh) in table.stdout
    assert "| candidates 10, hosts 2, planned 8 " in table.stdout  # one line for people


def test_status_of_a_folder_that_is_no_crawl_root_is_one_line(tmp_path):
    done = crawl_status(str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no generations table" in done.stderr
