"""A fetch task's journal (crawllib.store.journal), with real processes and a server on 127.0.0.1.

Each attempt of the task runs ``crawllib.engine.task.task_records`` in a process of its own, as
a PySpark worker does. A first attempt is lost with its parent (a shell killed with SIGKILL,
as an executor's JVM); the next attempt goes on from the journal: every URL gets one fetch
record, a URL is requested again only if the lost attempt requested it in its last journal
interval, and no host sees two requests closer than its delay. Two attempts alive at once (a
stage's new attempt beside the old one's task) take turns, and an attempt after a finished one
fetches nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web

from crawllib.store.journal import JournalSpec
from tests.unit.test_fetch_support import SLACK, LocalWeb

HOSTS = ("one.net", "two.net")
DELAY = 0.1
SECONDS = 0.5  # the journal's interval: what a lost attempt may leave to fetch again
REPO = Path(__file__).resolve().parents[2]

ATTEMPT = """
import json, sys
from crawllib.config import load_config, replace
from crawllib.engine.task import task_records
from crawllib.store.journal import JournalSpec
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
    crawl__max_depth=spec["max_depth"],
)
rows = [
    {"url": u, "url_key": url_key(u), "host": u.split("/")[2], "depth": 0} for u in spec["urls"]
]
journal = JournalSpec(spec["journal"], spec["seconds"])
out = [
    {k: r.get(k) for k in ("record", "url", "outcome", "refetched")}
    for r in task_records(
        rows, cfg, follow=spec["follow"], attempt=spec["attempt"], journal=journal
    )
]
with open(spec["out"], "w") as fh:  # what the task hands back: only once complete
    json.dump(out, fh)
"""


def attempt_cmd(
    server: LocalWeb,
    urls: list[str],
    folder: Path,
    attempt: int,
    out: Path,
    follow: int = 0,
):
    """An attempt of the task that fetches ``urls`` and ``follow`` more URLs of each host
    from their links."""
    spec = {
        "follow": [{"slot": h, "room": follow, "known": [], "trapped": []} for h in HOSTS],
        "max_depth": 1000 if follow else 0,
        "resolve": server.resolve(*HOSTS),
        "delay": DELAY,
        "urls": urls,
        "journal": str(folder),
        "seconds": SECONDS,
        "attempt": attempt,
        "out": str(out),
    }
    return [sys.executable, "-c", ATTEMPT, json.dumps(spec)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def page_hits(server: LocalWeb) -> list:
    return sorted((h for h in server.hits if h.path_qs != "/robots.txt"), key=lambda h: h.start)


def wait_for_pages(server: LocalWeb, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(page_hits(server)) < n:
        assert time.monotonic() < deadline, "the attempt made no requests"
        time.sleep(0.01)


def assert_handed_over(server: LocalWeb, resumed: float) -> None:
    """Every host's requests before ``resumed`` (the retry's start) are the lost attempt's, the
    rest the retry's: none of the lost attempt's after that, and the retry's first comes at
    least the delay after the lost attempt's last (its own spacing: tests/unit/test_fetch_*)."""
    for host in HOSTS:
        hits = server.hits_of(host)
        lost = [h for h in hits if h.start < resumed]
        retry = [h for h in hits if h.start >= resumed]
        assert lost and retry, host
        assert all(h.end is not None and h.end < resumed for h in lost), host
        assert retry[0].start - lost[-1].start >= DELAY - SLACK, host


def fetch_records(out: Path) -> list[dict]:
    records = [r for r in json.loads(out.read_text()) if r["record"] == "fetch"]
    assert records
    return records


def page(*links: str) -> web.Response:
    anchors = "".join(f'<p>See <a href="{href}">{href}</a> for more.</p>' for href in links)
    body = f"<html><body><h1>A page</h1><p>{'Words of text. ' * 40}</p>{anchors}</body></html>"
    return web.Response(text=body, content_type="text/html")


