"""RocketMQ 4.9.8's own admin tool (mqadmin, ``shared/rocketmq-4.9.8``) against trocket:
:func:`mqadmin` runs several commands in one JVM (``scripts/MqadminBatch.java``,
compiled once per session) and returns what each printed; :class:`JavaPushConsumer` is
a 4.9.8 push consumer in its own JVM (``scripts/PushConsumerProbe.java``) reporting
every message it consumes.

Needs ``java`` and ``javac`` (17) and the 4.9.8 folder; :func:`java_status` says why not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
SOURCES = [HERE / "scripts" / "MqadminBatch.java", HERE / "scripts" / "PushConsumerProbe.java"]


def _rocketmq_home() -> Path:
    """``$RMQJ_HOME``, else ``shared/rocketmq-4.9.8`` beside the checkout or a folder above it."""
    if os.environ.get("RMQJ_HOME"):
        return Path(os.environ["RMQJ_HOME"])
    for parent in HERE.parents:
        candidate = parent / "shared" / "rocketmq-4.9.8"
        if (candidate / "lib").is_dir():
            return candidate
    return Path("/nonexistent/rocketmq-4.9.8")


ROCKETMQ_HOME = _rocketmq_home()


def classpath() -> str:
    lib = ROCKETMQ_HOME / "lib"
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.jar")))


#: the ``--add-opens`` flags RocketMQ 4.9.8 needs on Java 17 (env.sh's JDK17_OPTS)
JDK17_OPTS = [
    "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED", "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]

_compiled: Path | None = None


def java_status() -> tuple[bool, str]:
    """(usable, why not)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not on PATH"
    if not (ROCKETMQ_HOME / "lib").is_dir():
        return False, f"RocketMQ 4.9.8 is not at {ROCKETMQ_HOME}"
    return True, ""


def _compile() -> Path:
    global _compiled
    if _compiled is None:
        out = Path(tempfile.mkdtemp(prefix="trocket-mqadmin-"))
        subprocess.run(["javac", "-cp", classpath(), "-d", str(out), *map(str, SOURCES)], check=True,
                       capture_output=True, text=True, timeout=180)
        _compiled = out
    return _compiled


@attrs.define
class Output:
    args: list[str]
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def _java(main: str, logs: Path) -> list[str]:
    return [
        "java", *JDK17_OPTS, "-Xms64m", "-Xmx256m", "-XX:-AlwaysPreTouch", "-XX:TieredStopAtLevel=1",
        f"-Drocketmq.home.dir={ROCKETMQ_HOME}", f"-Dlogback.configurationFile={ROCKETMQ_HOME}/conf/logback_quiet.xml",
        f"-Drocketmq.client.logRoot={logs}", f"-Duser.home={logs}",
        "-cp", classpath() + os.pathsep + str(_compile()), main,
    ]


def mqadmin(*commands: list[str], timeout: float = 180) -> list[Output]:
    """Run each command (``["clusterList", "-n", ns]``) in one JVM; their outputs."""
    logs = Path(tempfile.mkdtemp(prefix="trocket-mqadmin-logs-"))
    cmd = _java("MqadminBatch", logs)
    stdin = "".join("\t".join(c) + "\n" for c in commands)
    try:
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    outputs = [Output(**json.loads(line)) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(outputs) != len(commands):
        raise AssertionError(f"mqadmin batch ran {len(outputs)} of {len(commands)} commands:\n{done.stdout}\n{done.stderr}")
    return outputs


class JavaPushConsumer:
    """A 4.9.8 ``DefaultMQPushConsumer`` (from the first offset) in its own JVM;
    :attr:`consumed` is what it consumed so far, as (queue id, queue offset, body)."""

    def __init__(self, namesrv: str, topic: str, group: str, instance: str = "probe") -> None:
        import threading

        self.logs = Path(tempfile.mkdtemp(prefix="trocket-java-consumer-"))
        self.proc = subprocess.Popen(
            _java("PushConsumerProbe", self.logs) + [namesrv, topic, group, instance],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.consumed: list[tuple[int, int, str]] = []
        self.client_id: str | None = None
        self.lines: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
                if line.startswith("MSG "):
                    _, queue, offset, body = line.split(" ", 3)
                    self.consumed.append((int(queue), int(offset), body))
                elif line.startswith("STARTED "):
                    self.client_id = line.split(" ", 1)[1]

    def bodies(self) -> list[str]:
        with self._lock:
            return [body for _, _, body in self.consumed]

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"the Java consumer exited ({self.proc.returncode}):\n" + "\n".join(self.lines[-30:]))
            time.sleep(0.1)  # its output arrives on a reader thread: polled
        raise AssertionError(f"the Java consumer did not {what} within {timeout} s; last lines:\n" + "\n".join(self.lines[-30:]))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.logs, ignore_errors=True)
