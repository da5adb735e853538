"""Shared servers: hosts on a few loopback addresses, some of them slow, fetched with
politeness.key = ip in one engine call (no Spark), the adaptive delay against a fixed one.

Every host's robots.txt, home page and pages 0..pages-1, each URL on the slot of its host's
address (as plan gives it). The slow addresses answer everything after ``slow`` seconds.
Reported per run: wall time, outcomes, and per address (from the test web's request log):
requests, median gap between two request starts, gap errors (gaps shorter than the address's
rule can be: max(min_address_delay, default_delay / its hosts), less 10 ms), host gap errors
(gaps between two requests to one host shorter than default_delay, less 10 ms), when the gap
errors happened (seconds into the run: the same instant on every address means the test web's
thread stalled, not the engine), and busy, the share of the run the server spent answering us. No slice end cuts the call short
(fetch.slice_grace_seconds is large): the wall time is the whole crawl's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter, defaultdict
from typing import Any

from crawllib.config import load_config, replace
from crawllib.engine import fetch_rows
from crawllib.testweb import WebSpec, serve_in_thread
from crawllib.testweb.web import LogRecord

from .fetch import engine_config, page_rows

TOLERANCE = 0.01  # seconds: the server's clock reads a start a little after the engine's


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=300, help="regular hosts (default 300)")
    parser.add_argument("--addresses", type=int, default=10, help="server addresses (10)")
    parser.add_argument("--slow-addresses", type=int, default=3, help="slow ones among them (3)")
    parser.add_argument("--pages", type=int, default=1, help="pages per host besides / (1)")
    parser.add_argument("--slow", type=float, default=0.1, help="a slow answer's seconds (0.1)")
    parser.add_argument("--delay", type=float, default=1.0, help="default_delay (1.0)")
    parser.add_argument("--min-address-delay", type=float, default=0.05, help="(0.05)")


def main(args: argparse.Namespace) -> None:
    bench(
        hosts=args.hosts,
        addresses=args.addresses,
        slow_addresses=args.slow_addresses,
        pages=args.pages,
        slow=args.slow,
        delay=args.delay,
        min_address_delay=args.min_address_delay,
        out=print,
    )


def bench(
    hosts: int = 300,
    addresses: int = 10,
    slow_addresses: int = 3,
    pages: int = 1,
    slow: float = 0.1,
    delay: float = 1.0,
    min_address_delay: float = 0.05,
    out: Any = None,
) -> dict[str, dict[str, Any]]:
    """Both runs (adaptive, fixed); their figures (printed through ``out`` if given)."""
    say = out or (lambda *a: None)
    spec = WebSpec(
        hosts=hosts,
        pages_per_host=max(pages, 1),
        special=False,
        addresses=addresses,
        slow_addresses=tuple(range(slow_addresses)),
        slow_seconds=slow,
    )
    results: dict[str, dict[str, Any]] = {}
    with serve_in_thread(spec) as web:
        rows = page_rows(hosts, pages)
        for r in rows:
            r["slot"] = web.address_of(r["host"])
        per_address = Counter(web.address_of(h) for h in {r["host"] for r in rows})
        say(
            f"# {len(rows)} URLs on {hosts} hosts, {addresses} addresses "
            f"({slow_addresses} answering in {slow} s); default_delay {delay} s, "
            f"min_address_delay {min_address_delay} s; {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        base = replace(
            engine_config(load_config(), web.resolve, hosts),
            politeness__key="ip",
            politeness__default_delay=delay,
            politeness__min_address_delay=min_address_delay,
            fetch__slice_grace_seconds=3600.0,
            sitemaps__enabled=False,
            fetch__soft404_probe=False,
        )
        slow_set = set(web.addresses[:slow_addresses])
        for name, adaptive in (("adaptive", True), ("fixed", False)):
            web.reset_log()
            t0 = time.time()
            outcomes = Counter(
                r["outcome"]
                for r in fetch_rows(rows, replace(base, politeness__adaptive=adaptive))
                if r["record"] == "fetch"
            )
            wall = time.time() - t0
            figures = _figures(web.log, per_address, delay, min_address_delay, t0, wall)
            results[name] = {"wall": wall, "outcomes": dict(outcomes), "addresses": figures}
            say(f"{name}: wall {wall:.1f} s, outcomes {dict(outcomes)}")
            for address, f in sorted(figures.items()):
                say(
                    f"  {address}{' (slow)' if address in slow_set else ''}: "
                    f"{f['requests']} requests, median gap {f['median_gap']:.3f} s, "
                    f"gap errors {f['gap_errors']} (at {_seconds(f['gap_errors_at'])}), "
                    f"host gap errors {f['host_gap_errors']}, busy {f['busy']:.0%}"
                )
    return results


def _figures(
    log: list[LogRecord],
    hosts_on: Counter[str],
    delay: float,
    min_address_delay: float,
    t0: float,
    wall: float,
) -> dict[str, dict[str, Any]]:
    by_address: dict[str, list[LogRecord]] = defaultdict(list)
    by_host: dict[str, list[LogRecord]] = defaultdict(list)
    for record in sorted(log, key=lambda r: r.start):
        by_address[record.address].append(record)
        by_host[record.host].append(record)
    out = {}
    for address, records in by_address.items():
        rule = max(min_address_delay, delay / max(1, hosts_on[address]))
        gaps = _gaps(records)
        short = [
            b.start - t0
            for a, b in zip(records, records[1:], strict=False)
            if b.start - a.start < rule - TOLERANCE
        ]
        host_gaps = [g for h, rs in by_host.items() if rs[0].address == address for g in _gaps(rs)]
        out[address] = {
            "requests": len(records),
            "median_gap": statistics.median(gaps) if gaps else 0.0,
            "gap_errors": len(short),
            "gap_errors_at": short,
            "host_gap_errors": sum(g < delay - TOLERANCE for g in host_gaps),
            "busy": sum(r.end - r.start for r in records) / wall if wall > 0 else 0.0,
        }
    return out


def _gaps(records: list[LogRecord]) -> list[float]:
    return [b.start - a.start for a, b in zip(records, records[1:], strict=False)]


def _seconds(offsets: list[float]) -> str:
    return ", ".join(f"{t:.2f} s" for t in offsets) or "-"
