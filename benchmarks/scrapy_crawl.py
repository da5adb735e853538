"""Scrapy over the test web, set up like our crawler: the Scrapy side of "ours vs Scrapy".

``run_scrapy`` writes the job to ``OUT_DIR/job.json``, runs ``python -m
benchmarks.scrapy_crawl OUT_DIR/job.json`` (one ``CrawlerProcess``) and returns the child's
wall and CPU time with Scrapy's counts. The child writes one line per page to
``OUT_DIR/pages.jsonl`` (url, status, depth, text_len) and Scrapy's stats to
``OUT_DIR/stats.json``. Only this module imports Scrapy (the ``bench`` extra), and only in the child.

Every request, robots.txt included, goes to the test web as to an HTTP proxy (``meta["proxy"]``):
Scrapy sends ``GET http://site3.net/p/1.html`` to 127.0.0.1:PORT with ``Host: site3.net``, the
test web routes by that header, and no connection goes anywhere but 127.0.0.1 (no DNS either:
the slot key below never resolves a name).

Equivalence with our crawler (settings in :func:`scrapy_settings`):

- politeness: one request at a time per host, ``delay`` s between request starts, no jitter; the
  download slot key is the request URL's hostname (CONCURRENT_REQUESTS_PER_IP 0), proxy or not,
  so robots.txt and ``:80`` URLs share the host's slot; all hosts in flight at once;
- depth: seeds 0, links depth + 1, nothing deeper than ``max_depth`` (DEPTH_LIMIT), breadth
  first (Scrapy's BFO settings), all seeds scheduled before any link (see ``start``);
- robots.txt obeyed (Protego), only the web's hosts (OffsiteMiddleware: no private addresses),
  only http(s) links (LinkExtractor); redirects up to 5 hops, 30 s per request, URLs up to 2048
  characters; no cookies, cache, AutoThrottle; RETRY left at Scrapy's default (2 more tries);
  tuned for speed only where nothing else changes (CONCURRENT_ITEMS, idle connections kept);
- per page: links (LinkExtractor) and, with ``extract_text``, trafilatura's text, our options.

Known differences: Scrapy keeps ``utm_*`` and ``:80`` (its fingerprint drops fragments and
sorts the query, no more), so it fetches some pages under two or three URLs and reads
``host:80/robots.txt`` again; it retries 5xx/429 at once, ours in later generations; a URL's
depth is that of the first link found in time, not the shortest path (a few pages at the limit
are missed); Scrapy spaces requests when its slot releases them, and they reach the wire after
whatever its one thread is busy with (callbacks, connecting), so a host can see two requests
less than ``delay`` apart; ours also hashes the text and writes Delta tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def scrapy_settings(hosts: int, max_depth: int, delay: float, out_dir: str) -> dict[str, Any]:
    """Scrapy settings equivalent to our crawler's (see the module docstring)."""
    return {
        "ROBOTSTXT_OBEY": True,
        "DOWNLOAD_DELAY": delay,
        "DOWNLOAD_DELAY_JITTER": 0.0,  # Scrapy 2.19's RANDOMIZE_DOWNLOAD_DELAY=False
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS": max(hosts, 256),
        # Outputs of a callback are handled by this many asyncio tasks per response; with no
        # item pipeline one is enough, and the default 100 only adds CPU.
        "CONCURRENT_ITEMS": 1,
        "DEPTH_LIMIT": max_depth,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REDIRECT_MAX_TIMES": 5,
        "DOWNLOAD_TIMEOUT": 30,
        "URLLENGTH_LIMIT": 2048,
        "USER_AGENT": "scrapy-bench",
        "LOG_LEVEL": "WARNING",
        "DOWNLOADER_MIDDLEWARES": {ThroughProxy: 10},
        "DOWNLOAD_HANDLERS": {"http": ProxyPoolHandler},
        "FEEDS": {
            Path(out_dir, "pages.jsonl").as_uri(): {"format": "jsonlines", "overwrite": True}
        },
    }


class ThroughProxy:
    """Downloader middleware: every request goes to ``BENCH_PROXY`` (set before
    HttpProxyMiddleware reads it; robots.txt requests pass here too)."""

    def __init__(self, proxy: str) -> None:
        self.proxy = proxy

    @classmethod
    def from_crawler(cls, crawler: Any) -> ThroughProxy:
        return cls(crawler.settings["BENCH_PROXY"])

    def process_request(self, request: Any) -> None:
        request.meta["proxy"] = self.proxy


