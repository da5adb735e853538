"""Operator exclusions as SQL (the rules: crawllib.policy.exclusions): matched by plan with
built-ins (IN, a prefix compare, RLIKE), no Python function; the rules of an exclude file that
is not local are read once by the stage (crawllib.store.db.Db.read_file) and travel to the
fetch tasks inside the config (:func:`inlined`)."""

from __future__ import annotations

from collections.abc import Callable

from crawllib.config import Config, replace
from crawllib.core.errors import ConfigError
from crawllib.policy.exclusions import Exclusions
from crawllib.policy.exclusions import load as load_rules
from crawllib.transforms.sqltext import in_list, lit

# The bytes of a file at a URI (crawllib.store.db.Db.read_file).
FileReader = Callable[[str], bytes]


def load(cfg: Config, read_file: FileReader | None = None) -> Exclusions:
    """The crawl's exclusions (crawllib.policy.exclusions.load), an exclude_file that is not
    local read with ``read_file``."""

    def remote(path: str) -> list[tuple[str, str]]:
        if read_file is None:
            raise ConfigError(f"crawl.exclude_file {path!r} cannot be read here")
        try:
            data = read_file(path)
        except FileNotFoundError:
            raise ConfigError(f"crawl.exclude_file {path!r} does not exist") from None
        except OSError as exc:
            raise ConfigError(f"crawl.exclude_file {path!r} cannot be read: {exc}") from None
        return [(path, data.decode("utf-8", errors="replace"))]

    return load_rules(cfg, remote)


def inlined(cfg: Config, read_file: FileReader | None = None) -> Config:
    """``cfg`` with the rules of crawl.exclude_file read (:func:`load`) and written into
    crawl.exclude, exclude_file empty: a config the fetch tasks use without reading any file
    (an S3 file is read once, by the stage)."""
    if not cfg.crawl.exclude_file:
        return cfg
    return replace(cfg, crawl__exclude=load(cfg, read_file).rules(), crawl__exclude_file="")


def matches_sql(rules: Exclusions, url: str, host: str, domain: str) -> str:
    """:meth:`Exclusions.matches` as an SQL boolean expression of the columns ``url``, ``host``
    and ``domain``: true when any rule matches, else false (a null input matches nothing)."""
    tests = []
    if rules.hosts:
        tests.append(f"{host} IN ({in_list(sorted(rules.hosts))})")
    if rules.domains:
        tests.append(f"{domain} IN ({in_list(sorted(rules.domains))})")
    tests += [f"left({url}, {len(p)}) = {lit(p)}" for p in rules.prefixes]
    tests += [f"{url} RLIKE {lit(p)}" for p in rules.patterns]
    if not tests:
        return "FALSE"
    return f"coalesce({' OR '.join(f'({t})' for t in tests)}, FALSE)"
