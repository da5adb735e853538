"""spark-submit entry point: seed a crawl root.

spark-submit jobs/seed.py ROOT FILE [--config conf/emr.toml] [--set key=value]
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["seed", *sys.argv[1:]]))
