"""``python -m crawllib.cli``: the ``crawl`` command."""

import sys

from crawllib.cli import console

sys.exit(console())
