"""The same job on a real Spark standalone cluster (a master and a worker started from the
installed pyspark on loopback) gives what local mode gives, run with ``trocket analyze
--master spark://...`` and with ``spark-submit`` of the packaged entry point.

One cluster serves the module; the cluster's JVMs are subprocesses of this test, stopped
at its end. Skips only where Java is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from ..waiting import wait_until_sync

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path, text: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    """Until the process's log says ``text`` (it is up)."""

    def content() -> str:
        return path.read_text(errors="replace") if path.exists() else ""

    def said() -> bool:
        log = content()
        if text in log:
            return True
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1]} exited with {proc.returncode}:\n{log[-3000:]}")
        return False

    wait_until_sync(said, timeout, interval=0.3, what=lambda: f"{text!r} in the log:\n{content()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed: a Spark standalone cluster needs it")
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    d = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(d), PYSPARK_PYTHON=sys.executable,
               SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")  # fmt: skip
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = os.path.join(home, "bin", "spark-class")
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for name, args, ready in (
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(_free_port())], "I have been elected leader"),
            ("worker", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
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


@pytest.fixture(scope="module")
def cluster_runs(cluster, captures, tmp_path_factory):
    """Both entry points on the cluster at once: ``trocket analyze --master spark://...``
    and ``spark-submit --master spark://...`` of the packaged entry point. Each
    application takes one of the worker's two cores, so their JVM start-ups overlap
    (the two runs one after the other were most of this module's time)."""
    import trocket.spark.submit as entry

    url, env, home = cluster
    d = tmp_path_factory.mktemp("cluster-runs")
    jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    commands = {
        "analyze": (
            # a relative --out: the executors work in their own folders, not the driver's
            [sys.executable, "-m", "trocket", "analyze", captures["native"], "--out", "analyze-out", "--master", url,
             "--split-mb", "0.0625", "--quiet", "--no-report"],
            dict(env, PYSPARK_SUBMIT_ARGS="--conf spark.cores.max=1 pyspark-shell"),
        ),
        "submit": (
            [os.path.join(home, "bin", "spark-submit"), "--master", url, "--total-executor-cores", "1",
             "--driver-java-options", jvm, "--conf", "spark.ui.enabled=false", entry.__file__,
             captures["native"], "--out", str(d / "submit-out"), "--quiet", "--no-report"],
            env,
        ),
    }  # fmt: skip
    procs = {
        name: subprocess.Popen(cmd, env=e, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (cmd, e) in commands.items()
    }
    runs = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            runs[name] = (proc.returncode, out, err, d / f"{name}-out")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return runs


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


def test_standalone_cluster_gives_the_local_results(cluster_runs, spark, native_result):
    rc, _, err, out = cluster_runs["analyze"]
    assert rc == 0, err[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary == native_result.summary
    _same_tables(spark, os.path.dirname(native_result.frames_path), str(out))


def test_spark_submit_entry_point_on_the_cluster(cluster_runs, native_result):
    rc, stdout, err, out = cluster_runs["submit"]
    assert rc == 0, err[-3000:]
    assert "frames 3000" in stdout
    assert json.loads((out / "summary.json").read_text()) == native_result.summary
