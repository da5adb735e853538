"""The priority benchmark's ground truth: in-degrees on the generator's graph, popular pages."""

from __future__ import annotations

import urllib.request

from benchmarks.fetch import web_server
from benchmarks.priority import important_pages, in_degrees, render
from crawllib.core.urls import normalize_url
from crawllib.testweb.site import Site, WebSpec


def test_popular_pages_are_deep_and_among_the_most_linked():
    spec = WebSpec(hosts=4, pages_per_host=60, special=False, popular_pages=2)
    site = Site(spec)
    degree = in_degrees(site)
    important = important_pages(site, 0.1)
    assert len(important) == round(0.1 * 4 * 61)
    popular = {f"http://{h}/p/{n}.html" for h in site.regular for n in (58, 59)}
    assert popular <= important
    # without popular pages these deep pages have few in-links
    plain = in_degrees(Site(WebSpec(hosts=4, pages_per_host=60, special=False)))
    assert 3 * sum(plain[u] for u in popular) < sum(degree[u] for u in popular)


def test_no_popular_pages_leaves_the_web_as_it_was():
    a = Site(WebSpec(hosts=3, pages_per_host=20))
    b = Site(WebSpec(hosts=3, pages_per_host=20, popular_pages=0, popular_link_share=0.9))
    for host in a.regular:
        for n in range(20):
            assert a.route(host, f"/p/{n}.html").links == b.route(host, f"/p/{n}.html").links


def test_render_names_both_orders():
    run = {"fetched": 10, "shares": [0.1, 0.2], "popular_shares": [0.0, 0.5], "seconds": 3.0}
    text = render(
        {
            "hosts": 2,
            "pages_per_host": 5,
            "max_per_host": 2,
            "generations": 2,
            "popular": 1,
            "share": 0.1,
            "important": 1,
            "depth": run,
            "score": run,
            "ratio": 1.0,
        }
    )
    assert "| depth | 10 | 0.10 / 0.20 | 0.00 / 0.50 | 3 |" in text
    assert "| score |" in text


def test_the_benchmarks_web_process_serves_the_whole_spec():
    # web_server("process") once passed only hosts, pages and fanout: the priority benchmark
    # crawled a web without its popular pages and measured nothing
    spec = WebSpec(
        seed=7, hosts=2, pages_per_host=30, special=False, cross_host_link_share=0.6,
        popular_pages=2, popular_link_share=1.0,
    )  # fmt: skip
    site = Site(spec)
    host = site.regular[0]
    with web_server(spec, "process") as (resolve, pid):
        assert pid is not None and set(resolve) == set(site.regular)
        for path in ("/", "/p/3.html", "/p/11.html"):
            request = urllib.request.Request(
                f"http://{resolve[host]}{path}", headers={"Host": host}
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                served = response.read()
            route = site.route(host, path)
            assert served == (route.body() if callable(route.body) else route.body)
    popular = {f"http://{h}/p/{n}.html" for h in site.regular for n in (28, 29)}
    base = f"http://{host}/p/11.html"
    linked = {normalize_url(h, base=base) for h in route.links if ".html" in h}
    assert popular & linked
