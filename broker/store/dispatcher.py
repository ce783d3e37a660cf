"""Dispatcher: RocketMQ's ``ReputMessageService``, building consume queues from the
commit log and telling listeners about new messages.

It runs synchronously, in the putting thread, right after the append lock is released:
the put path queues one :class:`DispatchRequest` per record under the append lock (so
the queue is in commit-log order) and :meth:`Dispatcher.drain` applies them under the
dispatcher's own lock. Why not a separate task as in Java (a thread polling every
1 ms)? Applying a request is one 20-byte copy plus the listener calls: cheaper than a
task switch, and a put returns with its consume-queue entry already visible, so a pull
right after a send finds the message and held pulls are woken without polling latency.
Whoever takes the dispatch lock drains everything queued, so many putters share one
pass; a putter whose request another thread already applied finds the queue empty.

Listeners are called ``listener(topic, queue_id, queue_offset, tag_hash,
store_timestamp)`` in commit-log order, in the putting thread (a trio task or a worker
thread), under the dispatch lock: they must be quick and thread-safe (for a trio
broker, e.g. ``trio.lowlevel.TrioToken.run_sync_soon``) and decide themselves how to
batch wake-ups. A listener given a topic hears only that topic's messages (the
schedule service: ``SCHEDULE_TOPIC_XXXX``), and a listener is registered only while it
has something to do (long polling: while pulls are held; HA: while a slave follows), so
the common put -- no held pull, an ordinary topic -- makes no listener call. A waiter
that needs to know only that something came (the index, caught up) registers a one-shot
wake-up instead (:meth:`Dispatcher.wake_once`): the next dispatch calls it once and drops
it, so the puts that follow until the waiter runs call nothing.

Recovery uses :meth:`Dispatcher.reput`, which reads the records back from the commit
log (``doReput``) instead of taking them from the put path.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator

import attrs

from trocket.codecs.message.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from .commit_log import CommitLog, DispatchRequest
from .queue_table import ConsumeQueueTable

__all__ = ["Dispatcher", "MessageArrivingListener"]

log = logging.getLogger(__name__)

MessageArrivingListener = Callable[[str, int, int, int, int], None]


def _taken(pending: deque) -> Iterator[tuple]:
    """The queued requests, each taken off the queue (putters in other threads may
    append meanwhile: they are taken too)."""
    while pending:
        yield pending.popleft()


def _notify(listeners: tuple, topic: str, queue_id: int, queue_offset: int, tag: int, store_ts: int) -> None:
    for listener in listeners:
        try:
            listener(topic, queue_id, queue_offset, tag, store_ts)
        except Exception:  # a listener must not break the store
            log.exception("message arriving listener failed")


@attrs.define(slots=True, eq=False)
class Dispatcher:
    commit_log: CommitLog
    queues: ConsumeQueueTable
    _listeners: tuple[MessageArrivingListener, ...] = ()
    #: topic -> the listeners of that topic only
    _topic_listeners: dict[str, tuple[MessageArrivingListener, ...]] = attrs.field(factory=dict)
    #: one-shot wake-ups (:meth:`wake_once`), dropped by the next dispatch that calls them
    _wakeups: tuple[Callable[[], None], ...] = ()
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    #: End of the last record dispatched (Java's ``reputFromOffset``).
    dispatched_offset: int = 0
    #: Store timestamp of the last record dispatched (the checkpoint's logics time).
    last_store_timestamp: int = 0
    dispatched_count: int = 0

    def add_listener(self, listener: MessageArrivingListener, topic: str | None = None) -> None:
        """Call ``listener`` for every message dispatched (``topic``: for that topic's only).
        Each change replaces a tuple: a drain running in another thread meanwhile sees
        the old or the new one whole."""
        if topic is None:
            self._listeners = self._listeners + (listener,)
        else:
            by_topic = dict(self._topic_listeners)
            by_topic[topic] = by_topic.get(topic, ()) + (listener,)
            self._topic_listeners = by_topic

    def remove_listener(self, listener: MessageArrivingListener) -> None:
        """Stop calling ``listener`` (compared by ``==``: a bound method is a new object
        on every attribute read, but equal to the one registered)."""
        self._listeners = tuple(x for x in self._listeners if x != listener)
        by_topic = {}
        for topic, listeners in self._topic_listeners.items():
            left = tuple(x for x in listeners if x != listener)
            if left:
                by_topic[topic] = left
        self._topic_listeners = by_topic

    def wake_once(self, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once, after the next record is dispatched (from the thread that
        dispatches it, under :attr:`lock`; a listener of every record would be called for
        each record until its waiter ran again to remove it). For a waiter that needs to
        know only that something came: the index."""
        with self._lock:
            self._wakeups = self._wakeups + (wake,)

    def cancel_wake(self, wake: Callable[[], None]) -> None:
        """Drop ``wake`` if no dispatch has called it yet."""
        with self._lock:
            self._wakeups = tuple(w for w in self._wakeups if w is not wake)

    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def drain_locked(self) -> None:
        """:meth:`drain` for a caller already holding :attr:`lock`."""
        pending = self.commit_log.pending
        if pending:
            self._apply_each(_taken(pending))

    def drain(self) -> None:
        """Apply every queued request, in order (see the module docstring)."""
        pending = self.commit_log.pending
        if not pending:
            return
        lock = self._lock
        lock.acquire()  # (not ``with``: its __enter__ / __exit__ calls cost more, every put)
        try:
            if len(pending) == 1:  # the common case (a send drains its own record): no generator
                try:
                    request = pending.popleft()
                except IndexError:  # taken meanwhile by another thread's drain
                    return
                self._apply_each((request,))
            else:
                self._apply_each(_taken(pending))
        finally:
            lock.release()

    def _apply_each(self, requests: Iterable[DispatchRequest | tuple]) -> None:
        """Apply each request: its consume-queue entry (the queue looked up in the
        table's current dict; the slow lookup, which creates it, only for a new queue),
        then the listeners."""
        queues = self.queues
        listeners = self._listeners
        by_topic = self._topic_listeners
        for topic, queue_id, queue_offset, phys, size, tag, store_ts, sys_flag in requests:
            tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                cq = queues._queues.get((topic, queue_id)) or queues.find_or_create(topic, queue_id)
                cq.put(phys, size, tag, queue_offset)
                if listeners:
                    _notify(listeners, topic, queue_id, queue_offset, tag, store_ts)
                if by_topic:
                    topical = by_topic.get(topic)
                    if topical is not None:
                        _notify(topical, topic, queue_id, queue_offset, tag, store_ts)
            end = phys + size
            if end > self.dispatched_offset:
                self.dispatched_offset = end
            self.last_store_timestamp = store_ts
            self.dispatched_count += 1
        wakeups = self._wakeups
        if wakeups:
            self._wakeups = ()
            for wake in wakeups:
                try:
                    wake()
                except Exception:  # a waiter must not break the store
                    log.exception("dispatch wake-up failed")

    def apply_all(self, requests: Iterable[DispatchRequest]) -> None:
        with self._lock:
            self._apply_each(requests)

    def reput(self, start: int, *, check_crc: bool) -> int:
        """Dispatch every valid record from ``start`` on (``doReput``); returns the end
        of the last valid record. Consume queues skip entries they already hold."""
        self.apply_all(self.commit_log.scan(start, check_crc=check_crc))
        end = self.commit_log.scan_end
        if end > self.dispatched_offset:
            self.dispatched_offset = end
        return end
