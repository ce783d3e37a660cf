"""The Java reference suite (issue 28): every scenario against ``trocket broker`` and the
real Java 4.9.8 broker, in the same test (``broker`` parametrized ``trocket`` / ``java``).

One of each per test session: a trocket broker (embedded name server), a Java name server
and broker (small JVMs), and per broker one ``Runner`` JVM that runs every Java-client
scenario at once (src/*.java, compiled into a cache keyed by the sources' hash). A test
waits only for its own scenario's result. Where Java (a JDK 17) or the bundle is missing,
the tests skip and say why.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from acc_tools import BrokerProcess  # noqa: E402
from java_tools import (  # noqa: E402
    Bundle,
    JavaBroker,
    JavaNameServer,
    Peer,
    ScenarioRun,
    compile_programs,
    find_bundle,
)

_bundle: tuple[Bundle | None, str] | None = None

#: what the trocket broker needs beyond its defaults, as JavaBroker's broker.conf says
#: for the Java broker (the scenarios' SQL92 subscriptions, the trace topic)
TROCKET_BROKER_CONF = "enablePropertyFilter=true\ntraceTopicEnable=true\n"


def bundle_status() -> tuple[Bundle | None, str]:
    global _bundle
    if _bundle is None:
        _bundle = find_bundle()
    return _bundle


@pytest.fixture(scope="session")
def java_bundle() -> Bundle:
    bundle, why = bundle_status()
    if bundle is None:
        print(f"\nSKIP: {why}", file=sys.stderr)
        pytest.skip(why)
    return bundle


@pytest.fixture(scope="session")
def java_compiling(java_bundle):
    """:func:`compile_programs` started at once in a thread (javac runs while the brokers
    boot): (its Future, when it started)."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="javac") as pool:
        yield pool.submit(compile_programs, java_bundle), time.monotonic()


@pytest.fixture(scope="session")
def java_classes(java_compiling, figures) -> Path:
    future, t0 = java_compiling
    classes, compiled = future.result()
    figures.append(f"java reference: programs {'compiled in %.1f s' % (time.monotonic() - t0) if compiled else 'from the cache'}"
                   f" ({classes})")
    return classes


@pytest.fixture(scope="session")
def java_peer(java_bundle, tmp_path_factory, figures):
    """The Java name server and broker (DefaultCluster / broker-a), once per session."""
    tmp = tmp_path_factory.mktemp("java-peer")
    t0 = time.monotonic()
    ns = JavaNameServer(java_bundle, tmp / "namesrv")
    ns.start()
    broker = JavaBroker(java_bundle, tmp / "broker", ns.addr)
    try:
        ns.wait_ready()
        broker.start()
        broker.wait_ready()
        broker.wait_registered()
        figures.append(f"java reference: Java name server + broker up in {time.monotonic() - t0:.1f} s")
        yield Peer("java", ns.addr, broker.addr, broker.store, broker.log_tail)
    finally:  # its store is thrown away: no clean shutdown to wait for
        broker.kill()
        ns.kill()


@pytest.fixture(scope="session")
def trocket_peer(tmp_path_factory):
    """``trocket broker`` (embedded name server), once per session; must stop cleanly."""
    tmp = tmp_path_factory.mktemp("trocket-peer")
    conf = tmp / "broker.conf"
    conf.write_text(TROCKET_BROKER_CONF)
    broker = BrokerProcess(tmp / "store", tmp / "broker.log", extra=["-c", str(conf)])
    broker.start()
    try:
        yield Peer("trocket", broker.namesrv, f"127.0.0.1:{broker.port}", broker.store, broker.log_tail)
    finally:
        rc = broker.stop()
        assert rc == 130, f"trocket broker exited {rc} after SIGINT:\n{broker.log_tail()}"
        assert "shut down cleanly" in broker.log_text(), f"no clean shutdown:\n{broker.log_tail()}"


@pytest.fixture
def peer(request, broker: str) -> Peer:
    """The broker the test's ``broker`` parameter names, started on first use."""
    return request.getfixturevalue(f"{broker}_peer")


@pytest.fixture(scope="session")
def scenario_runs(java_bundle, java_classes, tmp_path_factory, figures):
    """``runs(peer) -> ScenarioRun``: one Runner JVM per broker, started on first use."""
    runs: dict[str, ScenarioRun] = {}
    tmp = tmp_path_factory.mktemp("java-runs")

    def get(p: Peer) -> ScenarioRun:
        if p.kind not in runs:
            prefix = f"j{p.kind[0]}{os.getpid() % 10000}_{int(time.time()) % 100000}"
            runs[p.kind] = ScenarioRun(java_bundle, java_classes, namesrv=p.namesrv, broker=p.addr, prefix=prefix,
                                       home=tmp / p.kind)
        return runs[p.kind]

    yield get
    for kind, run in runs.items():
        end = run.ended if run.ended is not None else time.monotonic()
        figures.append(f"java reference: scenario runner against {kind}: {len(run.results)} scenarios, "
                       f"{end - run.started:.1f} s{'' if run.done else ' (still running: killed)'}")
        run.stop()


@pytest.fixture(scope="session")
def runs_in_background(request) -> None:
    """Start the Runner against both brokers now, so they work while other tests run
    (test_trocket_client.py, collected first: see pytest_collection_modifyitems). The
    compilation first: it runs while the brokers boot."""
    request.getfixturevalue("java_compiling")
    peers = [request.getfixturevalue(f"{kind}_peer") for kind in ("java", "trocket")]
    scenario_runs = request.getfixturevalue("scenario_runs")
    for p in peers:
        scenario_runs(p)


def pytest_collection_modifyitems(session, config, items):
    """This folder's trocket-client tests first: the Runner JVMs they start in the
    background (runs_in_background) have the Java-client results ready when those tests
    come, which then wait for nothing."""
    mine = [i for i, item in enumerate(items) if Path(str(item.path)).resolve().parent == HERE]
    if not mine:
        return
    block = [items[i] for i in mine]
    block.sort(key=lambda item: Path(str(item.path)).name != "test_trocket_client.py")  # stable
    for i, item in zip(mine, block):
        items[i] = item


@pytest.fixture
def scenario(peer, scenario_runs):
    """``scenario(name) -> data``: the Java scenario's facts against the test's broker
    (fails the test with the Java exception when the scenario threw)."""

    def get(name: str) -> dict:
        doc = scenario_runs(peer).result(name)
        if not doc.get("ok"):
            pytest.fail(f"Java scenario {name} failed against {peer.kind} broker:\n{doc.get('error')}", pytrace=False)
        return doc["data"]

    return get


@pytest.fixture
def java_reference(request, scenario_runs):
    """``java_reference(name) -> data``: the scenario's facts against the Java broker,
    what the trocket run is compared with."""

    def get(name: str) -> dict:
        doc = scenario_runs(request.getfixturevalue("java_peer")).result(name)
        assert doc.get("ok"), f"the Java reference run of {name} failed:\n{doc.get('error')}"
        return doc["data"]

    return get
