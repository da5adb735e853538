"""The documents `crawl export-text` writes: the texts rows it keeps, with their fetch time.

One query over ``{texts}`` and ``{pages}``: of each URL its latest text among the generations
chosen (the version a revisit stored last, as the view ``latest_texts``), then kept when

- it has text: no extraction error, a text that is not empty;
- it is no soft 404 (its text is its host's answer to a missing page);
- it is a document: ``non_document`` is null (not a 200 "page not found", a parked domain or a
  server's default page, crawllib.content.nondocument), where texts has that column;
- with ``one_per_cluster``, it is the first copy of its cluster: ``duplicate_of IS NULL``
  (exact and near copies, and pages naming another URL their canonical, point to the first
  copy, which is kept);
- unless ``include_reserved``, the page does not reserve it: ``tdm_reserved`` (W3C TDMRep
  ``tdm-reservation: 1``, or the robots directive ``noai``) is not true and its robots
  directives hold neither ``noai`` nor ``noindex``;
- its language (the detected one, else the declared one) is one of ``languages``, if given;
- the user's predicate over the texts columns holds, if given (:func:`check_predicate`).

Out: text, gen, url_key, url, fetched_us (the page's fetch time, microseconds since the epoch,
UTC), language, language_detected, quality, cluster (the first copy of its cluster of
duplicates: ``cluster``, else, in rows written before that column, ``duplicate_of``, else its
own url_key),
tdm_reserved.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from crawllib.core.vocab import Directive, DuplicateKind
from crawllib.store.schemas import TEXTS
from crawllib.transforms.sqltext import in_list, is_in, lit

# Robots directives that reserve a page's text from a training set (besides tdm_reserved).
RESERVING_DIRECTIVES = (Directive.NOAI, Directive.NOINDEX)
_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass(frozen=True)
class Predicate:
    """What a user's predicate reads: texts columns, and the functions SQLGlot does not know
    by name (Spark's JVM and file functions among them: the CLI holds them to `crawl sql`'s
    allow-list, crawllib.sql.functions)."""

    columns: list[str]
    other_functions: list[str]


def check_predicate(predicate: str) -> Predicate:
    """What a user's ``--where`` predicate reads; ValueError (one line) unless it is one SQL
    expression (Spark SQL) of texts columns: no second statement, no subquery, no column of
    another table."""
    import sqlglot
    from sqlglot import exp

    where = f"--where {predicate!r}"
    if _PLACEHOLDER.search(predicate):
        raise ValueError(f"{where}: '{{name}}' is not SQL; write the expression itself")
    try:
        parsed = [e for e in sqlglot.parse(predicate, read="spark") if e is not None]
    except sqlglot.errors.SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{where}: cannot parse it: {first}") from None
    if len(parsed) != 1:
        raise ValueError(f"{where}: expected one SQL expression, got {len(parsed)} statements")
    tree = parsed[0]
    if isinstance(tree, exp.Query | exp.Command | exp.DDL | exp.DML) or any(
        isinstance(node, exp.Query | exp.Subquery | exp.DDL | exp.DML) for node in tree.walk()
    ):
        raise ValueError(f"{where}: expected an expression over texts columns, not a query")
    known = set(TEXTS.names)
    read = set()
    for column in tree.find_all(exp.Column):
        name = column.parts[0].name.lower()
        if name not in known:
            raise ValueError(
                f"{where}: {name} is not a column of texts; its columns are: "
                + ", ".join(TEXTS.names)
            )
        read.add(name)
    others = {f.name.lower() for f in tree.find_all(exp.Anonymous)}
    return Predicate(sorted(read), sorted(others))


def reserved() -> str:
    """Whether a texts row's page reserves its text: tdm_reserved, or a reserving directive."""
    directives = " OR ".join(
        f"coalesce(array_contains(directives, {lit(d)}), FALSE)" for d in RESERVING_DIRECTIVES
    )
    return f"(coalesce(tdm_reserved, FALSE) OR {directives})"


def documents(
    gens: Sequence[int] | None = None,
    languages: Sequence[str] = (),
    predicate: str | None = None,
    one_per_cluster: bool = True,
    include_reserved: bool = False,
    texts_columns: Collection[str] = TEXTS.names,
) -> str:
    """The query (module docstring) over ``{texts}`` and ``{pages}``. gens: None for all;
    texts_columns: the columns texts has (a root made before non_document or cluster has
    not)."""

    def chosen(alias: str = "") -> str:
        return is_in(f"{alias}gen", list(gens)) if gens is not None else "TRUE"

    keep = [
        "error IS NULL",
        "text IS NOT NULL",
        "text <> ''",
        f"coalesce(duplicate_kind, '') <> {lit(DuplicateKind.SOFT_404)}",
    ]
    if "non_document" in texts_columns:
        keep.append("non_document IS NULL")
    cluster = "coalesce(t.cluster, t.duplicate_of, t.url_key)"
    if "cluster" not in texts_columns:
        cluster = "coalesce(t.duplicate_of, t.url_key)"
    if one_per_cluster:
        keep.append("duplicate_of IS NULL")
    if not include_reserved:
        keep.append(f"NOT {reserved()}")
    if languages:
        keep.append(f"coalesce(language_detected, language) IN ({in_list(languages)})")
    if predicate is not None:
        check_predicate(predicate)
        keep.append(f"({predicate})")
    return (
        "WITH latest AS (SELECT gen, slice, url_key FROM (SELECT gen, slice, url_key, "
        "row_number() OVER (PARTITION BY url_key ORDER BY gen DESC, slice DESC) AS _newest "
        f"FROM {{texts}} WHERE {chosen()}) WHERE _newest = 1), "
        "versions AS (SELECT x.* FROM {texts} x JOIN latest l ON x.gen = l.gen "
        f"AND x.slice = l.slice AND x.url_key = l.url_key WHERE {chosen('x.')}), "
        # the filters, the user's predicate among them, see the texts columns by their names
        f"t AS (SELECT * FROM versions WHERE {' AND '.join(keep)}), "
        "fetched AS (SELECT gen, url_key, max(fetched_at) AS fetched_at FROM {pages} "
        f"WHERE {chosen()} GROUP BY gen, url_key) "
        "SELECT t.text, t.gen, t.url_key, t.url, unix_micros(p.fetched_at) AS fetched_us, "
        "coalesce(t.language_detected, t.language) AS language, t.language_detected, "
        f"t.quality, {cluster} AS cluster, "
        "coalesce(t.tdm_reserved, FALSE) AS tdm_reserved "
        "FROM t LEFT JOIN fetched p ON p.gen = t.gen AND p.url_key = t.url_key"
    )
