"""Conformance tests: the committed corpus, replay, the capture proxy."""

from __future__ import annotations

import socket
from pathlib import Path


from ..broker.conftest import running_broker  # noqa: F401  (the one in-process broker of the tests)

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "conformance" / "captures"
#: the namesrv request codes: a captured server that answered them is a name server
NAMESRV_CODES = frozenset({101, 103, 104, 105, 106, 206, 219, 224})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def target_map(session, controller):
    """Captured server address -> the fresh broker's or name server's address."""
    broker = ("127.0.0.1", controller.server.port)
    namesrv = ("127.0.0.1", controller.namesrv.port)
    roles = {}
    for conn, exchanges in session.connections.items():
        is_ns = any(e.request.code in NAMESRV_CODES for e in exchanges)
        roles[session.servers[conn]] = namesrv if is_ns else broker
    return lambda server: roles[server]
