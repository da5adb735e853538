"""Same-slot following in the fetch engine: the links of a fetched page to its own slot are
fetched in the same call, exactly once, within the depth, the rules and the slot's room, with
the slot's politeness; links elsewhere, known URLs and what does not fit are left to the next
generation."""

from __future__ import annotations

from test_fetch_support import LocalWeb, config, gaps, row, starts

from crawllib.core.urls import url_key
from crawllib.engine import fetch_rows
from crawllib.engine.follow import Known

DELAY = 0.05


def page(*links: str) -> str:
    anchors = "".join(f'<p>See <a href="{href}">{href}</a> for more.</p>' for href in links)
    return f"<html><body><h1>A page</h1><p>{'Words of text. ' * 40}</p>{anchors}</body></html>"


def site(server: LocalWeb) -> None:
    """a.site1.net: / -> /1, /2, /img.png, other host, a known URL; /1 -> /3 (depth 2), /2 -> /1
    (again) and /4; /3 -> /5 (depth 3: past max_depth 2)."""
    server.text("a.site1.net", "/", page("/1", "/2", "/img.png", "http://b.site2.org/x", "/known"),
                content_type="text/html")  # fmt: skip
    server.text("a.site1.net", "/1", page("/3"), content_type="text/html")
    server.text("a.site1.net", "/2", page("/1", "/4"), content_type="text/html")
    server.text("a.site1.net", "/3", page("/5"), content_type="text/html")
    server.text("a.site1.net", "/4", page(), content_type="text/html")


def follow_row(room: int, *known: str, trapped: tuple[str, ...] = ()) -> dict:
    return {
        "slot": "a.site1.net",
        "room": room,
        "known": [url_key(u) for u in known],
        "trapped": list(trapped),
    }


def run(server: LocalWeb, room: int, trapped: tuple[str, ...] = (), **changes) -> tuple[dict, list]:
    settings = {"politeness__default_delay": DELAY, "crawl__max_depth": 2, **changes}
    cfg = config(server.resolve("a.site1.net", "b.site2.org"), **settings)
    known = follow_row(room, "http://a.site1.net/known", trapped=trapped)
    records = list(fetch_rows([row("http://a.site1.net/")], cfg, (), follow_rows=[known]))
    fetches = {r["url"]: r for r in records if r["record"] == "fetch"}
    robots = [r for r in records if r["record"] == "robots"]
    return fetches, robots


def test_links_to_the_own_slot_are_fetched_once_within_depth_rules_and_politeness():
    with LocalWeb() as server:
        site(server)
        fetches, robots = run(server, room=10)
        paths = sorted(h.path_qs for h in server.hits_of("a.site1.net"))
    base = "http://a.site1.net"
    assert sorted(fetches) == [f"{base}/", f"{base}/1", f"{base}/2", f"{base}/3", f"{base}/4"]
    # each URL requested once (/1 is linked twice), robots.txt first; nothing of b.site2.org,
    # the image, the known URL or /5 (depth 3)
    assert paths == ["/", "/1", "/2", "/3", "/4", "/robots.txt"]
    assert server.hits_of("b.site2.org") == []
    assert {u: (r["depth"], r["source_url"]) for u, r in fetches.items()} == {
        f"{base}/": (0, None),
        f"{base}/1": (1, f"{base}/"),
        f"{base}/2": (1, f"{base}/"),
        f"{base}/3": (2, f"{base}/1"),
        f"{base}/4": (2, f"{base}/2"),
    }
    assert all(r["outcome"] == "ok" and r["extracted"] for r in fetches.values())
    assert all(r["url_key"] == url_key(u) for u, r in fetches.items())
    # one request at a time, spaced by the delay, followed URLs included
    assert min(gaps(starts(fetches, robots, "a.site1.net"))) >= DELAY - 0.001


def test_the_slots_room_caps_what_is_followed():
    with LocalWeb() as server:
        site(server)
        fetches, _ = run(server, room=1)
    assert sorted(fetches) == ["http://a.site1.net/", "http://a.site1.net/1"]


def test_the_time_budget_at_the_slots_delay_caps_what_is_followed():
    # generate.fetch_seconds = 0.3: at the default delay (0.05 s) the slot may take 7 URLs, all
    # five; once robots.txt asks Crawl-delay 0.2, 1 + 0.3 // 0.2 = 2: the home page and one link
    for crawl_delay, expected in ((None, 5), (0.2, 2)):
        with LocalWeb() as server:
            site(server)
            if crawl_delay is not None:
                server.text(
                    "a.site1.net", "/robots.txt", f"User-agent: *\nCrawl-delay: {crawl_delay}\n"
                )
            fetches, _ = run(server, room=10, generate__fetch_seconds=0.3)
        assert len(fetches) == expected, (crawl_delay, sorted(fetches))


def test_excluded_links_are_not_followed_from_the_rules_or_the_file(tmp_path):
    rules = tmp_path / "exclude.txt"
    rules.write_text("# never the second page\nprefix:http://a.site1.net/2\n")
    with LocalWeb() as server:
        site(server)
        fetches, _ = run(
            server, room=10, crawl__exclude=("regex:/3$",), crawl__exclude_file=str(rules)
        )
        paths = sorted(h.path_qs for h in server.hits_of("a.site1.net"))
    assert sorted(fetches) == ["http://a.site1.net/", "http://a.site1.net/1"]
    assert paths == ["/", "/1", "/robots.txt"]


