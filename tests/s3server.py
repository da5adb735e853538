"""An S3 API on 127.0.0.1 for tests: moto's server, and a config whose s3a keys point at it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from crawllib.config import Config, load_config, replace
from crawllib.store import lease

CONDITIONS = ("HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH")


def atomic_conditions(app: Any) -> Any:
    """S3 applies a conditional write (If-Match, If-None-Match) atomically: the check and the
    write are one step. moto checks, then writes, on the thread of each request, so two
    conditional PUTs racing each other could both pass their checks. This WSGI wrapper runs
    conditional requests one at a time, as S3 would (the lease's race tests depend on it)."""
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if not any(environ.get(h) for h in CONDITIONS):
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))

    return wrapped


def s3_server() -> Any:
    """moto's threaded S3 server on 127.0.0.1 (a free port), conditional writes atomic; not
    started."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class AtomicMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = atomic_conditions(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return AtomicMotoServer(ip_address="127.0.0.1", port=0, verbose=False)


@contextmanager
def moto_s3(bucket: str) -> Iterator[Config]:
    """Start moto's S3 server on 127.0.0.1 with ``bucket`` (conditional writes atomic, as on
    S3); yield a config whose spark.conf points the s3a keys (and so boto3's client,
    ``lease.s3_client``) at it."""
    server = s3_server()
    server.start()
    try:
        host, port = server.get_host_and_port()
        cfg = replace(
            load_config(),
            spark__conf={
                "spark.hadoop.fs.s3a.endpoint": f"http://{host}:{port}",
                "spark.hadoop.fs.s3a.access.key": "test",
                "spark.hadoop.fs.s3a.secret.key": "test",
                "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                "spark.hadoop.fs.s3a.path.style.access": "true",
            },
        )
        lease.s3_client(cfg).create_bucket(Bucket=bucket)
        yield cfg
    finally:
        server.stop()
