"""A fetch whose parent process dies stops: the engine runs in a child process (as a PySpark
worker runs below its executor's JVM), fetching from a server on 127.0.0.1; its parent, a
shell, is killed with SIGKILL mid-slice. With the watcher the child's requests stop within
about a second and it exits without writing its output; without it (the control) the orphan
goes on fetching."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crawllib.engine.watch import CHECK_SECONDS, Watcher, ancestors
from tests.unit.test_fetch_support import LocalWeb

HOSTS = ("one.net", "two.net")
PAGES = 80  # per host: 8 s at the delay, far longer than the test waits
DELAY = 0.1

CHILD = """
import json, sys
from crawllib.config import load_config, replace
from crawllib.engine import fetch_rows
from crawllib.engine.watch import Watcher
from crawllib.core.urls import url_key

spec = json.loads(sys.argv[1])
cfg = replace(
    load_config(),
    network__resolve=spec["resolve"],
    network__resolve_only=True,
    politeness__default_delay=spec["delay"],
    politeness__jitter=0.0,
    sitemaps__enabled=False,
    fetch__soft404_probe=False,
)
rows = [
    {"url": u, "url_key": url_key(u), "host": u.split("/")[2], "depth": 0} for u in spec["urls"]
]
watcher = Watcher() if spec["watch"] else None
if watcher is not None:
    watcher.__enter__()
records = list(fetch_rows(rows, cfg, watcher=watcher))
with open(spec["out"], "w") as fh:  # what the task would hand back: only once complete
    fh.write(f"{len(records)} records\\n")
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited child waiting for its reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("watch", [True, False], ids=["watched", "control"])
def test_a_fetch_stops_within_a_second_once_its_parent_is_killed(watch, tmp_path):
    out = tmp_path / "out.txt"
    with LocalWeb() as server:
        spec = {
            "resolve": server.resolve(*HOSTS),
            "delay": DELAY,
            "urls": [f"http://{h}/p{i}" for h in HOSTS for i in range(PAGES)],
            "watch": watch,
            "out": str(out),
        }
        child = [sys.executable, "-c", CHILD, json.dumps(spec)]
        # the parent is a shell, not Python: like the JVM above a PySpark worker
        script = 'exec 3>&1; "$@" & echo $! >&3; wait'
        parent = subprocess.Popen(
            ["/bin/sh", "-c", script, "sh", *child],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while len([h for h in server.hits if h.path_qs != "/robots.txt"]) < 10:
            assert time.monotonic() < deadline, "the child made no requests"
            time.sleep(0.01)
        os.kill(parent.pid, signal.SIGKILL)
        killed = time.monotonic()
        parent.wait()
        while alive(pid) and time.monotonic() - killed < 3:
            time.sleep(0.01)
        gone = time.monotonic() - killed
        time.sleep(1.5)  # long enough to see an orphan go on
        hits = list(server.hits)
    after = sorted(round(h.start - killed, 3) for h in hits if h.start > killed)
    pages = [h for h in hits if h.path_qs != "/robots.txt"]
    assert len(pages) < len(spec["urls"]), "the slice ended before the kill"
    if watch:
        assert gone < 1.0, gone
        assert all(t < 1.0 for t in after), after  # about a second: CHECK_SECONDS and a request
        assert not out.exists(), "the orphan handed its output back"
    else:
        # the control: without a watcher the orphan goes on fetching
        assert alive(pid) and any(t > 1.5 for t in after), after
        os.kill(pid, signal.SIGKILL)


def test_the_watched_ancestors_end_at_the_first_process_that_is_not_this_python():
    chain = ancestors()
    assert chain, "no /proc here?"
    assert chain[0][0] == os.getppid()
    exe = os.path.realpath(f"/proc/{os.getpid()}/exe")
    assert all(os.path.realpath(f"/proc/{pid}/exe") == exe for pid, _ in chain[:-1])


def test_a_check_costs_microseconds():
    """What the watcher costs: a check every CHECK_SECONDS of a few /proc reads."""
    watcher = Watcher()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        assert not watcher.jvm_gone()
    per_check = (time.perf_counter() - t0) / n
    print(f"\nwatcher: {per_check * 1e6:.1f} us a check, {len(watcher.watched)} processes")
    assert per_check / CHECK_SECONDS < 0.01  # under 1% of one core, whatever the load
