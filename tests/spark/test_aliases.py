"""Alias hosts in SQL, on both engines: exact copies counted per pair of hosts, the copy judged
an alias, plan's filter."""

from __future__ import annotations

from crawllib.config import replace
from crawllib.store.schemas import ALIASES, TRAPS, L, S, struct_of
from crawllib.transforms.aliases import alias_counts, alias_hosts
from crawllib.transforms.plan import filter_aliases
from tests.rows import rel, run

OWNERS = struct_of(("url_key", L), ("host", S))
MARKS = struct_of(("url_key", L), ("duplicate_of", L), ("duplicate_kind", S))
CANDIDATES = struct_of(("url", S), ("host", S), ("filter_reason", S))
ALIASED = struct_of(("host", S), ("alias_of", S))


def _aliases(db, rows):
    return rel(
        db,
        ALIASES,
        [{"host": h, "of_host": o, "copies": c} for h, o, c in rows],
        first_gen=1,
        gen=2,
    )


def _pages(db, counts):
    return rel(
        db,
        TRAPS,
        [
            {"host": h, "pattern": f"/p{i}", "pages": n}
            for h, ns in counts.items()
            for i, n in enumerate(ns)
        ],
    )


def test_exact_copies_are_counted_per_pair_of_different_hosts(db):
    owned = (
        [{"url_key": k, "host": "site.net"} for k in range(1, 5)]
        + [{"url_key": 10 + k, "host": "mirror.net"} for k in range(1, 5)]
        + [{"url_key": 20, "host": "other.net"}]
    )
    marks = rel(
        db,
        MARKS,
        [
            {"url_key": u, "duplicate_of": d, "duplicate_kind": k}
            for u, d, k in [
                (11, 1, "exact"),  # mirror.net copies site.net, three times
                (12, 2, "exact"),
                (13, 3, "exact"),
                (14, 4, "near"),  # near copies do not count
                (2, 11, "exact"),  # site.net copies mirror.net once
                (3, 1, "exact"),  # a copy on its own host does not count
                (20, 99, "canonical"),
            ]
        ],
    )
    owners = rel(db, OWNERS, owned + owned)  # owners seen twice
    rows = run(db, alias_counts(5), marks=marks, hosts=owners)
    got = {(r["host"], r["of_host"]): r["copies"] for r in rows}
    assert got == {("mirror.net", "site.net"): 3, ("site.net", "mirror.net"): 1}
    assert {(r["first_gen"], r["gen"]) for r in rows} == {(5, 5)}


def test_the_copy_of_a_host_sharing_most_pages_is_its_alias_unless_allowed(db, spark_cfg):
    cfg = replace(spark_cfg, aliases__min_pages=10, aliases__duplicate_share=0.8, aliases__allow=())
    aliases = _aliases(
        db,
        [
            ("mirror.net", "site.net", 8),  # 8 + 1 of mirror.net's 10 pages shared: an alias
            ("site.net", "mirror.net", 1),  # site.net: 9 of 30 shared, and the original
            ("b.org", "a.org", 5),  # two equal mirrors: the greater name is the alias
            ("a.org", "b.org", 5),
            ("partial.com", "site.net", 7),  # 7 of 20: not an alias
            ("few.com", "site.net", 5),  # all 5 pages copies, but fewer than min_pages
        ],
    )
    pages = _pages(
        db,
        {
            "mirror.net": [6, 4],
            "site.net": [30],
            "a.org": [10],
            "b.org": [10],
            "partial.com": [20],
            "few.com": [5],
        },
    )

    def judged(c):
        return {
            r["host"]: r["alias_of"] for r in run(db, alias_hosts(c), aliases=aliases, traps=pages)
        }

    assert judged(cfg) == {"mirror.net": "site.net", "b.org": "a.org"}
    loose = replace(cfg, aliases__min_pages=5, aliases__duplicate_share=0.3)
    assert judged(loose) == {
        "mirror.net": "site.net",
        "b.org": "a.org",
        "partial.com": "site.net",
        "few.com": "site.net",
    }
    kept = replace(cfg, aliases__allow=("MIRROR.net",))
    assert judged(kept) == {"b.org": "a.org"}


def test_a_host_copying_two_hosts_is_the_alias_of_the_one_it_copies_most(db, spark_cfg):
    cfg = replace(spark_cfg, aliases__min_pages=10, aliases__duplicate_share=0.4, aliases__allow=())
    # m.net is an alias of both by the shares (4 and 6 of its 10 pages)
    aliases = _aliases(db, [("m.net", "a.net", 4), ("m.net", "b.net", 6)])
    pages = _pages(db, {"m.net": [10], "a.net": [10], "b.net": [10]})
    got = run(db, alias_hosts(cfg), aliases=aliases, traps=pages)
    assert {r["host"]: r["alias_of"] for r in got} == {"m.net": "b.net"}


def test_plan_filters_every_url_of_an_alias_without_another_reason(db):
    df = rel(
        db,
        CANDIDATES,
        [
            {"url": "http://mirror.net/a", "host": "mirror.net"},
            {"url": "http://mirror.net/b", "host": "mirror.net", "filter_reason": "depth"},
            {"url": "http://site.net/a", "host": "site.net"},
        ],
    )
    aliased = rel(db, ALIASED, [{"host": "mirror.net", "alias_of": "site.net"}])
    out = run(db, filter_aliases(CANDIDATES.names), df=df, aliased=aliased)
    assert out and all(tuple(r) == CANDIDATES.names for r in out)
    assert {r["url"]: r["filter_reason"] for r in out} == {
        "http://mirror.net/a": "alias",
        "http://mirror.net/b": "depth",
        "http://site.net/a": None,
    }
    # no alias (a root without an aliases table yet: plan leaves the rule out): nothing changes
    none = rel(db, ALIASED, [])
    out = run(db, filter_aliases(CANDIDATES.names), df=df, aliased=none)
    assert {r["url"]: r["filter_reason"] for r in out} == {
        "http://mirror.net/a": None,
        "http://mirror.net/b": "depth",
        "http://site.net/a": None,
    }
