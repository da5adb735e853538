"""A crawl root's address: a local folder or a URI. Below the tables, the lease and the
journal, which all key on it; imports nothing of crawllib."""

from __future__ import annotations

import os


def normalize_root(root: str) -> str:
    """Local paths become absolute; URIs (s3a://, s3://, file:/, hdfs://) are kept as given."""
    if "://" in root or root.startswith("file:"):
        return root.rstrip("/")
    return os.path.abspath(os.path.expanduser(root))
