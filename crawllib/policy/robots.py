"""robots.txt decisions per RFC 9309, pure Python (no I/O).

``RobotsRules.parse(body, agent)`` turns a robots.txt body into the rules that bind one
crawler; ``rules.allowed(url)`` answers for an absolute http(s) URL. The fetch engine maps
HTTP outcomes onto the two fixed policies: ``allow_all()`` for a 4xx robots.txt,
``disallow_all()`` for a 5xx or unreachable one.

Built on protego 0.7.0 (pinned), whose percent-encoding normaliser and ``*``/``$`` pattern
matcher are used as they are. Its group selection and rule set are not, because protego
0.7.0 deviates from RFC 9309 there (each case is pinned by a test in
``tests/unit/test_robots.py`` that fails once protego stops deviating):

- a group matches any agent that *starts* with its name (``Foo`` catches ``FooBot``);
  RFC 9309 §2.2.1 matches the whole product token;
- ``Disallow: /foo$`` adds a hidden literal rule ``/foo%24``, so the anchor also catches
  ``/foo$`` and ``/foo$x``; §2.2.3 makes a trailing ``$`` an anchor only;
- ``Allow: /index.html`` adds a hidden ``Allow: /$``, which the RFC does not have;
- a UTF-8 byte-order mark hides the first ``User-agent`` line.

So this module splits lines and groups itself (the RFC grammar is a few lines) and keeps
protego's matching primitives. They are private names of protego; a protego upgrade must
rerun the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

from protego._urlpattern import _URLPattern
from protego._utils import _quote_path, _quote_pattern

MAX_ROBOTS_BYTES = 512000  # RFC 9309 §2.5: parse at least 500 KiB
# A group's wildcard rules are tried one by one against every URL of the host, each in Python:
# 24,800 of them cost 0.56 s per URL of 2 KB. A group with more wildcard rules than this is
# taken as disallowing everything (the crawler stays polite and pays nothing; no real
# robots.txt comes near it). Plain rules cost a dictionary lookup per distinct rule length.
MAX_WILDCARD_RULES = 1000

# RFC 9309 §2.2.1: product-token = identifier / "*", identifier = 1*(ALPHA / "-" / "_").
# Like Google's reference parser, a value such as "FooBot/2.1" is read as its leading token.
_PRODUCT_TOKEN = re.compile(r"\*(?=\s|$)|[A-Za-z_-]+")
_EOL = re.compile(r"\r\n|\r|\n")  # RFC 9309 §2.2: EOL = CR / LF / CRLF


def _product_token(value: str) -> str | None:
    m = _PRODUCT_TOKEN.match(value.strip())
    return m.group(0).lower() if m else None


def _decode(body: str | bytes, max_bytes: int) -> str:
    """Return the text of the first ``max_bytes`` bytes of ``body``, cut after the last
    complete line (a cut line could turn ``Allow: /public`` into ``Allow: /p``), without BOM.
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if len(raw) > max_bytes:
        raw = raw[:max_bytes]
        raw = raw[: max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1]
    return raw.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _records(text: str) -> Iterator[tuple[str, str]]:
    """Yield ``(key, value)`` per line: key lowercased, comment and whitespace removed."""
    for line in _EOL.split(text):
        key, sep, value = line.split("#", 1)[0].partition(":")
        if sep:
            yield key.strip().lower(), value.strip()


def _crawl_delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


class _Group:
    """The merged groups that name one agent: rules in file order and the first crawl-delay."""

    def __init__(self) -> None:
        self.seen = False
        self.rules: list[tuple[str, bool]] = []  # (pattern, is_allow)
        self.crawl_delay: float | None = None


