"""Recrawl: revisit policies over two simulated weeks of hourly generations on the changing
hosts of the test web (known change rates), at a fixed fetch budget per generation; and a short
real crawl that checks the simulator counts what the crawler does.

The simulator is :mod:`benchmarks.recrawl_sim`.

**The real check** (:func:`real_check`): a few generations of the real crawler (on the embedded
engine by default, or on Spark: ``--engine``; Delta tables, the test web on loopback,
``crawl.now`` and the web's clock set per generation) and the simulator on the same setup;
each generation's plan (planned, revisits) and update (new, revisited, changed, unchanged,
not_modified) counts and its fetched URLs should be equal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from benchmarks.recrawl_sim import (
    HOUR,
    START,
    Counts,
    Rule,
    known_rate_rule,
    settles_at,
    simulate,
)
from crawllib.config import Config, replace
from crawllib.testweb import changes
from crawllib.testweb.site import WebSpec

if TYPE_CHECKING:
    from crawllib.store.db import Db


@dataclass(frozen=True)
class Policy:
    """A revisit policy under study: ``cfg`` (its recrawl section), and a rule that replaces
    crawllib.policy.revisit's (None: the crawler's own)."""

    key: str
    name: str
    cfg: Config
    rule: Rule | None = None


# Adaptive rates under study (inc_rate, dec_rate) beside the crawler's defaults (0.1, 0.3):
# Nutch's AdaptiveFetchSchedule's, the anchor, and a steadier pair.
NUTCH = (0.4, 0.2)
STEADIER = (0.3, 0.4)


def policies(base: Config, budget_hours: float) -> list[Policy]:
    """The policies compared, all at ``base``'s budget (generate.max_per_host): fixed at the
    interval that spends the budget (key ``fixed``) and at 24 h; adaptive at the crawler's
    defaults (``adaptive``), with the budget's interval as default, at Nutch's rates
    (``nutch``) and a steadier pair, the defaults with a 2 h minimum; and the known-rate rule
    at the defaults' steady share."""
    fixed = replace(base, recrawl__policy="fixed")
    adaptive = replace(base, recrawl__policy="adaptive")

    def rates(inc: float, dec: float) -> Config:
        return replace(adaptive, recrawl__inc_rate=inc, recrawl__dec_rate=dec)

    tuned = adaptive  # the defaults
    name = "adaptive, inc {:g} dec {:g}".format
    steady = settles_at(tuned.recrawl) or 0.5
    every = f"{budget_hours:g} h"
    return [
        Policy(
            "fixed", f"fixed {every}", replace(fixed, recrawl__default_interval_hours=budget_hours)
        ),
        Policy("fixed_24h", "fixed 24 h", replace(fixed, recrawl__default_interval_hours=24.0)),
        Policy("adaptive", "adaptive, defaults", adaptive),
        Policy(
            "adaptive_budget",
            f"adaptive, default {every}",
            replace(adaptive, recrawl__default_interval_hours=budget_hours),
        ),
        Policy("steadier", name(*STEADIER), rates(*STEADIER)),
        Policy("nutch", name(*NUTCH) + " (Nutch's rates)", rates(*NUTCH)),
        Policy(
            "tuned_min2",
            "adaptive, defaults, min 2 h",
            replace(tuned, recrawl__min_interval_hours=2.0),
        ),
        Policy(
            "known_rate",
            f"known change rate, p = {steady:.2f} per visit (simulator only)",
            tuned,
            known_rate_rule(tuned.recrawl, steady),
        ),
    ]


