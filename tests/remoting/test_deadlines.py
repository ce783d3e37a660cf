"""The deadline wheel, on trio's autojump clock: virtual time, exact bounds."""

import trio
import trio.testing

from trocket.remoting.deadlines import RESOLUTION, schedule, unschedule


class Item:
    def __init__(self, deadline: float, log: list) -> None:
        self.deadline = deadline
        self._slot = None
        self.log = log

    def expire(self) -> bool:
        self.log.append((self, trio.current_time()))
        return True


async def test_expires_never_early_and_at_most_a_slot_late(autojump_clock):
    log: list = []
    now = trio.current_time()
    items = [Item(now + d, log) for d in (0.3, 0.1, 0.2)]
    for item in items:
        schedule(item)
    await trio.sleep(0.5)
    assert [i for i, _ in log] == [items[1], items[2], items[0]]
    for item, when in log:
        assert item.deadline <= when <= item.deadline + RESOLUTION
        assert item._slot is None


async def test_unscheduled_items_never_expire(autojump_clock):
    log: list = []
    item = Item(trio.current_time() + 0.05, log)
    schedule(item)
    unschedule(item)
    unschedule(item)  # twice is harmless
    await trio.sleep(0.15)
    assert log == []


async def test_an_earlier_deadline_wakes_the_sleeping_timer(autojump_clock):
    log: list = []
    late = Item(trio.current_time() + 10, log)
    schedule(late)
    await trio.sleep(0.02)  # the timer now sleeps until +10 s
    early = Item(trio.current_time() + 0.05, log)
    schedule(early)
    await trio.sleep(0.15)
    assert [i for i, _ in log] == [early]
    assert log[0][1] <= early.deadline + RESOLUTION  # woken for it, not at +10 s
    unschedule(late)


async def test_many_items_in_one_slot(autojump_clock):
    log: list = []
    deadline = trio.current_time() + 0.05
    items = [Item(deadline, log) for _ in range(1000)]
    for item in items:
        schedule(item)
    for item in items[::2]:
        unschedule(item)
    await trio.sleep(0.15)
    assert {id(i) for i, _ in log} == {id(i) for i in items[1::2]}


async def test_an_enforced_call_nobody_awaits_expires_at_its_deadline(autojump_clock):
    """``ResponseFuture.enforce_deadline``: an async call whose callback is all its caller
    waits for times out on the wheel; one not enforced waits for the periodic scan."""
    from trocket.codecs.command import RemotingCommand
    from trocket.remoting import RemotingTimeoutError, ResponseFuture

    outcomes: list = []

    def callback(fut: ResponseFuture) -> None:
        outcomes.append((fut, fut.exception, trio.current_time()))

    enforced = ResponseFuture(1, RemotingCommand.request(100), "a:1", 0.2, callback=callback)
    left = ResponseFuture(2, RemotingCommand.request(100), "a:1", 0.2, callback=callback)
    enforced.enforce_deadline()
    enforced.enforce_deadline()  # twice is harmless
    await trio.sleep(0.5)
    assert [(f, type(e)) for f, e, _ in outcomes] == [(enforced, RemotingTimeoutError)]
    assert enforced.deadline <= outcomes[0][2] <= enforced.deadline + RESOLUTION
    assert not left.done()
    left.set_response(RemotingCommand.response(0))
    left.enforce_deadline()  # done: nothing to enforce
    await trio.sleep(0.5)
    assert [f for f, _, _ in outcomes] == [enforced, left] and left._slot is None


async def test_left_slots_leave_the_wheel(autojump_clock):
    """Leaving needs no lookup of the wheel, yet an emptied slot is dropped from its
    table: calls that finish before their deadline leave nothing behind."""
    from trocket.remoting.deadlines import wheel

    log: list = []
    first = round(trio.current_time() / RESOLUTION) + 200  # a slot a second ahead
    items = [Item((first + i - 0.5) * RESOLUTION, log) for i in range(200)]  # one per slot
    for item in items:
        schedule(item)
    assert len(wheel().slots) == 200
    for item in items:
        unschedule(item)
        assert item._slot is None
    assert wheel().slots == {}
    await trio.sleep(3)
    assert log == []
