"""The built-in multi-host test web: one aiohttp server on 127.0.0.1, many virtual hosts.

Used by the tests, the benchmarks and ``crawl demo``. Content is generated from
``(seed, host, path)`` on each request, never stored, so the same :class:`WebSpec` serves the
same bytes in every run, from a few hosts to hundreds of hosts and ~100k pages.

* :mod:`crawllib.testweb.site` - :class:`WebSpec`, regular hosts, link graph, link forms;
* :mod:`crawllib.testweb.special` - the special hosts (robots variants, traps, mirrors,
  errors...), with a table of each host's behaviour and paths;
* :mod:`crawllib.testweb.live` - the changing hosts ``live<i>.com`` (``WebSpec.changing_hosts``,
  none by default): pages that change hourly, daily, weekly, never, at random or only in their
  boilerplate, with or without ETag / Last-Modified, as of a clock tests set
  (``TestWeb.set_now``); :mod:`crawllib.testweb.changes` - their schedules and ground truth
  (``text_version``, ``expected_changes``...);
* :mod:`crawllib.testweb.web` - :class:`TestWeb` (async) and :func:`serve_in_thread` (sync);
* :mod:`crawllib.testweb.truth` - ``expected_fetches`` / ``expected_attempts``: what a correct
  crawl fetches, computed from the generator with independent URL and robots rules (robots.txt,
  and the robots meta tags, X-Robots-Tag and canonical links of directives.org);
  ``expected_noindex`` / ``page_directives``: which fetched pages' text is not kept, and why.

A crawler reaches the virtual hosts through its static resolve map, ``web.resolve``
(``{host: "127.0.0.1:PORT"}``); pages write absolute links as ``http://host/...`` (port 80).
``python -m crawllib.testweb --hosts 20 --port 8080`` serves until Ctrl-C.
"""

from crawllib.testweb.changes import changing_host_name, changing_urls
from crawllib.testweb.site import Site, WebSpec, regular_host_name
from crawllib.testweb.special import SPECIAL_HOSTS
from crawllib.testweb.truth import (
    Directives,
    Expected,
    canonical_url,
    expect,
    expected_attempts,
    expected_fetches,
    expected_noindex,
    is_private_host,
    page_directives,
)
from crawllib.testweb.web import LogRecord, TestWeb, serve_in_thread

__all__ = [
    "SPECIAL_HOSTS",
    "Directives",
    "Expected",
    "LogRecord",
    "Site",
    "TestWeb",
    "WebSpec",
    "canonical_url",
    "changing_host_name",
    "changing_urls",
    "expect",
    "expected_attempts",
    "expected_fetches",
    "expected_noindex",
    "is_private_host",
    "page_directives",
    "regular_host_name",
    "serve_in_thread",
]
