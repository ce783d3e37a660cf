"""Real-client acceptance tests: ``trocket broker`` as a subprocess, driven by the C++
RocketMQ client of the PyPI package ``rocketmq`` 0.4.4 (librocketmq.so in the wheel) and
by the pure-JavaScript client ``ali-ons`` 3.12.0 from npm (tests/acceptance/js/).

Every client scenario runs in its own process (tests/acceptance/scripts/ with python,
tests/acceptance/js/ with node): the clients have their own threads, timers and global
state, and a crash or a hang there fails one test with its log instead of taking pytest
down. The C++ tests skip, saying why, only when ``import rocketmq.client`` fails in such
a process (the wheel cannot load here); the JS tests only when node is missing or
``require('ali-ons')`` fails (not installed: the skip names the ``npm ci`` to run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from acc_tools import BrokerProcess, CountingProxy, js_client_status  # noqa: E402


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.acceptance)


#: figures the tests report (messages, durations, idle pull rates), printed at the end
FIGURES: list[str] = []


@pytest.fixture(scope="session")
def figures():
    return FIGURES


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("trocket acceptance figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


_wheel_status: tuple[bool, str] | None = None


def _check_wheel() -> tuple[bool, str]:
    global _wheel_status
    if _wheel_status is None:
        try:
            r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True,
                               timeout=60)
            ok = r.returncode == 0
            why = "" if ok else (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        _wheel_status = (ok, why)
    return _wheel_status


@pytest.fixture(scope="session")
def rocketmq_wheel() -> None:
    """Skip (printing why) where the ``rocketmq`` wheel cannot load."""
    ok, why = _check_wheel()
    if not ok:
        msg = f"the rocketmq wheel (librocketmq) cannot load under {sys.executable}: {why}"
        print(f"\nSKIP: {msg}", file=sys.stderr)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def rocketmq_wheel_status() -> tuple[bool, str]:
    """(loads, why not) for the ``rocketmq`` wheel, without skipping: for modules that
    use the C++ client in some tests only."""
    return _check_wheel()


_js_status: tuple[bool, str] | None = None


@pytest.fixture(scope="session")
def js_client() -> None:
    """Skip (printing why and the npm command that fixes it) where node is missing or
    ``require('ali-ons')`` fails in tests/acceptance/js."""
    global _js_status
    if _js_status is None:
        _js_status = js_client_status()
    ok, why = _js_status
    if not ok:
        print(f"\nSKIP: {why}", file=sys.stderr)
        pytest.skip(why)


@pytest.fixture
def broker_factory(tmp_path):
    """``make(flush="async"|"sync", advertise_port=None) -> BrokerProcess`` (started);
    every broker made is stopped with SIGINT at teardown and must exit 130 after a clean shutdown."""
    made: list[BrokerProcess] = []

    def make(*, flush: str = "async", advertise_port: int | None = None, store: Path | None = None,
             extra: list[str] | None = None, name: str = "broker") -> BrokerProcess:
        b = BrokerProcess(store or tmp_path / f"{name}-store", tmp_path / f"{name}.log", flush=flush,
                          advertise_port=advertise_port, extra=extra)
        made.append(b)
        b.start()
        return b

    yield make
    problems = []
    for b in made:
        if b.alive():
            rc = b.stop()
            if rc != 130:  # SIGINT: 130 after the clean shutdown (trocket/interrupt.py)
                problems.append(f"broker exited {rc} after SIGINT:\n{b.log_tail()}")
            elif "shut down cleanly" not in b.log_text():
                problems.append(f"no clean shutdown in the broker log:\n{b.log_tail()}")
    if problems:
        pytest.fail("\n\n".join(problems))


@pytest.fixture(scope="module")
def proxied_broker(rocketmq_wheel, tmp_path_factory):
    """A module-wide broker behind a :class:`CountingProxy` (routes give out the proxy,
    so every client request is counted); stopped with SIGINT, clean exit checked."""
    yield from _proxied_broker(tmp_path_factory.mktemp("proxied"))


@pytest.fixture(scope="module")
def js_proxied_broker(js_client, tmp_path_factory):
    """:func:`proxied_broker` for the JS client's module (it does not need the C++ wheel)."""
    yield from _proxied_broker(tmp_path_factory.mktemp("js-proxied"))


def _proxied_broker(tmp: Path):
    proxy = CountingProxy()
    broker = BrokerProcess(tmp / "store", tmp / "broker.log", advertise_port=proxy.port,
                           extra=["--segment-size", "16m"])
    proxy.upstream = broker.addr
    broker.start()
    broker.proxy = proxy
    broker.tmp = tmp
    try:
        yield broker
    finally:
        rc = broker.stop()
        proxy.close()
        text = broker.log_text()
        assert rc == 130, f"broker exited {rc} after SIGINT:\n{broker.log_tail()}"
        assert "shut down cleanly" in text, f"no clean shutdown in the broker log:\n{broker.log_tail()}"
