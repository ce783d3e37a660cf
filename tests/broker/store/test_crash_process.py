"""A real crash: a child process doing SYNC_FLUSH puts is SIGKILLed mid-load."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from trocket.broker.store import MessageStore
from trocket.codecs.message.record import decode_record

from .conftest import small_config
from .test_recovery import QUEUES, served

CHILD = textwrap.dedent(
    """
    import sys, trio
    from trocket.broker.store import MessageInner, MessageStore, StoreConfig

    config = StoreConfig(store_dir=sys.argv[1], commit_log_segment_size=64 * 1024,
                         consume_queue_entries_per_file=50, flush_mode="SYNC")
    store = MessageStore.open(config)

    async def sender(n):
        i = 0
        while True:
            body = b"%d-%d-" % (n, i) + b"p" * (50 + (i * 37) % 400)
            r = await store.async_put_message(
                MessageInner(topic="T", body=body, queue_id=n % 3, properties={"TAGS": "c"}))
            assert r.ok
            print("ack", r.physical_offset, r.queue_id, r.queue_offset, body.decode(), flush=True)
            i += 1

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            print("ready", flush=True)
            for n in range(6):
                nursery.start_soon(sender, n)

    trio.run(main)
    """
)


@pytest.mark.slow
def test_sigkill_during_sync_puts(tmp_path):
    store_dir = tmp_path / "store"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(store_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked = []
    deadline = time.monotonic() + 20
    try:
        assert proc.stdout.readline().strip() == "ready"
        while len(acked) < 1500 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            _, phys, qid, qoff, body = line.split()
            acked.append((int(phys), int(qid), int(qoff), body))
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL, err
    assert len(acked) >= 300, err

    config = small_config(store_dir)
    store = MessageStore.open(config)
    assert store.recovery.abnormal
    for phys, qid, qoff, body in acked:
        m = store.look_message_by_offset(phys)
        assert m is not None and m.body == body.encode()
        assert (m.queue_id, m.queue_offset) == (qid, qoff)
        assert store.get_commit_log_offset("T", qid, qoff) == phys
    # everything served decodes with a valid CRC and matches its queue position
    got = served(store)
    assert len(got) >= len(acked)
    assert sum(store.get_max_offset("T", q) for q in range(QUEUES)) == len(got)
    end = store.max_phy_offset
    last = got[-1]
    last_end = last.commit_log_offset + last.store_size
    # killed between a segment's blank filler and the next record: the end is the boundary
    assert end == last_end or (end % config.commit_log_segment_size == 0 and end - last_end < 2048)
    decode_record(store.select_one_message_by_offset(last.commit_log_offset), check_crc=True)
    store.shutdown()
