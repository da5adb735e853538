"""Fetch engine benchmark: one ``fetch_rows`` call over every page of the test web (no Spark).

Two runs over the same URLs (robots.txt included, fetched per host in each run):

1. throughput, politeness delay 0: pages per second and CPU milliseconds per page;
2. politeness, delay D (0.2 s), jitter 0: efficiency = ideal / wall time, where
   ideal = max over hosts of (requests to the host - 1) * D, requests = pages + 1 (robots.txt):
   the shortest time any polite crawler needs, since a host's requests must start D apart.
   It is the bound only while every host is in flight at once (hosts <= max_hosts_in_flight,
   which the benchmark ensures) and the server keeps up with hosts / D requests per second.

The test web runs in a child process by default (``--server process``): in this process
(``--server thread``, ``serve_in_thread``) it shares the GIL with the engine, and its page
rendering then caps both figures. Other load on the machine lowers them too (see the printed
load average).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from crawllib.config import Config, load_config, replace
from crawllib.core.urls import url_key
from crawllib.engine import fetch_rows
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.audit import write_log
from crawllib.testweb.site import Site, regular_host_name

IDEAL_DEFINITION = (
    "ideal = max over hosts of (requests_to_host - 1) * delay, requests = pages + robots.txt"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=200, help="regular hosts (default 200)")
    parser.add_argument("--pages", type=int, default=50, help="pages per host (default 50)")
    parser.add_argument("--delay", type=float, default=0.2, help="delay of the politeness run")
    parser.add_argument(
        "--server", choices=("process", "thread"), default="process", help="where the web runs"
    )


def main(args: argparse.Namespace) -> None:
    bench(hosts=args.hosts, pages=args.pages, delay=args.delay, server=args.server, out=print)


def bench(
    hosts: int = 200,
    pages: int = 50,
    delay: float = 0.2,
    server: str = "process",
    out: Any = None,
) -> dict[str, float]:
    """Run both runs; return their figures (and print them through ``out`` if given)."""
    say = out or (lambda *a: None)
    spec = WebSpec(hosts=hosts, pages_per_host=pages, special=False)
    with web_server(spec, server) as (resolve, server_pid):
        rows = page_rows(hosts, pages)
        base = engine_config(load_config(), resolve, hosts)
        say(
            f"# {len(rows)} pages on {hosts} hosts; test web in a {server}; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        )
        fast = run_engine(rows, replace(base, politeness__default_delay=0.0), server_pid)
        pages_per_s = fast["pages"] / fast["wall"]
        say(
            f"throughput (delay 0): {fast['pages']} pages in {fast['wall']:.2f} s = "
            f"{pages_per_s:.0f} pages/s; CPU per page: engine {fast['engine_ms']:.3f} ms, "
            f"test web {fast['server_ms']:.3f} ms; outcomes {fast['outcomes']}"
        )
        polite = run_engine(rows, replace(base, politeness__default_delay=delay), server_pid)
        ideal = max(Counter(r["host"] for r in rows).values()) * delay  # pages + 1 - 1
        efficiency = ideal / polite["wall"]
        say(f"politeness (delay {delay} s, jitter 0): {IDEAL_DEFINITION}")
        say(
            f"  ideal {ideal:.2f} s, wall {polite['wall']:.2f} s, median response "
            f"{polite['median_ms']:.0f} ms, outcomes {polite['outcomes']}"
        )
        say(f"efficiency={efficiency:.3f} pages_per_s={pages_per_s:.0f}")
    return {
        "efficiency": efficiency,
        "pages_per_s": pages_per_s,
        "engine_cpu_ms_per_page": fast["engine_ms"],
        "server_cpu_ms_per_page": fast["server_ms"],
        "ideal_s": ideal,
        "polite_wall_s": polite["wall"],
    }


def page_urls(hosts: int, pages: int) -> list[str]:
    """Every page of the regular test web: each host's home page and its pages 0..pages-1."""
    names = [regular_host_name(i) for i in range(hosts)]
    return [f"http://{h}/" for h in names] + [
        f"http://{h}/p/{n}.html" for h in names for n in range(pages)
    ]


def page_rows(hosts: int, pages: int) -> list[dict]:
    """The engine's input rows for :func:`page_urls` (depth 1 everywhere)."""
    return [
        {"url": u, "url_key": url_key(u), "host": u.split("/")[2], "depth": 1}
        for u in page_urls(hosts, pages)
    ]


def engine_config(cfg: Config, resolve: dict[str, str], hosts: int) -> Config:
    """cfg reaching only the test web, no jitter, every host in flight at once."""
    return replace(
        cfg,
        network__resolve=resolve,
        network__resolve_only=True,
        politeness__jitter=0.0,
        politeness__max_hosts_in_flight=max(hosts, 256),
    )


