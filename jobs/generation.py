"""spark-submit entry point for `crawl generation` (same arguments).

spark-submit jobs/generation.py ROOT [...] [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["generation", *sys.argv[1:]]))
