"""Long polling: RocketMQ's ``PullRequestHoldService`` on trio.

A PULL_MESSAGE with the suspend bit that finds nothing new is *held* here (per
``topic@queueId``, like Java's ``ManyPullRequest``) instead of being answered. It is
answered later, through the connection it came on, when one of these happens:

* **a message arrives** on its queue (and its tag hash is in the pull's subscription):
  while any pull is held (and only then: with none, a put makes no call here), the
  store calls :meth:`PullHoldService.on_message_arriving` from the putting thread
  (a trio task or a worker thread) for every dispatched message. That call only marks
  the queue *dirty* -- and only when pulls are held on it -- and wakes the service task
  (directly on the trio thread, through ``TrioToken.run_sync_soon`` from any other).
  The service task then handles every dirty queue in one pass: however many messages
  arrived meanwhile, each held pull is re-run once. That is RocketMQ 4.9.3's batched
  notification (wake-ups moved off the dispatch path and coalesced), and it is what
  keeps a busy queue from re-running its held pulls once per message;
* **its suspend deadline** passes (``suspendTimeoutMillis``, or
  ``shortPollingTimeMills`` with long polling off): it is re-run and, still finding
  nothing, answered PULL_NOT_FOUND (19);
* **the periodic check** (5 s with long polling, like Java's ``checkHoldRequest``)
  finds the queue's max offset past the pull's offset: a safety net for arrivals the
  listener could not see (a message dispatched by recovery, a race with a worker
  thread).

A re-run is the pull processor's job (:attr:`PullHoldService.rerun`, set by
:mod:`.processors.pull`); it never suspends again (Java's
``executeRequestWhenWakeup`` with ``brokerAllowSuspend=false``). A connection that
closes drops its held pulls (:meth:`drop_connection`, called from the channel
listener), and at most ``max_held`` pulls are held at once: :meth:`suspend` returns
False past that and the processor answers SYSTEM_BUSY. An answer that finds the
connection's outbound queue full is not dropped and does not stall the service: a task
sends it once there is room (or ends when the connection closes).

Every time here is trio's clock (deadlines, the periodic check), so a test running
under ``trio.testing.MockClock`` drives the whole service on logical time.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from typing import TYPE_CHECKING, Callable

import attrs
import trio

from trocket.codecs.command import RemotingCommand
from trocket.remoting.errors import RemotingSendRequestError

if TYPE_CHECKING:
    from trocket.broker.store import MessageStore
    from trocket.codecs.headers import PullMessageRequestHeader
    from trocket.remoting import Connection

__all__ = ["HeldPull", "PullHoldService"]

log = logging.getLogger(__name__)

#: More distinct tag hashes than this arriving on one queue between two passes: treat
#: it as "any tag" (every held pull on the queue is re-run).
_MAX_TRACKED_TAGS = 64


@attrs.define(slots=True, eq=False)
class HeldPull:
    """One suspended pull. ``codes`` is the subscription's tag-hash set (None: ``*``);
    ``state`` is the pull's decoded header, what the pull processor re-runs it with."""

    conn: Connection
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    deadline: float  # trio clock
    codes: frozenset[int] | None = None
    state: PullMessageRequestHeader | None = None
    done: bool = False