def study(
    hosts: int = 4, pages: int = 39, max_per_host: int = 10, days: int = 14
) -> dict[str, Any]:
    """Every policy of :func:`policies` simulated over ``days`` of hourly generations on
    ``hosts`` changing hosts of ``pages`` /c/ pages each (plus the front page); fetches over
    the whole run, freshness and age over its second half."""
    spec = WebSpec(hosts=0, special=False, changing_hosts=hosts, changing_pages=pages)
    base = replace(Config(), generate__max_per_host=max_per_host)
    budget_hours = (pages + 1) / max_per_host
    generations = days * 24
    rows, kinds = [], {}
    t0 = time.perf_counter()
    for policy in policies(base, budget_hours):
        s = simulate(policy.cfg, spec, START, generations, HOUR, policy.rule, generations // 2)
        total, recrawl = s.total, policy.cfg.recrawl
        adaptive = policy.rule is None and recrawl.policy == "adaptive"
        rows.append(
            {
                "key": policy.key,
                "policy": policy.name,
                "settles_at": settles_at(recrawl) if adaptive else None,
                "fetches": total.planned,
                "budget_used": total.planned / (hosts * max_per_host * generations),
                "new": total.new,
                "changed": total.changed,
                "unchanged": total.unchanged,
                "not_modified": total.not_modified,
                "freshness": s.freshness,
                "age_hours": s.age_hours,
                "busiest": s.busiest,
            }
        )
        kinds[policy.key] = {k: asdict(v) for k, v in s.kinds.items()}
    return {
        "hosts": hosts,
        "pages": pages,
        "max_per_host": max_per_host,
        "revisit_share": base.generate.revisit_share,
        "budget_hours": budget_hours,
        "days": days,
        "start": START,
        "policies": rows,
        "kinds": kinds,
        "seconds": time.perf_counter() - t0,
    }


def check_config(base: Config, max_per_host: int) -> Config:
    """The real check's settings: adaptive from a 2 h default (revisits within a few
    generations 2 h apart), ``max_per_host``, no links followed inside a generation and no
    sitemaps (the simulator models neither)."""
    return replace(
        base,
        generate__max_per_host=max_per_host,
        recrawl__policy="adaptive",
        recrawl__default_interval_hours=2.0,
        fetch__follow=False,
        sitemaps__enabled=False,
        politeness__jitter=0.0,
    )


def real_check(
    work: str,
    hosts: int = 2,
    pages: int = 15,
    max_per_host: int = 6,
    generations: int = 6,
    step: float = 2 * HOUR,
    delay: float = 0.05,
    engine: str = "embedded",
) -> dict[str, Any]:
    """``generations`` generations of the real crawler on ``engine``, ``step`` seconds apart
    by ``crawl.now`` and the test web's clock, from the front pages of ``hosts`` changing
    hosts, and the simulator on the same setup; per generation, both counts and fetched URLs."""
    from benchmarks.stages import bench_config, close_root, open_root
    from crawllib.runs import runner
    from crawllib.stages import seeding
    from crawllib.testweb import serve_in_thread

    spec = WebSpec(hosts=0, special=False, changing_hosts=hosts, changing_pages=pages)
    cfg = check_config(bench_config(), max_per_host)
    root = os.path.join(work, "recrawl-check")
    os.makedirs(work, exist_ok=True)
    seeds = root + "-seeds.txt"
    with open(seeds, "w", encoding="utf-8") as fh:
        fh.write("".join(f"http://{changes.changing_host_name(i)}/\n" for i in range(hosts)))
    t0 = time.perf_counter()
    with serve_in_thread(spec) as web:
        cfg = replace(cfg, network__resolve=web.resolve, politeness__default_delay=delay)
        db = open_root(root, cfg, engine, "bench recrawl")
        try:
            seeding.seed(db, seeds, cfg, 0)
            for gen in range(generations):
                now = START + gen * step
                web.set_now(now)
                clock = dt.datetime.fromtimestamp(now, dt.UTC).isoformat()
                runner.run_generation(db, replace(cfg, crawl__now=clock), gen)
            seconds = time.perf_counter() - t0
            real, real_urls = generation_counts(db)
        finally:
            close_root(db)
    sim = simulate(cfg, spec, START, generations, step)
    return {
        "engine": engine,
        "hosts": hosts,
        "pages": pages,
        "max_per_host": max_per_host,
        "step_hours": step / HOUR,
        "default_hours": cfg.recrawl.default_interval_hours,
        "real": [asdict(c) for c in real],
        "simulated": [asdict(c) for c in sim.gens],
        "same_urls": [a == b for a, b in zip(real_urls, sim.fetched, strict=False)],
        "seconds": seconds,
    }


def generation_counts(db: Db) -> tuple[list[Counts], list[set[str]]]:
    """Per generation of a crawl: its plan and update counts (generations table, done runs)
    and the URLs its fetch stage fetched (fetches table)."""
    from crawllib.core.vocab import Stage, StageState
    from crawllib.store import generations

    by_gen: dict[int, dict[str, int]] = {}
    for run in generations.read_rows(db):
        if run.state == StageState.DONE and run.stage in (Stage.PLAN, Stage.UPDATE):
            by_gen.setdefault(run.gen, {}).update(run.counts)
    names = [f.name for f in fields(Counts)]
    counts = [Counts(**{k: by_gen[g].get(k, 0) for k in names}) for g in sorted(by_gen)]
    urls: list[set[str]] = [set() for _ in counts]
    for r in db.collect(db.table("fetches", columns=["gen", "url"])):
        urls[r["gen"]].add(r["url"])
    return counts, urls


def bench_recrawl(
    work: str,
    hosts: int = 4,
    pages: int = 39,
    max_per_host: int = 10,
    days: int = 14,
    check_generations: int = 6,
    engine: str = "embedded",
) -> dict[str, Any]:
    """The suite's case: :func:`study`, then :func:`real_check` on ``engine`` (skipped when
    ``check_generations`` is 0)."""
    out = study(hosts, pages, max_per_host, days)
    if check_generations:
        out["check"] = real_check(work, generations=check_generations, engine=engine)
    return out


# The report: rows of the goal table (measure, ours, reference, ratio, goal) and the details.
GoalRow = tuple[str, str, str, float | None, str]


def goal_rows(r: dict[str, Any]) -> list[GoalRow]:
    """Freshness (≥ the fixed schedule's) and unchanged fetches (≤ 0.7 × its) of adaptive at
    the crawler's defaults and at Nutch's rates, against fixed at the interval that spends the budget; and whether
    the real crawl's generations counted what the simulator did."""
    by_key = {p["key"]: p for p in r["policies"]}
    ref = by_key["fixed"]
    weeks = f"{r['days'] / 7:g} simulated weeks"
    out: list[GoalRow] = []
    for label, key in (("a", "adaptive"), ("b", "nutch")):
        p = by_key[key]
        out += [
            (
                f"9{label}. recrawl, {weeks}: freshness, {p['policy']} / {ref['policy']} "
                "(same budget)",
                f"{p['freshness']:.3f}",
                f"{ref['freshness']:.3f}",
                p["freshness"] / ref["freshness"],
                "≥ 1",
            ),
            (
                f"9{label}. recrawl, {weeks}: fetches of unchanged pages, {p['policy']} / "
                f"{ref['policy']}",
                f"{p['unchanged']:,}",
                f"{ref['unchanged']:,}",
                p["unchanged"] / max(1, ref["unchanged"]),
                "≤ 0.7",
            ),
        ]
    if "check" in r:
        c = r["check"]
        # a generation the real crawl did not finish counts as a disagreement
        agree = sum(
            a == b and same
            for a, b, same in zip(c["real"], c["simulated"], c["same_urls"], strict=False)
        )
        out.append(
            (
                "9c. recrawl: real generations whose counts and URLs the simulator predicted / all",
                str(agree),
                str(len(c["simulated"])),
                agree / max(1, len(c["simulated"])),
                "≥ 1",
            )
        )
    return out


def details(r: dict[str, Any]) -> list[str]:
    """Markdown: the setup, the policies' figures, their figures per change kind, and the
    real check's per-generation counts."""
    kinds = r["kinds"]["fixed"]
    mix = ", ".join(f"{v['pages'] // r['hosts']} {k}" for k, v in kinds.items())
    when = dt.datetime.fromtimestamp(r["start"], dt.UTC).strftime("%Y-%m-%d %H:%M")
    out = [
        f"**9. Recrawl**, simulated (`benchmarks.recrawl.simulate`: plan's per-host "
        "selection, crawllib.policy.revisit's rule, the test web's change truth; no politeness "
        f"timing, no failures): {r['hosts']} changing hosts × {r['pages'] + 1} URLs (per "
        f"host: {mix}), {r['days'] * 24} hourly generations from {when} UTC, "
        f"generate.max_per_host {r['max_per_host']} (budget: every URL once in "
        f"{r['budget_hours']:g} h, the interval of the fixed schedule that spends it), "
        f"revisit_share {r['revisit_share']:g}. Fetches over the whole run (unchanged: the "
        "text is the stored one, 304s included); freshness (share of pages whose stored text "
        "is current) and age (hours since the stored text stopped being current) over the "
        "second half, sampled at 7.5, 22.5, 37.5 and 52.5 min past each hour. p*: the share "
        "of visits finding a change at which the adaptive rule holds an interval steady, "
        "ln(1 + inc) / (ln(1 + inc) − ln(1 − dec)).",
        "",
        "| policy | p* | fetches (of the budget) | changed | unchanged (304) | unchanged / fixed "
        "| freshness | mean age h |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ref = next(p for p in r["policies"] if p["key"] == "fixed")
    for p in r["policies"]:
        steady = "" if p["settles_at"] is None else f"{p['settles_at']:.2f}"
        out.append(
            f"| {p['policy']} | {steady} | {p['fetches']:,} ({p['budget_used']:.0%}) | "
            f"{p['changed']:,} | {p['unchanged']:,} ({p['not_modified']:,}) | "
            f"{p['unchanged'] / max(1, ref['unchanged']):.2f} | {p['freshness']:.3f} | "
            f"{p['age_hours']:.2f} |"
        )
    shown = [p for p in r["policies"] if p["key"] in ("fixed", "adaptive", "nutch")]
    out += [
        "",
        "Per change kind: fetches per page per day, freshness.",
        "",
        "| kind | " + " | ".join(p["policy"] for p in shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    per_day = 1 / r["days"]
    for kind in kinds:
        cells = []
        for p in shown:
            k = r["kinds"][p["key"]][kind]
            share = k["fresh"] / max(1, k["samples"])
            cells.append(f"{k['fetches'] / k['pages'] * per_day:.2f}, {share:.2f}")
        out.append(f"| {kind} | " + " | ".join(cells) + " |")
    if "check" in r:
        out += ["", *_check_details(r["check"])]
    return out


def _check_details(c: dict[str, Any]) -> list[str]:
    names = list(c["real"][0]) if c["real"] else []
    out = [
        f"Real crawl{' on the ' + c['engine'] + ' engine' if 'engine' in c else ''} against "
        f"the simulator: {c['hosts']} changing hosts × {c['pages'] + 1} "
        f"URLs, {len(c['simulated'])} generations {c['step_hours']:g} h apart (crawl.now and the "
        f"test web's clock), adaptive from a {c['default_hours']:g} h default, max_per_host "
        f"{c['max_per_host']}, fetch.follow off, in {c['seconds']:.0f} s. A cell shows "
        "real / simulated where they differ.",
        "",
        "| gen | " + " | ".join(names) + " | same URLs |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for gen, (real, sim, same) in enumerate(
        zip(c["real"], c["simulated"], c["same_urls"], strict=False)
    ):
        cells = [str(real[k]) if real[k] == sim[k] else f"{real[k]} / {sim[k]}" for k in names]
        out.append(f"| {gen} | " + " | ".join(cells) + f" | {'yes' if same else '**no**'} |")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=4, help="changing hosts (default 4)")
    parser.add_argument("--pages", type=int, default=39, help="/c/ pages per host (default 39)")
    parser.add_argument("--max-per-host", type=int, default=10, help="budget (default 10)")
    parser.add_argument("--days", type=int, default=14, help="simulated days (default 14)")
    parser.add_argument(
        "--check-generations",
        type=int,
        default=6,
        help="generations of the real crawl checked against the simulator (0: none; default 6)",
    )
    parser.add_argument("--work-dir", help="the real check's crawl root goes here (default: temp)")
    from benchmarks.stages import add_engine_argument

    add_engine_argument(parser)


def main(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    r = study(args.hosts, args.pages, args.max_per_host, args.days)
    if args.check_generations:
        work = args.work_dir or tempfile.mkdtemp(prefix="crawllib-bench-recrawl-")
        try:
            r["check"] = real_check(work, generations=args.check_generations, engine=args.engine)
        finally:
            if not args.work_dir:
                shutil.rmtree(work, ignore_errors=True)
    print("| measure | ours | reference | ratio | goal |\n|---|---|---|---|---|")
    for measure, ours, reference, ratio, goal in goal_rows(r):
        print(f"| {measure} | {ours} | {reference} | {ratio:.2f} | {goal} |")
    print("\n" + "\n".join(details(r)))
    print(f"\n({time.perf_counter() - t0:.0f} s; simulation {r['seconds']:.0f} s)")
