"""A pcap recorded here with tcpdump on loopback while the real C++ client (PyPI
``rocketmq``) produces through ``trocket broker``; the analysis must count what the test
sent. Skips where tcpdump cannot capture (absent, or no permission) or the C++ client's
wheel cannot run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trocket.spark.job import analyze

from ..waiting import wait_until_sync
from .conftest import stop

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parents[1] / "acceptance" / "scripts"
SENT = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_text(path: Path, text: str, proc: subprocess.Popen, timeout: float) -> bool:
    """Whether the process's log says ``text`` within ``timeout`` s (False once it exits)."""
    try:
        wait_until_sync(lambda: text in path.read_text(errors="replace") or proc.poll() is not None,
                        timeout, interval=0.1)
    except AssertionError:
        return False
    return text in path.read_text(errors="replace")


def _wait_written(pcap: Path, steady: float = 1.0, timeout: float = 20.0) -> None:
    """Until tcpdump has written what it received: the file stops growing for ``steady``
    seconds. On a loaded machine tcpdump lags, and SIGINT drops what it has not yet
    written (seen: 172 packets received by the filter, 32 written). tcpdump signals
    nothing per packet written, so a quiet spell is the only sign (the sleep stays)."""
    deadline = time.monotonic() + timeout
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = pcap.stat().st_size if pcap.exists() else 0
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= steady:
            return
        time.sleep(0.1)


def test_cpp_client_session_recorded_with_tcpdump(spark, tmp_path):
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        pytest.skip("tcpdump is not installed")
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the wheel's native library may not load here
        pytest.skip(f"the C++ client (PyPI rocketmq) cannot run here: {exc}")
    port, ns_port = _free_port(), _free_port()
    trocket = Path(sys.executable).with_name("trocket")
    broker_log = tmp_path / "broker.log"
    dump_log = tmp_path / "tcpdump.log"
    pcap = tmp_path / "cpp.pcap"
    procs = []
    try:
        with open(dump_log, "wb") as dl:
            dump = subprocess.Popen([tcpdump, "-i", "lo", "-U", "-s", "0", "-w", str(pcap), f"tcp port {port} or tcp port {ns_port}"],
                                    stdout=dl, stderr=subprocess.STDOUT)  # fmt: skip
        procs.append(dump)
        if not _wait_text(dump_log, "listening on", dump, 20):
            pytest.skip(f"tcpdump cannot capture on lo here: {dump_log.read_text(errors='replace')[-500:]}")
        with open(broker_log, "wb") as bl:
            broker = subprocess.Popen([str(trocket), "broker", "--listen", f"127.0.0.1:{port}", "--namesrv-listen", f"127.0.0.1:{ns_port}",
                                       "--store", str(tmp_path / "store"), "--segment-size", "32m"], stdout=bl, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        procs.append(broker)
        assert _wait_text(broker_log, "boot success", broker, 30), broker_log.read_text(errors="replace")[-2000:]
        produced = subprocess.run(
            [sys.executable, str(SCRIPTS / "produce.py"), "--namesrv", f"127.0.0.1:{ns_port}", "--mode", "sync", "--count", str(SENT)],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr[-2000:]
        result = json.loads(produced.stdout.strip().splitlines()[-1])
        assert len(result["acked"]) == SENT, result["errors"]
        _wait_written(pcap)
    finally:
        for proc in reversed(procs):
            stop(proc)
    summary = analyze(spark, [str(pcap)], str(tmp_path / "out")).summary
    sends = {code: n for code, n in summary["requests_by_code"].items() if code in ("10", "310", "320")}
    why = f"{summary}\ntcpdump: {dump_log.read_text(errors='replace')[-300:]}"
    assert sum(sends.values()) == SENT, why
    answered_ok = sum(p["count"] for p in summary["pairs"] if str(p["request_code"]) in sends and p["response_code"] == 0)
    assert answered_ok == SENT, why
    assert summary["requests_by_code"].get("105", 0) >= 1  # the route lookup at the name server
    assert not any(code in sends for code in summary["unanswered_by_code"])
    assert summary["header_decode_errors"] == 0 and summary["unmatched_responses"] == 0
    assert summary["connections"] >= 2  # name server and broker
    assert summary["frames_by_serialize"]["JSON"] + summary["frames_by_serialize"]["ROCKETMQ"] == summary["frames"]
