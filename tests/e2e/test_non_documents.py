"""Pages that are not documents, end to end on the embedded engine (issue 50, point 5): a host
that answers real 404s for missing pages also answers 200 with a "Page not found" page at one
URL, so the soft-404 probe (the host's answer to a URL nothing links to) cannot catch it; a
parked domain; a server's default page. The crawl marks each in ``texts.non_document`` with its
reason, leaves the articles beside them unmarked, and ``crawl export-text`` leaves them out."""

from __future__ import annotations

import contextlib
import random

import pyarrow.parquet as pq
import pytest

from crawllib.cli import main
from crawllib.config import replace
from crawllib.runs import runner
from crawllib.stages.seeding import seed
from crawllib.store import lease
from crawllib.store.embedded import EmbeddedDb
from crawllib.testweb.content import article_html
from tests.e2e import reading
from tests.unit.test_fetch_support import LocalWeb

pytestmark = pytest.mark.e2e

SHOP, PARKED, FRESH = "shop.net", "forsale.org", "fresh-server.com"
MISSING = """<html><head><title>Page not found | Shop</title></head><body>
<nav><a href="/">Home</a> <a href="/a.html">Lamps</a></nav>
<main><h1>Oops!</h1><p>Sorry, the page you are looking for could not be found.</p></main>
</body></html>"""
PARKED_PAGE = """<html><head><title>forsale.org is for sale</title></head><body>
<p>This domain may be for sale. Make an offer on this domain today.</p></body></html>"""
NGINX = """<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and working.</p>
</body></html>"""


@pytest.fixture(scope="module")
def crawled(spark_cfg, template_root, tmp_path_factory):
    import shutil

    tmp = tmp_path_factory.mktemp("nondocuments")
    root = str(tmp / "crawl")
    shutil.copytree(template_root, root)
    rng = random.Random(5)
    with LocalWeb() as server:
        home = article_html(rng, SHOP, "Shop news", [("/a.html", "Lamps"), ("/b.html", "B")])
        server.text(SHOP, "/", home, content_type="text/html")
        lamps = article_html(rng, SHOP, "Harbor lamps", [("/", "Home")])
        server.text(SHOP, "/a.html", lamps, content_type="text/html")
        server.text(SHOP, "/b.html", MISSING, content_type="text/html")  # 200, says missing

        async def real_404(request):
            from aiohttp import web

            if request.path == "/robots.txt":
                return web.Response(status=404, text="no robots")
            return web.Response(status=404, text=MISSING, content_type="text/html")

        server.fallback(SHOP, real_404)
        server.text(PARKED, "/", PARKED_PAGE, content_type="text/html")
        server.text(FRESH, "/", NGINX, content_type="text/html")
        cfg = replace(
            spark_cfg,
            network__resolve=server.resolve(SHOP, PARKED, FRESH),
            politeness__default_delay=0.05,
            crawl__max_depth=1,
            fetch__soft404_probe=True,  # on, as by default: it cannot catch this host's page
        )
        seeds = tmp / "seeds.txt"
        seeds.write_text(f"http://{SHOP}/\nhttp://{PARKED}/\nhttp://{FRESH}/\n")
        with lease.hold(root, "pytest", cfg), contextlib.closing(EmbeddedDb(root, cfg)) as db:
            seed(db, str(seeds), cfg, 0)
            for gen in range(3):
                runner.run_generation(db, cfg, gen)
    return {
        "root": root,
        "texts": {r["url"]: r for r in reading.read(root, "texts")},
        "probes": {r["host"]: r for r in reading.read(root, "probes")},
    }


def test_each_non_document_is_marked_with_its_reason(crawled):
    texts = crawled["texts"]
    marks = {url: row["non_document"] for url, row in texts.items()}
    assert marks == {
        f"http://{SHOP}/": None,
        f"http://{SHOP}/a.html": None,
        f"http://{SHOP}/b.html": "soft_404",
        f"http://{PARKED}/": "parked",
        f"http://{FRESH}/": "placeholder",
    }
    # the host answers a missing page with a real 404: the probe could not catch this one
    assert crawled["probes"][SHOP]["http_status"] == 404
    assert texts[f"http://{SHOP}/b.html"]["duplicate_kind"] is None


def test_the_export_leaves_them_out(crawled, tmp_path, spark_cfg):
    out = tmp_path / "export"
    assert main(["export-text", crawled["root"], str(out), "--engine", "embedded"]) == 0
    urls = set()
    for part in sorted(out.glob("*.parquet")):
        urls |= {m["url"] for m in pq.read_table(part).column("metadata").to_pylist()}
    assert urls == {f"http://{SHOP}/", f"http://{SHOP}/a.html"}
