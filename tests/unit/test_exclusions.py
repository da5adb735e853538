"""crawllib.transforms.exclusions: rule parsing, refusals with line numbers, matching, file loading, and
config validation."""

from __future__ import annotations

import pickle

import pytest

from crawllib.config import load_config, replace
from crawllib.core.errors import ConfigError
from crawllib.core.urls import host_of, normalize_url, registered_domain
from crawllib.policy.exclusions import Exclusions, load, parse


def excluded(rules: Exclusions, url: str) -> bool:
    normalized = normalize_url(url)
    host = host_of(normalized)
    return rules.matches(normalized, host, registered_domain(host))


# --- parsing -----------------------------------------------------------------------------


def test_parse_normalises_each_kind_and_skips_blanks_and_comments():
    rules = parse(
        [
            "# operator list",
            "",
            "   domain: Example.CO.UK.  ",
            "host:WWW.Foo.org.",
            "host:bücher.de",
            "host:[::1]",
            "HOST:::2",
            "prefix:HTTP://A.com:80/x",
            "prefix:https://b.com",
            "prefix:http://c.com/s?q=",
            "prefix:https://",
            "regex:(?i)/admin/",
        ],
        "rules.txt",
    )
    assert rules.domains == {"example.co.uk"}
    assert rules.hosts == {"www.foo.org", "xn--bcher-kva.de", "::1", "::2"}
    # a bare host gains its "/"; a query part is kept as written; no URL: as written
    assert rules.prefixes == ("http://a.com/x", "https://b.com/", "http://c.com/s?q=", "https://")
    assert rules.patterns == ("(?i)/admin/",)


def test_repeated_rules_are_kept_once_in_order():
    rules = parse(["prefix:http://b.com/", "prefix:http://a.com/", "prefix:http://b.com"], "x")
    assert rules.prefixes == ("http://b.com/", "http://a.com/")


@pytest.mark.parametrize(
    ("rule", "fragments"),
    [
        ("example.com", ["no kind", "domain:example.com or host:example.com"]),
        ("https://example.com/a", ["no kind", "did you mean prefix:https://example.com/a"]),
        ("path:/private", ["no kind", "domain:, host:, prefix: or regex:"]),
        ("domain:", ["nothing after 'domain:'"]),
        ("domain:www.example.com", ["not a registered domain", "host:www.example.com"]),
        ("domain:bad_^.com", ["not a host name"]),
        ("host:a.com:8080", ["without a port"]),
        ("host:https://a.com/", ["not a URL", "prefix:"]),
        ("prefix:a.com/x", ["http:// or https://"]),
        ("prefix:ftp://a.com/", ["http:// or https://"]),
        ("prefix:http://a.com/#top", ["fragment"]),
        ("regex:(", ["Python cannot compile"]),
        (r"regex:\p{L}", ["Python cannot compile"]),
        ("regex:(?P<name>a)", ["Python-only"]),
        ("regex:(?P<x>a)(?P=x)", ["Python-only"]),
        ("regex:(?#note)a", ["Python-only"]),
        ("regex:(a)?(?(1)b|c)", ["Python-only"]),
        ("regex:(?a)x", ["flags a and L"]),
        ("regex:a{,3}", ["{0,n}"]),
        ("regex:/id{x}", ["\\{"]),
        ("regex:[[a-z]]", ["Java reads differently"]),
        ("regex:[a-z&&b]", ["Java reads differently"]),
    ],
)
def test_bad_rules_are_refused_with_source_line_and_rule(rule, fragments):
    with pytest.raises(ValueError) as exc:
        parse(["# comment", "", "domain:ok.com", rule], "rules.txt")
    message = str(exc.value)
    assert message.startswith(f"rules.txt:4: {rule!r}: ")
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    "pattern",
    [r"\{x\}", "[{]", r"/\d{4}/\d{2,}/", "a{1,2}?", "(?i:/Admin)", "(?:x|y)+$", "[]a]", r"\?"],
)
def test_regexes_in_the_common_subset_are_accepted(pattern):
    assert parse([f"regex:{pattern}"], "x").patterns == (pattern,)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("/a(?=b)", "lookahead or lookbehind"),
        ("/a(?!b)", "lookahead or lookbehind"),
        ("(?<=/)admin", "lookahead or lookbehind"),
        ("(?<!x)/admin", "lookahead or lookbehind"),
        ("(?>a|ab)c", "atomic group"),
        ("/a++b", "possessive quantifier (++)"),
        ("/a*+b", "possessive quantifier (*+)"),
        ("/a?+b", "possessive quantifier (?+)"),
        (r"/\d{2}+/", "possessive quantifier ({2}+)"),
        (r"/(a)\1/", r"backreference or octal escape (\1)"),
        (r"/[\1-\7]", r"backreference or octal escape (\1)"),
        (r"/(a)(b)(c)(d)(e)(f)(g)(h)(i)\9", r"backreference or octal escape (\9)"),
        (r"\.pdf\Z", r"\Z"),
    ],
)
def test_regexes_re2_cannot_run_are_refused(pattern, fragment):
    """The embedded engine's plan matches regexes with DuckDB, whose RE2 has no lookaround,
    atomic groups, possessive quantifiers or backreferences: refused when the rules are read,
    not when a plan fails. Python (3.11) compiles each of them."""
    with pytest.raises(ValueError) as exc:
        parse(["domain:ok.com", f"regex:{pattern}"], "rules.txt")
    message = str(exc.value)
    assert message.startswith(f"rules.txt:2: {'regex:' + pattern!r}: ")
    assert fragment in message and "RE2" in message


