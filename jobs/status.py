"""spark-submit entry point for `crawl status` (same arguments).

spark-submit jobs/status.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["status", *sys.argv[1:]]))
