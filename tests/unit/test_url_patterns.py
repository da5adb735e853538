"""URL patterns and repeated segments (crawllib.stages.traps), the Python side."""

from __future__ import annotations

import pytest

from crawllib.config import load_config
from crawllib.core.errors import ConfigError
from crawllib.policy.traps import allowed_patterns, repeated_segments, url_pattern


@pytest.mark.parametrize(
    ("url", "pattern"),
    [
        ("http://a.com/", "/"),
        ("http://a.com/cal/2026/11", "/cal/{n}/{n}"),
        ("http://a.com/p/12.html", "/p/{n}.html"),
        ("http://a.com/day-2026-11-30/x", "/day-{n}-{n}-{n}/x"),
        ("http://a.com/shop?color=red&page=2&size=m", "/shop?color&page&size"),
        ("http://a.com/shop?size=m&color=red&color=blue", "/shop?color&size"),
        ("http://a.com/s?q", "/s?q"),
        ("http://a.com/item/0123456789abcdef0123/v2", "/item/{h}/v{n}"),
        ("http://a.com/item/deadbeef12", "/item/deadbeef{n}"),  # short hex: digits only
    ],
)
def test_url_pattern_hides_numbers_ids_and_query_values(url, pattern):
    assert url_pattern(url) == pattern


@pytest.mark.parametrize(
    ("url", "repeats"),
    [
        ("http://a.com/", 0),
        ("http://a.com/a/b/c", 1),
        ("http://a.com/a/b/a/b/a/b", 3),
        ("http://a.com/x/x?x=x", 2),  # the query is not the path
    ],
)
def test_repeated_segments_counts_the_most_frequent_path_segment(url, repeats):
    assert repeated_segments(url) == repeats


def test_allowed_patterns_are_host_pattern_lines():
    assert allowed_patterns(("Shop.COM /shop?color",)) == [("shop.com", "/shop?color")]
    with pytest.raises(ValueError, match="host pattern"):
        allowed_patterns(("/shop?color",))
    with pytest.raises(ConfigError, match="traps.allow"):
        load_config(overrides=['traps.allow=["only-one-field"]'])
