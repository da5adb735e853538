"""Following to the hosts a fetch task owns: a link to a host crawldb does not know is fetched in
the same call when the task's partition function gives the host to this task, within the
depth, plan's URL rules, generate.max_per_host per new host and the task's budget for new
hosts; the new host's robots.txt comes first, and its slot gets a hosts record like any other.
A link to a known host the task does not hold, or to a new host another task owns, is left to
the next generation."""

from __future__ import annotations

from test_fetch_support import LocalWeb, config, gaps, row, starts

from crawllib.core.urls import host_of, url_key
from crawllib.engine import fetch_rows
from crawllib.engine.follow import Follower, Owner
from crawllib.store.udfs import task_partition

DELAY = 0.05


def hosts_of_partition(partition: int, partitions: int, count: int) -> list[str]:
    """``count`` host names whose slot (the host) task_partition gives to ``partition``."""
    found = []
    i = 0
    while len(found) < count:
        host = f"h{i}.example{i}.net"
        if task_partition(host, partitions) == partition:
            found.append(host)
        i += 1
    return found


def page_record(url: str, depth: int, *links: str) -> dict:
    """A fetched page as the engine passes it to the follower: its extraction's links."""
    return {
        "url": url,
        "depth": depth,
        "extracted": {
            "links": [
                {"dst_url": u, "dst_key": url_key(u), "dst_host": host_of(u), "anchor": ""}
                for u in links
            ]
        },
    }


def follower(owner: Owner | None, **changes) -> Follower:
    cfg = config({}, crawl__max_depth=2, generate__max_per_host=2, **changes)
    planned = {"slot": "a.site1.net", "room": 10, "known": [url_key("http://a.site1.net/")]}
    return Follower(cfg, [planned], owner)


def nowhere(slot: str) -> tuple[None, None]:
    return None, None


def followed(f: Follower, page: dict) -> list[tuple[str, str]]:
    return [(r["slot"], r["url"]) for r in f.links("a.site1.net", page, None, None, nowhere)]


def test_a_new_host_the_task_owns_is_followed_one_level_deeper():
    mine, theirs = hosts_of_partition(0, 2, 1)[0], hosts_of_partition(1, 2, 1)[0]
    f = follower(Owner(0, 2, frozenset({"a.site1.net"}), budget=100))
    page = page_record("http://a.site1.net/", 0, f"http://{mine}/x", f"http://{theirs}/x")
    rows = f.links("a.site1.net", page, None, None, nowhere)
    # the other partition's host is not followed: its task owns it
    assert [(r["slot"], r["url"], r["depth"], r["source_url"]) for r in rows] == [
        (mine, f"http://{mine}/x", 1, "http://a.site1.net/")
    ]
    assert rows[0]["url_key"] == url_key(f"http://{mine}/x") and rows[0]["host"] == mine
    assert f.adopted == {mine}


def test_a_known_host_the_task_does_not_hold_is_not_followed():
    # crawldb knows b.site2.org (it is in the known slot keys), this task was given no URL of
    # it: the next frontier takes the link, the task owning it then fetches it
    known = hosts_of_partition(0, 1, 1)[0]
    f = follower(Owner(0, 1, frozenset({"a.site1.net", known}), budget=100))
    assert followed(f, page_record("http://a.site1.net/", 0, f"http://{known}/y")) == []


def test_each_new_host_takes_at_most_max_per_host_and_the_task_at_most_its_budget():
    hosts = hosts_of_partition(0, 1, 3)
    links = [f"http://{h}/{i}" for h in hosts for i in range(3)]
    f = follower(Owner(0, 1, frozenset({"a.site1.net"}), budget=5))
    got = followed(f, page_record("http://a.site1.net/", 0, *links))
    # max_per_host 2 for each of the first two hosts, then the budget's last URL
    assert got == [
        (hosts[0], f"http://{hosts[0]}/0"),
        (hosts[0], f"http://{hosts[0]}/1"),
        (hosts[1], f"http://{hosts[1]}/0"),
        (hosts[1], f"http://{hosts[1]}/1"),
        (hosts[2], f"http://{hosts[2]}/0"),
    ]
    # the budget spent: nothing more of any new host, from a later page either
    later = page_record(f"http://{hosts[2]}/0", 1, f"http://{hosts[2]}/9", "http://a.site1.net/z")
    assert [r["url"] for r in f.links(hosts[2], later, None, None, nowhere)] == [
        "http://a.site1.net/z"
    ]


def test_no_new_host_past_the_depth_and_none_for_a_url_plan_would_filter():
    host = hosts_of_partition(0, 1, 1)[0]
    owner = Owner(0, 1, frozenset({"a.site1.net"}), budget=100)
    # the page at max_depth: its links would be one deeper
    f = follower(owner)
    assert followed(f, page_record("http://a.site1.net/d", 2, f"http://{host}/x")) == []
    # excluded, a skipped extension, repeated segments: not followed, the host not taken
    f = follower(owner, crawl__exclude=(f"prefix:http://{host}/private",))
    page = page_record(
        "http://a.site1.net/",
        0,
        f"http://{host}/private/1",
        f"http://{host}/img.png",
        f"http://{host}/x/x/x/x/y",
    )
    assert followed(f, page) == [] and f.adopted == set()


def test_a_link_known_for_a_new_host_is_queued_once():
    host = hosts_of_partition(0, 1, 1)[0]
    f = follower(Owner(0, 1, frozenset({"a.site1.net"}), budget=100))
    first = followed(f, page_record("http://a.site1.net/", 0, f"http://{host}/x"))
    again = followed(f, page_record("http://a.site1.net/", 0, f"http://{host}/x"))
    assert first == [(host, f"http://{host}/x")] and again == []