@pytest.mark.parametrize(
    "pattern",
    ["a+?b", "a??b", "a{2,3}?", r"\+\+", "[(?=]x", r"\\1", "(?:a|b)+$", "(?i)x"],
)
def test_lazy_quantifiers_and_escaped_look_alikes_are_no_re2_problem(pattern):
    assert parse([f"regex:{pattern}"], "x").patterns == (pattern,)


# --- matching ----------------------------------------------------------------------------


def test_domain_matches_the_registered_domain_and_every_host_under_it():
    rules = parse(["domain:example.co.uk"], "x")
    assert excluded(rules, "http://example.co.uk/")
    assert excluded(rules, "https://a.b.EXAMPLE.co.uk/page")
    assert not excluded(rules, "http://notexample.co.uk/")
    assert not excluded(rules, "http://example.co.uk.evil.net/")


def test_host_matches_that_host_only():
    rules = parse(["host:www.example.com.", "host:[2001:db8::1]"], "x")
    assert excluded(rules, "http://WWW.example.com:8080/a")
    assert excluded(rules, "http://[2001:db8::1]/")
    assert not excluded(rules, "http://example.com/")
    assert not excluded(rules, "http://a.www.example.com/")


def test_prefix_matches_urls_starting_with_the_normalised_prefix():
    rules = parse(["prefix:http://A.com/x", "prefix:http://b.com"], "x")
    assert excluded(rules, "http://a.com/x/y")
    assert excluded(rules, "http://a.com/xy")
    assert excluded(rules, "http://a.com:80/x?q=1")
    assert not excluded(rules, "https://a.com/x")
    assert not excluded(rules, "http://a.com/")
    assert excluded(rules, "http://b.com")
    assert not excluded(rules, "http://b.com.evil.net/")
    assert not excluded(rules, "http://b.com:8080/")


def test_regex_is_searched_anywhere_in_the_normalised_url():
    rules = parse([r"regex:/20\d\d/", "regex:(?i)sessionid=|/CART"], "x")
    assert excluded(rules, "http://a.com/news/2024/01/")
    assert excluded(rules, "http://a.com/cart/")
    assert not excluded(rules, "http://a.com/news/1999x/")
    assert not excluded(rules, "http://a.com/")


def test_empty_rules_match_nothing():
    assert Exclusions().empty and not Exclusions()
    assert parse(["", "# nothing"], "x") == Exclusions()
    assert not Exclusions().matches("http://a.com/", "a.com", "a.com")
    assert parse(["host:a.com"], "x") and not parse(["host:a.com"], "x").empty


def test_union_and_pickle_for_executors():
    both = parse(["host:a.com", "regex:x"], "1") | parse(["domain:b.com", "regex:x"], "2")
    assert both == Exclusions(frozenset({"b.com"}), frozenset({"a.com"}), (), ("x",))
    again = pickle.loads(pickle.dumps(both))
    assert again == both and again.matches("http://c.com/x", "c.com", "c.com")


# --- loading -----------------------------------------------------------------------------


def test_load_joins_the_config_list_and_a_local_file(tmp_path):
    path = tmp_path / "exclude.txt"
    path.write_text("# never\n\nhost:b.com\n  prefix:http://c.com/private/  \n", encoding="utf-8")
    cfg = load_config(overrides=['crawl.exclude=["domain:a.com"]'])
    assert load(cfg) == Exclusions(frozenset({"a.com"}))
    rules = load(replace(cfg, crawl__exclude_file=str(path)))
    assert rules == Exclusions(
        frozenset({"a.com"}), frozenset({"b.com"}), ("http://c.com/private/",)
    )
    assert load(replace(cfg, crawl__exclude_file=path.as_uri())) == rules


def test_load_refuses_a_bad_file_with_a_config_error(tmp_path):
    cfg = load_config()
    bad = tmp_path / "bad.txt"
    bad.write_text("host:a.com\n# fine\nb.com\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{bad}:3: 'b.com': no kind"):
        load(replace(cfg, crawl__exclude_file=str(bad)))
    with pytest.raises(ConfigError, match="does not exist"):
        load(replace(cfg, crawl__exclude_file=str(tmp_path / "missing.txt")))
    with pytest.raises(ConfigError, match="is a folder"):
        load(replace(cfg, crawl__exclude_file=str(tmp_path)))
    bad.write_bytes(b"host:\xff.com\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(replace(cfg, crawl__exclude_file=str(bad)))


def test_a_remote_file_needs_a_spark_session():
    cfg = replace(load_config(), crawl__exclude_file="s3a://bucket/exclude.txt")
    with pytest.raises(ConfigError, match="needs a SparkSession"):
        load(cfg)


# --- config ------------------------------------------------------------------------------


def test_config_refuses_a_bad_rule_at_load_naming_it(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=['crawl.exclude=["domain:a.com", "regex:(?P<x>y)"]'])
    assert "crawl.exclude" in str(exc.value)
    assert "crawl.exclude:2: 'regex:(?P<x>y)'" in str(exc.value)
    toml = tmp_path / "crawl.toml"
    toml.write_text('[crawl]\nexclude = ["www.example.com"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="crawl.exclude:1: 'www.example.com': no kind"):
        load_config([toml])


def test_config_defaults_exclude_nothing():
    cfg = load_config()
    assert cfg.crawl.exclude == () and cfg.crawl.exclude_file == ""
    assert load(cfg).empty
