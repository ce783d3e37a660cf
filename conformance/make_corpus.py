"""Regenerate conformance/captures/: real client sessions through a trocket broker.

    .venv/bin/python conformance/make_corpus.py [--out conformance/captures] [--only cpp|js]

Each session runs against a fresh ``trocket broker`` (embedded name server, both on
free loopback ports, ``--tap`` on) while ``tcpdump -i lo`` records the same two ports,
so every session is committed twice: ``NAME.trkcap`` (native, from the tap) and
``NAME.pcap`` (from tcpdump). The clients are the acceptance tests' scenario scripts
(tests/acceptance/scripts with the C++ client of PyPI ``rocketmq``,
tests/acceptance/js with ali-ons, installed by ``npm ci --prefix tests/acceptance/js``):

* ``cpp-produce-pull``: the C++ producer sends 5 messages synchronously to
  ``CapCpp`` (auto-created), then the C++ pull consumer (group ``CG_cap_cpp``)
  reads them back.
* ``js-produce-consume``: an admin request creates topic ``CapJs`` (4 queues, as
  ``mqadmin updateTopic``), the ali-ons producer sends 5 messages
  (SEND_MESSAGE_V2), then the ali-ons push consumer (group ``CG_cap_js``) consumes
  them and shuts down.

Needs root (or CAP_NET_RAW) for tcpdump. Afterwards extract the sessions' distinct
frames into golden/captures/ with ``python -m trocket.conformance.corpus_golden``
(captures/README.md says what each session holds).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ACC = REPO / "tests" / "acceptance"
sys.path[:0] = [str(ACC), str(ACC / "scripts")]

from acc_tools import (  # noqa: E402
    BrokerProcess,
    RawClient,
    finish_client_script,
    finish_js_script,
    start_client_script,
    start_js_script,
)


class Tcpdump:
    def __init__(self, path: Path, ports: list[int]) -> None:
        self.path = path
        expr = " or ".join(f"tcp port {p}" for p in ports)
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", str(path), expr],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 10
        # tcpdump prints "listening on lo" once it captures
        line = ""
        while time.monotonic() < deadline and "listening" not in line:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"tcpdump exited with {self.proc.returncode}")

    def stop(self) -> None:
        time.sleep(0.5)  # the last segments (FINs) reach the capture
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)


def _session(name: str, out: Path, work: Path, body) -> None:
    broker = BrokerProcess(work / f"{name}-store", work / f"{name}-broker.log",
                           extra=["--tap", str(out / f"{name}.trkcap")])
    for suffix in (".trkcap", ".pcap"):
        (out / f"{name}{suffix}").unlink(missing_ok=True)
    dump = Tcpdump(out / f"{name}.pcap", [broker.port, broker.namesrv_port])
    try:
        broker.start()
        body(broker, work)
        time.sleep(0.5)
    finally:
        rc = broker.stop()
        dump.stop()
    if rc != 0:
        raise RuntimeError(f"broker exited with {rc}:\n{broker.log_tail()}")
    print(f"{name}: {(out / f'{name}.trkcap').stat().st_size} B native, {(out / f'{name}.pcap').stat().st_size} B pcap")


def cpp_session(broker: BrokerProcess, work: Path) -> None:
    home = work / "cpp-home"
    p = start_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", "sync", "--count", "5",
                                           "--topic", "CapCpp", "--group", "PG_cap_cpp"], home)
    r = finish_client_script(p, "produce.py", home, 60, broker)
    assert len(r["acked"]) == 5, r
    p = start_client_script("consume.py", ["--namesrv", broker.namesrv, "--kind", "pull", "--group", "CG_cap_cpp",
                                           "--topics", "CapCpp", "--expect", "5", "--timeout", "30",
                                           "--idle", "0"], home)
    r = finish_client_script(p, "consume.py", home, 60, broker)
    assert len({m["uid"] for m in r["messages"]}) == 5, r


def js_session(broker: BrokerProcess, work: Path) -> None:
    with RawClient(broker.addr) as raw:
        raw.create_topic("CapJs", 4)
    home = work / "js-home"
    p = start_js_script("produce.js", ["--namesrv", broker.namesrv, "--mode", "sync", "--topic", "CapJs",
                                       "--count", "5", "--group", "PG_cap_js", "--deadline", "50"], home)
    r = finish_js_script(p, "produce.js", 60, broker)
    assert len(r["acked"]) == 5, {k: v for k, v in r.items() if k != "_stderr"}
    p = start_js_script("consume.js", ["--namesrv", broker.namesrv, "--group", "CG_cap_js", "--topics", "CapJs",
                                       "--expect", "5", "--timeout", "30", "--idle", "0", "--quiet", "3",
                                       "--deadline", "50"], home)
    r = finish_js_script(p, "consume.js", 60, broker)
    assert len({m["uid"] for m in r["messages"]}) == 5, {k: v for k, v in r.items() if k != "_stderr"}


SESSIONS = {"cpp-produce-pull": cpp_session, "js-produce-consume": js_session}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "captures")
    ap.add_argument("--only", choices=sorted(SESSIONS), action="append")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trocket-corpus-") as tmp:
        for name in args.only or sorted(SESSIONS):
            _session(name, args.out.resolve(), Path(tmp), SESSIONS[name])
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
