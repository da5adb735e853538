#!/bin/bash
# EMR bootstrap action for crawllib, run on every node (make dist copies it into dist/).
# Upload dist/ (built with `make dist`, which packs crawllib-env.tar.gz), jobs/ and conf/ to
# s3://BUCKET/PREFIX, then pass that prefix as the argument:
#   --bootstrap-actions Path=s3://BUCKET/PREFIX/bootstrap.sh,Args=[s3://BUCKET/PREFIX]
# It installs Python 3.11 if the release lacks it (Amazon Linux 2023's python3 is 3.9), copies
# the prefix to /opt/crawllib and unpacks the packed environment into /opt/crawllib/env, the
# Python that deploy/emr/configurations.json gives PySpark. Nothing comes from PyPI; Spark and
# Delta come with EMR.
set -euo pipefail
DIST="${1:?usage: bootstrap.sh s3://BUCKET/PREFIX}"
if [ ! -x /usr/bin/python3.11 ]; then
  sudo dnf install -y -q python3.11
fi
sudo mkdir -p /opt/crawllib/env
# what the steps use, never logs an earlier cluster wrote under the prefix
sudo aws s3 cp --recursive --quiet --exclude "*" --include "crawllib.zip" \
  --include "crawllib-env.tar.gz" --include "jobs/*" --include "conf/*" "${DIST%/}" /opt/crawllib
sudo tar -xzf /opt/crawllib/crawllib-env.tar.gz -C /opt/crawllib/env
/opt/crawllib/env/bin/python -c "import aiohttp, trafilatura"  # fail here, not in a step
