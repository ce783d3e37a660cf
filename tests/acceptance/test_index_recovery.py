"""The index after kill -9 (issue 22): producers send keyed messages to ``trocket broker``
until it is killed mid-load; after a restart on the same store every acknowledged
message is found by its key and by its unique key (QUERY_MESSAGE), each exactly once,
and the index goes on with the messages sent after the restart."""

from __future__ import annotations

import struct
import threading
import time

import pytest
import trio

from trocket.client import ClientConfig, ClientError, ClientInstance
from trocket.client.blocking import BlockingProducer
from trocket.client.message import new_message

pytestmark = pytest.mark.slow

TOPIC = "IndexCrash"
PRODUCERS = 4
KILL_AFTER_ACKS = 3000
FAR = 2**62


def _produce(ns: str, n: int, stop: threading.Event, acked: list) -> None:
    with BlockingProducer(f"IdxPG{n}", ns, send_timeout=3) as producer:
        i = 0
        while not stop.is_set():
            key = f"p{n}-{i}"
            try:
                r = producer.send(new_message(TOPIC, f"body {key}", keys=[key, f"shared-{n}"]))
            except ClientError:
                if stop.is_set():
                    return
                time.sleep(0.05)
                continue
            acked.append((key, r.msg_id, r.offset_msg_id))
            i += 1


async def _lookups(ns: str, addr: str, acked: list) -> tuple[list, list]:
    """(problems by key, problems by unique key): what is not found exactly once."""
    by_key, by_uniq = [], []
    async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
        for key, uniq, offset_id in acked:
            found, _, _ = await inst.api.query_message(addr, TOPIC, key, 32, 0, FAR)
            mine = [m for m in found if key in m.keys]
            if [m.msg_id for m in mine] != [offset_id]:
                by_key.append((key, [m.msg_id for m in mine]))
            found, _, _ = await inst.api.query_message(addr, TOPIC, uniq, 32, 0, FAR, unique=True)
            if [m.msg_id for m in found if m.client_msg_id == uniq] != [offset_id]:
                by_uniq.append((uniq, len(found)))
    return by_key, by_uniq


def test_every_acknowledged_key_is_found_after_kill9(broker_factory):
    broker = broker_factory(name="index-crash")
    ns, addr = broker.namesrv, f"127.0.0.1:{broker.port}"
    acked: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=_produce, args=(ns, n, stop, acked), daemon=True) for n in range(PRODUCERS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < KILL_AFTER_ACKS and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()  # mid-load: the index task was some records behind, or mid-pass
    stop.set()
    for t in threads:
        t.join(30)
    assert len(acked) >= 100, f"only {len(acked)} sends acknowledged before the kill:\n{broker.log_tail()}"
    index_files = sorted((broker.store / "index").iterdir())
    assert index_files, "no index file before the kill"
    with open(index_files[-1], "rb") as f:
        indexed_to = struct.unpack(">qqqqii", f.read(40))[3]  # the last record indexed before the kill
    print(f"{len(acked)} sends acknowledged; the index had reached commit-log offset {indexed_to}")

    broker.start()
    assert "abnormal=True" in broker.log_text().rsplit("===== start #2", 1)[-1]
    by_key, by_uniq = trio.run(_lookups, ns, addr, acked)
    assert not by_key, f"{len(by_key)} of {len(acked)} keys not found exactly once, e.g. {by_key[:5]}"
    assert not by_uniq, f"{len(by_uniq)} of {len(acked)} unique keys not found exactly once, e.g. {by_uniq[:5]}"

    # the restarted broker indexes what comes next
    with BlockingProducer("IdxPGAfter", ns) as producer:
        r = producer.send(new_message(TOPIC, "after", keys="after-restart"))
    later = [("after-restart", r.msg_id, r.offset_msg_id)]
    for _ in range(100):
        by_key, by_uniq = trio.run(_lookups, ns, addr, later)
        if not by_key and not by_uniq:
            break
        time.sleep(0.05)
    assert not by_key and not by_uniq
