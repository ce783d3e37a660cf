"""The real RocketMQ 4.9.8 (Java) as a peer: its name server and broker as processes,
and ``TxnTool`` (the Java client's transactions and request-reply, TxnTool.java beside
this file) compiled once and run as a process.

Used by tests/acceptance/test_java_transactions.py and benchmarks/transactions.py.
The Java distribution is ``$TROCKET_ROCKETMQ_JAVA`` or /work/shared/rocketmq-4.9.8
(its README says how it was built); :func:`java_status` says whether it can run here.
Every process is ended by its own pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from functools import lru_cache
from pathlib import Path

__all__ = [
    "JavaBroker",
    "RMQ_HOME",
    "TOOL_SOURCE",
    "compile_tool",
    "finish_tool",
    "free_port",
    "java_env",
    "java_status",
    "run_tool",
    "start_tool",
]

HERE = Path(__file__).resolve().parent
TOOL_SOURCE = HERE / "TxnTool.java"
RMQ_HOME = Path(os.environ.get("TROCKET_ROCKETMQ_JAVA", "/work/shared/rocketmq-4.9.8"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@lru_cache(maxsize=1)
def java_env() -> dict[str, str]:
    """``env.sh``'s JAVA, CP, JDK17_OPTS, QUIET_LOG and ROCKETMQ_HOME."""
    names = ("JAVA", "CP", "JDK17_OPTS", "QUIET_LOG", "ROCKETMQ_HOME")
    script = f". '{RMQ_HOME / 'env.sh'}' && " + " && ".join(f'printf "%s\\0" "${n}"' for n in names)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True, timeout=30).stdout
    return dict(zip(names, out.decode().split("\0")))


def java_status() -> tuple[bool, str]:
    """(runs here, why not)."""
    if not (RMQ_HOME / "env.sh").exists():
        return False, f"no RocketMQ 4.9.8 distribution at {RMQ_HOME} (set TROCKET_ROCKETMQ_JAVA)"
    if shutil.which("javac") is None:
        return False, "javac is not on PATH"
    try:
        env = java_env()
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"{RMQ_HOME}/env.sh: {exc}"
    if shutil.which(env["JAVA"]) is None and not Path(env["JAVA"]).exists():
        return False, f"no java runtime ({env['JAVA']})"
    return True, ""


def compile_tool(out_dir: Path) -> Path:
    """``javac`` TxnTool.java into ``out_dir``; returns it (the classpath entry)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / "TxnTool.class").exists():
        subprocess.run(["javac", "-cp", java_env()["CP"], "-d", str(out_dir), str(TOOL_SOURCE)],
                       check=True, capture_output=True, timeout=300)
    return out_dir


def _jvm(classes: Path, *, props: dict[str, str], bench: bool) -> list[str]:
    """A client JVM: small and quick to start for the tests (C1 only, serial GC), the
    full JIT and a larger heap for a benchmark."""
    env = java_env()
    tuning = ["-Xms1g", "-Xmx1g"] if bench else ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    cmd = [env["JAVA"], *env["JDK17_OPTS"].split(), env["QUIET_LOG"], *tuning]
    cmd += [f"-D{k}={v}" for k, v in props.items()]
    return cmd + ["-cp", f"{env['CP']}:{classes}"]


def start_tool(classes: Path, args: list[str], *, log_dir: Path, props: dict[str, str] | None = None,
               bench: bool = False) -> subprocess.Popen:
    """``TxnTool ARGS`` as a process (stdout: its event lines; stderr: its log)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    props = {"rocketmq.client.logRoot": str(log_dir / "client-logs"), **(props or {})}
    stderr = open(log_dir / f"{args[0]}-{time.monotonic_ns()}.err", "w")
    return subprocess.Popen([*_jvm(classes, props=props, bench=bench), "TxnTool", *args], stdout=subprocess.PIPE,
                            stderr=stderr, text=True, stdin=subprocess.DEVNULL)


def finish_tool(proc: subprocess.Popen, timeout: float) -> list[str]:
    """Its stdout lines, once it exits (killed by pid after ``timeout``)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"TxnTool {proc.args[-6:]} did not finish within {timeout} s; it printed:\n{out}")
    return out.splitlines()


def run_tool(classes: Path, args: list[str], *, log_dir: Path, timeout: float = 120.0,
             props: dict[str, str] | None = None, bench: bool = False) -> list[str]:
    return finish_tool(start_tool(classes, args, log_dir=log_dir, props=props, bench=bench), timeout)


class JavaBroker:
    """A Java 4.9.8 name server and broker on free loopback ports, the broker with
    ``conf`` (broker.conf keys) on top of run-broker.sh's settings; store in ``home``."""

    def __init__(self, home: Path, conf: dict[str, str] | None = None, *, heap: str = "512m") -> None:
        self.home = Path(home)
        self.conf = dict(conf or {})
        self.heap = heap
        self.namesrv_port = free_port()
        self.port = free_port()
        self.procs: list[subprocess.Popen] = []

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def _start(self, main: str, conf: Path, log: Path, boot: str, timeout: float) -> None:
        env = java_env()
        cmd = [env["JAVA"], *env["JDK17_OPTS"].split(), f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
               f"-Duser.home={self.home}", f"-Drocketmq.home.dir={env['ROCKETMQ_HOME']}", "-cp", env["CP"], main,
               "-c", str(conf)]
        out = open(log, "w")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if boot in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                raise AssertionError(f"{main} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)  # its output goes to the log file: polled for the boot line
        self.stop()
        raise AssertionError(f"{main} did not boot within {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")

    def start(self, timeout: float = 60.0) -> JavaBroker:
        self.home.mkdir(parents=True, exist_ok=True)
        ns_conf = self.home / "namesrv.conf"
        ns_conf.write_text(f"listenPort={self.namesrv_port}\n")
        self._start("org.apache.rocketmq.namesrv.NamesrvStartup", ns_conf, self.home / "namesrv.log",
                    "boot success", timeout)
        store = self.home / "store"
        conf = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
            "listenPort": str(self.port), "namesrvAddr": self.namesrv, "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(store), "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true", "mappedFileSizeCommitLog": str(64 << 20), **self.conf,
        }
        broker_conf = self.home / "broker.conf"
        broker_conf.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self._start("org.apache.rocketmq.broker.BrokerStartup", broker_conf, self.home / "broker.log",
                    "boot success", timeout)
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def __enter__(self) -> JavaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
