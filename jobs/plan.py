"""spark-submit entry point for `crawl plan` (same arguments).

spark-submit jobs/plan.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["plan", *sys.argv[1:]]))
