#!/bin/bash
# Start an EMR cluster for crawllib (docs/emr.md, Amazon EMR): emr-spark-8.0.0 with Spark, the
# configurations of this folder (Delta, the packed environment's Python for PySpark, the Glue
# Data Catalog as the metastore), the bootstrap action on every node, the steps' and the
# client-mode drivers' logs kept under LOG_URI, and the cluster ended once idle for
# IDLE_SECONDS (default an hour) so a forgotten cluster does not run up a bill.
# Usage: deploy/emr/create-cluster.sh s3://BUCKET/crawllib [LOG_URI, default s3://BUCKET/crawllib-logs/]
set -euo pipefail
DIST="${1:?usage: create-cluster.sh s3://BUCKET/PREFIX [LOG_URI]}"
DIST="${DIST%/}"
LOG_URI="${2:-${DIST}-logs/}"  # beside the prefix: never under it, which the bootstrap copies
HERE="$(cd "$(dirname "$0")" && pwd)"
aws emr create-cluster \
  --name "${NAME:-crawl}" \
  --release-label emr-spark-8.0.0 \
  --applications Name=Spark \
  --configurations "file://${HERE}/configurations.json" \
  --bootstrap-actions "Path=${DIST}/bootstrap.sh,Args=[${DIST}]" \
  --log-uri "${LOG_URI}" \
  --auto-termination-policy "IdleTimeout=${IDLE_SECONDS:-3600}" \
  --instance-type "${INSTANCE_TYPE:-m5.xlarge}" \
  --instance-count "${INSTANCE_COUNT:-3}" \
  --use-default-roles
