"""One writer per crawl root, and tables that cannot silently go back in time: two `crawl
generation` at once, a killed writer's lease, a lost Delta log file."""

from __future__ import annotations

import collections
import contextlib
import glob
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from crawllib import cli
from crawllib.stages.seeding import seed
from crawllib.store import lease, tables
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.audit import is_page_request
from tests.conftest import test_config_overrides
from tests.e2e import reading

pytestmark = pytest.mark.e2e

DELAY = 0.1


@pytest.fixture(scope="module")
def web():
    with serve_in_thread(WebSpec(seed=5, hosts=4, pages_per_host=10, special=False)) as w:
        yield w


def settings(web, tmp_path, lease_seconds=300.0) -> list[str]:
    """CLI arguments of a test crawl of ``web``: its resolve map in a TOML file, as an
    operator would write it. The commands run on the embedded engine (``--engine auto`` on a
    local spark.master)."""
    config = tmp_path / "net.toml"
    lines = ["[network]", "resolve_only = true", "[network.resolve]"]
    lines += [f'"{h}" = "{t}"' for h, t in web.resolve.items()]
    config.write_text("\n".join(lines) + "\n")
    sets = [
        *test_config_overrides(),
        "crawl.max_depth=1",
        f"politeness.default_delay={DELAY}",
        f"storage.lease_seconds={lease_seconds}",
    ]
    return ["--config", str(config), *[a for s in sets for a in ("--set", s)]]


def command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "crawllib.cli", *argv]


def seeded_root(spark_cfg, web, root, tmp_path) -> str:
    """``root`` seeded; its writer lease released (the test's `crawl` processes take it)."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(web.seeds()) + "\n")
    with (
        lease.hold(root, "pytest", spark_cfg),
        contextlib.closing(EmbeddedDb(root, spark_cfg)) as db,
    ):
        seed(db, str(seeds), spark_cfg, 0)
    return root


@pytest.fixture(scope="module")
def alone(spark_cfg, web, template_root, tmp_path_factory) -> str:
    """One generation run alone, by `crawl generation` in this process: what two generations
    started at once must give, and the crawl the lost-log test goes on from."""
    tmp = tmp_path_factory.mktemp("alone")
    root = str(tmp / "crawl")
    shutil.copytree(template_root, root)
    seeded_root(spark_cfg, web, root, tmp)
    assert cli.main(["generation", root, *settings(web, tmp)]) == 0
    return root


def page_requests(web) -> collections.Counter:
    return collections.Counter(
        f"{r.host}{r.path_qs}" for r in web.log if is_page_request(r.path_qs)
    )


def rows(root, name, *columns):
    return sorted(tuple(r[c] for c in columns) for r in reading.read(root, name))


def test_two_generations_at_once_one_runs_the_other_refuses(
    spark_cfg, web, alone, unheld_root, tmp_path
):
    root = seeded_root(spark_cfg, web, unheld_root, tmp_path)
    args = settings(web, tmp_path)
    web.reset_log()
    procs = [
        subprocess.Popen(
            command("generation", root, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    results = [
        (p.wait(timeout=900), p.stdout.read().decode(), p.stderr.read().decode()) for p in procs
    ]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert "is being written by `crawl generation` (pid" in refused
    assert refused.strip().count("\n") == 0  # one line
    # nothing fetched twice, no row twice
    assert max(page_requests(web).values()) == 1
    for name in ("fetches", "pages", "texts", "crawldb", "fetchlist"):
        keys = [k for (k,) in rows(root, name, "url_key")]
        assert keys and len(keys) == len(set(keys)), f"{name} holds a URL twice"

    # the same as one generation run alone
    for name, columns in (
        ("fetches", ("url", "outcome", "http_status")),
        ("pages", ("url", "content_hash")),
        ("crawldb", ("url", "status", "attempts")),
        ("frontier", ("gen", "url", "depth")),
    ):
        assert rows(root, name, *columns) == rows(alone, name, *columns), name


def test_a_killed_writers_lease_is_taken_over_at_once_on_its_machine(
    spark_cfg, web, unheld_root, tmp_path, capsys, caplog
):
    """issue 37: after a kill -9 every rerun exited 2 naming the dead pid until the lease
    expired; its process is gone, on this machine: taken over at once."""
    root = seeded_root(spark_cfg, web, unheld_root, tmp_path)
    args = settings(web, tmp_path, lease_seconds=4.0)
    web.reset_log()
    proc = subprocess.Popen(
        command("generation", root, *args),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while not page_requests(web):  # killed in the middle of its fetch
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    holder = lease.Holder.from_bytes(
        lease.LocalStore(os.path.join(root, lease.LEASE_NAME)).read().data
    )
    assert holder.pid == proc.pid and holder.released_at is None
    capsys.readouterr()

    # at once, long before it expires: its process is gone, and the generation finishes
    with caplog.at_level(logging.WARNING, logger="crawllib.store.lease"):
        assert cli.main(["generation", root, *args]) == 0
    assert "took over the writer lease of `crawl generation`" in caplog.text
    assert f"its process (pid {proc.pid} on " in caplog.text
    states = reading.stage_states(root)
    assert all(states[(0, s)] == "done" for s in ("plan", "fetch", "update"))


def log_files(root):
    return {
        name: sorted(os.listdir(os.path.join(root, name, "_delta_log"))) for name in tables.TABLES
    }


def test_a_lost_log_file_stops_the_next_generation_before_it_writes(alone, web, tmp_path, capsys):
    root = str(tmp_path / "crawl")
    shutil.copytree(alone, root)  # generation 0 done
    args = settings(web, tmp_path)
    newest = max(glob.glob(os.path.join(root, "fetches", "_delta_log", "*.json")))
    lost = int(os.path.basename(newest).split(".")[0])
    folder, name = os.path.split(newest)
    # the log file, Delta's checksum of that version and the file system's checksum of the file
    for path in (newest, newest.replace(".json", ".crc"), os.path.join(folder, f".{name}.crc")):
        if os.path.exists(path):
            os.remove(path)
    before = log_files(root)
    capsys.readouterr()

    assert cli.main(["generation", root, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crawl generation: table fetches is at version ")
    assert f"but gen 0 update recorded version {lost}" in err
    assert "crawl accept-state" in err and "\n" not in err
    assert log_files(root) == before  # nothing written, not even a 'running' row

    # the operator accepts the tables as they are; the crawl goes on
    assert cli.main(["accept-state", root, *args]) == 0
    accepted = capsys.readouterr().out
    assert f"fetches {lost - 1}" in accepted
    assert cli.main(["generation", root, *args]) == 0
    states = reading.stage_states(root)
    assert states[(1, "update")] == "done"
