"""GroupTransferService on its own: the order, the grouping and the deadlines of the
SYNC_MASTER hand-off (the processes and the wire are in the other files)."""

from __future__ import annotations

import trio

from trocket.broker.ha.transfer import GroupTransferService


def _service() -> tuple[GroupTransferService, list, list[int]]:
    """A service, the log its callbacks write, and the log's length at each pass's end."""
    service = GroupTransferService(timeout=5, fallbehind_max=1 << 20)
    log: list = []
    passes: list[int] = []
    service.add_pass_listener(lambda: passes.append(len(log)))
    return service, log, passes


def _record(log: list, name: str):
    def done(arg, ok: bool) -> None:
        log.append((name, arg, ok))
    return done


async def test_an_acknowledgement_completes_every_request_it_covers_in_order_with_one_pass():
    service, log, passes = _service()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        for end in (100, 200, 300, 400):
            service.submit(end, _record(log, "r"), end)
        service.notify_acked(250)
        assert log == [("r", 100, True), ("r", 200, True)]
        assert passes == [2]
        service.notify_acked(250)  # not beyond what was acknowledged: nothing
        assert passes == [2]
        service.notify_acked(400)
        assert log[2:] == [("r", 300, True), ("r", 400, True)]
        assert passes == [2, 4]
        assert (service.acks_used, service.completed, service.timed_out, service.waiting) == (2, 4, 0, 0)
        nursery.cancel_scope.cancel()


async def test_requests_past_their_deadline_time_out_and_the_rest_wait(autojump_clock):
    service = GroupTransferService(timeout=5, fallbehind_max=1 << 20)
    log: list = []
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        service.submit(100, _record(log, "early"), 1)
        await trio.sleep(3)
        service.submit(200, _record(log, "late"), 2)
        await trio.sleep(2.5)  # the first one's deadline has passed, not the second's
        assert log == [("early", 1, False)]
        service.notify_acked(200)
        assert log == [("early", 1, False), ("late", 2, True)]
        assert (service.completed, service.timed_out) == (1, 1)
        await trio.sleep(10)
        assert service.timed_out == 1  # nothing left to time out
        nursery.cancel_scope.cancel()


async def test_a_callback_that_raises_is_logged_and_the_others_complete(caplog):
    service = GroupTransferService(timeout=5, fallbehind_max=1 << 20)
    log: list = []

    def boom(arg, ok: bool) -> None:
        raise RuntimeError("callback failed")

    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        service.submit(100, _record(log, "a"), 1)
        service.submit(200, boom, 2)
        service.submit(300, _record(log, "c"), 3)
        service.notify_acked(300)
        assert log == [("a", 1, True), ("c", 3, True)]
        assert service.completed == 3
        assert "transfer completion callback failed" in caplog.text
        nursery.cancel_scope.cancel()


async def test_stopping_the_service_fails_what_is_still_waiting():
    service, log, passes = _service()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        service.submit(100, _record(log, "a"), 1)
        service.submit(200, _record(log, "b"), 2)
        nursery.cancel_scope.cancel()
    assert log == [("a", 1, False), ("b", 2, False)]
    assert passes == [2]


def test_slave_ok_needs_a_connection_and_a_lag_below_fallbehind_max():
    service = GroupTransferService(timeout=5, fallbehind_max=1000)
    assert not service.slave_ok(0)
    service.connections = 1
    service.reset_acked(500)
    assert service.slave_ok(1499)
    assert not service.slave_ok(1500)
