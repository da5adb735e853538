"""``python -m crawllib.testweb --hosts 20 --port 8080``: serve the test web until Ctrl-C (or
SIGTERM); with ``--log FILE``, its request log is written there on the way out, one JSON object
(:class:`crawllib.testweb.web.LogRecord`) per line.

``--changing-hosts N`` adds the hosts whose pages change with time (live0.com ...); they answer
as of the clock ``--now T`` (epoch seconds; default the real time), which
``GET /__testweb/now?t=<epoch seconds>`` (any Host; ``t=`` empty: the real time) sets while the
server runs: ``curl 'http://127.0.0.1:8080/__testweb/now?t=1767225600'``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal

from crawllib.testweb.audit import write_log
from crawllib.testweb.site import WebSpec
from crawllib.testweb.web import CONTROL_NOW, TestWeb


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m crawllib.testweb", description=__doc__)
    parser.add_argument("--hosts", type=int, default=10, help="regular hosts (default 10)")
    parser.add_argument("--pages", type=int, default=50, help="pages per regular host")
    parser.add_argument("--seed", type=int, default=0, help="content seed")
    parser.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (0: any)")
    parser.add_argument("--fanout", type=int, default=2, help="children per page (default 2)")
    parser.add_argument("--no-special", action="store_true", help="regular hosts only")
    parser.add_argument(
        "--addresses", type=int, default=1, help="loopback addresses served (127.0.0.1 .. N)"
    )
    parser.add_argument("--log", default="", help="write the request log here on exit (JSONL)")
    parser.add_argument(
        "--changing-hosts", type=int, default=0, help="hosts whose pages change (live<i>.com)"
    )
    parser.add_argument("--changing-pages", type=int, default=40, help="pages per changing host")
    parser.add_argument(
        "--now", type=float, default=None, help="clock of changing pages (epoch s; default real)"
    )
    parser.add_argument(
        "--spec",
        default="",
        help="WebSpec fields as a JSON object, over the options above, e.g. '{\"popular_pages\": 3}'",
    )
    args = parser.parse_args(argv)
    spec = WebSpec(
        seed=args.seed,
        hosts=args.hosts,
        pages_per_host=args.pages,
        fanout=args.fanout,
        special=not args.no_special,
        addresses=args.addresses,
        changing_hosts=args.changing_hosts,
        changing_pages=args.changing_pages,
    )
    if args.spec:
        spec = spec_from_json(spec, args.spec, parser)
    try:
        asyncio.run(_serve(spec, args.port, args.log, args.now))
    except KeyboardInterrupt:
        pass


def spec_from_json(spec: WebSpec, text: str, parser: argparse.ArgumentParser) -> WebSpec:
    """``spec`` with the fields of the JSON object ``text``; a bad one is a usage error."""
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as exc:
        parser.error(f"--spec: not JSON: {exc}")
    if not isinstance(fields, dict):
        parser.error("--spec: a JSON object of WebSpec fields is needed")
    known = {f.name for f in dataclasses.fields(WebSpec)}
    unknown = sorted(set(fields) - known)
    if unknown:
        parser.error(f"--spec: no WebSpec field {', '.join(unknown)}")
    return dataclasses.replace(spec, **fields)


async def _serve(spec: WebSpec, port: int, log: str = "", now: float | None = None) -> None:
    web = TestWeb(spec, port)
    web.set_now(now)
    await web.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        resolve = ", ".join(f"{json.dumps(h)} = {json.dumps(t)}" for h, t in web.resolve.items())
        print(f"# test web on {web.base_url}: {len(web.hosts)} hosts; config for the crawler:")
        print(f"[network]\nresolve = {{ {resolve} }}\n")
        first = web.hosts[0]
        print(f"# try: curl -H 'Host: {first}' {web.base_url}/")
        if spec.changing_hosts:
            print(f"# set the clock: curl '{web.base_url}{CONTROL_NOW}?t=<epoch seconds>'")
        print("# Ctrl-C stops", flush=True)
        await stop.wait()
    finally:
        await web.stop()
        if log:
            write_log(log, web.log)


if __name__ == "__main__":
    main()
