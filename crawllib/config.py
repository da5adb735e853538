"""Typed configuration: defaults < ``--config FILE`` (TOML) < ``--set section.key=value``.

Every setting is declared once, below, with its default, its type and one line of
documentation (the Scrapy habit). ``conf/default.toml`` is generated from these declarations
(``python -m crawllib.config``) and a test keeps the two identical.

The resulting :class:`Config` is a frozen tree of plain dataclasses: it pickles, so Spark
executors receive it as a value and never read files or globals.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration key or value was refused; the message names key, value and what is allowed."""


@dataclasses.dataclass(frozen=True)
class Setting:
    default: Any
    doc: str
    kind: str  # int, float, bool, str, list[str], table, enum
    check: Callable[[Any], str | None] | None = None  # returns an error text or None
    choices: tuple[str, ...] = ()


def _min(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"a number >= {lo}"


def _positive(v: Any) -> str | None:
    return None if v > 0 else "a number > 0"


def _check_resolve(v: Mapping[str, str]) -> str | None:
    for host, target in v.items():
        ip_text, _, port = (
            str(target).rpartition(":") if _has_port(str(target)) else (str(target), "", "")
        )
        try:
            ipaddress.ip_address(ip_text.strip("[]"))
        except ValueError:
            return f'a table host = "IP" or "IP:port" (entry {host!r} = {target!r} is not an IP)'
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            return f'a table host = "IP" or "IP:port" (entry {host!r} has bad port {port!r})'
    return None


def _has_port(target: str) -> bool:
    if target.startswith("["):
        return "]:" in target
    return target.count(":") == 1


SETTINGS: dict[str, dict[str, Setting]] = {
    "crawl": {
        "max_depth": Setting(
            3, "links followed from a seed; deeper URLs are filtered", "int", _min(0)
        ),
        "max_url_length": Setting(2048, "longer URLs are filtered", "int", _min(16)),
        "skip_extensions": Setting(
            [
                "jpg",
                "jpeg",
                "png",
                "gif",
                "webp",
                "svg",
                "ico",
                "css",
                "js",
                "mp3",
                "mp4",
                "avi",
                "mov",
                "zip",
                "gz",
                "tar",
                "exe",
                "dmg",
                "iso",
                "woff",
                "woff2",
            ],
            "URL path extensions never fetched (not HTML)",
            "list[str]",
        ),
    },
    "generate": {
        "max_per_host": Setting(
            100, "URLs fetched per host in one generation; the rest wait", "int", _min(1)
        ),
        "host_budget": Setting(
            5000, "URLs fetched per host over the whole crawl (trap guard)", "int", _min(1)
        ),
        "domain_budget": Setting(
            20000, "URLs fetched per registered domain over the whole crawl", "int", _min(1)
        ),
    },
    "politeness": {
        "key": Setting(
            "host",
            "what one politeness slot (and one Spark task) holds",
            "enum",
            choices=("host", "domain"),
        ),
        "default_delay": Setting(
            1.0, "seconds between request starts to one host", "float", _min(0)
        ),
        "max_crawl_delay": Setting(
            30.0, "robots.txt Crawl-delay is honoured up to this many seconds", "float", _min(0)
        ),
        "jitter": Setting(0.1, "extra random delay, as a fraction of the delay", "float", _min(0)),
        "max_hosts_in_flight": Setting(256, "hosts fetched at once in one task", "int", _min(1)),
    },
    "robots": {
        "agent": Setting(
            "crawllib", "product token matched against robots.txt user-agent lines", "str"
        ),
        "ttl_hours": Setting(24.0, "a cached robots.txt is reused for this long", "float", _min(0)),
        "max_bytes": Setting(
            512000,
            "only this many bytes of robots.txt are parsed (RFC 9309: >= 500 KiB)",
            "int",
            _min(1),
        ),
        "max_redirects": Setting(5, "redirects followed when fetching robots.txt", "int", _min(0)),
    },
    "fetch": {
        "user_agent": Setting(
            "crawllib/0.1 (+https://github.com/crawllib/crawllib; crawler@crawllib.invalid)",
            "User-Agent header: product token, version and a contact URL",
            "str",
        ),
        "connect_timeout": Setting(10.0, "seconds to open a connection", "float", _positive),
        "total_timeout": Setting(
            30.0, "seconds for a whole request, body included", "float", _positive
        ),
        "max_body_bytes": Setting(
            5_000_000,
            "body bytes read; the rest is cut and the fetch marked truncated",
            "int",
            _min(1),
        ),
        "max_decompressed_bytes": Setting(
            20_000_000, "decoded bytes kept from a compressed body", "int", _min(1)
        ),
        "content_types": Setting(
            ["text/html", "application/xhtml+xml"], "content types whose body is kept", "list[str]"
        ),
        "max_urls_per_host": Setting(
            1000, "URLs fetched per host in one call of the engine", "int", _min(1)
        ),
        "deadline_seconds": Setting(
            3600.0,
            "a task stops starting requests after this; the rest is deferred",
            "float",
            _positive,
        ),
        "retry_after_cap": Setting(
            120.0, "longest Retry-After honoured, in seconds", "float", _min(0)
        ),
        "max_attempts": Setting(5, "attempts before a failing URL is dead", "int", _min(1)),
        "retry_backoff_base": Setting(
            1, "a URL failed n times is retried 2**(n-1) * base generations later", "int", _min(1)
        ),
    },
    "network": {
        "resolve": Setting(
            {},
            'host -> "IP" or "IP:port": connect there, keep the Host header (trusted)',
            "table",
            _check_resolve,
        ),
        "allow_private": Setting(False, "allow private, loopback and link-local addresses", "bool"),
        "resolve_only": Setting(
            False, "reach only hosts in network.resolve; never query DNS (tests, demo)", "bool"
        ),
        "dns_cache_ttl": Setting(300.0, "seconds a DNS answer is reused", "float", _min(0)),
        "nameservers": Setting([], "DNS servers for aiodns (empty: the system's)", "list[str]"),
    },
    "parse": {
        "max_html_bytes": Setting(2_000_000, "HTML bytes handed to the extractor", "int", _min(1)),
        "near_dup_distance": Setting(
            4,
            "SimHash Hamming distance at or below which pages are near-duplicates",
            "int",
            _min(0),
        ),
        "min_text_chars": Setting(
            200, "shorter texts are not used for near-duplicate detection", "int", _min(0)
        ),
    },
    "storage": {
        "fetch_slices": Setting(
            8, "fetch commits in at most this many slices; a crash loses one", "int", _min(1)
        ),
        "min_slice_urls": Setting(
            500,
            "fewer slices when a generation is small: each holds at least this many URLs",
            "int",
            _min(1),
        ),
        "min_slice_seconds": Setting(
            60.0,
            "fewer slices when a generation is short: each lasts at least this long at "
            "politeness.default_delay (a slice's commit costs seconds)",
            "float",
            _min(0),
        ),
    },
    "spark": {
        "master": Setting("local[*]", "Spark master; empty leaves it to spark-submit", "str"),
        "app_name": Setting("crawllib", "Spark application name", "str"),
        "log_level": Setting(
            "WARN", "Spark log level", "enum", choices=("ERROR", "WARN", "INFO", "DEBUG")
        ),
        "ui": Setting(False, "start the Spark UI", "bool"),
        "shuffle_partitions": Setting(8, "spark.sql.shuffle.partitions", "int", _min(1)),
        "delta_jars": Setting(
            "download",
            "download: fetch Delta jars once into jars_cache; provided: the cluster has them",
            "enum",
            choices=("download", "provided"),
        ),
        "jars_cache": Setting("~/.cache/crawllib/ivy", "where Delta jars are cached", "str"),
        "conf": Setting({}, "extra Spark conf, key -> value", "table"),
    },
}


def _section_class(section: str, settings: Mapping[str, Setting]) -> type:
    fields = [
        (name, Any, dataclasses.field(default_factory=lambda d=s.default: _freeze(d)))
        for name, s in settings.items()
    ]
    cls = dataclasses.make_dataclass(section.capitalize() + "Config", fields, frozen=True)
    cls.__module__ = __name__
    return cls


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return dict(value)
    return value


SECTION_CLASSES = {name: _section_class(name, s) for name, s in SETTINGS.items()}
# Pickle finds the generated classes by name in this module.
globals().update({cls.__name__: cls for cls in SECTION_CLASSES.values()})

Config = dataclasses.make_dataclass(
    "Config",
    [(name, cls, dataclasses.field(default_factory=cls)) for name, cls in SECTION_CLASSES.items()],
    frozen=True,
)
Config.__module__ = __name__
Config.__doc__ = "The whole configuration: one frozen dataclass per section (cfg.fetch.user_agent)."


def coerce(key: str, value: Any, from_text: bool = False) -> Any:
    """Check (and for ``--set`` text, parse) one value; raise ConfigError naming key, value, allowed."""
    section, _, name = key.partition(".")
    setting = _lookup(section, name)
    kind = setting.kind
    if from_text:
        value = _parse_text(key, value, setting)
    ok: Any
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind in ("str", "enum"):
        ok = isinstance(value, str)
    elif kind == "list[str]":
        ok = isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
    elif kind == "table":
        ok = isinstance(value, dict)
    else:  # pragma: no cover - declarations above are fixed
        raise AssertionError(kind)
    allowed = _allowed(setting)
    if not ok:
        raise ConfigError(f"config key {key!r}: value {value!r} is not allowed; expected {allowed}")
    if kind == "enum" and value not in setting.choices:
        raise ConfigError(f"config key {key!r}: value {value!r} is not allowed; expected {allowed}")
    if setting.check is not None:
        problem = setting.check(value)
        if problem:
            raise ConfigError(
                f"config key {key!r}: value {value!r} is not allowed; expected {problem}"
            )
    return _freeze(value)


def _allowed(setting: Setting) -> str:
    if setting.kind == "enum":
        return "one of " + ", ".join(setting.choices)
    return {
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "str": "a string",
        "list[str]": "a list of strings",
        "table": "a table",
    }[setting.kind]


def _parse_text(key: str, text: str, setting: Setting) -> Any:
    if setting.kind in ("str", "enum"):
        return text
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError(
            f"config key {key!r}: value {text!r} is not allowed; expected {_allowed(setting)}"
        ) from None


def _lookup(section: str, name: str) -> Setting:
    if section not in SETTINGS:
        raise ConfigError(
            f"unknown config section {section!r} (in key {section + '.' + name!r}); "
            f"sections are: {', '.join(SETTINGS)}"
        )
    if name not in SETTINGS[section]:
        raise ConfigError(
            f"unknown config key {section + '.' + name!r}; keys of [{section}] are: "
            f"{', '.join(SETTINGS[section])}"
        )
    return SETTINGS[section][name]


def _apply(values: dict[str, dict[str, Any]], key: str, value: Any, from_text: bool) -> None:
    if "." not in key:
        raise ConfigError(f"config key {key!r} must be written section.key (e.g. crawl.max_depth)")
    section, _, name = key.partition(".")
    values.setdefault(section, {})[name] = coerce(key, value, from_text)


def load_config(
    files: Iterable[str | Path] = (),
    overrides: Iterable[str] = (),
) -> Any:
    """Build a Config: defaults, then each TOML file in order, then ``section.key=value`` texts."""
    values: dict[str, dict[str, Any]] = {}
    for path in files:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        for section, table in data.items():
            if not isinstance(table, dict):
                raise ConfigError(
                    f"config file {str(path)!r}: {section!r} must be a [section] table"
                )
            for name, value in table.items():
                _apply(values, f"{section}.{name}", value, from_text=False)
    for text in overrides:
        key, sep, raw = text.partition("=")
        if not sep:
            raise ConfigError(f"--set {text!r}: expected section.key=value")
        _apply(values, key.strip(), raw.strip(), from_text=True)
    return make_config(values)


def make_config(values: Mapping[str, Mapping[str, Any]] | None = None) -> Any:
    """Config from already-checked nested values (missing ones take defaults)."""
    values = values or {}
    return Config(
        **{
            section: cls(
                **{k: coerce(f"{section}.{k}", v) for k, v in values.get(section, {}).items()}
            )
            for section, cls in SECTION_CLASSES.items()
        }
    )


def replace(cfg: Any, **changes: Any) -> Any:
    """A copy of cfg with ``section__key=value`` changes, each checked like ``--set``."""
    values = to_dict(cfg)
    for dunder, value in changes.items():
        section, _, name = dunder.partition("__")
        _apply(values, f"{section}.{name}", value, from_text=False)
    return make_config(values)


def to_dict(cfg: Any) -> dict[str, dict[str, Any]]:
    return {
        section: {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in dataclasses.asdict(getattr(cfg, section)).items()
        }
        for section in SECTION_CLASSES
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    return repr(value)


def defaults_toml() -> str:
    """The text of conf/default.toml: every key, its default and its one-line documentation."""
    lines = [
        "# crawllib defaults. Generated by `python -m crawllib.config`; do not edit by hand.",
        "# Override in a file given with --config, or with --set section.key=value.",
    ]
    for section, settings in SETTINGS.items():
        lines += ["", f"[{section}]"]
        for name, s in settings.items():
            allowed = f" ({_allowed(s)})" if s.kind == "enum" else ""
            lines.append(f"# {s.doc}{allowed}")
            lines.append(f"{name} = {_toml_value(s.default)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(defaults_toml())
