"""URL-pattern traps in SQL (the rules and why: crawllib.policy.traps): the SQL twins of the
pattern and repeated-segment rules (built-ins, no Python function; a test keeps them equal to
the Python ones), a generation's pages counted per host and pattern, and the patterns judged
traps. The traps table is read and written by crawllib.stages.traps and the stages, never here.
"""

from __future__ import annotations

from crawllib.config import Config
from crawllib.core.vocab import DuplicateKind
from crawllib.policy.traps import DIGITS, HEX, allowed_patterns
from crawllib.transforms.sqltext import is_in, lit

_PATH = "regexp_extract({url}, '^[^:/?#]+://[^/?#]*([^?#]*)', 1)"
# '{h}' and '{n}' without braces in the text (braces name a rule's inputs)
_HEX_MARK = "concat(chr(123), 'h', chr(125))"
_DIGITS_MARK = "concat(chr(123), 'n', chr(125))"


def url_pattern(url: str) -> str:
    """:func:`crawllib.policy.traps.url_pattern` as an SQL expression of the column ``url``."""
    path = _PATH.format(url=url)
    path = f"regexp_replace(regexp_replace({path}, {lit(HEX)}, {_HEX_MARK}), {lit(DIGITS)}, {_DIGITS_MARK})"
    query = f"regexp_extract({url}, '\\\\?([^#]*)', 1)"
    param_names = (
        f"array_join(array_sort(array_distinct(transform(split({query}, '&'), "
        "p -> split(p, '=')[0]))), '&')"
    )
    return f"CASE WHEN {query} = '' THEN {path} ELSE concat({path}, '?', {param_names}) END"


def repeats_more_than(url: str, times: int) -> str:
    """SQL: whether some path segment of ``url`` occurs more than ``times`` times
    (:func:`crawllib.policy.traps.repeated_segments` > times)."""
    path = _PATH.format(url=url)
    segments = f"filter(split({path}, '/'), s -> s != '')"
    counts = f"transform(array_distinct({segments}), s -> size(filter({segments}, t -> t = s)))"
    return f"(coalesce(array_max({counts}), 0) > {times})"


def pattern_counts(gen: int, pages: str = "{pages}", marks: str = "{marks}") -> str:
    """A generation's pages counted per host and pattern: rows for the traps table.

    In: pages of gen (url_key, url, host); marks (url_key, duplicate_kind) of its duplicates.
    Out: host, pattern, pages, duplicates (exact, near or soft 404), first_gen = gen = ``gen``,
    updated_at."""
    kinds = (DuplicateKind.EXACT, DuplicateKind.NEAR, DuplicateKind.SOFT_404)
    copies = f"SELECT DISTINCT url_key FROM {marks} WHERE {is_in('duplicate_kind', kinds)}"
    return (
        f"SELECT host, pattern, count(*) AS pages, count(c.url_key) AS duplicates, "
        f"{gen} AS first_gen, {gen} AS gen, current_timestamp() AS updated_at FROM "
        f"(SELECT url_key, host, {url_pattern('url')} AS pattern FROM {pages}) p "
        f"LEFT JOIN ({copies}) c ON p.url_key = c.url_key GROUP BY host, pattern"
    )


def trapped_patterns(cfg: Config, traps: str = "{traps}") -> str:
    """The (host, pattern) pairs whose new URLs plan filters: traps.min_pages pages or more,
    at least traps.duplicate_share of them duplicates, and not in traps.allow.
    In: traps rows. Out: host, pattern."""
    t = cfg.traps
    trapped = (
        f"SELECT host, pattern FROM {traps} WHERE pages >= {t.min_pages} AND "
        f"duplicates >= pages * {lit(float(t.duplicate_share))}"
    )
    allowed = allowed_patterns(t.allow)
    if not allowed:
        return trapped
    kept = " OR ".join(f"(host = {lit(h)} AND pattern = {lit(p)})" for h, p in allowed)
    return f"SELECT host, pattern FROM ({trapped}) WHERE NOT ({kept})"
