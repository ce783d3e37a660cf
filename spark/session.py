"""The SparkSession the job runs in, and a progress line while it runs.

Defaults fit a 2-core, 8 GiB laptop: ``local[*]``, a 1 GiB driver (the driver holds
only the plan and the summary), few shuffle partitions, JVMs that leave the cores to
the Python workers (C1 JIT only, serial GC). The executors run the
driver's own Python (``sys.executable``), so ``trocket`` is importable there; on a
standalone cluster that means the workers see the same installation (a shared
machine or image), as Spark's own Python jobs expect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Iterator, TextIO

__all__ = ["build_session", "Progress", "stop_quietly", "interrupts"]

_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def build_session(
    master: str | None = None,
    *,
    app_name: str = "trocket analyze",
    shuffle_partitions: int = 8,
    driver_memory: str = "1g",
    ui: bool = False,
    extra: dict[str, str] | None = None,
):
    """A SparkSession; an existing active one is reused (``spark-submit``, tests)."""
    from pyspark.sql import SparkSession

    # PySpark hands the driver's PYSPARK_PYTHON to every executor as the worker's Python.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    conf = {
        "spark.driver.memory": driver_memory,
        "spark.executor.memory": "1g",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(max(2, shuffle_partitions)),
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",  # Progress below prints one line instead
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        # no delay scheduling: a stage's tasks read small shuffle outputs (ranges,
        # leftovers), nothing worth waiting 3 s (the default) for a "local" slot
        "spark.locality.wait": "0s",
        # the JVMs only schedule, shuffle small records and run the report's group-bys:
        # C1 code and the serial collector leave the cores to the Python workers (on 2
        # cores, C2's compiler threads and G1's concurrent ones competed with them, and
        # the first job of a session took seconds longer)
        "spark.driver.extraJavaOptions": _JVM_OPTIONS,
        "spark.executor.extraJavaOptions": _JVM_OPTIONS,
    }
    conf.update(extra or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    if threading.current_thread() is not threading.main_thread():
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        return spark
    # A signal while the JVM starts is held until the session exists (else the JVM
    # PySpark is launching outlives the command). PySpark's own SIGINT handler, which
    # calls the JVM from inside the signal handler, in the middle of the call it
    # interrupts (a "reentrant call" and Py4J stack traces), is never put in (the
    # context's init sets it while the session is still being built): ours only raises,
    # with Python's logging off, and stop_quietly ends the jobs after.
    held: list[int] = []
    real_signal = signal.signal
    previous = {s: real_signal(s, lambda signum, frame: held.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}

    def keep_sigint(signum, handler):  # signal.signal while PySpark starts
        return signal.getsignal(signum) if signum == signal.SIGINT else real_signal(signum, handler)

    signal.signal = keep_sigint
    try:
        with _JVM_STDERR.inherited():
            spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    finally:
        signal.signal = real_signal
        real_signal(signal.SIGTERM, previous[signal.SIGTERM])
        real_signal(signal.SIGINT, _interrupt)
    if held:
        signal.raise_signal(held[0])  # now handled as any other: trocket/interrupt.py's rule
    return spark


class _ForwardedStderr:
    """The stderr the JVM PySpark launches inherits: a pipe this process copies to its
    own stderr, until :meth:`mute`. Once a command is interrupted, what the dying JVM
    and its Python workers print (a worker's BrokenPipeError traceback, an executor's
    ERROR line) must not reach the terminal, and the JVM may print it before it reads
    the log level set to OFF."""

    def __init__(self) -> None:
        self._muted = False

    @contextlib.contextmanager
    def inherited(self) -> Iterator[None]:
        """Point fd 2 at the pipe while the block launches the JVM (not when PySpark
        attaches to a gateway it was given, or to a JVM already running)."""
        from pyspark import SparkContext

        if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
            yield
            return
        read_end, write_end = os.pipe()
        saved = os.dup(2)
        threading.Thread(target=self._forward, args=(read_end, saved), name="jvm-stderr", daemon=True).start()
        sys.stderr.flush()
        os.dup2(write_end, 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(write_end)

    def mute(self) -> None:
        self._muted = True

    def _forward(self, read_end: int, to: int) -> None:
        try:
            while data := os.read(read_end, 65536):
                while data and not self._muted:
                    data = data[os.write(to, data):]
        except OSError:  # our stderr closed: nothing left to copy to
            pass
        finally:
            os.close(read_end)
            os.close(to)


_JVM_STDERR = _ForwardedStderr()


_INTERRUPTS = [0]  # SIGINTs the handler below has seen


def interrupts() -> int:
    """How many SIGINTs reached the session's handler: a loop that must stop on Ctrl-C
    checks it too, since the KeyboardInterrupt the handler raises is lost when the
    signal lands in a garbage-collection callback (Py4J's finalizer of a JavaObject:
    Python prints it as 'Exception ignored' and goes on)."""
    return _INTERRUPTS[0]


def _interrupt(signum: int, frame: object) -> None:
    _INTERRUPTS[0] += 1
    logging.disable(logging.CRITICAL)  # Py4J logs every call cut short
    raise KeyboardInterrupt


def stop_quietly(wait: float = 10.0) -> None:
    """Cancel the jobs and stop the Spark context and its JVM with logging off: no Java
    stack trace of a cancelled task, and no JVM output after the command has exited
    (``trocket analyze`` interrupted; trocket/interrupt.py has the rule)."""
    import subprocess

    from pyspark import SparkContext

    logging.disable(logging.CRITICAL)
    _JVM_STDERR.mute()  # what the JVM and its Python workers print while they die
    sc = SparkContext._active_spark_context
    gateway = SparkContext._gateway
    if sc is not None:
        try:
            sc.setLogLevel("OFF")
            sc.cancelAllJobs()
            sc.stop()
        except Exception:  # noqa: BLE001 - the JVM may be going already; stopping is all that is left
            pass
    proc = getattr(gateway, "proc", None)  # the JVM PySpark launched (None under spark-submit)
    if gateway is not None:
        try:
            gateway.shutdown()
        except Exception:  # noqa: BLE001
            pass
    if proc is not None:
        try:
            proc.stdin.close()  # PySpark's JVM exits when its stdin closes
            proc.wait(wait)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


class Progress:
    """What a run is doing: its phase, and once the session exists the active stages'
    task counts, polled about once a second and (unless ``show`` is false) printed on
    one line; :meth:`so_far` says it in words for a run that was interrupted.

    Spark's status tracker is polled from a daemon thread in the driver; nothing runs
    in the executors for it. ``frames``: an accumulator the job's tasks add the frames
    they decoded to (read in the driver: no call to the JVM).
    """

    def __init__(self, stream: TextIO | None = None, interval: float = 1.0, *, show: bool = True) -> None:
        self._stream = stream or sys.stderr
        self._interval = interval
        self._show = show
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.phase = "starting"
        self.frames = None  # an Accumulator[int], set by the job
        self.stages = ""  # the active stages' task counts at the last poll
        self._started = time.monotonic()
        self._last = ""
        self._last_logged = ""
        self._logged_at = 0.0
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())

    def start(self, sc) -> Progress:
        """Poll ``sc``'s status tracker from now on (until :meth:`stop`)."""
        self._thread = threading.Thread(target=self._run, args=(sc,), name="trocket-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling and clear the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._last:
            self._stream.write("\r" + " " * len(self._last) + "\r")
            self._stream.flush()
            self._last = ""

    def so_far(self) -> str:
        """``while <phase> (<stages>; N frames decoded)``: what was done when it stopped."""
        done = []
        if self.stages:
            done.append(self.stages)
        frames = self.frames.value if self.frames is not None else 0
        if frames:
            done.append(f"{frames:,} frames decoded by the tasks that finished")
        return f"while {self.phase}" + (f" ({'; '.join(done)})" if done else "")

    def _run(self, sc) -> None:
        tracker = sc.statusTracker()
        while not self._stop.wait(self._interval):
            try:
                parts = []
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
            except Exception:  # the context is stopping; progress is best effort
                return
            self.stages = ", ".join(parts)
            if not self._show:
                continue
            elapsed = time.monotonic() - self._started
            line = f"[{elapsed:6.1f}s] {self.phase}" + (" | " + self.stages if parts else "")
            if self._tty:
                pad = max(0, len(self._last) - len(line))
                self._stream.write("\r" + line + " " * pad)
                self._last = line
            elif line != self._last_logged and time.monotonic() - self._logged_at >= 10 * self._interval:
                self._stream.write(line + "\n")  # a log file gets a line every 10 s at most
                self._last_logged = line
                self._logged_at = time.monotonic()
            self._stream.flush()
