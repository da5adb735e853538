"""``crawl demo``: crawl the built-in test web on 127.0.0.1 for a few generations, then show
what landed in the tables and the commands to try next.

The demo empties its root first, so it only ever empties a folder it made: one holding its
marker file (MARKER), or the seed file demos of older crawllibs wrote; a new or empty folder
becomes one. Any other folder (``--root ~``) is refused before anything is written to it."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time

from crawllib import config as config_mod
from crawllib.config import Config
from crawllib.core.errors import BadRoot
from crawllib.core.output import write_table
from crawllib.runs import runner
from crawllib.store.lease import LEASE_NAME

log = logging.getLogger(__name__)

SUMMARY_SQL = """
SELECT f.gen,
       count(*)                                                   AS planned,
       count_if(f.outcome = 'ok')                                 AS fetched,
       count_if(f.outcome IN ('http_error', 'error'))             AS failed,
       count_if(f.outcome = 'robots_denied')                      AS denied,
       count_if(f.outcome = 'blocked')                            AS blocked,
       count_if(f.outcome = 'deferred')                           AS deferred,
       coalesce(max(d.duplicates), 0)                             AS duplicates,
       round(count(*) / max(g.seconds), 1)                        AS urls_per_s
FROM fetches f
LEFT JOIN (SELECT gen, count_if(duplicate_of IS NOT NULL) AS duplicates FROM texts GROUP BY gen) d
       ON d.gen = f.gen
LEFT JOIN (SELECT gen, max(seconds) AS seconds FROM generations
           WHERE stage = 'fetch' AND state = 'done' GROUP BY gen) g
       ON g.gen = f.gen
GROUP BY f.gen ORDER BY f.gen
"""

MARKER = ".crawl-demo"  # in a folder `crawl demo` made, and may empty again
SEEDS_LINE = "# seeds of the built-in test web"  # the first line of the seeds a demo wrote

EXAMPLE_SQL = """
SELECT host, count(*) AS pages, round(avg(text_chars)) AS avg_chars,
       count_if(duplicate_of IS NOT NULL) AS duplicates
FROM texts GROUP BY host ORDER BY pages DESC LIMIT 8
"""


def demo_config(cfg: Config, resolve: dict[str, str]) -> Config:
    """The user's config with what the demo needs: the test web's resolve map, quick politeness."""
    return config_mod.replace(
        cfg,
        network__resolve=resolve,
        network__resolve_only=True,
        spark__log_level="ERROR",
        politeness__default_delay=min(cfg.politeness.default_delay, 0.2),
        fetch__total_timeout=min(cfg.fetch.total_timeout, 10.0),
        crawl__max_depth=min(cfg.crawl.max_depth, 2),
        generate__max_per_host=min(cfg.generate.max_per_host, 25),
    )


def check_demo_root(root: str) -> None:
    """BadRoot unless `crawl demo` may empty ``root``: it does not exist, holds nothing (but a
    writer lease), or a demo made it (module text)."""
    if not os.path.isdir(root):
        return  # a file is refused by the CLI's own check of the root
    entries = _entries(root)
    if not entries or MARKER in entries or _old_demo(root):
        return
    raise BadRoot(
        f"{root} is not a folder `crawl demo` made (no {MARKER} in it) and is not empty "
        f"({len(entries)} entries): the demo empties its --root, so it never takes a folder it "
        "did not make; choose a new or empty folder"
    )


def _entries(root: str) -> list[str]:
    return [e for e in os.listdir(root) if not e.startswith(LEASE_NAME)]


def _old_demo(root: str) -> bool:
    """A demo root of an older crawllib: the seed file it wrote, and crawl tables."""
    try:
        with open(os.path.join(root, "seeds.txt"), encoding="utf-8") as fh:
            first = fh.readline().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return first == SEEDS_LINE and os.path.isdir(os.path.join(root, "crawldb"))


def run_demo(
    cfg: Config,
    root: str,
    generations: int = 3,
    hosts: int = 12,
    fresh: bool = True,
    engine: str = "auto",
) -> int:
    from crawllib.runs.engines import open_db
    from crawllib.sql import duckdb_engine
    from crawllib.testweb import WebSpec, serve_in_thread

    check_demo_root(root)
    if fresh and os.path.isdir(root):
        for entry in _entries(root):  # all but the writer lease this run holds
            path = os.path.join(root, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, MARKER), "w", encoding="utf-8") as fh:
        fh.write("a folder `crawl demo` made: it empties it on its next run\n")
    spec = WebSpec(seed=7, hosts=hosts, pages_per_host=40, special=True)
    started = time.monotonic()
    with serve_in_thread(spec) as web:
        print(
            f"test web: {len(web.hosts)} hosts on 127.0.0.1:{web.port} (mapped by network.resolve)"
        )
        seeds = os.path.join(root, "seeds.txt")
        with open(seeds, "w", encoding="utf-8") as fh:
            fh.write(SEEDS_LINE + "\n" + "\n".join(web.seeds()) + "\n")
        dcfg = demo_config(cfg, web.resolve)
        db = open_db(dcfg, root, engine)
        try:
            ran = runner.run_crawl(db, dcfg, seeds, generations)
        finally:
            db.close()
        requests = len(web.log)
    print(
        f"\ncrawled generations {ran} in {time.monotonic() - started:.0f}s ({db.engine} engine); "
        f"{requests} HTTP requests served\n"
    )
    for title, sql in (
        ("per generation", SUMMARY_SQL),
        ("example query: top hosts by pages", EXAMPLE_SQL),
    ):
        print(title + ":")
        columns, rows = duckdb_engine.run_query(root, sql, dcfg)
        write_table(columns, list(rows), sys.stdout)
        print()
    print("next, try:")
    print(f"  .venv/bin/crawl status {root}")
    print(
        f'  .venv/bin/crawl sql {root} "SELECT status, count(*) AS urls FROM crawldb GROUP BY status"'
    )
    print(f'  .venv/bin/crawl sql {root} "SELECT url, title FROM texts LIMIT 5" --format json')
    return 0
