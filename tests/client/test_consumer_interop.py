"""Interop: messages produced by the real C++ client (PyPI ``rocketmq``, driven in a
subprocess by tests/acceptance/scripts/produce.py) consumed by trocket's PushConsumer,
bodies (the large ones compressed by the C++ client), tags, keys and user properties
intact."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio

from trocket.client.consumer import PushConsumer

from .conftest import acceptance_tools, running_broker


def _wheel_loads() -> str | None:
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


@pytest.mark.parametrize("mode,count", [("sync", 200), ("large", 20)])
async def test_cpp_produced_messages_consumed_by_trocket(tmp_path, mode, count):
    why = await trio.to_thread.run_sync(_wheel_loads)
    if why is not None:
        pytest.skip(f"the rocketmq wheel (librocketmq) cannot load: {why}")
    acc = acceptance_tools()
    import acc_spec

    topic = f"Interop_{mode}"
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        result = await trio.to_thread.run_sync(
            lambda: acc.run_client_script("produce.py", ["--namesrv", ns, "--mode", mode, "--count", str(count),
                                                         "--topic", topic], tmp_path / "cpp")
        )
        assert not result["errors"] and len(result["acked"]) == count
        got = {}
        done = trio.Event()

        async def listener(msg):
            got[msg.properties["uid"]] = msg
            if len(got) == count:
                done.set()

        async with PushConsumer("InteropCG", ns, {topic: "*"}, listener, consume_from="first"):
            with trio.fail_after(20):
                await done.wait()
    for i in range(count):
        spec = acc_spec.message_of(mode, i)
        msg = got[spec["uid"]]
        assert msg.body == spec["body"]
        assert msg.tags == spec["tags"]
        assert msg.keys == spec["keys"].split(" ")
        assert {k: msg.properties.get(k) for k in spec["props"]} == spec["props"]
        assert msg.client_msg_id == result["acked"][spec["uid"]]["msg_id"]
