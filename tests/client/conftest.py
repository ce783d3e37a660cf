"""Brokers for the client tests: tests/broker's in-process broker (embedded name server) on
free loopback ports over a real store in ``tmp_path``; the subprocess broker of the acceptance
tests (``BrokerProcess``) for kill -9 tests."""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio

from ..broker.conftest import running_broker  # noqa: F401  (the one in-process broker of the tests)
from ..waiting import wait_until

ACCEPTANCE = Path(__file__).resolve().parent.parent / "acceptance"


@pytest.fixture
async def broker(tmp_path):
    async with running_broker(tmp_path) as controller:
        yield controller


@pytest.fixture
def namesrv(broker) -> str:
    return ";".join(broker.namesrv_addrs)


def acceptance_tools():
    """tests/acceptance's ``acc_tools`` (BrokerProcess, free_port) importable."""
    for p in (ACCEPTANCE, ACCEPTANCE / "scripts"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    import acc_tools

    return acc_tools


# -- fakes: a name server with a given route, brokers that misbehave ----------------------


@asynccontextmanager
async def fake_server(processors: dict):
    """A RemotingServer on a free loopback port answering ``{code: processor}``; yields
    its ``host:port``."""
    from trocket.remoting import RemotingServer, ServerConfig

    server = RemotingServer(ServerConfig(
        listen_host="127.0.0.1", listen_port=0, system_reply_ext_fields=True,
        shutdown_deadline=0.1,  # a processor made to hang is not waited for at exit
    ))
    for code, proc in processors.items():
        server.register_processor(code, proc)
    async with server:
        yield server.address


def route_body(brokers: dict[str, str], queues: int = 4) -> bytes:
    """A TopicRouteData body: ``{broker name: master address}``, ``queues`` each, RW."""
    from trocket.codecs.bodies.route import BrokerData, QueueData, TopicRouteData

    return TopicRouteData(
        queue_datas=[QueueData(name, queues, queues, 6) for name in brokers],
        broker_datas=[BrokerData("DefaultCluster", name, {0: addr}) for name, addr in brokers.items()],
    ).to_body()


def fake_namesrv(brokers: dict[str, str], queues: int = 4):
    """A name server answering every GET_ROUTEINFO_BY_TOPIC with ``route_body(brokers)``."""

    async def get_route(conn, request):
        return request.make_response(0, body=route_body(brokers, queues), ext_fields={})

    return fake_server({105: get_route})


@asynccontextmanager
async def tcp_sink(on_data: str = "hang"):
    """A TCP server that accepts and then, on the first bytes, hangs ("hang": never
    answers) or closes the connection ("close"). Yields ``host:port``."""

    async def handle(stream):
        async with stream:
            try:
                data = await stream.receive_some(65536)
                if on_data == "hang" and data:
                    await trio.sleep_forever()
            except trio.BrokenResourceError:
                pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        try:
            yield f"127.0.0.1:{port}"
        finally:
            nursery.cancel_scope.cancel()


def closed_port() -> str:
    """An address nothing listens on (connect is refused)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def pull_all(instance, topic: str, *, group: str = "CHECK") -> list:
    """Every message stored in ``topic`` (all readable queues, from offset 0), through the
    core's PULL_MESSAGE call."""
    from trocket.codecs.headers import PullMessageRequestHeader
    from trocket.client.message import PullStatus

    # a topic created by a send is registered soon after
    await wait_until(lambda: instance.update_route(topic), 10, interval=0.02)
    out = []
    for mq in await instance.subscribe_queues(topic):
        addr = instance.master_addr(mq.broker_name)
        offset = 0
        while True:
            header = PullMessageRequestHeader(
                consumerGroup=group, topic=topic, queueId=mq.queue_id, queueOffset=offset, maxMsgNums=32,
                sysFlag=4, commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0,
            )
            result = await instance.api.pull_message(addr, header, timeout=5)
            if result.status is not PullStatus.FOUND:
                break
            out.extend(result.messages)
            offset = result.next_begin_offset
    return out


@pytest.fixture
def broker_process(tmp_path):
    """``make(**kw) -> BrokerProcess`` (``trocket broker`` subprocess, started); all are
    stopped at teardown."""
    acc = acceptance_tools()
    made = []

    def make(name: str = "broker", **kw):
        b = acc.BrokerProcess(tmp_path / f"{name}-store", tmp_path / f"{name}.log", **kw)
        made.append(b)
        b.start()
        return b

    yield make
    for b in made:
        if b.alive():
            b.stop()
