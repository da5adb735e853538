"""spark-submit entry point for `crawl register` (same arguments).

spark-submit jobs/register.py ROOT --database NAME [--replace] [--config conf/emr.toml]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["register", *sys.argv[1:]]))
