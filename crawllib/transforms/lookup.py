"""Looking a generation's keys up in a table the size of the crawl.

A generation touches a small share of crawldb (or of all earlier texts): the URLs it fetched,
the targets of its links, the hashes of its texts. Joined as such, a left join or an anti-join
of the generation's rows against crawldb is, on Spark, a sort-merge join that shuffles and
sorts every crawldb row each generation (Spark may broadcast only the side a left join does not
keep, and its size estimate of a Delta scan is the table's bytes on disk, so it seldom
broadcasts either). :func:`rows_of` first keeps crawldb's rows whose key the generation has,
with the generation's distinct keys broadcast: the table is scanned once, only the columns
asked for, and filtered where it is read, never shuffled; the join that follows is between two
generation-sized sides. Measured by the scale benchmark (docs/benchmarks.md, measure 11). The
embedded engine reads the hint as a plain semi-join (DuckDB builds its hash table on the
smaller side by itself).

The broadcast holds one generation's distinct keys: about 40 bytes per key in the executors'
hash relation, 400 MB for 10^7 keys (docs/scale.md says when a generation outgrows it).
"""

from __future__ import annotations


def rows_of(table: str, keys: str, on: str | list[str] = "url_key", key: str | None = None) -> str:
    """SQL of the rows of ``table`` (a relation name, or a parenthesised query) whose column
    ``on`` (or columns) matches a row of ``keys``'s same columns (or of its column ``key``,
    for one column named otherwise there), with ``table``'s columns: a left-semi join with the
    distinct keys broadcast. ``keys`` is generation-sized (a stage's own rows); ``table`` may
    be the size of the crawl. A null key matches nothing (an equi-join)."""
    names = [on] if isinstance(on, str) else list(on)
    if key is not None and len(names) != 1:
        raise ValueError("key renames a single column")
    wanted = ", ".join(f"`{key or n}` AS `{n}`" for n in names)
    match = " AND ".join(f"_t.`{n}` = _k.`{n}`" for n in names)
    return (
        f"SELECT /*+ BROADCAST(_k) */ _t.* FROM {table} _t LEFT SEMI JOIN "
        f"(SELECT DISTINCT {wanted} FROM {keys}) _k ON {match}"
    )
