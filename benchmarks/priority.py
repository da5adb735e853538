"""Priority: how soon a crawl fetches the important pages, in score order against breadth first.

The test web's regular hosts (seeds: their home pages), each with a few *popular* pages deep in
its tree that pages everywhere link to (WebSpec.popular_pages), are crawled for a few generations with
a small per-host quota, so each generation can take only part of what it knows: once with
generate.order = score (the default: :mod:`crawllib.transforms.priority`), once with
generate.order = depth (breadth first, the order before scores). The *important* pages are
the top share of the web's pages by in-degree from distinct pages, counted on the generator's
link graph (every page of the web, not only the crawled part). The figure is the share of them
fetched after each generation: both orders fetch the same number of pages, so a higher share
is a better use of the same fetches.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

from crawllib.config import replace
from crawllib.core.urls import InvalidURL, normalize_url
from crawllib.testweb.site import Site, WebSpec

ORDERS = ("depth", "score")


def in_degrees(site: Site) -> Counter[str]:
    """Distinct linking pages of every page of the regular hosts (home pages included), on
    the generator's link graph: normalised URLs, links to the page itself not counted."""
    pages = site.spec.pages_per_host
    paths = ["/", *(f"/p/{n}.html" for n in range(pages))]
    exists = {f"http://{h}{p}" for h in site.regular for p in paths}
    degree: Counter[str] = Counter()
    for host in site.regular:
        for path in paths:
            url = f"http://{host}{path}"
            targets = set()
            for href in site.route(host, path).links:
                try:
                    target = normalize_url(href, base=url)
                except InvalidURL:
                    continue
                if target in exists and target != url:
                    targets.add(target)
            degree.update(targets)
    return degree


def important_pages(site: Site, share: float) -> set[str]:
    """The top ``share`` of the regular pages by :func:`in_degrees` (ties: by URL)."""
    degree = in_degrees(site)
    count = max(1, round(share * len(site.regular) * (site.spec.pages_per_host + 1)))
    ranked = sorted(degree.items(), key=lambda kv: (-kv[1], kv[0]))
    return {url for url, _ in ranked[:count]}


def bench_priority(
    work: str,
    hosts: int = 8,
    pages: int = 150,
    max_per_host: int = 6,
    generations: int = 5,
    share: float = 0.1,
    delay: float = 0.05,
    popular: int = 3,
    engine: str = "embedded",
) -> dict[str, Any]:
    """Crawl the same web in each of ORDERS on ``engine``; per order the share of the
    important pages fetched after each generation, the pages fetched and the wall time."""
    from benchmarks.fetch import engine_config, web_server
    from benchmarks.stages import bench_config, close_root, open_root
    from crawllib.runs import runner

    spec = WebSpec(
        hosts=hosts,
        pages_per_host=pages,
        special=False,
        cross_host_link_share=0.3,
        popular_pages=popular,
    )
    site = Site(spec)
    important = important_pages(site, share)
    hubs = {f"http://{h}/p/{pages - 1 - k}.html" for h in site.regular for k in range(popular)}
    out: dict[str, Any] = {
        "engine": engine,
        "hosts": hosts,
        "pages_per_host": pages,
        "max_per_host": max_per_host,
        "generations": generations,
        "important": len(important),
        "share": share,
        "popular": popular,
    }
    os.makedirs(work, exist_ok=True)
    with web_server(spec, "process") as (resolve, _pid):
        for order in ORDERS:
            cfg = replace(
                engine_config(bench_config(), resolve, hosts),
                politeness__default_delay=delay,
                crawl__max_depth=50,
                generate__max_per_host=max_per_host,
                generate__order=order,
                fetch__follow=False,
            )
            root = os.path.join(work, order)
            seeds = os.path.join(work, f"{order}-seeds.txt")
            with open(seeds, "w", encoding="utf-8") as fh:
                fh.write("\n".join(site.seeds()) + "\n")
            db = open_root(root, cfg, engine, "bench priority", init=False)
            try:
                t0 = time.perf_counter()
                runner.run_crawl(db, cfg, seeds, generations_wanted=generations)
                seconds = time.perf_counter() - t0
                ok = db.table("fetches", "outcome = 'ok'", columns=["gen", "url"])
                rows = db.collect(ok)
            finally:
                close_root(db)
            by_gen: dict[int, set[str]] = {}
            for r in rows:
                by_gen.setdefault(r["gen"], set()).add(r["url"])
            fetched: set[str] = set()
            shares, hub_shares = [], []
            for gen in sorted(by_gen):
                fetched |= by_gen[gen]
                shares.append(len(fetched & important) / len(important))
                hub_shares.append(len(fetched & hubs) / len(hubs) if hubs else 0.0)
            out[order] = {
                "fetched": len(fetched),
                "shares": shares,
                "popular_shares": hub_shares,
                "seconds": seconds,
            }
    depth, score = out["depth"]["shares"][-1], out["score"]["shares"][-1]
    out["ratio"] = score / depth if depth else None
    return out


def goal_row(r: dict[str, Any]) -> tuple[str, str, str, float | None, str]:
    """The report's row: popular pages fetched after the last generation, score / depth."""
    score, depth = r["score"]["popular_shares"][-1], r["depth"]["popular_shares"][-1]
    return (
        f"10. priority, {r['generations']} generations of {r['max_per_host']} URLs per host: "
        "popular pages (deep, linked from everywhere) fetched, score order / breadth first",
        f"{score:.2f}",
        f"{depth:.2f}",
        score / depth if depth else None,
        "≥ 1.2",
    )


def render(r: dict[str, Any]) -> str:
    """The figures as a Markdown table, one row per order."""
    engine = f"On the {r['engine']} engine: " if "engine" in r else ""
    head = [
        f"{engine}{r['hosts']} hosts x {r['pages_per_host']} pages, quota "
        f"{r['max_per_host']} URLs per host and generation, {r['generations']} generations, "
        f"{r['popular']} popular pages per host; important: the top {r['share']:.0%} by in-degree ({r['important']} "
        "pages).",
        "",
        "| order | pages fetched | share of important pages fetched, by generation | "
        "share of popular pages | wall s |",
        "|---|---|---|---|---|",
    ]
    for order in ORDERS:
        o = r[order]
        shares = " / ".join(f"{s:.2f}" for s in o["shares"])
        hubs = " / ".join(f"{s:.2f}" for s in o["popular_shares"])
        head.append(f"| {order} | {o['fetched']} | {shares} | {hubs} | {o['seconds']:.0f} |")
    if r.get("ratio"):
        head += ["", f"score / depth, important pages fetched at the end: {r['ratio']:.2f}"]
    return "\n".join(head)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from benchmarks.stages import add_engine_argument

    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--pages", type=int, default=150, help="pages per host")
    parser.add_argument("--max-per-host", type=int, default=6)
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--work", default="", help="directory for the crawls (default: temp)")
    add_engine_argument(parser)


def main(args: argparse.Namespace) -> None:
    work = args.work or tempfile.mkdtemp(prefix="crawllib-bench-priority-")
    try:
        result = bench_priority(
            work,
            hosts=args.hosts,
            pages=args.pages,
            max_per_host=args.max_per_host,
            generations=args.generations,
            engine=args.engine,
        )
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(render(result))
