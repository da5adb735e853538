"""``python -m benchmarks``: every benchmark in one go on the built-in test web; prints a
markdown report and writes it to ``docs/benchmarks.md`` (with commit, machine and date).

``--quick`` shrinks every size (a smoke run of the whole suite in a few minutes; its figures
are not meaningful). ``--engine`` (``embedded`` by default: the engine of a crawl on one machine,
which the comparison with Scrapy is about; or ``spark``) runs every crawl. Goals come from the
benchmark issue; each row says whether it was met.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import tempfile
import time
from typing import Any

from benchmarks.procs import mib

REPORT = "docs/benchmarks.md"

FULL: dict[str, dict[str, Any]] = {
    "crawl": {"hosts": 100, "pages": 300, "seed_pages": 150, "max_depth": 1, "delay": 1.0},
    "sites": {"hosts": 60, "pages": 95, "fanout": 5, "max_depth": 3, "delay": 0.2},
    "gaps": {"hosts": (20, 60), "pages": 40, "delay": 0.2},
    "ceiling": {"hosts": 200, "pages": 50},
    "fixed": {"sizes": (1_000, 100_000), "hosts": 20},
    "memory": {"body_sizes": (4 * 2**20, 40 * 2**20), "regular_hosts": 20},
    "recrawl": {"hosts": 4, "pages": 39, "max_per_host": 10, "days": 14, "check_generations": 6},
    "priority": {"hosts": 8, "pages": 150, "max_per_host": 6, "generations": 5},
    "sql": {"repeat": 3, "spark_repeat": 1},
}
QUICK: dict[str, dict[str, Any]] = {
    "crawl": {"hosts": 6, "pages": 20, "seed_pages": 10, "max_depth": 1, "delay": 0.05},
    "sites": {"hosts": 6, "pages": 20, "fanout": 3, "max_depth": 3, "delay": 0.05},
    "gaps": {"hosts": (3, 6), "pages": 10, "delay": 0.05},
    "ceiling": {"hosts": 6, "pages": 10},
    "fixed": {"sizes": (100, 1_000), "hosts": 3},
    "memory": {"body_sizes": (2**20, 8 * 2**20), "regular_hosts": 3},
    "recrawl": {"hosts": 1, "pages": 15, "max_per_host": 4, "days": 2, "check_generations": 3},
    "priority": {"hosts": 3, "pages": 30, "max_per_host": 3, "generations": 3},
    "sql": {"repeat": 1, "spark_repeat": 1},
}
IDLE_GOAL_S = 15.0  # fixed cost of a generation with nothing heavy to do


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--no-scrapy", action="store_true", help="skip the Scrapy comparison")
    parser.add_argument("--out", default=REPORT, help=f"report file (default {REPORT}; '' none)")
    parser.add_argument("--work", default="", help="directory for the crawls (default: a temp dir)")
    from benchmarks.stages import add_engine_argument

    add_engine_argument(parser)


def main(args: argparse.Namespace) -> None:
    sizes = QUICK if args.quick else FULL
    work = args.work or tempfile.mkdtemp(prefix="crawllib-bench-")
    try:
        results = run_all(work, sizes, scrapy=not args.no_scrapy, engine=args.engine)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    report = render(results, quick=args.quick)
    print(report)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        notes = kept_notes(args.out)
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(report + ("\n" + notes if notes else ""))


# The report's hand-written part: measurements made once, by hand, behind design choices.
NOTES_HEADING = "## Measurements behind design choices"


def kept_notes(path: str) -> str:
    """The section of the existing report from NOTES_HEADING on, which a new run keeps."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return ""
    at = text.find(NOTES_HEADING)
    return text[at:] if at >= 0 else ""


