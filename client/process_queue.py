"""A consumer's cache of one queue's pulled, not yet finished messages.

Java: ``ProcessQueue``. The pull loop puts what it pulled; consume tasks take messages
in queue order and remove them once consumed; the offset to commit is the smallest
offset still cached (or one past the largest pulled when nothing is), so a message
being consumed is never skipped by a commit -- the at-least-once rule. Counts and body
bytes feed the pull loop's flow control (``pullThresholdForQueue`` /
``pullThresholdSizeForQueue``) and the max span (``consumeConcurrentlyMaxSpan``).

Messages are put in increasing offset order (one queue, one pull loop), so an
``OrderedDict`` is the tree map: first key, removal and insertion are O(1).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Iterable

import trio

from trocket.codecs.message.message import MessageExt

__all__ = ["ProcessQueue", "LOCK_MAX_LIVE_S", "PULL_MAX_IDLE_S"]

#: ``REBALANCE_LOCK_MAX_LIVE_TIME``: a broker lock is trusted this long after it was taken.
LOCK_MAX_LIVE_S = 30.0
#: ``PULL_MAX_IDLE_TIME``: a queue not pulled for this long is dropped by the rebalance.
PULL_MAX_IDLE_S = 120.0


class ProcessQueue:
    __slots__ = (
        "_msgs",
        "_pending",
        "_lot",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "dropped",
        "locked",
        "last_lock_time",
        "last_pull_time",
        "last_consume_ms",
        "consuming",
        "closing",
    )

    def __init__(self) -> None:
        self._msgs: OrderedDict[int, MessageExt] = OrderedDict()
        self._pending: deque[MessageExt] = deque()
        self._lot = trio.lowlevel.ParkingLot()
        self.msg_count = 0
        self.msg_size = 0  # body bytes
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.last_lock_time = 0.0
        self.last_pull_time = trio.current_time() if _in_trio() else 0.0
        #: wall clock (epoch ms) of the last consumed batch, for GET_CONSUMER_RUNNING_INFO
        self.last_consume_ms = int(time.time() * 1000)
        self.consuming = False  # orderly: a message of this queue is in the callback
        self.closing = False  # the consumer is shutting down: take nothing more

    # -- the pull side -------------------------------------------------------------------

    def put(self, messages: Iterable[MessageExt]) -> int:
        """Cache pulled messages (offsets above any cached); returns how many were new."""
        added = 0
        msgs = self._msgs
        for msg in messages:
            offset = msg.queue_offset
            if offset in msgs:
                continue
            msgs[offset] = msg
            self._pending.append(msg)
            self.msg_size += len(msg.body)
            if offset > self.queue_offset_max:
                self.queue_offset_max = offset
            added += 1
        self.msg_count += added
        if added:
            self._lot.unpark_all()
        return added

    @property
    def max_span(self) -> int:
        """Largest minus smallest cached offset (``getMaxSpan``)."""
        if not self._msgs:
            return 0
        return next(reversed(self._msgs)) - next(iter(self._msgs))

    # -- the consume side ----------------------------------------------------------------

    def take(self, n: int) -> list[MessageExt]:
        """Up to ``n`` messages not yet handed out, in offset order (they stay cached)."""
        out = []
        pending = self._pending
        while pending and len(out) < n:
            out.append(pending.popleft())
        return out

    def give_back(self, messages: list[MessageExt]) -> None:
        """Return taken messages to the front, to be taken again first (orderly retry)."""
        for msg in reversed(messages):
            self._pending.appendleft(msg)
        if messages:
            self._lot.unpark_all()

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    async def wait_pending(self) -> None:
        """Wait until a message can be taken or the queue is dropped or closing."""
        while not self._pending and not self.dropped and not self.closing:
            await self._lot.park()

    def wake(self) -> None:
        """Wake waiters (after ``dropped`` or ``closing`` was set)."""
        self._lot.unpark_all()

    def remove(self, messages: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit now, -1 if nothing was cached
        (``removeMessage``)."""
        msgs = self._msgs
        if not msgs:
            return -1
        result = self.queue_offset_max + 1
        self.last_consume_ms = int(time.time() * 1000)
        for msg in messages:
            if msgs.pop(msg.queue_offset, None) is not None:
                self.msg_count -= 1
                self.msg_size -= len(msg.body)
        if msgs:
            result = next(iter(msgs))
        return result

    @property
    def min_cached_offset(self) -> int:
        """The smallest cached offset, 0 when nothing is cached."""
        return next(iter(self._msgs)) if self._msgs else 0

    def first_cached(self) -> MessageExt | None:
        """The cached message of the smallest offset (``msgTreeMap.firstEntry``)."""
        return next(iter(self._msgs.values())) if self._msgs else None

    def clear(self) -> None:
        self._msgs.clear()
        self._pending.clear()
        self.msg_count = 0
        self.msg_size = 0

    # -- locks (orderly) -----------------------------------------------------------------

    def lock_expired(self, now: float) -> bool:
        return now - self.last_lock_time > LOCK_MAX_LIVE_S

    def pull_expired(self, now: float) -> bool:
        return now - self.last_pull_time > PULL_MAX_IDLE_S

    def set_locked(self, locked: bool, now: float) -> None:
        self.locked = locked
        if locked:
            self.last_lock_time = now


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
