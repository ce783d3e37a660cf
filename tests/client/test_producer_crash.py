"""kill -9 of a ``trocket broker`` subprocess during trocket producer sends, then a restart
on the same store and ports: the producer gets typed errors while the broker is away,
sends again once it is back, and every acknowledged message is in the store."""

from __future__ import annotations

import trio

from trocket.client import ClientConnectError, ClientError, SendTimeoutError, new_message
from trocket.client.producer import Producer

from ..waiting import wait_until
from .conftest import pull_all

TOPIC = "CrashTopic"
SENDERS = 4
ACKS_BEFORE_KILL = 400
ACKS_AFTER_RESTART = 200


async def test_kill_9_and_restart_during_sends(broker_process):
    broker = broker_process(name="crash")
    acked: dict[str, object] = {}
    failures: list[ClientError] = []
    phase = {"restarted": False, "after": 0}
    enough_to_kill = trio.Event()
    enough = trio.Event()

    async with Producer("CrashPG", broker.namesrv, send_timeout=2) as producer:

        async def sender(s: int) -> None:
            i = 0
            while not enough.is_set():
                i += 1
                msg = new_message(TOPIC, b"s%d-%d" % (s, i), properties={"uid": f"{s}-{i}"})
                try:
                    result = await producer.send(msg)
                except ClientError as exc:
                    failures.append(exc)
                    await trio.sleep(0.05)  # a sender's pause after a failure (pacing, not waiting for anything)
                    continue
                acked[result.msg_id] = result
                if len(acked) >= ACKS_BEFORE_KILL:
                    enough_to_kill.set()
                if phase["restarted"]:
                    phase["after"] += 1
                    if phase["after"] >= ACKS_AFTER_RESTART:
                        enough.set()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for s in range(SENDERS):
                    nursery.start_soon(sender, s)
                await enough_to_kill.wait()
                await trio.to_thread.run_sync(broker.kill)
                killed_at = len(acked)
                failed_before = len(failures)
                # sends fail meanwhile
                await wait_until(lambda: len(failures) > failed_before, 30,
                                 what="a send fails while the broker is down")
                await trio.to_thread.run_sync(broker.start)
                phase["restarted"] = True
        assert failures, "sends while the broker was down must fail"
        assert all(isinstance(f, (ClientConnectError, SendTimeoutError)) for f in failures), {
            type(f).__name__ for f in failures
        }
        assert len(acked) >= killed_at + ACKS_AFTER_RESTART
        stored = {m.client_msg_id for m in await pull_all(producer.instance, TOPIC)}
    missing = set(acked) - stored
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages are not in the store"
