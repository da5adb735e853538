"""spark-submit entry point for `crawl export-text` (same arguments).

spark-submit jobs/export_text.py ROOT OUT [--format parquet|jsonl|wet] [--gen GENS]
    [--language CODES] [--where PREDICATE] [--shard-docs N] [--config conf/emr.toml]

The executors write the shards (part-<task>-<seq>.<ext>) to OUT, a folder every node reaches or
an S3 URI.
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["export-text", *sys.argv[1:]]))
