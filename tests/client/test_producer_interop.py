"""Messages produced by the trocket producer, consumed by the real C++ client (PyPI
``rocketmq``, driven by tests/acceptance/scripts/consume.py in its own process): bodies
(plain, binary, compressed, batched) and properties arrive intact."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys

import pytest
import trio

from trocket.client import new_message
from trocket.client.producer import Producer

from .conftest import acceptance_tools

TOPIC = "InteropTopic"


@pytest.fixture(scope="module")
def cpp_client() -> None:
    r = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"the rocketmq wheel cannot load: {(r.stderr.strip().splitlines() or ['?'])[-1]}")


def body_of(i: int) -> bytes:
    """Bodies the C++ binding can hand back whole: it reads ``msg.body`` as a C string, so
    no NUL bytes (a NUL cuts the body there on the consumer's side, whoever produced it)."""
    rnd = random.Random(i)
    if i % 10 == 3:  # 6 KiB of text: compressed by the producer
        return "".join(rnd.choice("abcdefghij KLMNOP,.;0123456789") for _ in range(6 * 1024)).encode()
    if i % 10 == 7:  # every byte value but NUL
        return bytes(range(1, 256))
    return f"interop body {i} ünïcode".encode()


@pytest.mark.slow
async def test_cpp_push_consumer_reads_trocket_messages(cpp_client, broker_process, tmp_path):
    acc = acceptance_tools()
    broker = broker_process(name="interop")
    expected = {}
    async with Producer("InteropPG", broker.namesrv) as producer:
        for i in range(40):
            uid = f"single-{i:03d}"
            msg = new_message(TOPIC, body_of(i), tags=f"Tag{i % 3}", keys=[f"k{i}", "shared"],
                              properties={"uid": uid, "note": "é & ; = \u4e2d"})
            await producer.send(msg)
            expected[uid] = msg
        batch = [new_message(TOPIC, body_of(100 + i), tags="TagB", properties={"uid": f"batch-{i:03d}", "note": "b"})
                 for i in range(10)]
        await producer.send_batch(batch)
        expected.update({m.properties["uid"]: m for m in batch})
    out = await trio.to_thread.run_sync(
        lambda: acc.run_client_script(
            "consume.py",
            ["--namesrv", broker.namesrv, "--kind", "push", "--group", "InteropCG", "--topics", TOPIC,
             "--expect", str(len(expected)), "--timeout", "60", "--idle", "0.5"],
            tmp_path / "cpp-consume", timeout=120, broker=broker,
        )
    )
    assert not out["errors"], out["errors"]
    got = {m["uid"]: m for m in out["messages"]}
    assert set(got) == set(expected)
    for uid, msg in expected.items():
        m = got[uid]
        assert m["sha1"] == hashlib.sha1(msg.body).hexdigest() and m["len"] == len(msg.body), uid
        assert m["tags"] == msg.tags, uid
        assert m["props"]["note"] == msg.properties["note"], uid
        if msg.keys:
            assert m["keys"] == " ".join(msg.keys), uid