def chain(pages: int):
    """A host's pages /p0 .. /p<pages - 1>, each linking to the next two."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if not request.path.startswith("/p"):
            return web.Response(status=404, text="none")
        i = int(request.path[2:])
        return page(*(f"/p{j}" for j in (i + 1, i + 2) if j < pages))

    return handler


@pytest.mark.parametrize("followed", [False, True], ids=["listed", "followed"])
def test_a_retry_goes_on_from_the_journal_of_a_lost_attempt(followed, tmp_path):
    """``listed``: every URL is in the task's rows; ``followed``: only each host's first page,
    the rest found by following links in the task (the retry replays the journal's links)."""
    pages = 40  # per host: 4 s at the delay
    everything = [f"http://{h}/p{i}" for h in HOSTS for i in range(pages)]
    urls = [u for u in everything if u.endswith("/p0")] if followed else everything
    follow = pages - 1 if followed else 0
    folder = tmp_path / "journal"
    with LocalWeb() as server:
        for host in HOSTS:
            server.fallback(host, chain(pages))
        lost = attempt_cmd(server, urls, folder, 0, tmp_path / "lost.json", follow)
        # the parent is a shell, not Python: like the JVM above a PySpark worker
        script = 'exec 3>&1; "$@" & echo $! >&3; wait'
        parent = subprocess.Popen(
            ["/bin/sh", "-c", script, "sh", *lost], stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        wait_for_pages(server, 30)  # past a few journal writes
        os.kill(parent.pid, signal.SIGKILL)
        killed = time.monotonic()
        parent.wait()
        while alive(pid) and time.monotonic() - killed < 3:
            time.sleep(0.01)
        assert not alive(pid), "the lost attempt went on"
        before = {(h.host, h.path_qs): h.start for h in page_hits(server)}
        assert len(before) < len(everything), "the lost attempt finished before the kill"
        retry = attempt_cmd(server, urls, folder, 1, tmp_path / "retry.json", follow)
        resumed = time.monotonic()
        subprocess.run(retry, check=True, cwd=REPO, timeout=120)
        hits = page_hits(server)
    assert not (tmp_path / "lost.json").exists(), "the lost attempt handed its output back"
    records = fetch_records(tmp_path / "retry.json")
    # the task's output is whole: one fetch record per URL, as without the loss
    assert sorted(r["url"] for r in records) == sorted(everything)
    assert {r["outcome"] for r in records} == {"ok"}
    # a URL requested twice was first requested in the lost attempt's last journal interval
    # (and the time its loss took to notice); none three times
    counts = Counter((h.host, h.path_qs) for h in hits)
    assert max(counts.values()) <= 2
    twice = [key for key, n in counts.items() if n == 2]
    late = [(key, round(killed - before[key], 2)) for key in twice]
    assert all(ago <= SECONDS + 1.0 for _, ago in late), late
    print(f"\n{len(before)} pages before the loss, {len(twice)} again after it: {late}")
    assert len(twice) < len(before) // 2, (len(twice), len(before))
    # the repeats the journal knows of are named; none that is not one
    refetched = {r["url"].split("/", 3)[3] for r in records if r["refetched"]}
    assert refetched <= {path.lstrip("/") for _, path in twice}
    print(f"{len(refetched)} of them named refetched")
    assert_handed_over(server, resumed)


def test_two_live_attempts_take_turns_and_a_finished_task_fetches_nothing(tmp_path):
    urls = [f"http://{h}/p{i}" for h in HOSTS for i in range(15)]  # 1.5 s at the delay
    folder = tmp_path / "journal"
    with LocalWeb() as server:
        first = subprocess.Popen(
            attempt_cmd(server, urls, folder, 0, tmp_path / "first.json"), cwd=REPO
        )
        wait_for_pages(server, 3)
        # a second attempt of the same task starts while the first fetches
        second = subprocess.run(
            attempt_cmd(server, urls, folder, 0, tmp_path / "second.json"), cwd=REPO, timeout=120
        )
        assert first.wait(60) == 0 and second.returncode == 0
        requests = len(server.hits)
        # the partition computed again once the task is done (a persisted one lost, say)
        third = attempt_cmd(server, urls, folder, 0, tmp_path / "third.json")
        subprocess.run(third, check=True, cwd=REPO, timeout=120)
        assert len(server.hits) == requests, "a finished task fetched again"
        hits = page_hits(server)
    counts = Counter((h.host, h.path_qs) for h in hits)
    assert sorted(counts.values()) == [1] * len(urls), "a page was fetched twice"
    assert len(server.hits) == len(urls) + len(HOSTS), "the second attempt fetched"  # robots
    outputs = [fetch_records(tmp_path / f"{n}.json") for n in ("first", "second", "third")]
    assert outputs[0] == outputs[1] == outputs[2]
    assert not any(r["refetched"] for r in outputs[0])


def test_a_journal_spec_names_one_folder_per_task():
    spec = JournalSpec("/crawl/_fetch_journal/gen=3/slice=1", 10.0)
    assert spec.task_folder(4, 2) == "/crawl/_fetch_journal/gen=3/slice=1/parts=4/part=2"
