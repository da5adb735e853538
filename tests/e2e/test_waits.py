"""`crawl run` ends when nothing is due, and retries are due by time: a crawl with a host that
answers 429 + Retry-After 3600 and a URL that always fails runs no generation that plans
nothing, ends with one line naming both waits, and a later run whose clock is past them
fetches them again."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import shutil
import time

import pytest

from crawllib.config import replace
from crawllib.core.vocab import Stage
from crawllib.runs import runner
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb import WebSpec, serve_in_thread
from tests.e2e import reading

pytestmark = pytest.mark.e2e

SPEC = WebSpec(
    seed=5, hosts=2, pages_per_host=4, special=True, special_hosts=("throttled.org", "err500.com")
)
THROTTLED = ("throttled.org", "/")
BROKEN = ("err500.com", "/broken.html")


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_crawl_ends_when_nothing_is_due_and_takes_the_waits_once_due(
    spark_cfg, template_root, tmp_path
):
    with serve_in_thread(SPEC) as web:
        root = str(tmp_path / "crawl")
        shutil.copytree(template_root, root)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        cfg = replace(
            spark_cfg,
            network__resolve=web.resolve,
            crawl__max_depth=1,
            politeness__default_delay=0.05,
            fetch__retry_backoff_seconds=600.0,
        )
        lines: list[str] = []
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            ran = runner.run_crawl(db, cfg, str(seeds), on_idle=lines.append)
            first = collections.Counter((r.host, r.path_qs) for r in web.log)

            # later, by the crawl's clock: past the Retry-After and the retry's backoff
            later = replace(cfg, crawl__now=iso(time.time() + 7200))
            again = runner.run_crawl(db, later, None, on_idle=lines.append)
        second = collections.Counter((r.host, r.path_qs) for r in web.log)

    assert ran and again
    runs = reading.latest_runs(root)
    planned = {g: r.counts["planned"] for (g, s), r in runs.items() if s == Stage.PLAN}
    assert sorted(planned) == sorted(ran + again)
    assert all(n > 0 for n in planned.values())  # no generation planned nothing

    assert first[THROTTLED] == 1 and first[BROKEN] == 1  # asked once, then waited
    assert "wait for a Retry-After" in lines[0] and "wait for a retry" in lines[0]
    assert "the next is due" in lines[0]
    assert second[THROTTLED] == 2 and second[BROKEN] == 2  # due again by the later clock
