"""Configuration: load order, typed values, and clear refusals naming key, value and what is allowed."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from crawllib.config import coerce, defaults_toml, load_config, replace
from crawllib.core.errors import ConfigError

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
    assert cfg.maintain.min_files == 4
    assert cfg.maintain.vacuum_hours == 168.0  # Delta's own default retention, one week
    assert load_config(overrides=["maintain.vacuum_hours=1"]).maintain.vacuum_hours == 1.0


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
    assert emr.spark.s3_jars == "provided"


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
        ("crawl.max_depth=-1", ["crawl.max_depth", "-1", "from 0 to"]),
        ("crawl.max_dept=2", ["unknown config key", "crawl.max_dept", "max_depth"]),
        ("crawler.max_depth=2", ["unknown config section", "crawler", "crawl"]),
        ("politeness.key=url", ["politeness.key", "'url'", "one of host, domain, ip"]),
        ("politeness.default_delay=fast", ["politeness.default_delay", "'fast'", "a number"]),
        ("network.allow_private=yes", ["network.allow_private", "'yes'", "true or false"]),
        ('network.resolve={"a.net" = "nowhere"}', ["network.resolve", "not an IP"]),
        ('network.resolve={"a.net" = "127.0.0.1:99999"}', ["network.resolve", "bad port"]),
        ("max_depth=3", ["section.key"]),
        ("crawl.max_depth", ["section.key=value"]),
        # values are checked for what they mean, not only their type
        ("politeness.default_delay=inf", ["politeness.default_delay", "inf", "a finite number"]),
        ("fetch.total_timeout=inf", ["fetch.total_timeout", "inf", "a finite number"]),
        ("fetch.deadline_seconds=nan", ["fetch.deadline_seconds", "nan", "a finite number"]),
        ("politeness.jitter=-inf", ["politeness.jitter", "-inf", "a finite number"]),
        ("parse.near_dup_distance=64", ["parse.near_dup_distance", "64", "from 0 to 63"]),
        ("fetch.user_agent=bot/1\r\nX-Evil: 1", ["fetch.user_agent", "control characters"]),
        ("fetch.user_agent=", ["fetch.user_agent", "non-empty"]),
        ("robots.agent=my bot", ["robots.agent", "product token"]),
        ('network.nameservers=["8.8.8.8", "dns.google"]', ["nameservers", "'dns.google'"]),
        ('fetch.content_types=["html"]', ["fetch.content_types", "media types"]),
        ('spark.conf={"a" = {"b" = 1}}', ["spark.conf", "plain values"]),
        # a speculative copy of a fetch task is a second fetcher of the same hosts
        ('spark.conf={"spark.speculation" = "true"}', ["spark.conf", "spark.speculation"]),
        ('spark.conf={"spark.speculation" = true}', ["spark.conf", "spark.speculation"]),
        ("maintain.min_files=0", ["maintain.min_files", "0", ">= 1"]),
        ("maintain.vacuum_hours=0", ["maintain.vacuum_hours", "0", "> 0"]),
        ("maintain.vacuum_hours=-168", ["maintain.vacuum_hours", "-168", "> 0"]),
        ("maintain.vacuum_hours=a week", ["maintain.vacuum_hours", "'a week'", "a number"]),
        # integers the tables and queries cannot hold
        (
            "crawl.max_depth=99999999999999999999",
            ["crawl.max_depth", "an integer from 0 to 2147483646"],
        ),
        ("crawl.max_depth=2147483647", ["crawl.max_depth", "from 0 to 2147483646"]),
        ("fetch.max_bytes_in_flight=9223372036854775807", ["fetch.max_bytes_in_flight", "from"]),
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


def test_every_setting_is_declared_with_a_type_a_default_and_a_doc():
    from crawllib.config import SETTINGS, Config

    cfg = Config()
    for section, settings in SETTINGS.items():
        for name, setting in settings.items():
            assert setting.doc and setting.kind, f"{section}.{name}"
            assert getattr(getattr(cfg, section), name) == coerce(
                f"{section}.{name}", setting.default
            )


def test_a_value_that_means_nothing_fails_at_load_not_in_a_stage():
    """inf made plan fail ("cannot convert float NaN to integer") and every fetch fail as
    "internal" without a request; now the configuration is refused before anything runs."""
    cfg = load_config(overrides=["politeness.default_delay=1e3", "fetch.total_timeout=0.5"])
    assert cfg.politeness.default_delay == 1000.0 and cfg.fetch.total_timeout == 0.5
    for text in ("inf", "+inf", "nan", "-nan"):
        with pytest.raises(ConfigError, match="a finite number"):
            load_config(overrides=[f"politeness.default_delay={text}"])


def test_unreadable_config_files_are_one_line_errors(tmp_path, capsys):
    from crawllib.cli import main

    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[fetch]\nuser_agent = "caf\xe9"\n'.encode("latin-1"))
    for path, words in ((latin1, "not UTF-8"), (tmp_path, "is a folder")):
        with pytest.raises(ConfigError, match=words):
            load_config([path])
        assert main(["config", "show", "--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1


def test_config_show_prints_the_effective_configuration_which_loads_back(tmp_path, capsys):
    from crawllib.cli import main

    sets = ["--set", "crawl.max_depth=5", "--set", 'network.resolve={"a.net" = "127.0.0.2"}']
    assert main(["config", "show", *sets]) == 0
    shown = tmp_path / "shown.toml"
    shown.write_text(capsys.readouterr().out)
    cfg = load_config([shown])
    assert cfg == load_config(overrides=[s for s in sets if s != "--set"])
    assert cfg.crawl.max_depth == 5 and cfg.network.resolve == {"a.net": "127.0.0.2"}


def test_config_show_masks_secret_spark_settings(tmp_path, capsys):
    """issue 37: `crawl config show` printed spark.conf's S3 secret key."""
    from crawllib.cli import main

    config = tmp_path / "s3.toml"
    config.write_text(
        "[spark.conf]\n"
        '"spark.hadoop.fs.s3a.access.key" = "AKIAEXAMPLE"\n'
        '"spark.hadoop.fs.s3a.secret.key" = "wJalrXUtnFEMI/K7MDENG"\n'
        '"spark.hadoop.fs.s3a.session.token" = "FwoGZXIvYXdzEXAMPLE"\n'
        '"spark.hadoop.javax.jdo.option.ConnectionPassword" = "hunter2"\n'
        '"spark.ssl.keyStorePassword" = "changeit"\n'
        '"spark.hadoop.fs.azure.sas.fixed.token" = "sv=2020"\n'
        '"spark.hadoop.fs.s3a.endpoint" = "http://127.0.0.1:9000"\n'
        '"spark.sql.shuffle.partitions" = 4\n'
    )
    assert main(["config", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    for secret in ("AKIAEXAMPLE", "wJalrXUtnFEMI", "FwoGZXIv", "hunter2", "changeit", "sv=2020"):
        assert secret not in out, secret
    assert '"spark.hadoop.fs.s3a.secret.key" = "(masked)"' in out
    # what is no secret is shown as it is
    assert '"spark.hadoop.fs.s3a.endpoint" = "http://127.0.0.1:9000"' in out
    assert '"spark.sql.shuffle.partitions" = 4' in out


def test_version_and_a_root_that_is_a_file(tmp_path, capsys):
    from crawllib.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("crawl ")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a crawl\n")
    for argv in (["init", str(a_file)], ["status", str(a_file)], ["init", f"{a_file}/crawl"]):
        assert main(argv) == 2, argv  # before any Spark or lease
        err = capsys.readouterr().err
        assert "is a file, not a folder" in err and len(err.strip().splitlines()) == 1


def test_config_show_masks_secrets_inside_other_values(tmp_path, capsys):
    """Issue 49: masking went by key name only, so a secret inside another key's value was
    printed: a -D...secret.key= in extraJavaOptions, a password in an endpoint or metastore URI,
    a JDBC password=."""
    from crawllib.cli import main

    config = tmp_path / "c.toml"
    config.write_text(
        "[spark.conf]\n"
        '"spark.driver.extraJavaOptions" = "-Xss4m -Dfs.s3a.secret.key=S3KRET1 -Dlog.level=INFO"\n'
        '"spark.hadoop.fs.s3a.endpoint" = "https://AKIAUSER:S3KRET2@s3.local:9000"\n'
        '"spark.hadoop.javax.jdo.option.ConnectionURL" = '
        '"jdbc:postgresql://hive:S3KRET3@db:5432/metastore?ssl=true&password=S3KRET4"\n'
        '"spark.sql.warehouse.dir" = "s3a://bucket/warehouse"\n'
    )
    assert main(["config", "show", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    for secret in ("S3KRET1", "S3KRET2", "S3KRET3", "S3KRET4"):
        assert secret not in out, secret
    assert "-Xss4m -Dfs.s3a.secret.key=(masked) -Dlog.level=INFO" in out
    assert "https://AKIAUSER:(masked)@s3.local:9000" in out
    assert "ssl=true&password=(masked)" in out
    assert '"spark.sql.warehouse.dir" = "s3a://bucket/warehouse"' in out
