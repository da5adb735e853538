"""spark-submit entry point for `crawl parse` (same arguments).

spark-submit jobs/parse.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["parse", *sys.argv[1:]]))