def run_all(
    work: str, sizes: dict[str, dict[str, Any]], scrapy: bool = True, engine: str = "embedded"
) -> dict[str, Any]:
    from benchmarks.crawl import bench_crawl, bench_sites
    from benchmarks.fetch import bench_gap_error
    from benchmarks.memory import bench_memory
    from benchmarks.priority import bench_priority
    from benchmarks.recrawl import bench_recrawl
    from benchmarks.sql import bench_sql
    from benchmarks.stages import bench_fetch_and_parse, bench_fixed_cost

    def at(name: str) -> str:
        return os.path.join(work, name)

    t0 = time.perf_counter()
    out: dict[str, Any] = {"engine": engine}
    out["crawl"] = bench_crawl(at("crawl"), engine=engine, **sizes["crawl"])
    out["sites"] = bench_sites(at("sites"), scrapy=scrapy, engine=engine, **sizes["sites"])
    out["sql"] = bench_sql(out["sites"]["root"], **sizes["sql"])
    out["gaps"] = bench_gap_error(work=work, **sizes["gaps"])
    out["ceiling"] = bench_fetch_and_parse(at("ceiling"), engine=engine, **sizes["ceiling"])
    out["fixed"] = bench_fixed_cost(at("fixed"), engine=engine, **sizes["fixed"])
    out["memory"] = bench_memory(at("memory"), engine=engine, **sizes["memory"])
    out["recrawl"] = bench_recrawl(at("recrawl"), engine=engine, **sizes["recrawl"])
    out["priority"] = bench_priority(at("priority"), engine=engine, **sizes["priority"])
    out["seconds"] = time.perf_counter() - t0
    out["sizes"] = sizes
    return out


def _row(measure: str, ours: str, reference: str, ratio: float | None, goal: str) -> str:
    met = "" if ratio is None or not goal else ("yes" if _meets(ratio, goal) else "**no**")
    shown = "" if ratio is None else f"{ratio:.2f}"
    return f"| {measure} | {ours} | {reference} | {shown} | {goal} | {met} |"


def _meets(value: float, goal: str) -> bool:
    op, bound = goal.split(" ", 1)
    return value >= float(bound) if op == "≥" else value <= float(bound)


CASES = ("crawl", "sites", "gaps", "ceiling", "fixed", "memory")