def run_engine(rows: list[dict], cfg: Config, server_pid: int | None) -> dict[str, Any]:
    """One ``fetch_rows`` call: pages, wall, engine_ms / server_ms (CPU per page), outcomes."""
    outcomes: Counter[str] = Counter()
    fetch_ms: list[int] = []
    server0 = _cpu(server_pid) if server_pid else 0.0
    cpu0, consumer0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    engine_cpu, engine, seen = 0.0, None, 0
    for record in fetch_rows(rows, cfg):
        seen += 1
        if record["record"] == "fetch":
            outcomes[record["outcome"]] += 1
            fetch_ms.append(record["fetch_ms"])
        if server_pid is None and seen % 100 == 1:  # the thread's entry goes when it ends
            engine = engine or _engine_thread()
            engine_cpu = max(engine_cpu, _cpu(None, engine) if engine else 0.0)
    wall = time.perf_counter() - t0
    process_cpu = time.process_time() - cpu0
    if server_pid:
        server_cpu = _cpu(server_pid) - server0
        engine_cpu = process_cpu
    else:
        engine_cpu += time.thread_time() - consumer0
        server_cpu = process_cpu - engine_cpu
    pages = sum(outcomes.values())
    return {
        "pages": pages,
        "wall": wall,
        "engine_ms": engine_cpu / pages * 1e3,
        "server_ms": server_cpu / pages * 1e3,
        "median_ms": statistics.median(fetch_ms),
        "outcomes": dict(outcomes),
    }


def _engine_thread() -> int | None:
    for thread in threading.enumerate():
        if thread.name == "crawllib-fetch":
            return thread.native_id
    return None


def _cpu(pid: int | None, tid: int | None = None) -> float:
    """CPU seconds used so far by a process or a thread of this one (Linux /proc; else 0)."""
    path = f"/proc/{pid}/stat" if pid else f"/proc/self/task/{tid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def web_server(
    spec: WebSpec, server: str, log: str = ""
) -> Iterator[tuple[dict[str, str], int | None]]:
    """The test web's resolve map and its process id (None when it runs in this process).
    With ``log``, the server's request log is written to that file once the server stopped
    (:func:`crawllib.testweb.audit.read_log` reads it)."""
    if server == "thread":
        with serve_in_thread(spec) as web:
            try:
                yield web.resolve, None
            finally:
                if log:
                    write_log(log, web.log)
        return
    # the whole spec (popular pages, cross-host links, seed...), not only the usual options
    cmd = [sys.executable, "-m", "crawllib.testweb", "--port", "0"]
    cmd += ["--spec", json.dumps(dataclasses.asdict(spec))] + (["--log", log] if log else [])
    # The test web stands for remote servers with CPUs of their own: ahead of the crawler in
    # the scheduler, so the crawler's load does not stall its request log (`nice` runs it as
    # is where a higher priority is not allowed; it execs, so the pid is the server's).
    if shutil.which("nice"):
        cmd = ["nice", "-n", "-10", *cmd]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = None
        for line in child.stdout:
            found = re.search(r"test web on http://127\.0\.0\.1:(\d+)", line)
            port = int(found.group(1)) if found else port
            if line.startswith("# Ctrl-C"):
                break
        if port is None:
            raise RuntimeError("the test web process did not start")
        yield {h: f"127.0.0.1:{port}" for h in Site(spec).hosts}, child.pid
    finally:
        child.terminate()
        child.wait(10)


def bench_gap_error(
    hosts: tuple[int, ...] = (20, 60), pages: int = 40, delay: float = 0.2, work: str = "."
) -> dict[tuple[int, bool], dict[str, float]]:
    """Per-host gap error of the bare engine with and without extraction in its task: the same
    pages at ``delay``, for each number of hosts (a load one extraction thread keeps up with,
    and one it does not), each run on a fresh test web whose request log is the measure.
    Error = the gap between consecutive request starts to one host, minus the delay the host
    should get (robots.txt to the first page included). Keys: (hosts, extraction on); values:
    gaps, mean_ms, p99_ms, max_ms (all errors, ms), the run's wall seconds and its pages per
    second."""
    from crawllib.testweb.audit import read_log

    out = {}
    for n, extract in itertools.product(hosts, (False, True)):
        spec = WebSpec(hosts=n, pages_per_host=pages, special=False)
        rows = page_rows(n, pages)
        log = os.path.join(work, f"gaps-{n}-extract-{extract}.jsonl")
        with web_server(spec, "process", log) as (resolve, server_pid):
            cfg = replace(
                engine_config(load_config(), resolve, n),
                politeness__default_delay=delay,
                fetch__extract=extract,
                fetch__follow=False,
            )
            run = run_engine(rows, cfg, server_pid)
        starts: dict[str, list[float]] = {}
        for r in read_log(log):
            starts.setdefault(r.host, []).append(r.start)
        errors = sorted(
            (b - a - delay) * 1e3
            for host_starts in starts.values()
            for a, b in itertools.pairwise(sorted(host_starts))
        )
        out[(n, extract)] = {
            "gaps": len(errors),
            "mean_ms": statistics.fmean(errors),
            "p99_ms": errors[int(0.99 * (len(errors) - 1))],
            "max_ms": errors[-1],
            "wall_s": run["wall"],
            "pages_per_s": run["pages"] / run["wall"],
        }
    return out
