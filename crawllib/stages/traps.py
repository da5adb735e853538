"""The traps and aliases tables as the stages read them (URL-pattern traps:
crawllib.policy.traps has the rules, crawllib.transforms.traps their SQL; alias hosts:
crawllib.transforms.aliases), and how update adds a generation's counts."""

from __future__ import annotations

from crawllib.config import Config
from crawllib.store.db import Db, Rel
from crawllib.transforms.aliases import alias_hosts
from crawllib.transforms.traps import trapped_patterns

# MERGE of pattern_counts (s) into traps (t) on (host, pattern), guarded by
# crawllib.store.db.ONCE_PER_GEN: a generation adds its counts once.
TRAPS_UPDATE = {
    "pages": "t.pages + s.pages",
    "duplicates": "t.duplicates + s.duplicates",
    "gen": "s.gen",
    "updated_at": "s.updated_at",
}


def read_trapped(db: Db, cfg: Config) -> Rel | None:
    """The trapped patterns (host, pattern) of the crawl root's traps table; None on a root
    without one yet."""
    if not db.exists("traps"):
        return None
    return db.sql(trapped_patterns(cfg), traps=db.table("traps"))


def read_aliased(db: Db, cfg: Config) -> Rel | None:
    """The hosts judged aliases (host, alias_of); None on a root without an aliases table
    yet."""
    if not db.exists("aliases"):
        return None
    return db.sql(alias_hosts(cfg), aliases=db.table("aliases"), traps=db.table("traps"))
