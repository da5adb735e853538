"""Configuration: load order, typed values, and clear refusals naming key, value and what is allowed."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from crawllib.config import ConfigError, defaults_toml, load_config, replace

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_file_is_generated_from_the_declarations():
    assert (ROOT / "conf" / "default.toml").read_text() == defaults_toml()


def test_required_keys_exist_with_their_names():
    cfg = load_config()
    assert cfg.crawl.max_depth == 3
    assert cfg.politeness.default_delay == 1.0
    assert cfg.robots.agent == "crawllib"
    assert "crawllib" in cfg.fetch.user_agent and "http" in cfg.fetch.user_agent
    assert cfg.network.resolve == {}
    assert cfg.network.allow_private is False


def test_load_order_defaults_then_files_then_set(tmp_path):
    a = tmp_path / "a.toml"
    a.write_text("[crawl]\nmax_depth = 5\n[politeness]\ndefault_delay = 2\n")
    b = tmp_path / "b.toml"
    b.write_text("[crawl]\nmax_depth = 7\n")
    cfg = load_config([a, b], ["politeness.default_delay=0.25"])
    assert cfg.crawl.max_depth == 7
    assert cfg.politeness.default_delay == 0.25
    assert isinstance(cfg.politeness.default_delay, float)


def test_profiles_load():
    for name in ("default", "local", "emr"):
        load_config([ROOT / "conf" / f"{name}.toml"])
    emr = load_config([ROOT / "conf" / "emr.toml"])
    assert emr.spark.master == "" and emr.spark.delta_jars == "provided"


def test_resolve_table_from_set_and_file(tmp_path):
    cfg = load_config(
        overrides=['network.resolve={"a.site1.net" = "127.0.0.1:8080", "b.net" = "127.0.0.1"}']
    )
    assert cfg.network.resolve == {"a.site1.net": "127.0.0.1:8080", "b.net": "127.0.0.1"}
    f = tmp_path / "r.toml"
    f.write_text('[network.resolve]\n"x.site2.org" = "[::1]:9000"\n')
    assert load_config([f]).network.resolve == {"x.site2.org": "[::1]:9000"}


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("crawl.max_depth=abc", ["crawl.max_depth", "'abc'", "an integer"]),
        ("crawl.max_depth=-1", ["crawl.max_depth", "-1", ">= 0"]),
        ("crawl.max_dept=2", ["unknown config key", "crawl.max_dept", "max_depth"]),
        ("crawler.max_depth=2", ["unknown config section", "crawler", "crawl"]),
        ("politeness.key=ip", ["politeness.key", "'ip'", "one of host, domain"]),
        ("politeness.default_delay=fast", ["politeness.default_delay", "'fast'", "a number"]),
        ("network.allow_private=yes", ["network.allow_private", "'yes'", "true or false"]),
        ('network.resolve={"a.net" = "nowhere"}', ["network.resolve", "not an IP"]),
        ('network.resolve={"a.net" = "127.0.0.1:99999"}', ["network.resolve", "bad port"]),
        ("max_depth=3", ["section.key"]),
        ("crawl.max_depth", ["section.key=value"]),
    ],
)
def test_bad_values_are_refused_with_key_value_and_allowed(override, fragments):
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=[override])
    for fragment in fragments:
        assert fragment in str(exc.value)


def test_bad_file_is_refused(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[fetch]\ntotal_timeout = 0\n")
    with pytest.raises(ConfigError, match="fetch.total_timeout.*> 0"):
        load_config([f])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config([tmp_path / "missing.toml"])
    f.write_text("[fetch\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config([f])


def test_config_pickles_for_executors_and_replace_checks():
    cfg = replace(load_config(), politeness__default_delay=0.2, crawl__max_depth=1)
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert cfg.politeness.default_delay == 0.2
    with pytest.raises(ConfigError):
        replace(cfg, crawl__max_depth="x")