class ProxyPoolHandler:
    """Scrapy's HTTP handler, keeping up to CONCURRENT_REQUESTS idle connections to the proxy.

    Scrapy caps idle connections per pool key at CONCURRENT_REQUESTS_PER_DOMAIN (1), and through
    a proxy every host has the same key: without this it would reconnect for most requests."""

    lazy = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> Any:
        from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

        handler = HTTP11DownloadHandler.from_crawler(crawler)
        handler._pool.maxPersistentPerHost = crawler.settings.getint("CONCURRENT_REQUESTS")
        return handler


def run_scrapy(
    port: int,
    seeds: list[str],
    hosts: list[str],
    max_depth: int,
    delay: float,
    out_dir: str,
    extract_text: bool = True,
) -> dict[str, Any]:
    """Crawl the test web on 127.0.0.1:``port`` with Scrapy in a child process.

    Returns wall_s and cpu_s (user + system) of the child, crawl_s (Scrapy's own elapsed time,
    without interpreter start), pages (200 responses passed to the callback), requests (responses
    downloaded, robots.txt included), robots_requests, statuses {code: n} and depth_max.
    """
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    job = Path(out_dir, "job.json")
    spec = {"port": port, "seeds": seeds, "hosts": hosts, "max_depth": max_depth, "delay": delay}
    job.write_text(json.dumps({**spec, "extract_text": extract_text}))
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", __name__, str(job)])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"the Scrapy child exited with {child.returncode}")
    stats = json.loads(Path(out_dir, "stats.json").read_text())
    prefix = "downloader/response_status_count/"
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "crawl_s": stats.get("elapsed_time_seconds", 0.0),
        "pages": stats.get("bench/pages", 0),
        "requests": stats.get("downloader/response_count", 0),
        "robots_requests": stats.get("robotstxt/request_count", 0),
        "statuses": {int(k[len(prefix) :]): v for k, v in stats.items() if k.startswith(prefix)},
        "depth_max": stats.get("request_depth_max", 0),
    }


def main(argv: list[str] | None = None) -> None:
    """Child: ``python -m benchmarks.scrapy_crawl OUT_DIR/job.json``."""
    args = sys.argv[1:] if argv is None else argv
    job_path = Path(args[0])
    job = json.loads(job_path.read_text())
    stats = _crawl(job, str(job_path.parent))
    Path(job_path.parent, "stats.json").write_text(json.dumps(stats, default=str, indent=1))


def _crawl(job: dict[str, Any], out_dir: str) -> dict[str, Any]:
    import trafilatura
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor

    extract_text, max_depth = job["extract_text"], job["max_depth"]

    class BenchSpider(Spider):
        name = "bench"
        links = LinkExtractor()

        async def start(self) -> Any:
            # Yielded seeds are taken one per engine turn between links' requests, so a link can
            # reach a host's "/" first (depth 1+; the seed is then a duplicate): schedule all now.
            # Not start_urls: those skip the dupefilter, so a link to "/" fetches it again.
            for url in job["seeds"]:
                self.crawler.engine.crawl(Request(url))
            return
            yield

        def parse(self, response: Any) -> Any:
            text: str | None = ""
            if extract_text:  # the options of crawllib.content.extract
                text = trafilatura.extract(
                    response.text, url=response.url, include_comments=False, include_tables=True
                )
            if response.status == 200:
                self.crawler.stats.inc_value("bench/pages")
            yield {
                "url": response.url,
                "status": response.status,
                "depth": response.meta.get("depth", 0),
                "text_len": len(text or ""),
            }
            links = self.links.extract_links(response)
            if response.meta.get("depth", 0) < max_depth:  # else DEPTH_LIMIT drops them
                for link in links:
                    yield response.follow(link, callback=self.parse)

    settings = scrapy_settings(len(job["hosts"]), job["max_depth"], job["delay"], out_dir)
    settings["BENCH_PROXY"] = f"http://127.0.0.1:{job['port']}"
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler, allowed_domains=job["hosts"])
    process.start()
    return crawler.stats.get_stats()


if __name__ == "__main__":
    main()
