"""spark-submit entry point for `crawl fetch` (same arguments).

spark-submit jobs/fetch.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["fetch", *sys.argv[1:]]))
