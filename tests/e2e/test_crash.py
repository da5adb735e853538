"""Crash safety: SIGKILL `crawl run` (its whole process group) in the middle of a fetch and in
the middle of a parse, rerun it, and end with what an uninterrupted crawl gives, on each engine
(the embedded engine's worker processes and Spark's Python workers die with it). Pages are due
again seconds after their visit, so generation 1 revisits generation 0's pages."""

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

from crawllib import cli
from crawllib.core.urls import normalize_url
from crawllib.store import lease
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.audit import is_page_request
from tests.conftest import test_config_overrides
from tests.e2e import reading

pytestmark = pytest.mark.e2e

GENERATIONS = 2
SETTINGS = {
    "crawl.max_depth": 1,  # same-host links are followed in generation 0, others in 1
    "politeness.default_delay": 0.1,
    "storage.fetch_slices": 4,
    "storage.lease_seconds": 3,  # a killed run's writer lease expires soon
    "recrawl.default_interval_hours": 0.001,  # due again 3.6 s after a visit: gen 1 revisits
}


def toml_config(path, resolve):
    lines = ["[network]", "resolve_only = true", "[network.resolve]"]
    lines += [f'"{h}" = "{t}"' for h, t in resolve.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def crawl_cmd(root, seeds, config_file, engine):
    cmd = [
        sys.executable,
        "-m",
        "crawllib.cli",
        "run",
        root,
        "--engine",
        engine,
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


def stage_starts(root, stage):
    """How many times stage has started: the commits that record its 'running' row, as
    their Delta userMetadata names them ("gen 0 fetch done, gen 0 parse running")."""
    n = 0
    for path in glob.glob(os.path.join(root, "generations", "_delta_log", "*.json")):
        with open(path) as fh:
            for line in fh:
                note = (json.loads(line).get("commitInfo") or {}).get("userMetadata") or ""
                n += f" {stage} running" in note
    return n


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


def wait_lease_expired(root):
    """A killed run leaves its writer lease behind: the rerun may take it once it expires."""
    held = lease.LocalStore(os.path.join(root, lease.LEASE_NAME)).read()
    if held is not None:
        holder = lease.Holder.from_bytes(held[0])
        time.sleep(max(0.0, holder.expires_at - time.time()) + 0.2)


def wait_quiet(web, quiet=3.0, timeout=60.0):
    deadline = time.monotonic() + timeout
    seen = len(web.log)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        if len(web.log) == seen:
            return
        seen = len(web.log)
    raise AssertionError("requests went on after the kill")


def page_requests(log):
    return collections.Counter(
        f"http://{r.host}{r.path_qs}" for r in log if is_page_request(r.path_qs)
    )


def table_urls(root, name, where="true"):
    return sorted(r["url"] for r in reading.read(root, name, where))


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(WebSpec(seed=11, hosts=8, pages_per_host=12, special=False)) as w:
        yield w


@pytest.fixture(scope="module")
def seeds(web, tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    path.write_text("\n".join(web.seeds()) + "\n")
    return str(path)


def test_kill_in_fetch_and_in_parse_then_rerun_matches_uninterrupted(
    request, engine, web, seeds, tmp_path
):
    """The uninterrupted crawl is the test web's ground truth: an uninterrupted crawl gives
    exactly its expected pages (tests/e2e/test_crawl.py)."""
    if engine == "spark":
        request.getfixturevalue("spark")  # the rerun in this process runs on this session
    depth = SETTINGS["crawl.max_depth"]
    expected = {normalize_url(u) for u in web.expected_fetches(depth)}
    attempts = {normalize_url(u) for u in web.expected_attempts(depth)}
    root = str(tmp_path / "crawl")
    cmd = crawl_cmd(root, seeds, toml_config(tmp_path / "net.toml", web.resolve), engine)
    web.reset_log()

    # 1. Killed in the middle of a fetch: half the requests served, the crawl not finished.
    run_and_kill(cmd, lambda: sum(page_requests(web.log).values()) >= len(attempts) // 2)
    # PySpark's worker daemon has its own process group: it outlives the kill until it sees
    # the JVM gone (a fetch task's watcher, within a second), as the embedded engine's workers
    # see their parent gone. Wait until the web is quiet.
    wait_quiet(web)
    after_kill = page_requests(web.log)
    # 2. Rerun, killed in the middle of its first update.
    wait_lease_expired(root)
    updates = stage_starts(root, "update")
    run_and_kill(cmd, lambda: stage_starts(root, "update") > updates and time.sleep(1.0) is None)
    # 3. Rerun to the end, in this process (the same command line; its session is this one).
    wait_lease_expired(root)
    assert cli.main(cmd[3:]) == 0

    for name, where in (("pages", "true"), ("texts", "true"), ("fetches", "outcome = 'ok'")):
        assert set(table_urls(root, name, where)) == expected, name
    for name in ("pages", "texts", "crawldb", "fetches"):
        rows = reading.read(root, name)
        keys = [(r.get("gen"), r["url_key"]) for r in rows]
        assert len(keys) == len(set(keys)), f"{name} holds a URL twice in a generation"

    # generation 1 revisited what generation 0 fetched: one more request each, no more
    fetches = reading.read(root, "fetches", "outcome = 'ok'")
    visits = collections.Counter(r["url"] for r in fetches)
    revisited = {u for u, n in visits.items() if n == 2}
    assert revisited and max(visits.values()) == 2
    counts = reading.done_counts(root, 1, "update")
    assert counts["revisited"] == len(revisited) and counts["unchanged"] == len(revisited)

    requests = page_requests(web.log)
    assert {normalize_url(u) for u in requests} <= attempts
    # Only URLs of the slice in flight at the kill were requested more often than visited.
    twice = {normalize_url(u) for u, n in requests.items() if n > visits.get(normalize_url(u), 1)}
    assert twice <= {normalize_url(u) for u in after_kill}, "refetched a URL not in flight"
    # (by the slice of their fetches rows: URLs followed inside a task are in no fetchlist)
    slices = {
        (r["gen"], r["slice"])
        for r in reading.read(root, "fetches")
        if r["url"] in twice and r["gen"] == 0
    }
    assert len(slices) <= 1, slices
    followed = reading.count(root, "fetches", "source_url IS NOT NULL")
    assert followed > 0  # the path of URLs followed inside a fetch task was crashed too