class PullHoldService:
    """Held pulls, their wake-ups and their answers (see the module docstring)."""

    def __init__(
        self,
        store: MessageStore,
        *,
        check_interval: float = 5.0,
        max_held: int = 100_000,
    ) -> None:
        self.store = store
        self.check_interval = check_interval
        self.max_held = max_held
        #: ``rerun(held) -> RemotingCommand | None``: set by the pull processor.
        self.rerun: Callable[[HeldPull], RemotingCommand | None] | None = None
        self._table: dict[tuple[str, int], list[HeldPull]] = {}
        self._by_conn: dict[Connection, set[HeldPull]] = {}
        self._heap: list[tuple[float, int, HeldPull]] = []
        self._seq = itertools.count()
        self._held = 0
        # queue -> tag hashes arrived since the last pass (None: any)
        self._dirty: dict[tuple[str, int], set[int] | None] = {}
        self._event = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._trio_thread = -1
        self._kick_pending = False
        self._kick_lock = threading.Lock()
        self._foreign: list[tuple[str, int, int]] = []
        # the store's arrival listener, registered only while pulls are held: with none
        # held, a put makes no call here (a bound method is made once, to remove it again)
        self._listener = self.on_message_arriving
        self._listening = False
        # statistics
        self.woken_by_arrival = 0
        self.woken_by_timeout = 0
        self.woken_by_check = 0
        self.passes = 0
        self.rejected_full = 0

    # -- state -------------------------------------------------------------------------------

    @property
    def held_count(self) -> int:
        return self._held

    def held_on(self, topic: str, queue_id: int) -> int:
        return sum(1 for h in self._table.get((topic, queue_id), ()) if not h.done)

    # -- suspending ------------------------------------------------------------------------

    def suspend(self, held: HeldPull) -> bool:
        """Hold ``held`` (called from the pull processor, on the trio thread). False
        when ``max_held`` pulls are held already."""
        if self._held >= self.max_held:
            self.rejected_full += 1
            return False
        key = (held.topic, held.queue_id)
        lst = self._table.get(key)
        if lst is None:
            lst = self._table[key] = []
        lst.append(held)
        conns = self._by_conn.get(held.conn)
        if conns is None:
            conns = self._by_conn[held.conn] = set()
        conns.add(held)
        self._held += 1
        if not self._listening:
            self.store.add_listener(self._listener)
            self._listening = True
        heapq.heappush(self._heap, (held.deadline, next(self._seq), held))
        # A message may have been put (by a worker thread) between the processor's
        # read and now -- or before the listener above was registered: look again so
        # it is not missed until the periodic check.
        if self.store.get_max_offset(held.topic, held.queue_id) > held.offset:
            self._mark(key, None)
        elif len(self._heap) == 1 or held.deadline < self._heap[0][0] + 1e-9:
            self._event.set()  # the service task may be sleeping past this deadline
        return True

    def _remove(self, held: HeldPull) -> None:
        if held.done:
            return
        held.done = True
        self._held -= 1
        key = (held.topic, held.queue_id)
        lst = self._table.get(key)
        if lst is not None:
            try:
                lst.remove(held)
            except ValueError:
                pass
            if not lst:
                del self._table[key]
        conns = self._by_conn.get(held.conn)
        if conns is not None:
            conns.discard(held)
            if not conns:
                del self._by_conn[held.conn]
        if not self._held:
            self._stop_listening()

    def _stop_listening(self) -> None:
        """No pull held any more: the store's puts stop calling :meth:`on_message_arriving`."""
        if self._listening:
            self.store.remove_listener(self._listener)
            self._listening = False

    def drop_connection(self, conn: Connection) -> int:
        """Forget every pull held for ``conn`` (it closed); returns how many."""
        helds = self._by_conn.pop(conn, None)
        if not helds:
            return 0
        for held in list(helds):
            held.done = True
            self._held -= 1
            key = (held.topic, held.queue_id)
            lst = self._table.get(key)
            if lst is not None:
                lst[:] = [h for h in lst if h is not held]
                if not lst:
                    del self._table[key]
        if not self._held:
            self._stop_listening()
        return len(helds)

    # -- arrivals (any thread) ---------------------------------------------------------------

    def on_message_arriving(self, topic: str, queue_id: int, queue_offset: int, tag_hash: int, store_ts: int) -> None:
        """The store's message-arriving listener (``NotifyMessageArrivingListener``)."""
        key = (topic, queue_id)
        if key not in self._table:  # nobody waits on this queue: nothing to do
            return
        if threading.get_ident() == self._trio_thread:
            self._mark(key, tag_hash)
            return
        # another thread: hand it to trio, one run_sync_soon per burst
        with self._kick_lock:
            self._foreign.append((topic, queue_id, tag_hash))
            if self._kick_pending:
                return
            self._kick_pending = True
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._take_foreign)
            except trio.RunFinishedError:
                pass

    def _take_foreign(self) -> None:
        with self._kick_lock:
            items, self._foreign = self._foreign, []
            self._kick_pending = False
        for topic, queue_id, tag in items:
            self._mark((topic, queue_id), tag)

    def _mark(self, key: tuple[str, int], tag: int | None) -> None:
        dirty = self._dirty
        if key in dirty:
            tags = dirty[key]
            if tags is not None:
                if tag is None or len(tags) >= _MAX_TRACKED_TAGS:
                    dirty[key] = None
                else:
                    tags.add(tag)
        else:
            dirty[key] = None if tag is None else {tag}
            self._event.set()

    # -- the service task -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.get_ident()
        task_status.started()
        next_check = trio.current_time() + self.check_interval
        while True:
            if not self._dirty:
                wake_at = next_check
                heap = self._heap
                while heap and heap[0][2].done:
                    heapq.heappop(heap)
                if heap and heap[0][0] < wake_at:
                    wake_at = heap[0][0]
                with trio.move_on_at(wake_at):
                    await self._event.wait()
            self._event = trio.Event()
            self.passes += 1
            if self._dirty:
                self._process_dirty()
            now = trio.current_time()
            self._process_expired(now)
            if now >= next_check:
                self._check_all()
                next_check = now + self.check_interval
            await trio.lowlevel.checkpoint()

    def _process_dirty(self) -> None:
        dirty, self._dirty = self._dirty, {}
        store = self.store
        for key, tags in dirty.items():
            lst = self._table.get(key)
            if not lst:
                continue
            max_offset = store.get_max_offset(*key)
            for held in list(lst):
                if held.offset >= max_offset:
                    continue
                codes = held.codes
                if codes is not None and tags is not None and codes.isdisjoint(tags):
                    continue  # what arrived is not for this subscription
                self.woken_by_arrival += 1
                self._wake(held)

    def _process_expired(self, now: float) -> None:
        heap = self._heap
        while heap and (heap[0][2].done or heap[0][0] <= now):
            _, _, held = heapq.heappop(heap)
            if held.done:
                continue
            self.woken_by_timeout += 1
            self._wake(held)

    def _check_all(self) -> None:
        """``checkHoldRequest``: wake pulls whose queue moved past their offset."""
        store = self.store
        for key, lst in list(self._table.items()):
            max_offset = store.get_max_offset(*key)
            for held in list(lst):
                if held.offset < max_offset:
                    self.woken_by_check += 1
                    self._wake(held)

    def _wake(self, held: HeldPull) -> None:
        self._remove(held)
        conn = held.conn
        if not conn.is_active:
            return
        rerun = self.rerun
        try:
            response = rerun(held) if rerun is not None else None
        except Exception:
            log.exception("re-running a held pull from %s failed", conn.remote_address)
            return
        if response is None:
            return
        self.answer(conn, held.request, response)

    def answer(self, conn: Connection, request: RemotingCommand, response: RemotingCommand) -> None:
        """Send ``response`` to ``request`` from one of the connection's request
        handlers (``Connection.answer`` may wait for room: never blocks the service)."""
        try:
            conn.start_handler(conn.answer, request, response)
        except RemotingSendRequestError:
            pass  # the connection is gone: the answer is dropped

    def deadline_for(self, timeout_ms: int) -> float:
        """The trio-clock deadline ``timeout_ms`` from now (negative counts as 0)."""
        if timeout_ms <= 0:
            return trio.current_time()
        return trio.current_time() + min(timeout_ms / 1000.0, math.inf)
