"""Alias hosts, as SQL: a host whose pages are, mostly, exact copies of another host's pages (a
mirror, ``www.`` and the bare name serving one site, an old name kept alive) is crawled once,
not twice.

Update counts, in the ``aliases`` table, per pair of hosts (host, of_host), the pages of
``host`` marked exact duplicates whose first copy is on ``of_host`` (``copies``: a MERGE that
adds a generation once). A host is an **alias** of another once it has ``aliases.min_pages``
pages (the sum of its URL patterns' pages in the traps table: every page it has served), of
which at least ``aliases.duplicate_share`` are shared with that host (its copies of the other
plus the other's copies of it: when both are crawled at once, each page's first copy is on
either host), and it is the copy: it has more copies of the other than the other of it (ties:
the greater host name is the copy, so exactly one of two equal mirrors is the alias). Plan then
filters every URL of an alias, revisits included, with reason ``alias``; an operator keeps a
host crawled with ``aliases.allow``.

Only exact duplicates count: near duplicates are common between distinct sites of one
template, exact copies of most of a host's pages are not.
"""

from __future__ import annotations

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind
from crawllib.transforms.sqltext import in_list, lit


def alias_counts(gen: int, marks: str = "{marks}", hosts: str = "{hosts}") -> str:
    """A generation's exact duplicates counted per pair of hosts: rows for the aliases table.

    In: marks (url_key, duplicate_of, duplicate_kind) of gen's duplicates; hosts (url_key,
    host) of every page a mark may name, the marked ones and their first copies (gen's pages
    and crawldb). Out: host, of_host, copies, first_gen = gen = ``gen``, updated_at; only pairs
    of two different hosts."""
    copies = (
        f"SELECT url_key, duplicate_of FROM {marks} WHERE duplicate_kind = "
        f"{lit(DuplicateKind.EXACT)}"
    )
    named = f"SELECT url_key FROM ({copies}) UNION SELECT duplicate_of FROM ({copies})"
    owners = (
        f"SELECT DISTINCT h.url_key, h.host FROM {hosts} h LEFT SEMI JOIN ({named}) n "
        "ON h.url_key = n.url_key"
    )
    return (
        f"SELECT a.host, b.host AS of_host, count(*) AS copies, {gen} AS first_gen, "
        f"{gen} AS gen, current_timestamp() AS updated_at FROM ({copies}) c "
        f"JOIN ({owners}) a ON c.url_key = a.url_key JOIN ({owners}) b "
        "ON c.duplicate_of = b.url_key WHERE a.host != b.host GROUP BY a.host, b.host"
    )


# MERGE of alias_counts (s) into aliases (t) on (host, of_host), guarded by
# crawllib.store.db.ONCE_PER_GEN: a generation adds its counts once.
ALIASES_UPDATE = {
    "copies": "t.copies + s.copies",
    "gen": "s.gen",
    "updated_at": "s.updated_at",
}


def alias_hosts(cfg: Config, aliases: str = "{aliases}", traps: str = "{traps}") -> str:
    """The hosts judged aliases (module docstring), not in aliases.allow, with the host each
    copies. In: aliases rows, traps rows (for each host's pages). Out: host, alias_of."""
    a = cfg.aliases
    pages = f"SELECT host, sum(pages) AS pages FROM {traps} GROUP BY host"
    pairs = (
        f"SELECT x.host, x.of_host, x.copies, coalesce(y.copies, 0) AS copied, p.pages "
        f"FROM {aliases} x LEFT JOIN {aliases} y ON x.host = y.of_host AND x.of_host = y.host "
        f"JOIN ({pages}) p ON x.host = p.host"
    )
    judged = (
        f"SELECT * FROM ({pairs}) WHERE pages >= {a.min_pages} AND copies + copied >= "
        f"pages * {lit(float(a.duplicate_share))} AND (copies > copied OR "
        "(copies = copied AND host > of_host))"
    )
    best = f"SELECT host, max_by(of_host, copies) AS alias_of FROM ({judged}) GROUP BY host"
    allowed = sorted({h.lower() for h in a.allow})
    if not allowed:
        return best
    return f"SELECT * FROM ({best}) WHERE host NOT IN ({in_list(allowed)})"