class RobotsRules:
    """The rules of one robots.txt that bind one crawler.

    ``crawl_delay``: Crawl-delay of the selected group in seconds (None if absent or invalid).
    ``sitemaps``: every Sitemap line of the file, in order, deduplicated.
    ``too_many_wildcards``: the group had more than MAX_WILDCARD_RULES wildcard rules, and
    disallows everything.
    """

    __slots__ = (
        "_exact",
        "_prefix",
        "_prefix_lengths",
        "_rules",
        "_wildcards",
        "crawl_delay",
        "sitemaps",
        "too_many_wildcards",
    )

    def __init__(
        self,
        rules: Iterable[tuple[str, bool]] = (),
        crawl_delay: float | None = None,
        sitemaps: list[str] | None = None,
    ) -> None:
        quoted = [(q, is_allow) for pattern, is_allow in rules if (q := _quote_pattern(pattern))]
        self.too_many_wildcards = sum("*" in q for q, _ in quoted) > MAX_WILDCARD_RULES
        if self.too_many_wildcards:
            quoted = [("/", False)]  # the others are not even compiled
        # RFC 9309 §2.2.2: the match with the most octets wins and Allow wins a tie: the
        # greatest (length, allow) among the rules that match decides. A plain rule matches
        # the target's prefix of its length, one ending in $ (protego's anchor) the whole
        # target: both are looked up; wildcard rules are tried in that order.
        self._prefix: dict[str, bool] = {}
        self._exact: dict[str, bool] = {}
        wildcards = []
        for q, is_allow in quoted:
            if "*" in q:
                wildcards.append((_URLPattern(q), is_allow))
            else:
                kept = self._exact if q.endswith("$") else self._prefix
                key = q[:-1] if q.endswith("$") else q
                kept[key] = kept.get(key, False) or is_allow
        wildcards.sort(key=lambda r: (r[0].priority, r[1]), reverse=True)
        self._wildcards: tuple[tuple[_URLPattern, bool], ...] = tuple(wildcards)
        self._prefix_lengths = sorted({len(p) for p in self._prefix}, reverse=True)
        self._rules = sorted(quoted, key=lambda r: (len(r[0]), r[1]), reverse=True)  # for repr
        self.crawl_delay = crawl_delay
        self.sitemaps = list(sitemaps or [])

    @classmethod
    def parse(cls, text: str | bytes, agent: str, max_bytes: int = MAX_ROBOTS_BYTES) -> RobotsRules:
        """Parse a robots.txt body for the crawler whose product token is ``agent``.

        ``text``: the body; bytes are decoded as UTF-8 with replacement. Only the first
        ``max_bytes`` bytes count, cut on a line boundary. The groups naming ``agent``
        (case-insensitive, whole token) are merged; if there is none, the ``*`` groups apply;
        if there is none either, everything is allowed.
        """
        token = _product_token(agent)
        if token is None or token == "*":
            raise ValueError(f"agent {agent!r} has no product token (letters, '-', '_')")
        ours, star = _Group(), _Group()
        agents: set[str] = set()  # product tokens of the group being read
        in_rules = False  # after a rule, a user-agent line starts a new group
        sitemaps: dict[str, None] = {}  # in order, once each
        for key, value in _records(_decode(text, max_bytes)):
            if key == "user-agent":
                if in_rules:
                    agents, in_rules = set(), False
                name = _product_token(value)
                if name:
                    agents.add(name)
                ours.seen |= token in agents
                star.seen |= "*" in agents
            elif key == "sitemap":
                if value:
                    sitemaps[value] = None
            elif key in ("allow", "disallow", "crawl-delay"):
                in_rules = True  # Crawl-delay counts as a rule here, as in protego
                for group, name in ((ours, token), (star, "*")):
                    if name not in agents:
                        continue
                    if key == "crawl-delay":
                        if group.crawl_delay is None:
                            group.crawl_delay = _crawl_delay(value)
                    elif value:  # an empty Disallow (or Allow) says nothing
                        group.rules.append((value, key == "allow"))
        chosen = ours if ours.seen else star
        return cls(chosen.rules, chosen.crawl_delay, list(sitemaps))

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """The policy for a robots.txt answered with 4xx (RFC 9309 §2.3.1.3)."""
        return cls()

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        """The policy for a robots.txt answered with 5xx or unreachable (RFC 9309 §2.3.1.4)."""
        return cls([("/", False)])

    def allowed(self, url: str) -> bool:
        """Whether the absolute http(s) ``url`` may be fetched; ``/robots.txt`` always may."""
        if urlsplit(url).path == "/robots.txt":
            return True
        target = _quote_path(url)  # path + query, percent-encoding normalised as the rules
        best: tuple[int, bool] = (-1, True)  # (length, allow) of the best match: none yet
        for length in self._prefix_lengths:
            if length <= len(target) and (allow := self._prefix.get(target[:length])) is not None:
                best = (length, allow)
                break
        if (allow := self._exact.get(target)) is not None:
            best = max(best, (len(target) + 1, allow))  # the $ counts, as protego's priority
        for pattern, is_allow in self._wildcards:
            if (pattern.priority, is_allow) <= best:
                break
            if pattern.match(target):
                return is_allow
        return best[1]

    def __repr__(self) -> str:
        rules = [("allow " if a else "disallow ") + p for p, a in self._rules]
        return (
            f"RobotsRules(rules={rules}, crawl_delay={self.crawl_delay}, sitemaps={self.sitemaps})"
        )


def allowed(robots_txt: str, agent: str, url: str) -> bool:
    """One-shot check: ``RobotsRules.parse(robots_txt, agent).allowed(url)``."""
    return RobotsRules.parse(robots_txt, agent).allowed(url)
