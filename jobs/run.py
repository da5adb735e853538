"""spark-submit entry point for `crawl run` (same arguments).

spark-submit jobs/run.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
