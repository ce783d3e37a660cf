"""The same job on a real Spark standalone cluster (a master and a worker started from the
installed pyspark on loopback) gives what local mode gives; and the spark-submit entry point.

The cluster's JVMs are subprocesses of this test, stopped at its end. Skips only where
Java is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path, text: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1]} exited with {proc.returncode}:\n{content[-3000:]}")
        time.sleep(0.3)
    raise AssertionError(f"no {text!r} within {timeout} s:\n{path.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed: a Spark standalone cluster needs it")
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    d = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(d), PYSPARK_PYTHON=sys.executable)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = os.path.join(home, "bin", "spark-class")
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for name, args, ready in (
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(_free_port())], "I have been elected leader"),
            ("worker", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
                        "--webui-port", str(_free_port()), "--work-dir", str(d / "work")], "Successfully registered with master"),
        ):  # fmt: skip
            log = d / f"{name}.log"
            f = open(log, "wb")
            logs.append(f)
            proc = subprocess.Popen([spark_class, *args], stdout=f, stderr=subprocess.STDOUT, env=env, cwd=d)
            procs.append(proc)
            _wait_for(log, ready, proc)
        yield url, env, home
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in logs:
            f.close()


def _same_tables(spark, local_dir: str, other_dir: str) -> None:
    from pyspark.sql import functions as F

    for table in ("frames", "calls"):
        a = spark.read.parquet(os.path.join(local_dir, table))
        b = spark.read.parquet(os.path.join(other_dir, table))
        if "ext" in a.columns:  # maps take no part in set operations: compare them as JSON
            a = a.withColumn("ext", F.to_json("ext"))
            b = b.withColumn("ext", F.to_json("ext"))
        assert a.columns == b.columns
        assert a.count() == b.count()
        assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


def test_standalone_cluster_gives_the_local_results(cluster, spark, captures, native_result, tmp_path):
    url, env, _ = cluster
    out = tmp_path / "cluster-out"
    proc = subprocess.run(
        [sys.executable, "-m", "trocket", "analyze", captures["native"], "--out", str(out), "--master", url,
         "--split-mb", "1", "--quiet", "--no-report"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary == native_result.summary
    _same_tables(spark, os.path.dirname(native_result.frames_path), str(out))


def test_spark_submit_entry_point_on_the_cluster(cluster, spark, captures, native_result, tmp_path):
    import trocket.spark.submit as entry

    url, env, home = cluster
    out = tmp_path / "submit-out"
    proc = subprocess.run(
        [os.path.join(home, "bin", "spark-submit"), "--master", url, "--conf", "spark.ui.enabled=false", entry.__file__,
         captures["native"], "--out", str(out), "--quiet", "--no-report"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "frames 3000" in proc.stdout
    assert json.loads((out / "summary.json").read_text()) == native_result.summary
