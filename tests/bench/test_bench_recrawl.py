"""The recrawl simulator: it plays plan's selection and crawllib.policy.revisit's rule on the test
web's change truth, keeps the budget, and measures freshness, age and unchanged fetches."""

from __future__ import annotations

import random

import pytest
from test_bench_suite import results

from benchmarks import recrawl, recrawl_sim
from benchmarks.recrawl_sim import HOUR, START, Page, plan_host, simulate, visit
from benchmarks.suite import render
from crawllib.config import Config, replace
from crawllib.policy.revisit import PYTHON, next_interval
from crawllib.testweb import changes
from crawllib.testweb.site import WebSpec

SPEC = WebSpec(hosts=0, special=False, changing_hosts=2, changing_pages=16)
BASE = replace(Config(), generate__max_per_host=4)
FIXED = replace(BASE, recrawl__policy="fixed", recrawl__default_interval_hours=4.0)
DAYS = 4 * 24


def page(key: int, depth: int = 1, due: int | None = None) -> Page:
    return Page(f"http://live0.com/c/{key}.html", "live0.com", key, depth, 0, next_due=due)


def capped(due: list[Page], new: list[Page], max_per_host: int, share: float) -> set[int]:
    """plan's cap_per_host, transcribed from its window arithmetic: a row is deferred when its
    rank in its kind exceeds its kind's places plus the places the other kind leaves."""
    revisit_places = int(max_per_host * share)
    kept = set()
    for rows, places, others in (
        (sorted(due, key=lambda p: (p.next_due, p.key)), revisit_places, len(new)),
        (sorted(new, key=lambda p: (p.depth, p.key)), max_per_host - revisit_places, len(due)),
    ):
        left_by_others = max(0, max_per_host - places - others)
        kept |= {p.key for rank, p in enumerate(rows, 1) if rank <= places + left_by_others}
    return kept


def test_selection_takes_the_most_overdue_revisits_and_the_shallowest_new_urls():
    due = [page(k, due=d) for k, d in ((1, 30), (2, 10), (3, 20), (4, 10))]
    new = [page(10, depth=2), page(11), page(12), page(13)]
    # 2 places for revisits: due 10 twice (key order), then new by depth, key
    assert [p.key for p in plan_host(due, new, 4, 0.5)] == [2, 4, 11, 12]
    # a kind with fewer URLs than its places leaves them to the other
    assert [p.key for p in plan_host(due[:1], new, 4, 0.5)] == [1, 11, 12, 13]
    assert [p.key for p in plan_host(due, [], 4, 0.5)] == [2, 4, 3, 1]
    assert [p.key for p in plan_host(due, new, 5, 0.5)] == [2, 4, 11, 12, 13]  # floor(2.5)


def test_selection_is_plans_cap_per_host_on_random_cases():
    rng = random.Random(7)
    for _ in range(500):
        keys = iter(rng.sample(range(-(2**40), 2**40), 40))
        due = [page(next(keys), due=rng.randrange(5)) for _ in range(rng.randrange(8))]
        new = [page(next(keys), depth=rng.randrange(3)) for _ in range(rng.randrange(8))]
        cap, share = rng.randrange(1, 8), rng.choice((0.0, 0.3, 0.5, 1.0))
        chosen = {p.key for p in plan_host(due, new, cap, share)}
        assert chosen == capped(due, new, cap, share)


def test_the_interval_is_the_schedule_rule_of_the_config():
    url = "http://live0.com/c/0.html"  # hourly: every revisit an hour later finds a change
    p = Page(url, "live0.com", 0, 1, 0)
    rule = recrawl_sim.crawler_rule(BASE.recrawl)
    seconds = []
    for k in range(3):
        visit(p, START + k * HOUR, rule, conditional_get=True)
        seconds.append(p.interval)
    default = BASE.recrawl.default_interval_hours * HOUR
    assert seconds[0] == default
    assert seconds[1] == next_interval(BASE.recrawl, PYTHON, default, True, True).seconds
    assert seconds[2] == next_interval(BASE.recrawl, PYTHON, seconds[1], True, True).seconds
    assert p.visits_changed == 2 and p.visits_unchanged == 0
    assert p.next_due == int((START + 2 * HOUR + seconds[2]) * 1_000_000)


def test_a_revisit_of_an_unchanged_page_is_a_304_only_with_full_validators():
    counts = {}
    for n in (3, 7, 11):  # never changing; validators full, ignore, none
        p = Page(f"http://live0.com/c/{n}.html", "live0.com", n, 1, 0)
        rule = recrawl_sim.crawler_rule(BASE.recrawl)
        visit(p, START, rule, conditional_get=True)
        counts[changes.validators(p.url)] = visit(p, START + DAYS * HOUR, rule, True)
    assert [(c.unchanged, c.not_modified) for c in counts.values()] == [(1, 1), (1, 0), (1, 0)]
    assert list(counts) == ["full", "ignore", "none"]


