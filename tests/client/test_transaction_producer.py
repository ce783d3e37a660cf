"""TransactionProducer against the in-process broker: the local transaction's answer
ends the half message (commit delivered, rollback not), UNKNOW and exceptions are
checked back and answered by the listener's ``check``, plain and async listeners, the
checks' concurrency bound and queue, a plain producer of the group ignoring checks, and
the blocking facade running the local transaction in the caller's thread.

The brokers check by hand (``broker.transactions.check()``) with a
``transactionTimeOut`` of 0 and the check loop slowed to an hour.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import trio

from trocket.client import (
    BlockingTransactionProducer,
    LocalTransactionState,
    PullConsumer,
    TransactionProducer,
    TransactionSendResult,
    new_message,
)
from trocket.client.errors import ClientStateError
from trocket.client.producer import Producer

from ..waiting import wait_until, wait_until_sync
from .conftest import running_broker

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
TXN = dict(transaction_timeout_ms=0, transaction_check_interval_ms=3_600_000)


@pytest.fixture
async def broker(tmp_path):
    async with running_broker(tmp_path, **TXN) as controller:
        yield controller


@pytest.fixture
def namesrv(broker) -> str:
    return ";".join(broker.namesrv_addrs)


class Scripted:
    """A listener answering from the message body ``<exec>:<check>``: ``commit``,
    ``rollback``, ``unknown``, ``none`` (returns None), ``raise``."""

    def __init__(self) -> None:
        self.executed: list[bytes] = []
        self.checked: list[bytes] = []
        self.threads: set[int] = set()

    @staticmethod
    def _answer(word: str):
        if word == "raise":
            raise RuntimeError("the database is gone")
        return {"commit": COMMIT, "rollback": ROLLBACK, "unknown": UNKNOW, "none": None}[word]

    async def execute(self, msg, arg):
        self.executed.append(msg.body)
        assert arg == "arg" and msg.transaction_id == msg.properties["UNIQ_KEY"]
        return self._answer(msg.body.decode().split(":")[0])

    async def check(self, msg):
        self.checked.append(msg.body)
        return self._answer(msg.body.decode().split(":")[1])


class PlainScripted(Scripted):
    """The same as plain functions (run in worker threads)."""

    def execute(self, msg, arg):  # type: ignore[override]
        self.threads.add(threading.get_ident())
        self.executed.append(msg.body)
        return self._answer(msg.body.decode().split(":")[0])

    def check(self, msg):  # type: ignore[override]
        self.threads.add(threading.get_ident())
        self.checked.append(msg.body)
        return self._answer(msg.body.decode().split(":")[1])


async def registered(broker, group: str) -> None:
    """Until the broker knows a connection of the producer group (its heartbeat): where
    its checks go."""
    await wait_until(lambda: broker.ctx.producers.channels(group), 5, what=f"a heartbeat of {group}")


async def delivered(namesrv: str, topic: str, expect: int, group: str = "TxCG") -> list[bytes]:
    """Every message on ``topic`` once ``expect`` are there (and a short look for more)."""
    out: list[bytes] = []
    async with PullConsumer(group, namesrv) as consumer:
        consumer.subscribe(topic)
        with trio.move_on_after(10):
            while len(out) < expect:
                out += [m.body for m in await consumer.poll(0.5)]
        out += [m.body for m in await consumer.poll(0.3)]
    return sorted(out)


@pytest.mark.parametrize("listener_cls", [Scripted, PlainScripted])
async def test_local_answers_and_checks(broker, namesrv, listener_cls):
    listener = listener_cls()
    bodies = [b"commit:x", b"rollback:x", b"unknown:commit", b"none:rollback", b"raise:commit", b"unknown:raise"]
    async with TransactionProducer("TxPG", namesrv, listener) as producer:
        results = [await producer.send_in_transaction(new_message("TxTopic", body), "arg") for body in bodies]
        assert all(isinstance(r, TransactionSendResult) and r.ok for r in results)
        assert [r.local_transaction_state for r in results] == [COMMIT, ROLLBACK, UNKNOW, UNKNOW, UNKNOW, UNKNOW]
        assert listener.executed == bodies
        assert broker.store.get_max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 6
        await wait_until(lambda: broker.transactions.commits + broker.transactions.rollbacks == 2, 5,
                         what="the two ENDs")
        await registered(broker, "TxPG")
        # the broker checks the other four; the listener's check answers
        assert await broker.transactions.check() == 4
        await wait_until(lambda: producer.checks_answered == 4, 5, what="four check answers")
        await wait_until(lambda: broker.transactions.commits == 3 and broker.transactions.rollbacks == 2, 5,
                         what="the answers' ENDs")
        assert sorted(listener.checked) == sorted(bodies[2:])
        # "unknown:raise": the check raised -> UNKNOW -> checked again next pass
        broker.transactions.clock = lambda: time.time_ns() // 1_000_000 + 10  # the copies are old now
        assert await broker.transactions.check() == 1
        await wait_until(lambda: producer.checks_answered == 5, 5, what="the fifth answer")
    if listener_cls is PlainScripted:
        assert threading.get_ident() not in listener.threads  # worker threads, not the trio thread
    assert await delivered(namesrv, "TxTopic", 3) == [b"commit:x", b"raise:commit", b"unknown:commit"]


async def test_checks_are_bounded_and_queued(broker, namesrv):
    running = 0
    most = 0
    release = trio.Event()

    class Slow:
        async def execute(self, msg, arg):
            return UNKNOW

        async def check(self, msg):
            nonlocal running, most
            running += 1
            most = max(most, running)
            await release.wait()
            running -= 1
            return COMMIT

    async with TransactionProducer("TxSlow", namesrv, Slow(), check_concurrency=2, check_queue=3) as producer:
        for i in range(8):
            await producer.send_in_transaction(new_message("TxSlowTopic", b"m%d" % i))
        await wait_until(lambda: broker.transactions.unknowns == 8, 5, what="eight unknown ENDs")
        await registered(broker, "TxSlow")
        assert await broker.transactions.check() == 8
        await wait_until(lambda: most == 2 and producer.checks_dropped == 3, 5, what="2 running, 3 waiting, 3 dropped")
        release.set()
        await wait_until(lambda: producer.checks_answered == 5, 5, what="five answers")
    assert most == 2
    assert broker.transactions.commits == 5


async def test_a_plain_producer_of_the_group_ignores_checks(broker, namesrv):
    async with TransactionProducer("TxMixed", namesrv, Scripted()) as tx:
        await tx.send_in_transaction(new_message("TxMixedTopic", b"unknown:commit"), "arg")
    async with Producer("TxMixed", namesrv) as plain:  # the same group, no listener
        await plain.send(new_message("TxMixedTopic", b"plain"))
        await registered(broker, "TxMixed")
        assert await broker.transactions.check() == 1
        await trio.sleep(0.2)  # a while in which an answer would have come
        assert broker.transactions.commits == 0  # nobody answered
    async with TransactionProducer("TxNoListener", namesrv) as producer:
        with pytest.raises(ClientStateError):
            await producer.send_in_transaction(new_message("TxMixedTopic", b"x"))


async def test_delay_is_dropped_and_the_group_named(broker, namesrv):
    async with TransactionProducer("TxProps", namesrv, Scripted()) as producer:
        msg = new_message("TxPropsTopic", b"commit:x", delay_level=3)
        result = await producer.send_in_transaction(msg, "arg")
    assert result.local_transaction_state is COMMIT
    assert msg.properties["TRAN_MSG"] == "true" and msg.properties["PGROUP"] == "TxProps"
    assert "DELAY" not in msg.properties
    await wait_until(lambda: broker.store.get_max_offset("TxPropsTopic", result.queue.queue_id) == 1, 5,
                     what="the commit")


# -- the blocking facade ------------------------------------------------------------------------


@pytest.fixture
def thread_broker(tmp_path: Path):
    """(name server address, the controller) of a broker in a background trio thread."""
    ready = threading.Event()
    box: dict = {}

    async def main():
        async with running_broker(tmp_path, **TXN) as broker:
            box["ns"] = ";".join(broker.namesrv_addrs)
            box["broker"] = broker
            box["stop"] = trio.Event()
            box["token"] = trio.lowlevel.current_trio_token()
            ready.set()
            await box["stop"].wait()

    t = threading.Thread(target=trio.run, args=(main,), daemon=True)
    t.start()
    assert ready.wait(10)
    yield box
    trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
    t.join(10)


def test_blocking_transaction_producer(thread_broker):
    listener = PlainScripted()
    caller = threading.get_ident()
    with BlockingTransactionProducer("TxBlocking", thread_broker["ns"], listener) as producer:
        results = [producer.send_in_transaction(new_message("TxBlockTopic", body), "arg")
                   for body in (b"commit:x", b"rollback:x", b"unknown:commit")]
        assert [r.local_transaction_state for r in results] == [COMMIT, ROLLBACK, UNKNOW]
        assert listener.threads == {caller}  # execute ran in the caller's thread, as Java's
        broker = thread_broker["broker"]
        token = thread_broker["token"]
        wait_until_sync(lambda: broker.transactions.commits + broker.transactions.rollbacks == 2, 5)
        wait_until_sync(lambda: broker.ctx.producers.channels("TxBlocking"), 5)
        assert trio.from_thread.run(broker.transactions.check, trio_token=token) == 1
        wait_until_sync(lambda: broker.transactions.commits == 2, 5)
    assert listener.checked == [b"unknown:commit"]
