"""Long polling (broker/long_polling.py) at its edges, through the wire: a message put
from a worker thread wakes a held pull (``TrioToken.run_sync_soon``), and a held pull
answered while its connection's outbound queue is full still gets its answer, without
stalling the service or the other connections."""

from __future__ import annotations

import socket
import threading
from contextlib import asynccontextmanager

import trio
import trio.testing

from trocket.broker.controller import BrokerController
from trocket.broker.store import MessageInner
from trocket.codecs.message.record import decode_records
from trocket.remoting import ServerConfig

from ..waiting import wait_until
from .conftest import held_count_reaches


async def test_put_from_a_worker_thread_wakes_a_held_pull(tmp_path, wire):
    # The periodic check (the safety net for missed arrivals) is pushed past the test:
    # only the wake-up the putting thread hands to trio can answer these pulls.
    async with wire.running_broker(tmp_path, hold_check_interval_ms=600_000) as broker, wire.client() as c:
        addr = broker.broker_addr
        for q in (0, 1):
            r = await c.invoke_sync(addr, wire.send_v1("XT", b"zero", queue_id=q, properties=wire.props()))
            assert r.code == 0
        got: dict[int, object] = {}

        async def held(q: int) -> None:
            got[q] = await c.invoke_sync(addr, wire.pull("XT", q, offset=1, suspend_ms=60_000), 70)

        trio_thread = threading.get_ident()
        threads = set()

        def put_burst() -> None:
            threads.add(threading.get_ident())
            for i in range(50):
                broker.store.put_message(MessageInner(topic="XT", body=b"t%d" % i, queue_id=i % 2))

        with trio.fail_after(10):
            async with trio.open_nursery() as n:
                n.start_soon(held, 0)
                n.start_soon(held, 1)
                await held_count_reaches(broker, 2)
                await trio.to_thread.run_sync(put_burst)
        assert trio_thread not in threads
        for q in (0, 1):
            assert got[q].code == 0
            bodies = [m.body for m in decode_records(got[q].body)]
            assert bodies and bodies[0] == b"t%d" % q
        hold = broker.pull_hold
        assert (hold.woken_by_arrival, hold.woken_by_check, hold.woken_by_timeout) == (2, 0, 0)
        assert hold.held_count == 0


@asynccontextmanager
async def broker_with_outbox(tmp_path, wire, outbound_max_bytes: int):
    cfg = wire.broker_config(tmp_path, commit_log_segment_size=64 << 20)
    server_cfg = ServerConfig(
        listen_host="127.0.0.1", listen_port=0, outbound_max_bytes=outbound_max_bytes,
        system_reply_ext_fields=True,
    )
    controller = BrokerController(cfg, server_config=server_cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        try:
            yield controller
        finally:
            nursery.cancel_scope.cancel()


async def test_held_pull_answered_while_the_outbox_is_full(tmp_path, wire, raw):
    """A consumer that stops reading: its connection's outbound queue fills (pull
    answers of ~200 KiB, 20 MB in all, far more than the socket buffers -- 4 MiB at
    most on the broker's side here -- and the 64 KiB queue hold). A held pull woken then is answered later, by a task, once the consumer reads
    again: not lost, not blocking the hold service or the other connections (the
    hold service hands it to one of the connection's handlers, ``Connection.answer``)."""
    flood = 100
    async with broker_with_outbox(tmp_path, wire, 64 * 1024) as broker, wire.client() as c:
        addr = broker.broker_addr
        for i in range(4):
            r = await c.invoke_sync(addr, wire.send_v1("FO", b"%d" % i * 200_000, properties=wire.props()))
            assert r.code == 0
        host, port = addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        # a fixed small receive buffer (no autotuning): the broker's side fills first
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        buf = bytearray()
        async with stream:
            held = {"consumerGroup": "G", "topic": "FO", "queueId": 1, "queueOffset": 0, "maxMsgNums": 32,
                    "sysFlag": 6, "commitOffset": 0, "subVersion": 0, "suspendTimeoutMillis": 60_000,
                    "subscription": "*"}
            await stream.send_all(raw.frame(11, held, 1))
            await held_count_reaches(broker, 1)
            pull = {**held, "queueId": 0, "sysFlag": 4}
            await stream.send_all(b"".join(raw.frame(11, pull, 100 + i) for i in range(flood)))
            # the broker answers until the socket and the queue are full, then waits
            await trio.testing.wait_all_tasks_blocked(0.1)
            # the held pull's message arrives (another connection: it is served)
            with trio.fail_after(5):
                r = await c.invoke_sync(addr, wire.send_v1("FO", b"for the held pull", queue_id=1,
                                                           properties=wire.props()))
                assert r.code == 0
            await wait_until(lambda: not broker.pull_hold.held_count, 5)
            # handed to one of the connection's handlers, which waits for room
            assert broker.pull_hold.woken_by_arrival == 1
            # the hold service is not stuck behind it: another held pull is answered
            r = await c.invoke_sync(addr, wire.pull("FO", 1, offset=1, suspend_ms=200), 5)
            assert r.code == 19
            # the consumer reads again: every answer comes, the held one among them
            answers = {}
            with trio.fail_after(30):
                while len(answers) < flood + 1:
                    cmd, _ = await raw.read(stream, buf)
                    answers[cmd.opaque] = cmd
            assert sorted(answers) == [1] + list(range(100, 100 + flood))
            assert all(answers[100 + i].code == 0 for i in range(flood))
            (m,) = decode_records(answers[1].body)
            assert (answers[1].code, m.body, m.queue_id) == (0, b"for the held pull", 1)
            # and the connection still works
            await stream.send_all(raw.frame(11, {**pull, "queueOffset": 3}, 999))
            with trio.fail_after(5):
                cmd, _ = await raw.read(stream, buf)
            assert cmd.opaque == 999 and cmd.code == 0


async def test_arrival_listener_only_while_pulls_are_held(tmp_path, wire):
    """With no pull held, a put makes no call into long polling (the store's listener is
    off); holding a pull turns it on, and an arrival on the trio thread still wakes it
    at once (the periodic check is pushed past the test); once answered, it is off again."""
    async with wire.running_broker(tmp_path, hold_check_interval_ms=600_000) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, wire.send_v1("LT", b"zero", queue_id=0, properties=wire.props()))
        assert r.code == 0
        listeners = lambda: broker.store.dispatcher._listeners  # noqa: E731
        hold = broker.pull_hold
        assert hold.on_message_arriving not in listeners()
        got = []

        async def held() -> None:
            got.append(await c.invoke_sync(addr, wire.pull("LT", 0, offset=1, suspend_ms=60_000), 70))

        with trio.fail_after(10):
            async with trio.open_nursery() as n:
                n.start_soon(held)
                await held_count_reaches(broker, 1)
                assert hold.on_message_arriving in listeners()
                r = await c.invoke_sync(addr, wire.send_v1("LT", b"one", queue_id=0, properties=wire.props()))
                assert r.code == 0
        assert got[0].code == 0 and [m.body for m in decode_records(got[0].body)] == [b"one"]
        assert (hold.woken_by_arrival, hold.woken_by_check, hold.woken_by_timeout) == (1, 0, 0)
        assert hold.held_count == 0 and hold.on_message_arriving not in listeners()
