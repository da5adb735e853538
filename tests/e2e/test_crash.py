"""Crash safety: SIGKILL `crawl run` (its whole process group) in the middle of a fetch and in
the middle of a parse, rerun it, and end with what an uninterrupted crawl gives."""

from __future__ import annotations

import collections
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from crawllib import config as config_mod
from crawllib import pipeline, tables
from crawllib.testing import WebSpec, serve_in_thread
from tests.conftest import test_config_overrides

pytestmark = pytest.mark.e2e

GENERATIONS = 3
SETTINGS = {"crawl.max_depth": 2, "politeness.default_delay": 0.1, "storage.fetch_slices": 4}


def toml_config(path, resolve):
    lines = ["[network]", "resolve_only = true", "[network.resolve]"]
    lines += [f'"{h}" = "{t}"' for h, t in resolve.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def crawl_cmd(root, seeds, config_file):
    cmd = [
        sys.executable,
        "-m",
        "crawllib.cli",
        "run",
        root,
        "--seeds",
        seeds,
        "--generations",
        str(GENERATIONS),
        "--config",
        config_file,
    ]
    for override in test_config_overrides() + [f"{k}={v}" for k, v in SETTINGS.items()]:
        cmd += ["--set", override]
    return cmd


def stage_running(root, stage):
    """True once the generations table has a 'running' row of stage (read from the Delta log)."""
    for path in glob.glob(os.path.join(root, "generations", "_delta_log", "*.json")):
        with open(path) as fh:
            for line in fh:
                add = json.loads(line).get("add")
                if add and add.get("stats"):
                    low = json.loads(add["stats"]).get("minValues", {})
                    if low.get("stage") == stage and low.get("state") == "running":
                        return True
    return False


def run_and_kill(cmd, until, timeout=600):
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + timeout
    try:
        while not until():
            assert proc.poll() is None, (
                f"crawl ended before the kill point: {proc.stderr.read().decode()[-2000:]}"
            )
            assert time.monotonic() < deadline, "kill point never reached"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def page_requests(log):
    return collections.Counter(
        f"http://{r.host}{r.path_qs}" for r in log if r.path_qs != "/robots.txt"
    )


def table_urls(spark, root, name, where="true"):
    return sorted(
        r["url"] for r in tables.read(spark, root, name).filter(where).select("url").collect()
    )


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(WebSpec(seed=11, hosts=8, pages_per_host=12, special=False)) as w:
        yield w


@pytest.fixture(scope="module")
def reference(spark, spark_cfg, web, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("reference") / "crawl")
    seeds = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    seeds.write_text("\n".join(web.seeds()) + "\n")
    cfg = config_mod.load_config(
        overrides=test_config_overrides() + [f"{k}={v}" for k, v in SETTINGS.items()]
    )
    cfg = config_mod.replace(cfg, network__resolve=web.resolve)
    web.reset_log()
    pipeline.run_crawl(spark, root, cfg, str(seeds), GENERATIONS)
    return {"root": root, "seeds": str(seeds), "requests": page_requests(web.log)}


def test_kill_in_fetch_and_in_parse_then_rerun_matches_uninterrupted(
    spark, web, reference, tmp_path
):
    root = str(tmp_path / "crawl")
    cmd = crawl_cmd(root, reference["seeds"], toml_config(tmp_path / "net.toml", web.resolve))
    total = sum(reference["requests"].values())
    web.reset_log()

    # 1. Killed in the middle of a fetch: some requests served, the crawl not finished.
    run_and_kill(cmd, lambda: sum(page_requests(web.log).values()) >= total // 2)
    after_kill = page_requests(web.log)
    # 2. Rerun, killed in the middle of a parse of a later generation.
    run_and_kill(cmd, lambda: stage_running(root, "parse") and time.sleep(1.0) is None)
    # 3. Rerun to the end.
    subprocess.run(
        cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900
    )

    for name, where in (("pages", "true"), ("texts", "true"), ("fetches", "outcome = 'ok'")):
        assert table_urls(spark, root, name, where) == table_urls(
            spark, reference["root"], name, where
        ), name
    for name in ("pages", "texts", "crawldb", "fetches"):
        keys = [r["url_key"] for r in tables.read(spark, root, name).select("url_key").collect()]
        assert len(keys) == len(set(keys)), f"{name} holds a URL twice"

    # Only URLs of the slice in flight at the kill were requested twice.
    twice = {u for u, n in page_requests(web.log).items() if n > 1}
    assert twice <= set(after_kill), "a URL fetched twice that was not in flight at the kill"
    slices = {
        (r["gen"], r["slice"])
        for r in tables.read(spark, root, "fetchlist").collect()
        if r["url"] in twice
    }
    assert len(slices) <= 1, slices
    assert set(page_requests(web.log)) == set(reference["requests"])
