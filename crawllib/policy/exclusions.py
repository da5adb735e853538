"""Operator exclusions: what is never fetched (``crawl.exclude``, ``crawl.exclude_file``).

One rule per list item or file line; surrounding whitespace is stripped, blank lines and lines
starting with ``#`` are skipped. Every rule names its kind:

- ``domain:example.com``: the registered domain (as ``crawllib.core.urls.registered_domain`` gives
  it: public suffix + 1 label; a host without a known public suffix is its own domain) and every
  host under it. A name that is not its own registered domain (``www.example.com``) is refused:
  it would never match.
- ``host:www.example.com``: that host only; case-insensitive, a trailing dot ignored, IDNA
  applied, no port.
- ``prefix:https://example.com/private/``: URLs that start with it. The prefix up to its query
  is normalised as a URL (lowercase scheme and host, no default port, canonical escapes; a bare
  host gains its "/", so ``http://a.com`` does not match ``http://a.com.evil.net/``); a query
  part is kept as written. ``prefix:http://a.com/x`` matches ``http://a.com/x/y`` and
  ``http://a.com/xy``.
- ``regex:PATTERN``: searched anywhere in the normalised URL (Python ``re.search``; Spark
  ``rlike``: Java's ``find``; the embedded engine: DuckDB's RE2). Write patterns in the syntax
  all three share; a pattern Python cannot compile, or with a Python-only construct
  (``(?P<name>``, ``(?P=name)``, ``(?#...)``, ``(?(1)...)``, the flags ``a`` and ``L``,
  ``{,n}``, an unescaped literal ``{``, nested or operator classes Python warns about) is
  refused. Java-only syntax such as ``\\p{L}`` does not compile in Python and is refused too.
  So is what RE2 lacks (the embedded engine's plan would fail on it): lookahead and
  lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups ``(?>``, possessive
  quantifiers (``*+``, ``++``, ``?+``, ``{n}+``), backreferences ``\\1`` to ``\\9``, and
  ``\\Z``.

:meth:`Exclusions.matches` (Python, the in-fetch follower) and
``crawllib.transforms.exclusions.matches_sql`` (SQL built-ins, plan on either engine) decide
alike; a test keeps them in step. This module imports neither pyspark nor the configuration
(its types only).
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from crawllib.core.errors import ConfigError
from crawllib.core.urls import InvalidURL, host_of, normalize_url, registered_domain

if TYPE_CHECKING:
    from crawllib.config import Config

# (file, text) of each file at a URI that is not local: crawllib.transforms.exclusions reads
# it with the engine (crawllib.store.db.Db.read_file).
RemoteReader = Callable[[str], list[tuple[str, str]]]

KINDS = ("domain", "host", "prefix", "regex")
_QUANTIFIER = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_INLINE_FLAGS = re.compile(r"\(\?([A-Za-z-]+)[:)]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: not a drive


@dataclasses.dataclass(frozen=True)
class Exclusions:
    """Parsed exclusion rules (see the module doc); pickles, for Spark executors.

    domains and hosts are normalised names, prefixes normalised URL prefixes, patterns regex
    sources. Empty (the default) excludes nothing.
    """

    domains: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    _compiled: tuple[re.Pattern[str], ...] = dataclasses.field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(re.compile(p) for p in self.patterns))

    @property
    def empty(self) -> bool:
        """No rule: nothing is excluded."""
        return not (self.domains or self.hosts or self.prefixes or self.patterns)

    def __bool__(self) -> bool:
        return not self.empty

    def __or__(self, other: Exclusions) -> Exclusions:
        """The rules of both (prefixes and patterns in order, without repeats)."""
        return Exclusions(
            domains=self.domains | other.domains,
            hosts=self.hosts | other.hosts,
            prefixes=tuple(dict.fromkeys(self.prefixes + other.prefixes)),
            patterns=tuple(dict.fromkeys(self.patterns + other.patterns)),
        )

    def rules(self) -> tuple[str, ...]:
        """The rules as lines :func:`parse` reads back to the same Exclusions."""
        return (
            *(f"domain:{d}" for d in sorted(self.domains)),
            *(f"host:{h}" for h in sorted(self.hosts)),
            *(f"prefix:{p}" for p in self.prefixes),
            *(f"regex:{p}" for p in self.patterns),
        )

    def matches(self, url: str, host: str, domain: str) -> bool:
        """Whether a URL is excluded.

        In: a normalised URL, its host (``host_of``) and registered domain
        (``registered_domain``), as crawldb holds them. Out: true when any rule matches.
        """
        return (
            host in self.hosts
            or domain in self.domains
            or url.startswith(self.prefixes)
            or any(p.search(url) for p in self._compiled)
        )


def parse(lines: Iterable[str], source: str) -> Exclusions:
    """Rules from list items or file lines.

    In: the lines, and what they come from (a file path, ``crawl.exclude``) for messages.
    Out: the Exclusions. Raises ValueError ``"{source}:{n}: {rule!r}: {problem}"`` (n counts
    from 1, blank and comment lines included) at the first bad rule.
    """
    domains: set[str] = set()
    hosts: set[str] = set()
    prefixes: dict[str, None] = {}
    patterns: dict[str, None] = {}
    for n, line in enumerate(lines, start=1):
        rule = line.strip()
        if not rule or rule.startswith("#"):
            continue
        kind, sep, value = rule.partition(":")
        kind, value = kind.strip().lower(), value.strip()
        try:
            if not sep or kind not in KINDS:
                raise ValueError(_no_kind(rule))
            if not value:
                raise ValueError(f"nothing after {kind + ':'!r}")
            if kind == "domain":
                domains.add(_domain(value))
            elif kind == "host":
                hosts.add(_host(value))
            elif kind == "prefix":
                prefixes[_prefix(value)] = None
            else:
                patterns[_pattern(value)] = None
        except ValueError as exc:
            raise ValueError(f"{source}:{n}: {rule!r}: {exc}") from None
    return Exclusions(frozenset(domains), frozenset(hosts), tuple(prefixes), tuple(patterns))


def _no_kind(rule: str) -> str:
    if "://" in rule:
        example = f"did you mean prefix:{rule}?"
    elif " " not in rule:
        example = f"did you mean domain:{rule} or host:{rule}?"
    else:
        example = "e.g. domain:example.com"
    return f"no kind: start the rule with domain:, host:, prefix: or regex: ({example})"


def _host(text: str) -> str:
    """A host rule's value as ``host_of`` gives hosts: lowercase, IDNA, no trailing dot, an
    IPv6 literal without brackets."""
    if any(c in text for c in "/?#@ "):
        raise ValueError("a host name, not a URL (for a URL use prefix:)")
    netloc = f"[{text}]" if text.count(":") > 1 and not text.startswith("[") else text
    if ":" in netloc.rpartition("]")[2]:
        raise ValueError("a host without a port")
    try:
        return host_of(normalize_url(f"http://{netloc}/"))
    except InvalidURL as exc:
        raise ValueError(f"not a host name ({exc})") from None


def _domain(text: str) -> str:
    name = _host(text)
    domain = registered_domain(name)
    if domain != name:
        raise ValueError(
            f"{name!r} is not a registered domain (its registered domain is {domain!r}): "
            f"write host:{name} for that host only, or domain:{domain}"
        )
    return name


def _prefix(text: str) -> str:
    scheme, sep, _ = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ValueError("a prefix is an absolute URL starting with http:// or https://")
    if "#" in text:
        raise ValueError("a normalised URL has no fragment: a prefix with '#' never matches")
    head, question, query = text.partition("?")
    try:
        return normalize_url(head) + question + query
    except InvalidURL:  # "https://" alone, say: kept as written
        return scheme.lower() + text[len(scheme) :]


def _pattern(text: str) -> str:
    try:
        with warnings.catch_warnings():
            # re warns (FutureWarning) of nested sets and set operations, which Java reads
            # differently; as errors they are not cached, so every parse refuses them
            warnings.simplefilter("error")
            re.compile(text)
    except re.error as exc:
        raise ValueError(f"Python cannot compile the regex ({exc})") from None
    except Warning as exc:
        raise ValueError(f"a regex Java reads differently ({exc})") from None
    problem = _python_only(text)
    if problem:
        raise ValueError(f"{problem} (write regexes Python and Java read alike)")
    problem = _not_re2(text)
    if problem:
        raise ValueError(
            f"{problem}: the embedded engine matches with RE2 (DuckDB), which has none "
            "(write regexes Python, Java and RE2 read alike)"
        )
    return text


def _python_only(pattern: str) -> str | None:
    """The first construct of a compiled pattern that Java reads otherwise or refuses, or None."""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if pattern.startswith("(?", i):
            rest = pattern[i + 2 :]
            if rest.startswith(("P<", "P=", "P>")):
                return "(?P...) named groups are Python-only; use a plain group"
            if rest.startswith("#"):
                return "(?#...) comments are Python-only"
            if rest.startswith("("):
                return "(?(...)...) conditional groups are Python-only"
            flags = _INLINE_FLAGS.match(pattern, i)
            if flags and set(flags.group(1)) & {"a", "L"}:
                return "the inline flags a and L are Python-only"
        if char == "{" and not _QUANTIFIER.match(pattern, i):
            return "Java reads '{' as a repetition: write {0,n} for {,n}, \\{ for a literal '{'"
        i += 1
    return None


def _not_re2(pattern: str) -> str | None:
    """The first construct of a compiled pattern that RE2 refuses (DuckDB's regexes: the
    embedded engine's plan would fail on it), or None."""
    i = pattern.find("\\")
    while i >= 0:  # in a character class too, where Python reads \1 as an octal escape
        escaped = pattern[i + 1 : i + 2]
        if escaped and escaped in "123456789":
            return f"a backreference or octal escape (\\{escaped})"
        if escaped == "Z":
            return "\\Z (write $: a normalised URL has no line break)"
        i = pattern.find("\\", i + 2)
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            return "lookahead or lookbehind ((?=, (?!, (?<=, (?<!)"
        if pattern.startswith("(?>", i):
            return "an atomic group ((?>...))"
        if pattern.startswith("(?", i):
            i += 2  # a group's "?" is no quantifier
            continue
        counted = _QUANTIFIER.match(pattern, i)
        end = counted.end() if counted else i + 1 if char in "*+?" else None
        if end is None:
            i += 1
            continue
        if pattern.startswith("+", end):
            return f"a possessive quantifier ({pattern[i:end]}+)"
        i = end + 1 if pattern.startswith("?", end) else end  # a lazy quantifier's "?"
    return None


def _class_end(pattern: str, start: int) -> int:
    """Index after the character class opened at ``start`` (Python's reading: a ']' first in
    the class is literal)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern[i] == "]":
            return i + 1
        else:
            i += 1
    return i


def load(cfg: Config, read_remote: RemoteReader | None = None) -> Exclusions:
    """The crawl's exclusions: ``crawl.exclude`` and the lines of ``crawl.exclude_file``.

    In: the config; what reads an exclude_file that is not local (a path without a scheme, or
    file:, is read with open(); crawllib.transforms.exclusions.load reads any other URI with
    the engine, once). Out: the Exclusions. Raises ConfigError when the file cannot be read or
    holds a bad rule (naming the file and line).
    """
    try:
        rules = parse(cfg.crawl.exclude, "crawl.exclude")
        path = cfg.crawl.exclude_file
        if not path:
            return rules
        scheme = _SCHEME.match(path)
        if scheme is None or scheme.group(1).lower() == "file":
            return rules | parse(_read_local(path).splitlines(), path)
        if read_remote is None:
            raise ConfigError(
                f"config key 'crawl.exclude_file': {path!r} is not a local file; reading it "
                "needs a SparkSession"
            )
        for source, text in read_remote(path):
            rules = rules | parse(text.splitlines(), source)
        return rules
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _read_local(path: str) -> str:
    local = Path(unquote(urlsplit(path).path) if path.lower().startswith("file:") else path)
    what = f"crawl.exclude_file {path!r}"
    try:
        return local.expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} is a folder, not a file") from None
    except PermissionError:
        raise ConfigError(f"{what} cannot be read (permission)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{what} cannot be read ({exc.strerror or exc})") from None
