"""Conformance tests: the committed corpus, replay, the capture proxy."""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from trocket.broker.config import BrokerConfig
from trocket.broker.controller import BrokerController

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "conformance" / "captures"
#: the namesrv request codes: a captured server that answered them is a name server
NAMESRV_CODES = frozenset({101, 103, 104, 105, 106, 206, 219, 224})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def fresh_broker(tmp_path: Path, **kw):
    """A started broker with an embedded name server, on free ports, fresh store."""
    opts = dict(listen=("127.0.0.1", 0), namesrv_listen=("127.0.0.1", 0), store_dir=str(tmp_path / "store"),
                commit_log_segment_size=1 << 20, consume_queue_entries_per_file=1000)
    opts.update(kw)
    controller = BrokerController(BrokerConfig(**opts))
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        try:
            yield controller
        finally:
            nursery.cancel_scope.cancel()


def target_map(session, controller):
    """Captured server address -> the fresh broker's or name server's address."""
    broker = ("127.0.0.1", controller.server.port)
    namesrv = ("127.0.0.1", controller.namesrv.port)
    roles = {}
    for conn, exchanges in session.connections.items():
        is_ns = any(e.request.code in NAMESRV_CODES for e in exchanges)
        roles[session.servers[conn]] = namesrv if is_ns else broker
    return lambda server: roles[server]
