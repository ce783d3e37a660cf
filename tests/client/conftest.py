"""Brokers for the client tests: an in-process broker (embedded name server) on free
loopback ports over a real store in ``tmp_path``; the subprocess broker of the acceptance
tests (``BrokerProcess``) for kill -9 tests."""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from trocket.broker.config import BrokerConfig
from trocket.broker.controller import BrokerController

ACCEPTANCE = Path(__file__).resolve().parent.parent / "acceptance"


@asynccontextmanager
async def running_broker(tmp_path: Path, name: str = "store", **kw):
    """A started broker with its embedded name server; yields the controller."""
    opts = dict(
        listen=("127.0.0.1", 0),
        namesrv_listen=("127.0.0.1", 0),
        store_dir=str(tmp_path / name),
        commit_log_segment_size=1 << 22,
        consume_queue_entries_per_file=10000,
    )
    opts.update(kw)
    controller = BrokerController(BrokerConfig(**opts))
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        try:
            yield controller
        finally:
            nursery.cancel_scope.cancel()


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