def _cases(r: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(r[name] for name in CASES)


def _engine(r: dict[str, Any]) -> str:
    """The engine the suite's crawls ran on (a report of before the engines: Spark)."""
    return str(r.get("engine", "spark"))


def render(r: dict[str, Any], quick: bool = False) -> str:
    c, st, g, k, fixed, mem = _cases(r)
    a, fl = st["audit"], st["floor"]
    gs = r["sizes"]["gaps"]
    light = min(gs["hosts"])
    engine = _engine(r)
    lines = [
        "# Benchmarks",
        "",
        f"`python -m benchmarks{' --quick' if quick else ''} --engine {engine}` at commit "
        f"{_commit()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, on {_machine()}; "
        f"the suite took {r['seconds'] / 60:.1f} min; every crawl on the {engine} engine."
        + (" **Quick run: sizes too small to mean anything.**" if quick else ""),
        "",
        "| measure | ours | reference | ratio | goal | met |",
        "|---|---|---|---|---|---|",
        _row(
            "1a. politeness-bound crawl: efficiency of the fetch stages (ideal / their time)",
            f"{c['fetch_s']:.1f} s",
            f"ideal {c['ideal_s']:.1f} s",
            c["fetch_efficiency"],
            "≥ 0.9",
        ),
        _row(
            "1b. politeness-bound crawl: efficiency of the whole `crawl run` (ideal / wall)",
            f"{c['wall_s']:.1f} s",
            f"ideal {c['ideal_s']:.1f} s",
            c["run_efficiency"],
            "≥ 0.85",
        ),
        _row(
            f"2a. fetch ceiling, pages/s (delay 0, extraction in both): fetch stage ({engine}) "
            "/ bare engine",
            f"{k['stage_pages_per_s']:.0f}",
            f"{k['bare_pages_per_s']:.0f}",
            k["stage_pages_per_s"] / k["bare_pages_per_s"],
            "≥ 0.8",
        ),
        _row(
            f"2b. CPU ms per page (delay 0, extraction in both): fetch stage ({engine}) / bare "
            "engine",
            f"{k['stage_cpu_ms']:.2f}",
            f"{k['bare_cpu_ms']:.2f}",
            k["stage_cpu_ms"] / k["bare_cpu_ms"],
            "",
        ),
        _row(
            f"3. parse pages/s per core (`--force`: extraction on {engine}) / bare trafilatura",
            f"{k['parse_per_core']:.0f}",
            f"{k['trafilatura_per_core']:.0f}",
            k["parse_per_core"] / k["trafilatura_per_core"],
            "≥ 0.8",
        ),
        _row(
            f"4a. fixed cost of a small generation, crawldb {fixed[0]['crawldb']:,} → "
            f"{fixed[-1]['crawldb']:,} URLs",
            f"{fixed[-1]['fixed_s']:.1f} s",
            f"{fixed[0]['fixed_s']:.1f} s",
            fixed[-1]["fixed_s"] / fixed[0]["fixed_s"],
            "",
        ),
        _row(
            f"4b. fixed cost of a generation with nothing heavy to do (crawldb "
            f"{fixed[0]['crawldb']:,} URLs) / {IDLE_GOAL_S:.0f} s",
            f"{fixed[0]['fixed_s']:.1f} s",
            f"{IDLE_GOAL_S:.0f} s",
            fixed[0]["fixed_s"] / IDLE_GOAL_S,
            "≤ 1",
        ),
    ]
    small, big = mem[0], mem[-1]
    lines.append(
        _row(
            f"5. peak RSS in fetch, largest Python worker: {mib(big['body_bytes'])} bodies / "
            f"{mib(small['body_bytes'])} bodies (gzip bomb in both)",
            mib(big["worker_peak"]),
            mib(small["worker_peak"]),
            big["worker_peak"] / small["worker_peak"],
            "≤ 1.25",
        )
    )
    if "scrapy" in st:
        s = st["scrapy"]
        ours_cpu, scrapy_cpu = st["cpu_s"] / st["pages"], s["cpu_s"] / max(1, s["pages"])
        lines += [
            _row(
                "6a. small-site crawl, wall time: ours / Scrapy (same web, politeness, depth)",
                f"{st['wall_s']:.1f} s",
                f"{s['wall_s']:.1f} s",
                st["wall_s"] / s["wall_s"],
                "≤ 0.8",
            ),
            _row(
                "6b. small-site crawl, CPU s per page: ours (driver + JVM + workers) / Scrapy",
                f"{ours_cpu * 1e3:.1f} ms",
                f"{scrapy_cpu * 1e3:.1f} ms",
                ours_cpu / scrapy_cpu,
                "",
            ),
            _row(
                "6c. small-site crawl, pages fetched (200): ours / Scrapy",
                str(st["pages"]),
                str(s["pages"]),
                st["pages"] / max(1, s["pages"]),
                "",
            ),
        ]
    lines += [
        _row(
            "6d. small-site crawl, pages the rules allow that we fetched / all of them",
            f"{a.fetched}; violations: robots {a.robots_violations}, "
            f"politeness {a.politeness_violations}",
            f"{a.expected}",
            a.fetched / max(1, a.expected),
            "≥ 1",
        ),
        _row(
            "7. small-site crawl, CPU ms per page: whole crawl / floor (bare engine + bare "
            "extraction)",
            f"{st['cpu_s'] / st['pages'] * 1e3:.1f} ms",
            f"{fl['floor_ms']:.1f} ms",
            st["cpu_s"] / st["pages"] * 1e3 / fl["floor_ms"],
            "≤ 2",
        ),
        _row(
            f"8. per-host gap error (gap − delay), p99 / the delay, extraction in the task, "
            f"{light} hosts at {gs['delay']} s (within one extraction thread's capacity)",
            f"{g[(light, True)]['p99_ms']:.1f} ms",
            f"without: {g[(light, False)]['p99_ms']:.1f} ms",
            g[(light, True)]["p99_ms"] / 1e3 / gs["delay"],
            "≤ 0.1",
        ),
    ]
    if "recrawl" in r:
        from benchmarks.recrawl import details, goal_rows

        lines += [_row(*row) for row in goal_rows(r["recrawl"])]
    if "priority" in r:
        from benchmarks.priority import goal_row

        lines.append(_row(*goal_row(r["priority"])))
    if "sql" in r:
        from benchmarks.sql import goal_rows as sql_rows

        lines += [_row(*row) for row in sql_rows(r["sql"])]
    lines += ["", *_details(r)]
    if "recrawl" in r:
        lines += ["", *details(r["recrawl"])]
    if "priority" in r:
        from benchmarks.priority import render as priority_details

        lines += ["", "Measure 10, priority:", "", priority_details(r["priority"])]
    if "sql" in r:
        from benchmarks.sql import details as sql_details

        lines += ["", *sql_details(r["sql"])]
    from benchmarks.scale import DETAILS as scale_details

    lines += ["", scale_details]
    return "\n".join(lines) + "\n"


def _details(r: dict[str, Any]) -> list[str]:
    c, st, g, k, fixed, mem = _cases(r)
    gs = r["sizes"]["gaps"]
    engine = _engine(r)
    out = [
        "## Details",
        "",
        f"**1. Politeness-bound crawl**: {c['hosts']} hosts × {c['pages_per_host']} pages, "
        f"seeds: each host's home page and its first {c['seed_pages']} pages; depth ≤ "
        f"{c['max_depth']}, delay {c['delay']} s, jitter 0; `crawl run` to the end: "
        f"{c['generations']} generations, {c['pages']} pages ({c['followed']} URLs followed "
        f"inside their generation), {c['requests']} requests (robots.txt included). "
        + _crawl_time(c),
        "",
        f"**2. Fetch ceiling**: {k['pages']} pages, test web in a child process (not counted). "
        f"Fetch stage ({engine}) {k['stage_fetch_s']:.1f} s, of which {k['stage_fetching_s']} s "
        "fetching (the rest: reads, persist, three commits per slice); both extract each page "
        "in the fetch task (fetch.extract, the default).",
        "",
        f"**3. Re-extraction**: `crawl parse --force` (update, extracting again) over {k['parse_pages']} pages in "
        f"{k['parse_s']:.1f} s on {k['cores']} cores (Python workers' CPU "
        f"{k['parse_worker_cpu_s']:.1f} s): it re-extracts every stored page in the engine's "
        "workers, hashes, "
        "finds exact and near duplicates and writes texts, links and the frontier. Bare loop: "
        f"`trafilatura.extract` with crawllib's options on {k['trafilatura_pages']} decoded "
        "pages, one core.",
        "",
        "**4. Fixed cost per generation** (`crawl generation` of home pages, delay 0; fixed = wall "
        "− network time):",
        "",
        "| crawldb URLs | pages | plan s | fetch s | update s | network s | fixed s |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in fixed:
        out.append(
            f"| {f['crawldb']:,} | {f['pages']} | {f['plan_s']:.1f} | {f['fetch_s']:.1f} | "
            f"{f['update_s']:.1f} | {f['network_s']} | {f['fixed_s']:.1f} |"
        )
    out += [
        "",
        "**5. Memory** (fetch stage of the regular hosts plus bigbody.net/big.html and "
        "gzipbomb.org/bomb.html; fetch.max_body_bytes and max_decompressed_bytes at defaults):",
        "",
        "| body | driver peak | JVM peak | largest worker peak | workers' peaks summed | big.html | bomb |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in mem:
        out.append(
            f"| {mib(m['body_bytes'])} | {mib(m['driver_peak'])} | {mib(m['jvm_peak'])} | "
            f"{mib(m['worker_peak'])} | {mib(m['workers_sum_peak'])} | {m['big_outcome']} | "
            f"{m['bomb_outcome']} |"
        )
    fl = st["floor"]
    out += [
        "",
        f"**6. Small-site crawl**: {st['hosts']} hosts × {st['pages_per_host']} pages in a "
        f"tree of {st['fanout']} links per page (every page within 3 links of home), seeds = "
        f"home pages, depth ≤ {st['max_depth']}, delay {st['delay']} s, jitter 0, every other "
        f"setting at its default; `crawl run` to the end: {st['generations']} generations, "
        f"{st['pages']} pages ({st['followed']} URLs followed inside their generation), "
        f"{st['requests']} requests. "
        + _crawl_time(st)
        + " CPU by process: "
        + ", ".join(f"{role} {sec:.0f} s" for role, sec in st.get("cpu_roles", {}).items())
        + ".",
        "",
        "Both crawls audited from the test web's request log (`crawllib.testweb.audit`): pages "
        "the rules allow (breadth first from the seeds, robots.txt obeyed, depth ≤ max) and "
        "whether each was answered 200; requests robots.txt disallows; requests to a host "
        "overlapping or starting less than 0.95 × delay after the previous one.",
        "",
        "| crawler | wall s | CPU s | pages | requests | allowed pages fetched | URLs requested "
        "twice | robots violations | politeness violations |",
        "|---|---|---|---|---|---|---|---|---|",
        _audit_row("crawllib `crawl run`", st, st["audit"]),
    ]
    if "scrapy" in st:
        out += [
            _audit_row("Scrapy, links + trafilatura", st["scrapy"], st["scrapy_audit"]),
            "",
            "Scrapy: ROBOTSTXT_OBEY, DOWNLOAD_DELAY = delay without randomising, one request "
            "per host at a time, DEPTH_LIMIT = max depth, all hosts at once; every request goes "
            "to the test web through its proxy setting; per page: links and trafilatura text, "
            "our options (see `benchmarks/scrapy_crawl.py` for what still differs).",
        ]
    out += [
        "",
        f"**7. CPU floor**: the {fl['pages']} stored pages of the small-site crawl fetched again "
        f"by the bare engine (delay 0, no extraction): {fl['engine_ms']:.2f} ms per page; "
        f"extracted again by `extract_record` in one process: {fl['extract_ms']:.2f} ms per "
        f"page; floor {fl['floor_ms']:.2f} ms.",
        "",
        f"**8. Gap error**: the bare engine over N hosts × {gs['pages']} pages at delay "
        f"{gs['delay']} s, once without and once with extraction in its task, each on a fresh "
        "test web; error = the gap between consecutive request starts to one host (server's "
        "clock) − the delay. Extraction runs in one thread per task, with at most 8 fetched "
        "pages waiting for it: when hosts / delay pages per second need more than that thread, "
        "the slots wait for room (memory stays bounded) and requests leave late.",
        "",
        "| hosts | extraction | pages/s | gaps | mean ms | p99 ms | max ms | wall s |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {n} | {'on' if on else 'off'} | {g[(n, on)]['pages_per_s']:.0f} | "
            f"{g[(n, on)]['gaps']} | {g[(n, on)]['mean_ms']:.1f} | {g[(n, on)]['p99_ms']:.1f} | "
            f"{g[(n, on)]['max_ms']:.1f} | {g[(n, on)]['wall_s']:.1f} |"
            for n, on in sorted(g)
        ),
    ]
    return out


def _audit_row(name: str, run: dict[str, Any], a: Any) -> str:
    return (
        f"| {name} | {run['wall_s']:.1f} | {run['cpu_s']:.1f} | {run['pages']} | "
        f"{run['requests']} | {a.fetched} / {a.expected} | {a.twice} | {a.robots_violations} | "
        f"{a.politeness_violations} |"
    )


def _crawl_time(c: dict[str, Any]) -> str:
    return (
        "Ideal = Σ over generations of max over hosts of (requests − 1) × delay = "
        f"{c['ideal_s']:.1f} s. Time per stage over the crawl: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(c.get("stage_s", {}).items()))
        + f"; the rest of the {c['wall_s']:.0f} s is seeding and bookkeeping between stages. "
        + _fetch_timeline(c["fetch_timeline"])
    )


def _fetch_timeline(t: dict[str, float]) -> str:
    return (
        f"The fetch stages spent {t['before_s']:.1f} s before their first page request (reads, "
        f"task start, robots.txt), {t['requests_s']:.1f} s from first to last request and "
        f"{t['after_s']:.1f} s after the last (persist, commits); one host's requests were "
        f"{t['pacing']:.3f} × the delay apart on average."
    )


def _commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
        return sha + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{os.cpu_count()} × {model}, {mem / 2**30:.0f} GiB, Python {platform.python_version()}"
