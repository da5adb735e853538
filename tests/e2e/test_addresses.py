"""Politeness per server address (politeness.key = ip) over a generation of two slices, from
the server's request log: hosts served from one loopback address share one slot, so that
address sees its requests spaced by the address's rule (here min_address_delay = the host
delay), whichever host asked; plan resolves the names once and
keeps the answers in the dns table. (Politeness across generations: test_hosts.py.)"""

from __future__ import annotations

import contextlib
import shutil

import pytest

from crawllib.config import replace
from crawllib.runs import runner
from crawllib.stages.seeding import seed
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from tests.e2e import reading
from tests.unit.test_fetch_support import SLACK, LocalWeb

pytestmark = pytest.mark.e2e

DELAY = 0.25
SHARED = ("a.shared.org", "b.shared.org")  # on 127.0.0.2
SOLO = "solo.net"  # on 127.0.0.3
OTHER = "other.net"  # on 127.0.0.1
PAGES = 3


def page(*links: str) -> str:
    anchors = "".join(f'<p><a href="{href}">{href}</a></p>' for href in links)
    return f"<html><body><p>{'Some words. ' * 30}</p>{anchors}</body></html>"


@pytest.fixture(scope="module")
def crawled(spark_cfg, template_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("addresses")
    root = str(tmp / "crawl")
    shutil.copytree(template_root, root)
    with LocalWeb(addresses=("127.0.0.1", "127.0.0.2", "127.0.0.3")) as server:
        for host in SHARED:
            for p in range(PAGES):
                server.text(host, f"/{p}", page(), content_type="text/html")
        for host in (SOLO, OTHER):
            server.text(host, "/0", page(), content_type="text/html")
        resolve = {
            **server.resolve(*SHARED, address="127.0.0.2"),
            **server.resolve(SOLO, address="127.0.0.3"),
            **server.resolve(OTHER),
        }
        cfg = replace(
            spark_cfg,
            network__resolve=resolve,
            politeness__key="ip",
            politeness__default_delay=DELAY,
            politeness__min_address_delay=DELAY,
            storage__fetch_slices=2,
            crawl__max_depth=0,
        )
        seeds = tmp / "seeds.txt"
        urls = [f"http://{h}/{p}" for h in SHARED for p in range(PAGES)]
        urls += [f"http://{SOLO}/0", f"http://{OTHER}/0"]
        seeds.write_text("\n".join(urls) + "\n")
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            seed(db, str(seeds), cfg, 0)
            runner.run_generation(db, cfg, 0)
        hits = list(server.hits)

    def rows(name):
        return reading.read(root, name)

    return {
        "hits": hits,
        "fetchlist": rows("fetchlist"),
        "fetches": rows("fetches"),
        "hosts": {r["slot"]: r for r in rows("hosts")},
        "dns": {r["host"]: r for r in rows("dns")},
    }


def test_one_address_sees_one_request_per_delay_whichever_host_asks(crawled):
    shared = sorted((h for h in crawled["hits"] if h.address == "127.0.0.2"), key=lambda h: h.start)
    assert {h.host for h in shared} == set(SHARED)
    gaps = [b.start - a.start for a, b in zip(shared, shared[1:], strict=False)]
    # each host: its pages, robots.txt and /sitemap.xml (robots.txt lists none)
    assert len(gaps) == 2 * (PAGES + 2) - 1 and min(gaps) >= DELAY - SLACK, gaps
    assert sum(h.path_qs == "/sitemap.xml" for h in shared) == 2


def test_plan_puts_the_hosts_of_one_address_in_one_slot(crawled):
    slots = {(r["gen"], r["host"]): r["slot"] for r in crawled["fetchlist"]}
    assert slots == {
        (0, "a.shared.org"): "127.0.0.2",
        (0, "b.shared.org"): "127.0.0.2",
        (0, SOLO): "127.0.0.3",
        (0, OTHER): "127.0.0.1",
    }
    assert {r["outcome"] for r in crawled["fetches"]} == {"ok"}
    assert len(crawled["fetches"]) == 2 * PAGES + 2


def test_the_answers_are_kept_and_the_hosts_table_is_per_address(crawled):
    dns = crawled["dns"]
    assert {h: (r["address"], r["error_kind"]) for h, r in dns.items()} == {
        "a.shared.org": ("127.0.0.2", None),
        "b.shared.org": ("127.0.0.2", None),
        SOLO: ("127.0.0.3", None),
        OTHER: ("127.0.0.1", None),
    }
    assert all(r["expires_at"] > r["resolved_at"] for r in dns.values())
    hosts = crawled["hosts"]
    addresses = {"127.0.0.1", "127.0.0.2", "127.0.0.3"}
    assert set(hosts) == addresses | {*SHARED, SOLO, OTHER}
    # a row per address, and one per host with the address it is paced within
    assert {s: r["kind"] for s, r in hosts.items() if s in addresses} == dict.fromkeys(
        addresses, "address"
    )
    assert {s: (r["kind"], r["address"]) for s, r in hosts.items() if s not in addresses} == {
        **dict.fromkeys(SHARED, ("host", "127.0.0.2")),
        SOLO: ("host", "127.0.0.3"),
        OTHER: ("host", "127.0.0.1"),
    }
    assert hosts["127.0.0.2"]["addresses"] == ["127.0.0.2"]
    assert (hosts["127.0.0.2"]["urls_attempted"], hosts["127.0.0.2"]["pages"]) == (6, 6)
    # the hosts' rows hold the budgets: each counts its own URLs tried, the address none
    assert [hosts[h]["urls_tried"] for h in SHARED] == [PAGES, PAGES]
    assert hosts["127.0.0.2"]["urls_tried"] == 0
