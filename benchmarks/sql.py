"""`crawl sql` latency per engine: the documented queries over a crawl root, each in a fresh
`crawl sql` process, as an analyst runs them.

Every ``crawl sql ROOT "QUERY" [options]`` of the bash blocks of README.md and docs/*.md (each
query once) runs as ``python -m
crawllib.cli sql ROOT QUERY [options] --engine E``: a cold process each time (Python, imports,
and for spark the JVM and Delta's jars), ``repeat`` times with duckdb and ``spark_repeat``
times with spark, every other setting at its default. The figure is the median wall time. Both
engines' outputs are compared (their lines sorted unless the query orders its rows).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
# Where the queries users copy are shown: README.md, then docs/ (tables.md: the analysts')
DOCS = (PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md")))
ENGINES = ("duckdb", "spark")
GOAL_S = 1.0  # an analyst with only Python has the answer in under a second
GoalRow = tuple[str, str, str, float | None, str]
_PAGES = "SELECT count(*) AS n FROM pages"


def documented_queries(docs: tuple[Path, ...] = DOCS) -> list[tuple[str, list[str]]]:
    """Every ``crawl sql ROOT "QUERY" [options]`` in the documents' bash blocks, each (query,
    options) once: the query and its options (without ``--config``), in the order the
    documents show them."""
    found = [query for doc in docs for query in _doc_queries(doc)]
    return list({(query, tuple(options)): (query, options) for query, options in found}.values())


def _doc_queries(doc: Path) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    blocks = doc.read_text(encoding="utf-8").split("```bash\n")[1:]
    for block in (b.split("```", 1)[0] for b in blocks):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.lstrip().startswith("crawl sql "):
                continue
            command = line
            for more in lines[i + 1 :]:  # a query spans lines until its quotes close
                try:
                    shlex.split(command, comments=True)
                    break
                except ValueError:
                    command += "\n" + more
            words = shlex.split(command, comments=True)
            options = words[4:]
            while "--config" in options:  # the example's own config (an S3 root's): not ours
                at = options.index("--config")
                del options[at : at + 2]
            out.append((words[3], options))
    return out


def run_once(root: str, query: str, options: list[str], engine: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of one cold ``crawl sql`` process, and what it printed. The CPU is
    the process's own: Spark's JVM, which it does not wait for, is not counted."""
    argv = [sys.executable, "-m", "crawllib.cli", "sql", root, query, *options]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([*argv, "--engine", engine], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"crawl sql --engine {engine} failed: {done.stderr.strip()}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, done.stdout


def bench_sql(root: str, repeat: int = 3, spark_repeat: int = 1) -> dict[str, Any]:
    """Per documented query: each engine's median wall time over cold processes, the rows printed
    and whether both engines printed the same."""
    queries = []
    for query, options in documented_queries():
        runs = {"duckdb": repeat, "spark": spark_repeat}
        seconds: dict[str, float] = {}
        cpu: dict[str, float] = {}
        printed: dict[str, list[str]] = {}
        for engine in ENGINES:
            times, cpus = [], []
            for _ in range(runs[engine]):
                took, used, out = run_once(root, query, options, engine)
                times.append(took)
                cpus.append(used)
            seconds[engine] = statistics.median(times)
            cpu[engine] = statistics.median(cpus)
            lines = out.splitlines()
            printed[engine] = lines if "ORDER BY" in query.upper() else sorted(lines)
        queries.append(
            {
                "query": " ".join(query.split()),
                "options": options,
                "seconds": seconds,
                "cpu": cpu,
                "lines": len(printed["duckdb"]),
                "same": printed["duckdb"] == printed["spark"],
            }
        )
    return {
        "root": root,
        "repeat": repeat,
        "spark_repeat": spark_repeat,
        "queries": queries,
        "pages": json.loads(run_once(root, _PAGES, ["--format", "json"], "duckdb")[2])["n"],
        **_files(root),
        "load": os.getloadavg()[0],
    }


def _files(root: str) -> dict[str, int]:
    """The root's Parquet files: how many, and their bytes."""
    sizes = [
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(".parquet")
    ]
    return {"files": len(sizes), "bytes": sum(sizes)}


def _mean(r: dict[str, Any], engine: str) -> float:
    return statistics.mean(q["seconds"][engine] for q in r["queries"])


def goal_rows(r: dict[str, Any]) -> list[GoalRow]:
    """DuckDB against Spark per query, and DuckDB's slowest query against the goal."""
    n = len(r["queries"])
    slowest = max(q["seconds"]["duckdb"] for q in r["queries"])
    same = sum(q["same"] for q in r["queries"])
    return [
        (
            f"12a. `crawl sql`, the documented {n} queries, cold process, mean of the medians: "
            "duckdb / spark",
            f"{_mean(r, 'duckdb'):.2f} s",
            f"{_mean(r, 'spark'):.1f} s",
            _mean(r, "duckdb") / _mean(r, "spark"),
            "",
        ),
        (
            f"12b. `crawl sql --engine duckdb`, slowest documented query (cold process, wall) / "
            f"{GOAL_S:g} s; same output as spark: {same} of {n}",
            f"{slowest:.2f} s",
            f"{GOAL_S:g} s",
            slowest / GOAL_S,
            "≤ 1",
        ),
    ]


def details(r: dict[str, Any]) -> list[str]:
    """Markdown: the setup and each query's figures."""
    out = [
        f"**12. `crawl sql`**: the `crawl sql` examples of README.md and docs/ over a crawl root of "
        f"{r['pages']:,} pages ({r['files']:,} Parquet files, {r['bytes'] / 2**20:.0f} MiB; "
        f"load average {r['load']:.1f} at the end), each as a new `python -m crawllib.cli sql` "
        "process "
        "(what an analyst waits for: Python, the imports and, for spark, the JVM), the median "
        f"of {r['repeat']} runs with duckdb and {r['spark_repeat']} with spark, settings at "
        "their defaults. duckdb: DuckDB over delta-rs streams of the tables the query names "
        "(deletion vectors applied), of the columns it uses; spark: a local SparkSession "
        "with Delta. CPU: the `crawl sql` process's user and system time. same: both printed "
        "the same lines.",
        "",
        "| query | duckdb s | duckdb CPU s | spark s | lines | same |",
        "|---|---|---|---|---|---|",
    ]
    for q in r["queries"]:
        text = q["query"] if len(q["query"]) <= 90 else q["query"][:89] + "…"
        text = text.replace("|", "\\|")
        out.append(
            f"| `{text}` | {q['seconds']['duckdb']:.2f} | {q['cpu']['duckdb']:.2f} | "
            f"{q['seconds']['spark']:.1f} | "
            f"{q['lines']} | {'yes' if q['same'] else '**no**'} |"
        )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", default=".crawl/demo", help="crawl root (default .crawl/demo: `crawl demo`)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="duckdb runs per query (3)")
    parser.add_argument("--spark-repeat", type=int, default=1, help="spark runs per query (1)")


def main(args: argparse.Namespace) -> None:
    if not os.path.isdir(args.root):
        raise SystemExit(f"no crawl root at {args.root}: run `crawl demo` first, or give --root")
    r = bench_sql(args.root, args.repeat, args.spark_repeat)
    for measure, ours, reference, ratio, goal in goal_rows(r):
        shown = "" if ratio is None else f"{ratio:.2f}"
        print(f"| {measure} | {ours} | {reference} | {shown} | {goal} |")
    print()
    print("\n".join(details(r)))
