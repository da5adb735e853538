"""spark-submit entry point: create the crawl tables under ROOT (idempotent).

spark-submit jobs/init.py ROOT [--config conf/emr.toml]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["init", *sys.argv[1:]]))
