"""spark-submit entry point for `crawl maintain` (same arguments).

spark-submit jobs/maintain.py ROOT [--every K] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["maintain", *sys.argv[1:]]))
