"""Delta tables through delta-rs (the ``deltalake`` package), without a JVM: where a crawl root's
tables are for it (a local folder or ``s3://``, with the storage options the Spark engine's
settings imply), and a table as a stream of Arrow batches DuckDB scans."""

from __future__ import annotations

import os
import re
from typing import Any

from crawllib.config import Config
from crawllib.core.errors import EngineUnavailable


def table_location(root: str, cfg: Config) -> tuple[str, dict[str, str]]:
    """Where the root's tables are for delta-rs, and its storage options: a local folder, or
    ``s3://`` (for ``s3a://`` too) with the credentials and endpoint the Spark engine would use
    (``spark.hadoop.fs.s3a.*`` in ``spark.conf``, else boto3's: environment, profile, instance
    role)."""
    if root.startswith("file:"):
        root = re.sub(r"^file:(//)?", "", root)
    scheme, sep, rest = root.partition("://")
    if not sep:
        return os.path.abspath(os.path.expanduser(root)).rstrip("/"), {}
    if scheme not in ("s3", "s3a"):
        raise EngineUnavailable(
            f"the duckdb engine reads local and S3 crawl roots, not {scheme}://; use --engine spark"
        )
    return f"s3://{rest.rstrip('/')}", s3_options(cfg)


def s3_options(cfg: Config) -> dict[str, str]:
    """delta-rs storage options for S3, from the s3a settings in ``spark.conf`` or boto3."""
    conf = {k: str(v) for k, v in cfg.spark.conf.items()}
    s3a = "spark.hadoop.fs.s3a."
    options: dict[str, str] = {}
    endpoint = conf.get(s3a + "endpoint")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if conf.get(s3a + "path.style.access", "").lower() == "true":
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    if conf.get(s3a + "access.key"):
        options["AWS_ACCESS_KEY_ID"] = conf[s3a + "access.key"]
        options["AWS_SECRET_ACCESS_KEY"] = conf.get(s3a + "secret.key", "")
    else:
        import boto3

        session = boto3.Session()
        credentials = session.get_credentials()
        if credentials is not None:
            frozen = credentials.get_frozen_credentials()
            options["AWS_ACCESS_KEY_ID"] = frozen.access_key
            options["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
            if frozen.token:
                options["AWS_SESSION_TOKEN"] = frozen.token
        if session.region_name:
            options["AWS_REGION"] = session.region_name
    if conf.get(s3a + "endpoint.region"):
        options["AWS_REGION"] = conf[s3a + "endpoint.region"]
    return options


class DeltaScan:
    """One Delta table as DuckDB reads it (the Arrow PyCapsule protocol): every scan a fresh
    delta-rs stream of one version of the table (its current one when the table is opened, or
    ``version``), deletion vectors applied, of the columns ``wanted`` (None: all), of the rows
    matching ``predicate`` (DataFusion SQL; partitions are pruned by it). The table is opened
    once, when DuckDB first asks for its schema, so every scan reads the same version."""

    def __init__(
        self,
        uri: str,
        options: dict[str, str],
        wanted: frozenset[str] | None,
        predicate: str | None = None,
        version: int | None = None,
        cache_bytes: int = 0,
    ) -> None:
        self.uri, self.options, self.wanted = uri, options, wanted
        self.predicate, self.version = predicate, version
        self.cache_bytes = cache_bytes
        self._rows: Any = None  # the rows read once, when the table's files are small enough
        self._table: Any = None
        self._columns: list[str] = []
        self._schema: Any = None

    def _open(self) -> None:
        from deltalake import DeltaTable

        self._table = DeltaTable(
            self.uri, version=self.version, storage_options=self.options or None
        )
        names = [field.name for field in self._table.schema().fields]
        # DuckDB reads no table without a column: count(*) alone reads the first
        self._columns = [
            n for n in names if self.wanted is None or n.lower() in self.wanted
        ] or names[:1]
        self._schema = self._table.scan(columns=self._columns).schema

    def __arrow_c_schema__(self) -> object:
        if self._table is None:
            self._open()
        return self._schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        if self._table is None:
            self._open()
        if self._rows is not None:
            return self._rows.__arrow_c_stream__(requested_schema)
        scan = self._table.scan(columns=self._columns, predicate=self.predicate)
        if self.cache_bytes and self._files_bytes() <= self.cache_bytes:
            # A query that reads the table in several places (a rule's steps) scans it once:
            # each delta-rs scan plans a DataFusion query of its own.
            import pyarrow as pa

            self._rows = pa.table(scan)
            return self._rows.__arrow_c_stream__(requested_schema)
        return scan.__arrow_c_stream__(requested_schema)

    def _files_bytes(self) -> int:
        """The bytes of the table's data files on storage (all partitions), from its log."""
        import pyarrow as pa

        actions = pa.table(self._table.get_add_actions(flatten=True))
        return int(sum(actions.column("size_bytes").to_pylist())) if actions.num_rows else 0


def read_table(
    root: str,
    name: str,
    columns: list[str] | None = None,
    version: int | None = None,
    cfg: Config | None = None,
) -> Any:
    """Table ``name`` of the crawl at ``root`` as a pyarrow Table, for pandas (``.to_pandas()``)
    and any Arrow tool: read by delta-rs with deletion vectors applied (its ``to_pandas()``
    refuses crawldb's), string and binary views cast to plain strings and binaries (pyarrow's
    pandas conversion takes no view inside a list)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from crawllib.config import load_config
    from crawllib.store.db import table_path

    location, options = table_location(root, cfg or load_config())
    table = DeltaTable(table_path(location, name), version=version, storage_options=options or None)
    read = pa.table(table.scan(columns=columns))
    return read.cast(pa.schema([pa.field(f.name, _plain_type(f.type)) for f in read.schema]))


def _plain_type(kind: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _plain_type(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(_plain_type(kind.key_type), _plain_type(kind.item_type))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain_type(f.type)) for f in kind])
    return kind
