"""Secret Spark settings never reach the JVM's command line (issue 49: every spark.conf
setting was a `--conf k=v` of the launched JVM, which any local user reads with `ps` or from
/proc/PID/cmdline); the session still has them, and S3A's Hadoop configuration too. A fresh
JVM, started by a process of its own, as `crawl` starts one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, os, sys
from crawllib.config import load_config
from crawllib.store.session import get_spark
from tests.conftest import test_config_overrides

overrides = [o for o in test_config_overrides() if not o.startswith("spark.conf=")]
cfg = load_config(sys.argv[1:2], overrides)  # the file's spark.conf, whole
spark = get_spark(cfg)
sc = spark.sparkContext
jvm_pid = int(sc._gateway.proc.pid)
with open(f"/proc/{jvm_pid}/cmdline", "rb") as fh:
    cmdline = fh.read().decode("utf-8", "replace")
print(json.dumps({
    "cmdline": cmdline,
    "conf": sc.getConf().get("spark.hadoop.fs.s3a.secret.key"),
    "hadoop": sc._jsc.hadoopConfiguration().get("fs.s3a.secret.key"),
    "endpoint": sc._jsc.hadoopConfiguration().get("fs.s3a.endpoint"),
}))
spark.stop()
"""


def test_a_secret_setting_is_in_the_session_but_not_on_the_jvms_command_line(tmp_path):
    config = tmp_path / "s3.toml"
    config.write_text(
        "[spark.conf]\n"
        '"spark.hadoop.fs.s3a.secret.key" = "S3KRET-VALUE"\n'
        '"spark.hadoop.fs.s3a.endpoint" = "http://127.0.0.1:9"\n'
        '"spark.sql.codegen.wholeStage" = "false"\n'
    )
    ran = subprocess.run(
        [sys.executable, "-c", PROBE, str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9" in got["cmdline"]  # the probe sees
    assert "S3KRET" not in got["cmdline"]
    assert got["conf"] == got["hadoop"] == "S3KRET-VALUE"
    assert got["endpoint"] == "http://127.0.0.1:9"
