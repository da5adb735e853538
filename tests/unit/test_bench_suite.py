"""The benchmark report: every measure of the issue is a row, and a missed goal says so."""

from __future__ import annotations

import re

from crawllib.bench.suite import FULL, NOTES_HEADING, kept_notes, render

MIB = 2**20


def results(fetch_s: float = 20.0, scrapy_wall: float = 100.0) -> dict:
    crawl = {
        "hosts": 100,
        "pages_per_host": 200,
        "seed_pages": 100,
        "max_depth": 1,
        "generations": 2,
        "pages": 20_000,
        "requests": 20_100,
        "ideal_s": 18.0,
        "fetch_s": fetch_s,
        "wall_s": 80.0,
        "cpu_s": 120.0,
        "fetch_efficiency": 18.0 / fetch_s,
        "run_efficiency": 18.0 / 80.0,
        "fetch_timeline": {"before_s": 1.5, "requests_s": 17.0, "after_s": 1.5, "pacing": 1.004},
        "scrapy": {"wall_s": scrapy_wall, "cpu_s": 240.0, "pages": 19_990, "requests": 20_500},
        "scrapy_links_only": {"wall_s": 60.0, "cpu_s": 120.0, "pages": 19_990, "requests": 20_500},
    }
    ceiling = {
        "pages": 10_000,
        "bare_pages_per_s": 1000.0,
        "bare_cpu_ms": 0.5,
        "spark_pages_per_s": 900.0,
        "spark_fetching_s": 9,
        "spark_fetch_s": 11.1,
        "spark_cpu_ms": 1.0,
        "cores": 2,
        "parse_pages": 10_000,
        "parse_s": 40.0,
        "parse_per_core": 125.0,
        "parse_worker_cpu_s": 70.0,
        "trafilatura_pages": 10_000,
        "trafilatura_per_core": 200.0,
    }
    fixed = [
        {
            "crawldb": n,
            "pages": 20,
            "plan_s": 5.0,
            "fetch_s": 5.0,
            "parse_s": 5.0,
            "update_s": 5.0,
            "network_s": 1,
            "total_s": t,
            "fixed_s": t - 1,
        }
        for n, t in ((1_000, 20.0), (100_000, 30.0))
    ]
    memory = [
        {
            "body_bytes": b * MIB,
            "driver_peak": 100 * MIB,
            "jvm_peak": 1500 * MIB,
            "worker_peak": 110 * MIB,
            "workers_sum_peak": 250 * MIB,
            "big_outcome": "ok",
            "bomb_outcome": "error: decompressed_too_large",
        }
        for b in (4, 40)
    ]
    return {
        "crawl": crawl,
        "ceiling": ceiling,
        "fixed": fixed,
        "memory": memory,
        "seconds": 600.0,
        "sizes": FULL,
    }


def rows(report: str) -> dict[str, list[str]]:
    out = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        number = re.match(r"\d+[a-c]?\.", cells[0])
        if line.startswith("| ") and number:
            out[number.group(0)] = cells
    return out


def test_report_has_a_row_per_measure_and_judges_each_goal():
    report = render(results())
    table = rows(report)
    assert list(table) == ["1a.", "1b.", "2a.", "2b.", "3.", "4.", "5.", "6a.", "6b.", "6c."]
    assert table["1a."][3:] == ["0.90", "≥ 0.9", "yes"]
    assert table["1b."][3:] == ["0.23", "≥ 0.75", "**no**"]
    assert table["2a."][3:] == ["0.90", "≥ 0.8", "yes"]
    assert table["3."][3:] == ["0.62", "≥ 0.8", "**no**"]
    assert table["4."][1:4] == ["29.0 s", "19.0 s", "1.53"]
    assert table["5."][3:] == ["1.00", "≤ 1.25", "yes"]
    assert table["6a."][3:] == ["0.80", "≤ 1", "yes"]
    assert "commit" in report.splitlines()[2] and "GiB" in report.splitlines()[2]
    assert "1.5 s before their first page request" in report
    assert "17.0 s from first to last request" in report and "1.004 × the delay" in report


def test_a_slower_run_misses_its_goals():
    table = rows(render(results(fetch_s=40.0, scrapy_wall=50.0)))
    assert table["1a."][3:] == ["0.45", "≥ 0.9", "**no**"]
    assert table["6a."][3:] == ["1.60", "≤ 1", "**no**"]


def test_a_new_report_keeps_the_hand_written_notes(tmp_path):
    path = tmp_path / "benchmarks.md"
    assert kept_notes(str(path)) == ""  # no report yet
    notes = f"{NOTES_HEADING}\n\n- a figure measured by hand\n"
    path.write_text(render(results()) + "\n" + notes)
    assert kept_notes(str(path)) == notes
    path.write_text(render(results()))
    assert kept_notes(str(path)) == ""
