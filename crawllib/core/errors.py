"""Errors of the user's input, of stage order or of the crawl root's state: the CLI prints each
as one line and exits 2."""


class ConfigError(ValueError):
    """A configuration key or value was refused; the message names key, value and what is allowed."""


class StageOrderError(RuntimeError):
    """A stage was asked to run before the one it builds on."""


class QueryRefused(ValueError):
    """`crawl sql` was given a statement that writes, or reads something other than the crawl's
    tables."""


class LeaseHeld(RuntimeError):
    """Another process holds the crawl root's writer lease (and it has not expired)."""


class LeaseLost(RuntimeError):
    """This process's writer lease was taken over, or could not be renewed for 2/3 of its
    length: it must not write again."""


class LeaseNotHeld(RuntimeError):
    """A table write in a process that holds no writer lease on the crawl root."""


class TableBehind(RuntimeError):
    """A table is at an older Delta version than a stage recorded after committing to it."""


class TableChanged(RuntimeError):
    """A table has commits after the version a stage recorded that crawllib did not write (a
    DELETE or RESTORE outside the crawl, another writer)."""


class BadRoot(ValueError):
    """The crawl root cannot be used: a file, not a folder, or a folder this user cannot
    write to (for a command that writes)."""


class EngineUnavailable(RuntimeError):
    """`crawl sql --engine duckdb` cannot run here: its packages are not installed, or the crawl
    root is on storage it does not read."""


# What the CLI reports as one line and exit 2 rather than a traceback.
USER_ERRORS = (
    StageOrderError,
    QueryRefused,
    LeaseHeld,
    LeaseLost,
    LeaseNotHeld,
    TableBehind,
    TableChanged,
    BadRoot,
    EngineUnavailable,
)
