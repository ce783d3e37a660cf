"""One local SparkSession for every Spark test (local[2], two shuffle partitions, no UI),
and small synthetic captures analyzed once per session."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TROCKET = Path(sys.executable).with_name("trocket")


@contextlib.contextmanager
def tapping_broker(tmp_path: Path, tap: Path, rotate_mb: float) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """A real ``trocket broker`` (its name server embedded) recording to ``tap/broker.cap``
    with ``--tap-rotate-mb``; yields (name server address, the process, its log), and
    Ctrl-Cs it at the end (the tap's files are then complete)."""
    from ..waiting import wait_until_sync

    port, ns_port = free_port(), free_port()
    ns = f"127.0.0.1:{ns_port}"
    tap.mkdir(exist_ok=True)
    log = tmp_path / "broker.log"
    with open(log, "wb") as lf:
        broker = subprocess.Popen(
            [str(TROCKET), "broker", "--listen", f"127.0.0.1:{port}", "--namesrv-listen", ns, "--store", str(tmp_path / "store"),
             "--segment-size", "32m", "--tap", str(tap / "broker.cap"), "--tap-rotate-mb", str(rotate_mb)],
            stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        wait_until_sync(lambda: "boot success" in log.read_text(errors="replace") or broker.poll() is not None, 60, interval=0.1)
        assert broker.poll() is None, log.read_text(errors="replace")[-2000:]
        yield ns, broker, log
    finally:
        stop(broker, 30)


def wait_quiet(directory: Path, steady: float = 1.5, timeout: float = 30.0) -> None:
    """Until a tap has written what it holds: its files stop growing for ``steady``
    seconds (the tap hands its records to the disk within its 1 s flush interval)."""
    deadline = time.monotonic() + timeout
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = sum(p.stat().st_size for p in directory.iterdir())
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= steady:
            return
        time.sleep(0.1)


__all__ = ["summary_without", "split_native", "stop", "free_port", "tapping_broker", "wait_quiet", "TROCKET", "os"]