def test_trapped_patterns_and_repeated_segments_are_not_followed():
    with LocalWeb() as server:
        server.text("a.site1.net", "/", page("/cal/1", "/cal/2", "/x/x/x/y", "/ok"),
                    content_type="text/html")  # fmt: skip
        for path in ("/cal/1", "/cal/2", "/x/x/x/y", "/ok"):
            server.text("a.site1.net", path, page(), content_type="text/html")
        fetches, _ = run(server, room=10, trapped=("a.site1.net /cal/{n}", "b.site2.org /ok"))
    assert sorted(fetches) == ["http://a.site1.net/", "http://a.site1.net/ok"]


def test_nothing_is_followed_without_room_without_extraction_or_when_switched_off():
    for room, changes in ((0, {}), (10, {"fetch__extract": False}), (10, {"fetch__follow": False})):
        with LocalWeb() as server:
            site(server)
            fetches, _ = run(server, room=room, **changes)
        assert list(fetches) == ["http://a.site1.net/"], (room, changes)


def test_followed_urls_past_the_deadline_are_deferred_not_lost():
    with LocalWeb() as server:
        site(server)
        # the deadline passes after the home page: what it leads to comes back deferred
        fetches, _ = run(
            server, room=10, politeness__default_delay=0.5, fetch__deadline_seconds=0.6
        )
    deferred = {u for u, r in fetches.items() if r["outcome"] == "deferred"}
    assert deferred and all(fetches[u]["source_url"] for u in deferred)
    assert all(fetches[u]["error_kind"] == "deadline" for u in deferred)


def test_known_keys_are_exact():
    keys = [url_key(f"http://a.site1.net/{i}") for i in range(1000)]
    known = Known(keys[::2])
    assert all(k in known for k in keys[::2]) and not any(k in known for k in keys[1::2])
    known.add(keys[1])
    assert keys[1] in known and keys[3] not in known


def test_by_address_links_are_followed_to_the_hosts_of_the_slot_only():
    # politeness.key = ip: a.site1.net and c.site3.net share the slot 127.0.0.2 (plan gave it
    # to both rows); a link from one to the other is followed in the slot, b.site2.org is not
    with LocalWeb(addresses=("127.0.0.1", "127.0.0.2")) as server:
        server.text("a.site1.net", "/", page("http://c.site3.net/x", "http://b.site2.org/x"),
                    content_type="text/html")  # fmt: skip
        server.text("c.site3.net", "/", page(), content_type="text/html")
        resolve = {
            **server.resolve("a.site1.net", "c.site3.net", address="127.0.0.2"),
            **server.resolve("b.site2.org"),
        }
        cfg = config(resolve, politeness__key="ip", crawl__max_depth=2)
        rows = [row(f"http://{h}/", slot="127.0.0.2") for h in ("a.site1.net", "c.site3.net")]
        known = {"slot": "127.0.0.2", "room": 10, "known": []}
        records = list(fetch_rows(rows, cfg, (), follow_rows=[known]))
        fetches = {r["url"]: r for r in records if r["record"] == "fetch"}
        assert server.hits_of("b.site2.org") == []
    assert fetches["http://c.site3.net/x"]["source_url"] == "http://a.site1.net/"
    assert "http://b.site2.org/x" not in fetches


def test_a_slot_follows_breadth_first_and_a_shorter_path_in_the_task_lowers_a_queued_url():
    """Planned: / (depth 0) and /deep (depth 2, planned from another host's link) and /far
    (depth 3, linked from nowhere here). / links /deep (1 link) and /a; /a links /b. Breadth
    first: /deep is fetched at depth 1 (the shorter path found in the task), before /b (2),
    and /far (3) waits for the extraction of the depth-1 pages (their links would be 2) and
    comes last."""
    with LocalWeb() as server:
        server.text("a.site1.net", "/", page("/deep", "/a"), content_type="text/html")
        server.text("a.site1.net", "/a", page("/b"), content_type="text/html")
        for path in ("/b", "/deep", "/far"):
            server.text("a.site1.net", path, page(), content_type="text/html")
        cfg = config(
            server.resolve("a.site1.net"), politeness__default_delay=DELAY, crawl__max_depth=3
        )
        base = "http://a.site1.net"
        planned = [row(f"{base}/far", 3), row(f"{base}/deep", 2), row(f"{base}/", 0)]
        # planned URLs are in crawldb: known to the follower
        known = follow_row(10, f"{base}/deep", f"{base}/far", f"{base}/")
        records = list(fetch_rows(planned, cfg, (), follow_rows=[known]))
        order = [h.path_qs for h in server.hits_of("a.site1.net") if h.path_qs != "/robots.txt"]
    fetches = {r["url"]: r for r in records if r["record"] == "fetch"}
    assert order[0] == "/"
    assert set(order[1:3]) == {"/a", "/deep"}
    assert order[3:] == ["/b", "/far"]
    assert {u: (r["depth"], r["source_url"]) for u, r in fetches.items()} == {
        f"{base}/": (0, None),
        f"{base}/a": (1, f"{base}/"),
        f"{base}/deep": (1, None),  # planned, now at the depth of the shorter path
        f"{base}/b": (2, f"{base}/a"),
        f"{base}/far": (3, None),
    }


def test_the_row_queue_pops_shallowest_first_and_requeues_a_lowered_url():
    from crawllib.engine.slots import RowQueue

    queue = RowQueue([row("http://h.net/c", 2), row("http://h.net/a", 0), row("http://h.net/b", 2)])
    assert queue.lower(url_key("http://h.net/b"), 1)
    assert not queue.lower(url_key("http://h.net/b"), 1)  # not shorter
    assert not queue.lower(url_key("http://h.net/x"), 0)  # not queued
    assert len(queue) == 3 and queue.next_depth() == 0
    assert [(r["url"], r["depth"]) for r in (queue.popleft() for _ in range(3))] == [
        ("http://h.net/a", 0),
        ("http://h.net/b", 1),
        ("http://h.net/c", 2),
    ]
    assert not queue and queue.next_depth() is None