def test_boilerplate_changes_are_not_text_changes():
    url = "http://live0.com/c/45.html"
    assert (changes.change_kind(url), changes.validators(url)) == ("boilerplate", "full")
    p = Page(url, "live0.com", 45, 1, 0)
    rule = recrawl_sim.crawler_rule(BASE.recrawl)
    visit(p, START, rule, True)
    again = visit(p, START + 3 * HOUR, rule, True)
    assert (again.changed, again.unchanged, again.not_modified) == (0, 1, 0)  # new bytes


def test_the_budget_is_never_exceeded_and_every_url_is_visited():
    for cfg in (BASE, FIXED, replace(BASE, generate__revisit_share=0.0)):
        s = simulate(cfg, SPEC, generations=DAYS)
        assert s.busiest <= 4
        assert all(c.planned <= 2 * 4 for c in s.gens)
        assert set().union(*s.fetched) == set(changes.changing_urls(SPEC))
        assert s.total.planned == s.total.new + s.total.revisited == sum(map(len, s.fetched))


def test_never_changing_pages_are_fetched_less_often_under_adaptive_than_fixed():
    adaptive = simulate(BASE, SPEC, generations=DAYS).kinds["never"]
    fixed = simulate(FIXED, SPEC, generations=DAYS).kinds["never"]
    assert adaptive.pages == fixed.pages == 2 * 4
    assert adaptive.fetches < fixed.fetches / 2
    assert adaptive.unchanged < fixed.unchanged / 2


def test_a_web_that_never_changes_is_always_fresh(monkeypatch):
    monkeypatch.setattr(changes, "text_version", lambda url, t: 0)
    monkeypatch.setattr(changes, "page_version", lambda url, t: 0)
    cfg = replace(FIXED, generate__max_per_host=20)  # every URL in its first generation
    s = simulate(cfg, SPEC, generations=30, measure_from=2)
    assert (s.freshness, s.age_hours) == (1.0, 0.0)
    assert s.total.changed == 0 and s.total.unchanged == s.total.revisited > 0


def test_age_counts_from_the_first_change_after_the_visit():
    url = "http://live0.com/c/1.html"  # daily
    p = Page(url, "live0.com", 1, 1, 0)
    visit(p, START, recrawl_sim.crawler_rule(BASE.recrawl), True)
    first_change = changes.version_start(url, START + changes.DAY)
    assert START < first_change <= START + changes.DAY
    assert recrawl_sim.staleness(p, first_change - 1, START) == 0.0
    assert recrawl_sim.staleness(p, first_change + 600, START) == 600.0
    # a day on, it is still the first change that made the stored copy stale
    fresh_copy = Page(url, "live0.com", 1, 1, 0)
    visit(fresh_copy, START, recrawl_sim.crawler_rule(BASE.recrawl), True)
    assert (
        recrawl_sim.staleness(fresh_copy, first_change + changes.DAY + 5, START) == changes.DAY + 5
    )


@pytest.mark.parametrize(("inc", "dec", "share"), [(0.4, 0.2, 0.60), (0.3, 0.4, 0.34)])
def test_the_adaptive_rule_settles_where_its_log_does_not_drift(inc, dec, share):
    cfg = replace(BASE, recrawl__inc_rate=inc, recrawl__dec_rate=dec).recrawl
    p = recrawl.settles_at(cfg)
    assert p == pytest.approx(share, abs=0.005)
    assert (1 + inc) ** (1 - p) * (1 - dec) ** p == pytest.approx(1.0)


def test_report_rows_compare_against_the_fixed_schedule_that_spends_the_budget():
    r = recrawl.study(hosts=1, pages=7, max_per_host=2, days=2)
    assert r["budget_hours"] == 4.0
    names = [p["key"] for p in r["policies"]]
    assert names[:3] == ["fixed", "fixed_24h", "adaptive"] and "nutch" in names
    gen = recrawl.Counts(planned=2, new=2)
    r["check"] = {
        "hosts": 1,
        "pages": 7,
        "max_per_host": 2,
        "step_hours": 2.0,
        "default_hours": 2.0,
        "real": [vars(gen), {**vars(gen), "new": 1}],
        "simulated": [vars(gen), vars(gen)],
        "same_urls": [True, True],
        "seconds": 60.0,
    }
    rows = recrawl.goal_rows(r)
    assert [row[-1] for row in rows] == ["≥ 1", "≤ 0.7", "≥ 1", "≤ 0.7", "≥ 1"]
    assert rows[-1][1:4] == ("1", "2", 0.5)  # one generation of two agreed
    text = "\n".join(recrawl.details(r))
    assert "| 1 | 2 | 0 | 1 / 2 |" in text and "fixed 4 h" in text
    report = render({**results(), "recrawl": r})
    assert "| 9c. recrawl: real generations" in report and "**9. Recrawl**" in report