def test_without_an_owner_or_with_politeness_by_address_no_new_host_is_followed():
    host = hosts_of_partition(0, 1, 1)[0]
    page = page_record("http://a.site1.net/", 0, f"http://{host}/x")
    assert followed(follower(None), page) == []
    by_address = follower(Owner(0, 1, frozenset(), budget=100), politeness__key="ip")
    by_address.host_slots = {"a.site1.net": "a.site1.net"}
    assert followed(by_address, page) == []


def page(*links: str) -> str:
    anchors = "".join(f'<p>See <a href="{href}">{href}</a> for more.</p>' for href in links)
    return f"<html><body><h1>A page</h1><p>{'Words of text. ' * 40}</p>{anchors}</body></html>"


def test_the_engine_fetches_a_new_owned_host_after_its_robots_txt_and_records_its_slot():
    """a.site1.net/ links b.site2.org/x (new, owned: one partition) and c.site3.org/x (known to
    crawldb, not this task's); b's /x links /y on b and back to a.site1.net/1. b's robots.txt
    disallows /private and asks a Crawl-delay, which its requests keep."""
    with LocalWeb() as server:
        server.text("a.site1.net", "/", page("http://b.site2.org/x", "http://c.site3.org/x"),
                    content_type="text/html")  # fmt: skip
        server.text("a.site1.net", "/1", page(), content_type="text/html")
        server.text(
            "b.site2.org", "/robots.txt", "User-agent: *\nDisallow: /private\nCrawl-delay: 0.2\n"
        )
        server.text("b.site2.org", "/x", page("/y", "/private/z", "http://a.site1.net/1"),
                    content_type="text/html")  # fmt: skip
        server.text("b.site2.org", "/y", page(), content_type="text/html")
        server.text("c.site3.org", "/x", page(), content_type="text/html")
        cfg = config(
            server.resolve("a.site1.net", "b.site2.org", "c.site3.org"),
            politeness__default_delay=DELAY,
            crawl__max_depth=3,
        )
        planned = {"slot": "a.site1.net", "room": 10, "known": [url_key("http://a.site1.net/")]}
        owner = Owner(0, 1, frozenset({"a.site1.net", "c.site3.org"}), budget=100)
        records = list(
            fetch_rows([row("http://a.site1.net/")], cfg, (), follow_rows=[planned], owner=owner)
        )
        b_paths = [h.path_qs for h in server.hits_of("b.site2.org")]
        assert server.hits_of("c.site3.org") == []
    fetches = {r["url"]: r for r in records if r["record"] == "fetch"}
    robots = [r for r in records if r["record"] == "robots"]
    hosts = {r["slot"]: r for r in records if r["record"] == "host"}
    assert {u: (r["outcome"], r["depth"], r["source_url"]) for u, r in fetches.items()} == {
        "http://a.site1.net/": ("ok", 0, None),
        "http://b.site2.org/x": ("ok", 1, "http://a.site1.net/"),
        "http://b.site2.org/y": ("ok", 2, "http://b.site2.org/x"),
        "http://b.site2.org/private/z": ("robots_denied", 2, "http://b.site2.org/x"),
        # back to the planned slot, from the new host's page
        "http://a.site1.net/1": ("ok", 2, "http://b.site2.org/x"),
    }
    # robots.txt first, each URL once, the Crawl-delay kept between b's requests
    assert b_paths == ["/robots.txt", "/x", "/y"]
    assert min(gaps(starts(fetches, robots, "b.site2.org"))) >= 0.2 - 0.001
    assert {r["host"] for r in robots} == {"a.site1.net", "b.site2.org"}
    assert set(hosts) == {"a.site1.net", "b.site2.org"}
    assert hosts["b.site2.org"]["slice_urls"] == 2  # /x and /y requested
    assert hosts["b.site2.org"]["crawl_delay"] == 0.2


def test_a_new_host_outside_the_network_guard_is_blocked_not_requested():
    # 10.0.0.1 (private, not in network.resolve) is refused before any request, robots.txt
    # included, as a planned URL would be
    with LocalWeb() as server:
        server.text("a.site1.net", "/", page("http://10.0.0.1/x"), content_type="text/html")
        cfg = config(server.resolve("a.site1.net"), crawl__max_depth=2)
        planned = {"slot": "a.site1.net", "room": 10, "known": []}
        owner = Owner(0, 1, frozenset({"a.site1.net"}), budget=100)
        records = list(
            fetch_rows([row("http://a.site1.net/")], cfg, (), follow_rows=[planned], owner=owner)
        )
    fetches = {r["url"]: r for r in records if r["record"] == "fetch"}
    assert fetches["http://10.0.0.1/x"]["outcome"] == "blocked"
    assert not [r for r in records if r["record"] == "robots" and r["host"] == "10.0.0.1"]


def test_with_follow_other_hosts_off_links_stay_in_their_pages_slot():
    with LocalWeb() as server:
        server.text(
            "a.site1.net", "/", page("http://b.site2.org/x", "/1"), content_type="text/html"
        )
        server.text("a.site1.net", "/1", page(), content_type="text/html")
        server.text("b.site2.org", "/x", page(), content_type="text/html")
        cfg = config(
            server.resolve("a.site1.net", "b.site2.org"),
            crawl__max_depth=2,
            fetch__follow_other_hosts=False,
        )
        planned = {"slot": "a.site1.net", "room": 10, "known": []}
        owner = Owner(0, 1, frozenset({"a.site1.net"}), budget=100)
        records = list(
            fetch_rows([row("http://a.site1.net/")], cfg, (), follow_rows=[planned], owner=owner)
        )
        assert server.hits_of("b.site2.org") == []
    fetched = sorted(r["url"] for r in records if r["record"] == "fetch")
    assert fetched == ["http://a.site1.net/", "http://a.site1.net/1"]
