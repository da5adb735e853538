"""The benchmark report: every measure of the issue is a row, and a missed goal says so."""

from __future__ import annotations

import re

from benchmarks.suite import FULL, NOTES_HEADING, kept_notes, render
from crawllib.testweb.audit import Audit

MIB = 2**20


def audit(fetched: int = 5_700, robots: int = 0, short_gaps: int = 0) -> Audit:
    return Audit(
        expected=5_700,
        fetched=fetched,
        missing=5_700 - fetched,
        requests=5_800,
        twice=0,
        robots_violations=robots,
        overlaps=0,
        short_gaps=short_gaps,
    )


def results(
    fetch_s: float = 20.0, scrapy_wall: float = 100.0, ours_audit: Audit | None = None
) -> dict:
    timeline = {"before_s": 1.5, "requests_s": 17.0, "after_s": 1.5, "pacing": 1.004}
    crawl = {
        "hosts": 100,
        "pages_per_host": 200,
        "seed_pages": 100,
        "max_depth": 1,
        "delay": 1.0,
        "generations": 2,
        "followed": 10_000,
        "pages": 20_000,
        "requests": 20_100,
        "ideal_s": 18.0,
        "fetch_s": fetch_s,
        "wall_s": 80.0,
        "cpu_s": 120.0,
        "fetch_efficiency": 18.0 / fetch_s,
        "run_efficiency": 18.0 / 80.0,
        "stage_s": {"plan": 5.0, "fetch": 60.0, "parse": 8.0, "update": 5.0},
        "fetch_timeline": timeline,
    }
    sites = {
        "hosts": 60,
        "pages_per_host": 95,
        "fanout": 5,
        "max_depth": 3,
        "delay": 0.2,
        "generations": 2,
        "pages": 5_700,
        "requests": 5_800,
        "followed": 5_600,
        "ideal_s": 19.0,
        "fetch_s": 30.0,
        "wall_s": 80.0,
        "cpu_s": 114.0,
        "fetch_efficiency": 19.0 / 30.0,
        "run_efficiency": 19.0 / 80.0,
        "stage_s": {"plan": 5.0, "fetch": 30.0, "parse": 8.0, "update": 5.0},
        "fetch_timeline": timeline,
        "audit": ours_audit or audit(),
        "scrapy": {"wall_s": scrapy_wall, "cpu_s": 57.0, "pages": 5_690, "requests": 5_900},
        "scrapy_audit": audit(fetched=5_690, short_gaps=3),
        "floor": {"pages": 5_700, "engine_ms": 2.0, "extract_ms": 8.0, "floor_ms": 10.0},
    }

    def gap(p99_ms: float) -> dict:
        return {
            "gaps": 800,
            "mean_ms": 1.0,
            "p99_ms": p99_ms,
            "max_ms": 90.0,
            "wall_s": 9.0,
            "pages_per_s": 90.0,
        }

    gaps = {
        (20, False): gap(4.0),
        (20, True): gap(12.0),
        (60, False): gap(5.0),
        (60, True): gap(500.0),
    }
    ceiling = {
        "pages": 10_000,
        "bare_pages_per_s": 1000.0,
        "bare_cpu_ms": 0.5,
        "stage_pages_per_s": 900.0,
        "stage_fetching_s": 9,
        "stage_fetch_s": 11.1,
        "stage_cpu_ms": 1.0,
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
        "sites": sites,
        "gaps": gaps,
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
        number = re.match(r"\d+[a-d]?\.", cells[0])
        if line.startswith("| ") and number:
            out[number.group(0)] = cells
    return out


def test_report_has_a_row_per_measure_and_judges_each_goal():
    report = render(results())
    table = rows(report)
    assert list(table) == [
        *("1a.", "1b.", "2a.", "2b.", "3.", "4a.", "4b.", "5."),
        *("6a.", "6b.", "6c.", "6d.", "7.", "8."),
    ]
    assert table["1a."][3:] == ["0.90", "≥ 0.9", "yes"]
    assert table["1b."][3:] == ["0.23", "≥ 0.85", "**no**"]
    assert table["2a."][3:] == ["0.90", "≥ 0.8", "yes"]
    assert table["3."][3:] == ["0.62", "≥ 0.8", "**no**"]
    assert table["4a."][1:4] == ["29.0 s", "19.0 s", "1.53"]
    assert table["4b."][1:] == ["19.0 s", "15 s", "1.27", "≤ 1", "**no**"]
    assert table["5."][3:] == ["1.00", "≤ 1.25", "yes"]
    assert table["6a."][3:] == ["0.80", "≤ 0.8", "yes"]
    assert table["6d."][1:] == [
        "5700; violations: robots 0, politeness 0",
        "5700",
        "1.00",
        "≥ 1",
        "yes",
    ]
    assert table["7."][1:] == ["20.0 ms", "10.0 ms", "2.00", "≤ 2", "yes"]
    assert table["8."][1:] == ["12.0 ms", "without: 4.0 ms", "0.06", "≤ 0.1", "yes"]
    assert "| 60 | on | 90 | 800 | 1.0 | 500.0 | 90.0 | 9.0 |" in report
    assert "commit" in report.splitlines()[2] and "GiB" in report.splitlines()[2]
    assert "1.5 s before their first page request" in report
    assert "17.0 s from first to last request" in report and "1.004 × the delay" in report


def test_a_slower_run_misses_its_goals():
    table = rows(render(results(fetch_s=40.0, scrapy_wall=50.0)))
    assert table["1a."][3:] == ["0.45", "≥ 0.9", "**no**"]
    assert table["6a."][3:] == ["1.60", "≤ 0.8", "**no**"]


def test_a_missed_page_or_a_violation_is_shown():
    table = rows(render(results(ours_audit=audit(fetched=5_600, robots=1, short_gaps=2))))
    assert table["6d."][1:] == [
        "5600; violations: robots 1, politeness 2",
        "5700",
        "0.98",
        "≥ 1",
        "**no**",
    ]
    report = render(results())
    assert (
        "| Scrapy, links + trafilatura | 100.0 | 57.0 | 5690 | 5900 | 5690 / 5700 | 0 | 0 | 3 |"
        in report
    )


def test_a_new_report_keeps_the_hand_written_notes(tmp_path):
    path = tmp_path / "benchmarks.md"
    assert kept_notes(str(path)) == ""  # no report yet
    notes = f"{NOTES_HEADING}\n\n- a figure measured by hand\n"
    path.write_text(render(results()) + "\n" + notes)
    assert kept_notes(str(path)) == notes
    path.write_text(render(results()))
    assert kept_notes(str(path)) == ""


def test_the_report_names_the_engine_its_crawls_ran_on():
    report = render({**results(), "engine": "embedded"})
    assert "--engine embedded` at commit" in report.splitlines()[2]
    assert "every crawl on the embedded engine" in report.splitlines()[2]
    table = rows(report)
    assert table["2a."][0].endswith("fetch stage (embedded) / bare engine")
    assert "extraction on embedded" in table["3."][0]
    assert "Fetch stage (embedded) 11.1 s, of which 9 s fetching" in report
    # a report of the time before the engines: its crawls ran on Spark
    assert "fetch stage (spark) / bare engine" in rows(render(results()))["2a."][0]
