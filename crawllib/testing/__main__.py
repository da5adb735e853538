"""``python -m crawllib.testing --hosts 20 --port 8080``: serve the test web until Ctrl-C (or
SIGTERM); with ``--log FILE``, its request log is written there on the way out, one JSON object
(:class:`crawllib.testing.web.LogRecord`) per line."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

from crawllib.testing.audit import write_log
from crawllib.testing.site import WebSpec
from crawllib.testing.web import TestWeb


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m crawllib.testing", description=__doc__)
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
    args = parser.parse_args(argv)
    spec = WebSpec(
        seed=args.seed,
        hosts=args.hosts,
        pages_per_host=args.pages,
        fanout=args.fanout,
        special=not args.no_special,
        addresses=args.addresses,
    )
    try:
        asyncio.run(_serve(spec, args.port, args.log))
    except KeyboardInterrupt:
        pass


async def _serve(spec: WebSpec, port: int, log: str = "") -> None:
    web = TestWeb(spec, port)
    await web.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        resolve = ", ".join(f"{json.dumps(h)} = {json.dumps(t)}" for h, t in web.resolve.items())
        print(f"# test web on {web.base_url}: {len(web.hosts)} hosts; config for the crawler:")
        print(f"[network]\nresolve = {{ {resolve} }}\n")
        first = web.hosts[0]
        print(f"# try: curl -H 'Host: {first}' {web.base_url}/")
        print("# Ctrl-C stops", flush=True)
        await stop.wait()
    finally:
        await web.stop()
        if log:
            write_log(log, web.log)


if __name__ == "__main__":
    main()
