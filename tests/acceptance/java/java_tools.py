"""The real Java RocketMQ 4.9.8 as the reference peer (issue 28).

* :func:`find_bundle`: the bundle (``shared/rocketmq-4.9.8``: name server, broker,
  client, mqadmin's classes) and a Java 17 with ``javac``, or why not;
* :func:`compile_programs`: ``src/*.java`` compiled against the bundle's classpath into
  a cache keyed by the sources' hash (a second run does not recompile);
* :class:`JavaNameServer` / :class:`JavaBroker`: the Java name server and broker as
  subprocesses on free loopback ports, small JVMs; :class:`TrocketNamesrv` (``trocket
  namesrv``) beside them;
* :class:`ScenarioRun`: one ``Runner`` JVM running every scenario against one broker,
  its ``RESULT`` lines collected as they come (a test waits only for its own);
  :func:`program_command`: any program of src/ (``TxnTool``, the transactions' tests and
  benchmark) as a command line.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import attrs

from acc_tools import RawClient, free_port, free_port_block, trocket_command

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
REPO_ROOT = HERE.parent.parent.parent
BUNDLE_NAME = "rocketmq-4.9.8"
#: where to look for the bundle besides ``$TROCKET_ROCKETMQ_JAVA``: ``shared/rocketmq-4.9.8``
#: beside the checkout or beside any folder above it (CI: ``../shared``)
ENV_BUNDLE = "TROCKET_ROCKETMQ_JAVA"
#: small JVMs (the bundle's README): the suite runs four at once on two cores
SMALL_JVM = ["-Xms128m", "-Xmx512m", "-XX:-AlwaysPreTouch", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
SERVER_JVM = ["-Xms256m", "-Xmx512m", "-XX:-AlwaysPreTouch", "-XX:MaxDirectMemorySize=512m", "-XX:TieredStopAtLevel=1",
              "-XX:+UseSerialGC"]
#: the name server's GET_BROKER_CLUSTER_INFO
GET_BROKER_CLUSTER_INFO = 106


@attrs.define(slots=True, frozen=True)
class Bundle:
    """The Java bundle as ``env.sh`` describes it: ``java``, ``javac``, the classpath and
    the ``--add-opens`` flags 4.9.8 needs on Java 17."""

    home: Path
    java: str
    javac: str
    classpath: str
    jdk17_opts: list[str]
    version: str

    @property
    def quiet_log(self) -> str:
        return f"-Dlogback.configurationFile={self.home / 'conf' / 'logback_quiet.xml'}"


def _bundle_dirs() -> list[Path]:
    explicit = os.environ.get(ENV_BUNDLE)
    if explicit:
        return [Path(explicit)]
    out = []
    for folder in [REPO_ROOT, *REPO_ROOT.parents]:
        out.append(folder / "shared" / BUNDLE_NAME)
    return out


def find_bundle() -> tuple[Bundle | None, str]:
    """(the bundle, "") or (None, why it cannot run here)."""
    home = next((d for d in _bundle_dirs() if (d / "env.sh").is_file()), None)
    if home is None:
        where = os.environ.get(ENV_BUNDLE) or f"shared/{BUNDLE_NAME} beside {REPO_ROOT} or a folder above it"
        return None, f"the Java RocketMQ {BUNDLE_NAME} bundle is not at {where} (set ${ENV_BUNDLE} to its folder)"
    bash = shutil.which("bash")
    if bash is None:
        return None, "bash is not on PATH (the bundle's env.sh needs it)"
    script = f'. {shlex.quote(str(home / "env.sh"))} && printf "%s\\n%s\\n%s\\n" "$JAVA" "$CP" "$JDK17_OPTS"'
    try:
        r = subprocess.run([bash, "-c", script], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{home}/env.sh does not run: {exc}"
    lines = r.stdout.splitlines()
    if r.returncode != 0 or len(lines) < 3:
        return None, f"{home}/env.sh failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    java, classpath, opts = lines[0], lines[1], lines[2].split()
    java_path = shutil.which(java) or (java if Path(java).is_file() else None)
    if java_path is None:
        return None, f"no Java runtime ({java!r} from the bundle's env.sh): install a Java 17 JDK, or set RMQJ_JAVA / JAVA_HOME"
    javac = Path(java_path).resolve().with_name("javac")
    javac_path = str(javac) if javac.is_file() else shutil.which("javac")
    if javac_path is None:
        return None, f"no javac beside {java_path} nor on PATH: the Java acceptance programs need a JDK, not a JRE"
    try:
        v = subprocess.run([java_path, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{java_path} -version failed: {exc}"
    version = (v.stderr or v.stdout).strip().splitlines()[0] if (v.stderr or v.stdout).strip() else "?"
    return Bundle(home, java_path, javac_path, classpath, opts, version), ""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trocket" / "java-acceptance"


def sources_key(bundle: Bundle) -> str:
    """Hash of the programs' sources, the classpath and the Java version."""
    h = hashlib.sha256()
    for f in sorted(SRC.glob("*.java")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(bundle.classpath.encode() + b"\0" + bundle.version.encode())
    return h.hexdigest()[:20]


def compile_programs(bundle: Bundle) -> tuple[Path, bool]:
    """The classes dir for the current sources, compiling them if no cache has them;
    returns (dir, whether it compiled now)."""
    target = cache_root() / sources_key(bundle)
    if (target / "Runner.class").is_file():
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        r = subprocess.run(
            [bundle.javac, "-nowarn", "-encoding", "UTF-8", "-cp", bundle.classpath, "-d", str(tmp),
             *sorted(str(f) for f in SRC.glob("*.java"))],
            capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError(f"javac failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        try:
            tmp.rename(target)
        except OSError:  # another run put it there first
            if not (target / "Runner.class").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target, True


# -- processes ------------------------------------------------------------------------------


class JavaProcess:
    """A Java server in the background, its output in ``log_path``; ready when
    ``ready_line`` shows in it."""

    ready_line = ""
    what = "java"

    def __init__(self, bundle: Bundle, log_path: Path) -> None:
        self.bundle = bundle
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self._log = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=dict(os.environ, ROCKETMQ_HOME=str(self.bundle.home)))

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_line in self.log_text():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.what} exited with {self.proc.returncode}:\n{self.log_tail()}")
            time.sleep(0.1)
        raise AssertionError(f"no {self.ready_line!r} from {self.what} within {timeout} s:\n{self.log_tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def stop(self, timeout: float = 20.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the JVM's shutdown hooks: unregister, flush
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL (a crash; or the end of a server whose store nobody reads again: a
        SIGTERM'd Java broker takes seconds in its shutdown hooks, DefaultMessageStore's
        sleeps among them)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class JavaNameServer(JavaProcess):
    ready_line = "boot success"
    what = "the Java name server"

    def __init__(self, bundle: Bundle, home: Path) -> None:
        super().__init__(bundle, home / "namesrv.log")
        self.home = home
        self.port = free_port()
        home.mkdir(parents=True, exist_ok=True)
        (home / "namesrv.conf").write_text(f"listenPort={self.port}\n")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        b = self.bundle
        return [b.java, "-server", *SERVER_JVM, *b.jdk17_opts, f"-Duser.home={self.home}",
                f"-Drocketmq.home.dir={b.home}", "-cp", b.classpath,
                "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(self.home / "namesrv.conf")]


class JavaBroker(JavaProcess):
    """A Java 4.9.8 broker (DefaultCluster / broker-a / id 0 by default) with our own
    broker.conf: the bundle's run-broker.sh settings plus what the scenarios need
    (SQL92 filtering, the trace topic, patience with a loaded machine)."""

    ready_line = "boot success"
    what = "the Java broker"

    def __init__(self, bundle: Bundle, store: Path, namesrv: str, extra_conf: dict[str, str] | None = None) -> None:
        super().__init__(bundle, store / "broker.log")
        self.store = store
        self.namesrv = namesrv
        self.port = free_port_block()
        store.mkdir(parents=True, exist_ok=True)
        conf = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "listenPort": str(self.port),
            "namesrvAddr": namesrv,
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true",
            "mappedFileSizeCommitLog": str(64 << 20),
            "enablePropertyFilter": "true",
            "traceTopicEnable": "true",
            # a send may wait this long in the broker's queue before it is refused with
            # SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE] (200 ms by default: under the shared
            # machine's load the default refused the scenarios' sends, not what they test)
            "waitTimeMillsInSendQueue": "3000",
            **(extra_conf or {}),
        }
        (store / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_registered(self, timeout: float = 40.0) -> None:
        """Until every name server of its ``namesrvAddr`` lists it (GET_BROKER_CLUSTER_INFO).
        Java's broker registers before it prints ``boot success``, so this is at once,
        unless that first registration failed and the broker's 30 s timer must redo it."""
        servers = [a for a in self.namesrv.split(";") if a]

        def listed(ns: str) -> bool:
            with RawClient(hostport(ns), timeout=5) as c:
                resp, body = c.call(GET_BROKER_CLUSTER_INFO, {})
            return resp["code"] == 0 and f'"{self.addr}"' in body.decode("utf-8", "replace")

        if not all(wait_for(lambda ns=ns: listed(ns), timeout) for ns in servers):
            raise AssertionError(f"{self.what} {self.addr} is not registered with {servers} after {timeout} s:\n"
                                 f"{self.log_tail()}")

    def command(self) -> list[str]:
        b = self.bundle
        return [b.java, "-server", *SERVER_JVM, *b.jdk17_opts, f"-Duser.home={self.store}",
                f"-Drocketmq.home.dir={b.home}", "-cp", b.classpath,
                "org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.store / "broker.conf")]


class TrocketNamesrv:
    """``trocket namesrv`` on a free loopback port."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([*trocket_command(), "namesrv", "--listen", self.addr], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "trocket namesrv did not start"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self._log.close()


# -- Java programs ------------------------------------------------------------------------------


def program_command(bundle: Bundle, classes: Path, main: str, args: list[str], *, home: Path,
                    props: dict[str, str] | None = None, jvm: list[str] = SMALL_JVM) -> list[str]:
    """The command line of ``main`` (a program of src/, compiled into ``classes``) with
    ``args``: quiet logging, its client's logs under ``home``, ``-D`` ``props``."""
    return [bundle.java, *jvm, *bundle.jdk17_opts, bundle.quiet_log,
            f"-Drocketmq.client.logRoot={home / 'client-logs'}", f"-Duser.home={home}",
            *(f"-D{k}={v}" for k, v in (props or {}).items()),
            "-cp", f"{bundle.classpath}:{classes}", main, *args]


def start_program(bundle: Bundle, classes: Path, main: str, args: list[str], *, home: Path,
                  props: dict[str, str] | None = None, jvm: list[str] = SMALL_JVM) -> subprocess.Popen:
    """:func:`program_command` as a process: its stdout a text pipe (the lines a program
    reports), its stderr in a file under ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    err = open(home / f"{main}-{time.monotonic_ns()}.stderr", "w")
    return subprocess.Popen(program_command(bundle, classes, main, args, home=home, props=props, jvm=jvm),
                            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                            env=dict(os.environ, ROCKETMQ_HOME=str(bundle.home)))


def finish_program(proc: subprocess.Popen, timeout: float) -> list[str]:
    """A program's stdout lines once it has exited (killed, by its pid, after ``timeout``
    seconds: an AssertionError with what it printed)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"{proc.args[-6:]} did not finish within {timeout} s; it printed:\n{out}") from None
    return out.splitlines()


# -- the scenario runner ----------------------------------------------------------------------


class ScenarioRun:
    """``Runner`` (src/Runner.java) against one broker, all scenarios in one JVM; its
    ``RESULT`` lines collected by a reader thread as they come."""

    def __init__(self, bundle: Bundle, classes: Path, *, namesrv: str, broker: str, prefix: str, home: Path,
                 scenarios: list[str] | None = None, threads: int = 16, deadline_s: int = 240,
                 params: dict[str, object] | None = None, jvm_opts: list[str] | None = None) -> None:
        self.results: dict[str, dict] = {}
        self.scenarios = list(scenarios or ["all"])
        self.params = dict(params or {})
        self.cond = threading.Condition()
        self.done = False
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.stderr_path = home / "runner.stderr"
        cmd = program_command(bundle, classes, "Runner", [
            "--namesrv", namesrv, "--broker", broker, "--prefix", prefix,
            "--threads", str(threads), "--deadline", str(deadline_s),
            *(arg for k, v in (params or {}).items() for arg in ("--param", f"{k}={v}")),
            *(scenarios or ["all"]),
        ], home=home, jvm=[*SMALL_JVM, *(jvm_opts or [])])
        self._err = open(self.stderr_path, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err, stdin=subprocess.DEVNULL,
                                     cwd=home, env=dict(os.environ, ROCKETMQ_HOME=str(bundle.home)))
        self.ended: float | None = None
        threading.Thread(target=self._read, daemon=True, name=f"runner-{prefix}").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.home / "runner.stdout", "w") as keep:
            self._collect(keep)
        self.proc.wait()
        with self.cond:
            self.done = True
            self.ended = time.monotonic()
            self.cond.notify_all()
        self._err.close()

    def _collect(self, keep) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            keep.write(line + "\n")
            keep.flush()
            if line.startswith("RESULT "):
                try:
                    doc = json.loads(line[7:])
                except ValueError:
                    continue
                with self.cond:
                    self.results[doc["scenario"]] = doc
                    self.cond.notify_all()

    def result(self, name: str, timeout: float = 300.0) -> dict:
        """The scenario's RESULT document (waits for it)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while name not in self.results and not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            doc = self.results.get(name)
        if doc is None:
            raise AssertionError(
                f"the Java runner gave no result for {name!r} (exit {self.proc.poll()}); stderr tail:\n"
                + "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-30:]))
        return doc

    def wait_done(self, timeout: float) -> bool:
        """Whether the JVM ended (every scenario's result in) within ``timeout`` s."""
        with self.cond:
            return self.cond.wait_for(lambda: self.done, timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# -- small helpers the tests share ------------------------------------------------------------


def hostport(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``."""
    host, _, port = addr.rpartition(":")
    return host, int(port)


@attrs.define(slots=True, frozen=True)
class Peer:
    """A broker under test: its kind, name server, address and store."""

    kind: str
    namesrv: str
    addr: str
    store: Path
    log_tail: Callable[..., str] = attrs.field(repr=False)

    @property
    def hostport(self) -> tuple[str, int]:
        return hostport(self.addr)


def in_thread(fn: Callable[[], T]) -> concurrent.futures.Future[T]:
    """``fn()`` in a daemon thread of its own, at once (a server's boot while other tests
    run): its Future."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever waits for it
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name=f"in-thread-{getattr(fn, '__name__', 'fn')}").start()
    return future


def wait_for(cond, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``cond()`` (an OSError counts as not yet) until true or ``timeout`` s; whether it came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except OSError:
            pass
        time.sleep(interval)
    return False


def route_queue_datas(namesrv: str, topic: str) -> list[dict]:
    """The ``queueDatas`` of ``namesrv``'s route of ``topic`` (GET_ROUTEINFO_BY_TOPIC, 105);
    [] when it has none. (Only that array is parsed: a Java name server writes the
    ``brokerAddrs`` keys unquoted, as fastjson does.)"""
    with RawClient(hostport(namesrv)) as ns:
        resp, body = ns.call(105, {"topic": topic})
    if resp["code"] != 0 or not body:
        return []
    text = body.decode()
    start = text.index('"queueDatas"')
    return json.loads(text[text.index("[", start): text.index("]", start) + 1])


# -- parametrization ------------------------------------------------------------------------


def start_step(bundle: Bundle, classes: Path, home: Path, scenario: str, *, namesrv: str, broker: str,
               timeout: float = 180.0, jvm_opts: list[str] | None = None, **params: object) -> ScenarioRun:
    """One parametrized Runner scenario (src/StepScenarios.java) started in a JVM of its
    own; :func:`finish_step` waits for it."""
    return ScenarioRun(bundle, classes, namesrv=namesrv, broker=broker, prefix=f"st{os.getpid() % 10000}",
                       home=home, scenarios=[scenario], threads=1, deadline_s=int(timeout), params=params,
                       jvm_opts=jvm_opts)


def finish_step(run: ScenarioRun, timeout: float = 180.0) -> dict:
    """The data of the one scenario ``run`` runs, once it has ended (AssertionError with
    the Java exception when it threw); the JVM stopped."""
    (scenario,) = run.scenarios
    try:
        doc = run.result(scenario, timeout=timeout + 30)
    finally:
        run.stop()
    assert doc.get("ok"), f"Java step {scenario} {run.params} failed:\n{doc.get('error')}"
    return doc["data"]


def run_step(bundle: Bundle, classes: Path, home: Path, scenario: str, *, namesrv: str, broker: str,
             timeout: float = 180.0, jvm_opts: list[str] | None = None, **params: object) -> dict:
    """One parametrized Runner scenario (src/StepScenarios.java) to its end; its data
    (AssertionError with the Java exception when it threw)."""
    run = start_step(bundle, classes, home, scenario, namesrv=namesrv, broker=broker, timeout=timeout,
                     jvm_opts=jvm_opts, **params)
    return finish_step(run, timeout)


def on_both(trocket_xfail: str | None = None):
    """``@on_both()``: the test runs with ``broker`` = ``trocket`` and ``java``.
    ``trocket_xfail="issue NN: <what is missing>"`` marks the trocket run
    ``xfail(strict=True)``: it flips (and fails as XPASS) when the feature lands."""
    import pytest

    trocket = "trocket"
    if trocket_xfail is not None:
        trocket = pytest.param("trocket", marks=pytest.mark.xfail(strict=True, reason=trocket_xfail))
    return pytest.mark.parametrize("broker", [trocket, "java"])
