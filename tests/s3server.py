"""An S3 API on 127.0.0.1 for tests: moto's server, and a config whose s3a keys point at it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from crawllib.config import Config, load_config, replace
from crawllib.store import lease


@contextmanager
def moto_s3(bucket: str) -> Iterator[Config]:
    """Start moto's S3 server on 127.0.0.1 with ``bucket``; yield a config whose spark.conf
    points the s3a keys (and so boto3's client, ``lease.s3_client``) at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
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
