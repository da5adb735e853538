"""`crawl run`'s last line when nothing is due: what the URLs left wait for, and when."""

from __future__ import annotations

from crawllib.runs.runner import describe_waits
from crawllib.stages.plan import Wait

NOW = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def test_each_wait_is_named_with_its_first_due_time_and_the_next_one_is_said():
    line = describe_waits(
        [
            Wait("retry", 2, NOW + 600),
            Wait("retry_after", 24, NOW + 3600),
            Wait("crawl_delay", 3, None),
        ],
        NOW,
    )
    assert line == (
        "nothing due now: 2 URLs wait for a retry (first due 2027-01-15 08:10:00 UTC, in 10 min); "
        "24 URLs wait for a Retry-After (first due 2027-01-15 09:00:00 UTC, in 60 min); "
        "3 URLs wait for a Crawl-delay above politeness.max_crawl_delay; "
        "the next is due 2027-01-15 08:10:00 UTC, in 10 min (`crawl run --wait` waits for it)"
    )


def test_nothing_waiting_is_a_complete_crawl():
    assert describe_waits([], NOW).endswith("the crawl is complete")
    line = describe_waits([Wait("crawl_delay", 1, None)], NOW)
    assert "1 URL wait" in line and "next is due" not in line
