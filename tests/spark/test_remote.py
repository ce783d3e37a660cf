"""Captures on an S3-compatible store: a real S3 HTTP server on loopback (moto's
standalone server), the objects put there with boto3 (another client than the job's),
read by ``trocket analyze s3://...`` through :mod:`trocket.spark.storage`. And hdfs://
where no libhdfs is: a clear problem, no JVM."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trocket.spark.main import main_args, run

from .conftest import TROCKET, summary_without

pytest.importorskip("moto.server", reason="moto[server] (the test extra) is not installed")

CORPUS = Path(__file__).resolve().parents[2] / "conformance" / "captures"
BUCKET = "caps"


@pytest.fixture(scope="module")
def s3():
    """(endpoint URL, a boto3 client) of an S3 server on loopback, with one bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    yield url, client
    server.stop()


@pytest.fixture
def aws_env(monkeypatch):
    """The usual AWS variables, set as a user would (the machine's own left out)."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return dict(os.environ)


def _put(client, key: str, path_or_bytes) -> None:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    client.put_object(Bucket=BUCKET, Key=key, Body=data)


def _rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return sorted(pq.read_table(path).to_pylist(), key=repr)


def _download(client, prefix: str, to: Path) -> list[str]:
    """Every object below ``prefix`` into the folder ``to`` (by boto3, not the job's
    reader); their keys relative to the prefix."""
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix):]
            if rel.endswith("/"):  # a folder marker (pyarrow keeps an emptied folder so)
                continue
            keys.append(rel)
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            client.download_file(BUCKET, obj["Key"], str(to / rel))
    return sorted(keys)


def test_captures_on_s3_give_the_tables_of_the_same_files_read_locally(spark, captures, s3, aws_env, tmp_path):
    """Synthetic captures (native and pcap) and the real clients' corpus (a C++ client's
    pcap, a JS client's native tap), in ranges of 64 KiB (every range read by ranged
    GETs), the results written to the store too: the same summary, tables, views and
    report as the same files read and written locally."""
    url, client = s3
    local = [captures["native"], captures["pcap"], str(CORPUS / "js-produce-consume.trkcap"), str(CORPUS / "cpp-produce-pull.pcap")]
    for path in local:
        _put(client, f"same/{os.path.basename(path)}", path)
    remote = [f"s3://{BUCKET}/same/synth.cap", f"s3a://{BUCKET}/same/synth.pcap", f"s3://{BUCKET}/same/js-produce-consume.trkcap",
              f"s3a://{BUCKET}/same/cpp-produce-pull.pcap"]  # fmt: skip
    opts = ["--quiet", "--split-mb", "0.0625"]
    rc_local = run(main_args([*local, "--out", str(tmp_path / "local"), *opts]), spark=spark)
    rc_s3 = run(main_args([*remote, "--s3-endpoint", url, "--out", f"s3://{BUCKET}/result/", *opts]), spark=spark)
    keys = _download(client, "result/", tmp_path / "s3")
    assert {"summary.json", "report.html", "_SUCCESS", "frames/_SUCCESS", "calls/_SUCCESS", "views/io.parquet"} <= set(keys)
    assert not [k for k in keys if "/." in "/" + k]  # no part left under its hidden name
    on_disk = json.loads((tmp_path / "local" / "summary.json").read_text())
    on_s3 = json.loads((tmp_path / "s3" / "summary.json").read_text())
    assert rc_s3 == rc_local
    assert on_s3 == on_disk
    assert on_s3["captures"] == ["synth.cap", "synth.pcap", "js-produce-consume.trkcap", "cpp-produce-pull.pcap"]
    assert all(b["frames"] > 0 for b in on_s3["bytes_by_capture"].values())
    truth = captures["native_truth"]
    assert on_s3["bytes_by_capture"]["synth.cap"]["frames"] == truth["frames"]
    for table in ("frames", "calls"):
        rows = _rows(tmp_path / "s3" / table)
        assert len(rows) > 3000 and rows == _rows(tmp_path / "local" / table), table
    views = sorted(p.name for p in (tmp_path / "local" / "views").iterdir())
    assert views == sorted(k.removeprefix("views/") for k in keys if k.startswith("views/")) and len(views) > 5
    for name in views:
        assert _rows(tmp_path / "s3" / "views" / name) == _rows(tmp_path / "local" / "views" / name), name
    page, same = ((tmp_path / d / "report.html").read_text() for d in ("s3", "local"))
    assert _no_ids(page) == _no_ids(same) and "Plotly.newPlot" in page  # the same page, but for plotly's random div ids


def _no_ids(page: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "ID", page)


def test_a_folder_prefix_with_the_cli(captures, s3, aws_env, tmp_path):
    """``trocket analyze s3://BUCKET/PREFIX`` as a user runs it: the prefix walked
    recursively, a non-capture skipped with a warning, ``_``/``.`` names silently; the
    endpoint from AWS_ENDPOINT_URL; the driver's keys reach the executors."""
    url, client = s3
    _put(client, "run/day1/synth.cap", captures["native"])
    _put(client, "run/day1/synth.cap.truth.json", captures["dir"].joinpath("synth.cap.truth.json").read_bytes())
    _put(client, "run/notes.txt", b"not a capture")
    _put(client, "run/_SUCCESS", b"")
    _put(client, "run/_tmp/half.cap", b"TRKCAP\r\n")
    out = tmp_path / "out"
    env = dict(aws_env, AWS_ENDPOINT_URL=url)
    proc = subprocess.run([str(TROCKET), "analyze", f"s3://{BUCKET}/run/", "--out", str(out), "--quiet", "--master", "local[1]"],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "trocket: warning: run/day1/synth.cap.truth.json: skipped (not a capture)" in proc.stderr
    assert "trocket: warning: run/notes.txt: skipped (not a capture)" in proc.stderr
    assert "_SUCCESS" not in proc.stderr and "half.cap" not in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    truth = captures["native_truth"]
    assert summary["captures"] == ["run/day1/synth.cap"] and summary["complete"] is True
    assert summary_without(summary, "bytes_by_capture", "captures", "complete", "incomplete_captures") == summary_without(truth, "torn_connections", "captures")
    assert (out / "report.html").exists() and (out / "_SUCCESS").exists()


def test_a_missing_key_and_hdfs_without_libhdfs_fail_before_any_jvm(s3, aws_env, tmp_path):
    """A key or bucket that is not there, and hdfs:// where libhdfs cannot load: problems,
    exit 1, the summary and report written to the store, and no JVM (a Java that cannot
    start would fail the run). An --out bucket that is not there: refused at once."""
    url, client = s3
    env = dict(aws_env, JAVA_HOME=str(tmp_path / "no-java"), PATH=os.path.dirname(sys.executable))
    env.pop("HADOOP_HOME", None)
    env.pop("ARROW_LIBHDFS_DIR", None)

    def analyze(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trocket", "analyze", *argv, "--s3-endpoint", url, "--quiet"],
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip

    proc = analyze(f"s3://{BUCKET}/nope/missing.cap", "s3a://no-such-bucket/x.cap", "hdfs://namenode:8020/caps/x.cap", "--out", f"s3://{BUCKET}/nothing")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert {"summary.json", "report.html", "_SUCCESS", "frames/_SUCCESS", "frames/part-empty.parquet"} <= set(_download(client, "nothing/", tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    problems = summary["stream_problems"]
    # named as local files are: by their base name, or the URI as given when two share one
    assert summary["captures"] == ["missing.cap", "s3a://no-such-bucket/x.cap", "hdfs://namenode:8020/caps/x.cap"]
    assert "missing.cap: no such file" in problems and "s3a://no-such-bucket/x.cap: no such file" in problems
    (hdfs,) = [p for p in problems if p.startswith("hdfs://namenode:8020/caps/x.cap: cannot reach HDFS at namenode:8020 (")]
    assert "libhdfs" in hdfs and "CLASSPATH" in hdfs and "JAVA_HOME" in hdfs
    assert sorted(summary["incomplete_captures"]) == sorted(summary["captures"])
    assert "missing.cap: no such file" in (tmp_path / "report.html").read_text()
    proc = analyze(f"s3://{BUCKET}/nope/missing.cap", "--out", "s3://no-such-bucket/out")
    assert proc.returncode == 1 and "trocket: error: --out s3://no-such-bucket/out: no such bucket (s3://no-such-bucket)" in proc.stderr
    proc = analyze(f"s3://{BUCKET}/nope/missing.cap", "--out", "hdfs://namenode:8020/out")
    assert proc.returncode == 1 and "trocket: error: --out hdfs://namenode:8020/out: cannot reach HDFS at namenode:8020 (" in proc.stderr


def test_storage_settings_and_schemes(monkeypatch):
    import pyarrow.fs as pafs

    from trocket.spark.storage import Storage, StorageError, filesystem

    env = {"AWS_ENDPOINT_URL": "http://any:1", "AWS_ENDPOINT_URL_S3": "http://s3only:2", "AWS_DEFAULT_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "AKIDKEY", "AWS_SECRET_ACCESS_KEY": "SECRETKEY"}  # fmt: skip
    st = Storage.from_environment(None, env)
    assert (st.s3_endpoint, st.s3_region, st.s3_access_key, st.s3_secret_key) == ("http://s3only:2", "eu-west-1", "AKIDKEY", "SECRETKEY")
    assert "KEY" not in repr(st)  # no key in a log line
    assert Storage.from_environment("http://given:3", env).s3_endpoint == "http://given:3"  # --s3-endpoint first
    assert Storage.from_environment(None, {"AWS_ACCESS_KEY_ID": "k"}).s3_access_key is None  # half a key pair: the SDK's own chain
    fs, path = filesystem("s3a://bkt/a/b.cap", Storage(s3_endpoint="http://127.0.0.1:9", s3_region="us-east-1"))
    assert isinstance(fs, pafs.S3FileSystem) and path == "bkt/a/b.cap"
    fs, path = filesystem("file:///tmp/x%20y.cap")
    assert isinstance(fs, pafs.LocalFileSystem) and path == "/tmp/x y.cap"
    with pytest.raises(StorageError, match=r"gs:// is not read"):
        filesystem("gs://bkt/x.cap")


def test_capture_show_and_stats_read_s3_too(s3, aws_env, tmp_path):
    """``trocket capture show|stats s3://...``: the same output as for the local file; a
    missing key is a problem of its own (exit 1, the rest still read)."""
    url, client = s3
    local = CORPUS / "cpp-produce-pull.pcap"
    _put(client, "show/cpp.pcap", local)

    def trocket(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(TROCKET), "capture", *argv], env=aws_env, capture_output=True, text=True, timeout=120)

    for command in (["stats", "--json"], ["show"]):
        here = trocket(*command, str(local))
        there = trocket(*command, f"s3a://{BUCKET}/show/cpp.pcap", "--s3-endpoint", url)
        assert there.returncode == here.returncode and there.stderr == here.stderr, there.stderr
        if command[0] == "stats":
            here_doc, there_doc = json.loads(here.stdout), json.loads(there.stdout)
            assert there_doc.pop("captures") == [f"s3a://{BUCKET}/show/cpp.pcap"] and here_doc.pop("captures") == [str(local)]
            assert there_doc == here_doc and there_doc["frames"] > 50
        else:
            assert there.stdout == here.stdout and there.stdout.count("\n") > 50
    missing = trocket("stats", f"s3://{BUCKET}/show/none.pcap", f"s3://{BUCKET}/show/cpp.pcap", "--s3-endpoint", url)
    assert missing.returncode == 1
    assert f"trocket: error: s3://{BUCKET}/show/none.pcap: No such file or directory" in missing.stderr and "Traceback" not in missing.stderr
    assert "frames: " in missing.stdout
