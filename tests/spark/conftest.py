"""One local SparkSession for every Spark test (local[2], two shuffle partitions, no UI),
and small synthetic captures analyzed once per session."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
from collections.abc import Callable

import pytest

pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")


@pytest.fixture(scope="session")
def spark():
    from trocket.spark.session import build_session

    session = build_session("local[2]", shuffle_partitions=2, driver_memory="768m", extra={"spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def captures(tmp_path_factory):
    """A native and a pcap capture of the same synthetic traffic, and their truths."""
    from trocket.spark import synth

    d = tmp_path_factory.mktemp("captures")
    native = str(d / "synth.cap")
    pcap = str(d / "synth.pcap")
    synth.write_native(native, 3000, seed=11)
    synth.write_pcap(pcap, 3000, seed=11)
    with open(synth.truth_path(native)) as f:
        native_truth = json.load(f)
    with open(synth.truth_path(pcap)) as f:
        pcap_truth = json.load(f)
    return {"dir": d, "native": native, "pcap": pcap, "native_truth": native_truth, "pcap_truth": pcap_truth}


@pytest.fixture(scope="session")
def native_result(spark, captures, tmp_path_factory):
    """The synthetic native capture analyzed in ranges of ~64 KiB (several tasks)."""
    from trocket.spark.job import analyze

    out = str(tmp_path_factory.mktemp("native-out"))
    result = analyze(spark, [captures["native"]], out, split_bytes=64 * 1024)
    return result


def summary_without(summary: dict, *keys: str) -> dict:
    return {k: v for k, v in summary.items() if k not in keys}


def split_native(path: str, out_dir, parts: int, name: Callable[[int], str] = lambda i: f"tap{i}.cap") -> list[str]:
    """The records of ``path`` in ``parts`` files, as ``--tap-rotate-mb`` writes them
    (each with the file header); ``name(i)``: the i-th file's name."""
    data = open(path, "rb").read()
    header, pos, cuts = data[:16], 16, [16]
    while pos < len(data):
        pos += 4 + struct.unpack_from(">I", data, pos)[0]
        cuts.append(pos)
    step = len(cuts) // parts
    os.makedirs(out_dir, exist_ok=True)
    names = []
    for i in range(parts):
        a, b = cuts[i * step], cuts[(i + 1) * step] if i < parts - 1 else len(data)
        file = os.path.join(out_dir, name(i))
        with open(file, "wb") as f:
            f.write(header + data[a:b])
        names.append(file)
    return names


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Ctrl-C ``proc`` (a broker, tcpdump) and wait for it; killed if it does not stop."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["summary_without", "split_native", "stop", "os"]
