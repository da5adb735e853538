"""spark-submit entry point for `crawl export-warc` (same arguments).

spark-submit jobs/export_warc.py ROOT --gen N [OUT_DIR] [--config conf/emr.toml] [--set key=value]

The executors write the WARC files (to OUT_DIR, default ROOT/warc/gen=N) and the driver their
rows of the warc_index table.
"""

import sys

from crawllib.cli import main

if __name__ == "__main__":
    sys.exit(main(["export-warc", *sys.argv[1:]]))
