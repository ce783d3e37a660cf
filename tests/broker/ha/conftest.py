"""Fixtures of the process-based replication tests: a name server process, and the
brokers a test started (killed at the end if still alive)."""

from __future__ import annotations

import pytest

from .procs import Namesrv


@pytest.fixture
def namesrv(tmp_path):
    ns = Namesrv(tmp_path / "namesrv.log")
    yield ns
    ns.stop()


@pytest.fixture
def procs():
    made = []
    yield made
    for b in made:
        if b.alive():
            b.kill()
