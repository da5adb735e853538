"""spark-submit entry point for `crawl update` (same arguments).

spark-submit jobs/update.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["update", *sys.argv[1:]]))
