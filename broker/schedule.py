"""ScheduleMessageService: delayed delivery through ``SCHEDULE_TOPIC_XXXX``.

RocketMQ 4.9.8's ``CommitLog.asyncPutMessage`` delay branch plus
``store.schedule.ScheduleMessageService``:

* **the table** -- ``messageDelayLevel`` (broker.conf), default
  ``"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"``: level ``n`` is the
  ``n``-th entry, ``<number><unit>`` with unit ``s``, ``m``, ``h`` or ``d`` as Java, and
  (a trocket extension, which Java's parser rejects) ``ms``. The number of entries is
  the max level. A bad table is a :class:`~trocket.broker.config.DelayLevelError` naming the entry.
* **the put path** -- :meth:`ScheduleMessageService.rewrite`: a message whose ``DELAY``
  property is a level above 0, and that is not a prepared or rolled-back transactional
  message, is stored on ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with the level
  clamped to the max (``DELAY`` put again) and ``REAL_TOPIC`` / ``REAL_QID`` put, in the
  message's properties map (a :class:`~trocket.codecs.java_hashmap.JavaHashMap`: the
  send processor's, with ``CLUSTER`` and ``WAIT``, or the send-back's), written in
  Java's HashMap order, as Java's delay branch writes it. The store gives such a record its deliver
  time, store time + the level's delay (``computeDeliverTimestamp``), as its
  consume-queue tags code, on put and on recovery alike (:mod:`.store.commit_log`).
  The send processor rewrites single sends (10/310) that carry ``DELAY`` (a batch with
  ``DELAY`` is MESSAGE_ILLEGAL, as Java's ``asyncPutMessages``) and send-back rewrites
  its retry copies; a DLQ copy is never delayed.
* **delivery** -- :meth:`ScheduleMessageService.run`: one task per level reads its
  queue from the level's offset; an entry whose deliver time has come is looked up in
  the commit log and put on its real topic and queue (``messageTimeup``): body, flag,
  sysFlag, born time and host, reconsume times as stored, the properties string read
  into a fresh map and written back (Java's order) minus ``DELAY``, ``REAL_TOPIC`` and
  ``REAL_QID``, a new commit-log record (new offset
  message id and queue offset on the real topic, TAGS hash as tags code, no flush wait).
  Then the task sleeps until the next entry is due -- or, with nothing left, until a
  message arrives on its queue (the store's arrival listener wakes it; a new entry is
  never due earlier than the head of its level's queue, but an idle level waits on the
  listener only). A deliver time further away than the level's delay (the clock went
  back) is "now", as Java's ``correctDeliverTimestamp``.
* **offsets** -- ``<store>/config/delayOffset.json``, Java's
  ``{"offsetTable":{"<level>":<next queue offset>}}`` (fastjson's unquoted keys are
  read too), written atomically every ``flushDelayOffsetInterval`` (10 s) and at
  shutdown; loaded and clamped into each queue's ``[min, max]`` at start
  (``correctDelayOffset``). A crash re-delivers what was delivered since the last write:
  at least once, as Java.

Differences from Java, on purpose: the delivered message's properties lose ``DELAY``,
``REAL_TOPIC`` and ``REAL_QID`` (4.9.8 builds the stored string *before* clearing
``DELAY``, so its consumers see all three; apache/rocketmq#11037); the periodic write of
``delayOffset.json`` only counts deliveries the commit log has flushed (the final one,
after the store's own final flush, counts all), so a crash cannot record as delivered a
re-put that was lost with the commit log's unflushed tail; a due entry whose record has
no usable ``REAL_TOPIC``/``REAL_QID`` or cannot be stored (illegal) is skipped with an
error log instead of being retried forever; the level tasks sleep until the next due
time instead of polling every 100 ms.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable

import attrs
import trio

from trocket.codecs.errors import MessageDecodeError, MessageEncodeError
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    decode_properties_bytes,
    utf8,
    without_properties_bytes,
)
from trocket.codecs.message.record import decode_record, record_size
from trocket.codecs.message.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from trocket.codecs.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC

from .config import BrokerConfig, parse_delay_levels
from .store import MessageInner, MessageStore, PutMessageError, StoreClosedError
from .store.messages import properties_map
from .store.atomic_file import write_json_atomic
from .store.commit_log import CreateSegmentError
from .store.errors import ConfigLoadError

__all__ = [
    "SCHEDULE_TOPIC",
    "ScheduleMessageService",
    "TrioEpochClock",
    "delivered_properties",
    "schedule_properties",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = RMQ_SYS_SCHEDULE_TOPIC
#: An idle level re-reads its queue this often even without a wake-up (Java's
#: ``DELAY_FOR_A_PERIOD``), and a waiting one at least this often: a safety net, not the
#: way messages are noticed.
IDLE_RECHECK = 10.0
#: After a failed put (disk full...), a level retries the same entry this much later.
RETRY_AFTER_FAILURE = 1.0
#: Entries one level delivers before it lets other tasks run.
DELIVER_BATCH = 256

_UNQUOTED_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")
#: what a delivered message loses (on purpose: see "Differences from Java")
_STRIP_ON_DELIVERY = frozenset((PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID))
_STRIP_ON_DELIVERY_B = frozenset(k.encode() for k in _STRIP_ON_DELIVERY)
_INF = float("inf")


def wall_clock_ms() -> int:
    """The real clock: epoch milliseconds, what the store stamps records with."""
    return time.time_ns() // 1_000_000


class TrioEpochClock:
    """Epoch ms that advance with trio's clock, for tests under
    ``trio.testing.MockClock``: the wall clock read at the first call plus trio's time
    elapsed since, but never behind the wall clock itself (the store stamps records
    with it: a clock behind a record's store time would look like the clock going
    back). A level that sleeps until its due time wakes reading exactly that time.
    With trio's real clock it is a wall clock blind to the system clock being set
    back, which is why the broker uses :func:`wall_clock_ms`. Call it in ``trio.run``."""

    __slots__ = ("_wall0", "_trio0")

    def __init__(self) -> None:
        self._wall0: int | None = None
        self._trio0 = 0.0

    def __call__(self) -> int:
        now = trio.current_time()
        wall = wall_clock_ms()
        if self._wall0 is None:
            self._wall0, self._trio0 = wall, now
        # the epsilon absorbs float error in a sleep of exactly (due - now) / 1000 s
        return max(wall, self._wall0 + int((now - self._trio0) * 1000 + 1e-6))


def _delay_level(value: str | None) -> int:
    """``Message.getDelayTimeLevel``: the level, 0 when absent; not a number -> 0 (Java
    would fail the put with a NumberFormatException)."""
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def schedule_properties(props: JavaHashMap, level: int | None, real_topic: str, real_queue_id: int) -> JavaHashMap:
    """The properties of a delayed message's schedule record: a copy of ``props`` with
    ``DELAY`` put again when clamped (``level``; None: as it is), ``REAL_TOPIC`` and
    ``REAL_QID`` put -- Java's delay branch on the message's map (a present key keeps its
    place, as a HashMap's put)."""
    m = props.copy()
    if level is not None:
        m[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    m[PROPERTY_REAL_TOPIC] = real_topic
    m[PROPERTY_REAL_QUEUE_ID] = str(real_queue_id)
    return m


def delivered_properties(props: bytes) -> bytes:
    """The re-put's properties: the schedule record's string read into a fresh map and
    written back, as ``messageTimeup`` does, without ``DELAY``, ``REAL_TOPIC`` and
    ``REAL_QID``. A string that is not UTF-8 (Java would have replaced its bytes) keeps
    its bytes, those three items left out."""
    if not props:
        return b""
    try:
        text = props.decode("utf-8")
    except UnicodeDecodeError:
        return without_properties_bytes(props, _STRIP_ON_DELIVERY_B)
    return JavaHashMap.from_properties(text).to_properties(without=_STRIP_ON_DELIVERY).encode("utf-8")


@attrs.define(slots=True, eq=False)
class _Level:
    level: int
    delay_ms: int
    #: next queue offset to deliver (Java's offsetTable value)
    offset: int = 0
    #: the offset as far as the commit log has flushed the re-puts before it
    durable: int = 0
    #: (next offset, end of the re-put record) of deliveries not known to be flushed yet
    unflushed: deque = attrs.field(factory=deque)
    #: clock ms (epoch) the level task sleeps until (inf: until an arrival)
    deadline: float = _INF
    wake: trio.Event = attrs.field(factory=trio.Event)
    delivered: int = 0
    #: times the level task read its queue (idle levels: once per arrival or IDLE_RECHECK)
    passes: int = 0

    @property
    def queue_id(self) -> int:
        return self.level - 1  # delayLevel2QueueId


class ScheduleMessageService:
    """Delayed delivery for one store (see the module docstring).

    ``config`` is the broker's (its ``message_delay_level`` and
    ``flush_delay_offset_interval_ms``); None means the defaults, RocketMQ's. ``clock``
    returns epoch ms (see the module docstring); it is read on every pass, so it may
    be replaced while the service runs.
    """

    def __init__(
        self, store: MessageStore, config: BrokerConfig | None = None, *, clock: Callable[[], int] = wall_clock_ms
    ) -> None:
        if config is None:
            config = BrokerConfig()
        self.clock = clock
        text = config.message_delay_level
        self.delays_ms = parse_delay_levels(text)
        self.max_level = len(self.delays_ms)
        self.flush_interval = config.flush_delay_offset_interval_ms / 1000.0
        self.store = store
        if tuple(store.config.delay_levels_ms) != self.delays_ms:
            # the store computes deliver times with its own copy of the table
            log.warning("store opened with another delay table; using %s from now on", text)
            store.config.delay_levels_ms = self.delays_ms
        self.path = os.path.join(store.config.config_dir, "delayOffset.json")
        self.levels = {
            level: _Level(level, delay) for level, delay in enumerate(self.delays_ms, 1)
        }
        self._persist_lock = threading.Lock()
        self._written: dict[int, int] | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._trio_thread = -1
        self.load()

    # -- the put path ---------------------------------------------------------------------

    def rewrite(self, msg: MessageInner) -> MessageInner:
        """``msg`` as the store must keep it: moved to ``SCHEDULE_TOPIC_XXXX`` when its
        ``DELAY`` level is above 0 and it is not a prepared/rolled-back transactional
        message; otherwise ``msg`` itself."""
        try:
            props = properties_map(msg)
        except UnicodeDecodeError:
            return msg  # the store refuses it as it would have
        level = _delay_level(props.get(PROPERTY_DELAY_TIME_LEVEL))
        if level <= 0:
            return msg
        tran = msg.sys_flag & TRANSACTION_ROLLBACK_TYPE
        if tran != TRANSACTION_NOT_TYPE and tran != TRANSACTION_COMMIT_TYPE:
            return msg
        clamped = level > self.max_level
        level = min(level, self.max_level)
        held = schedule_properties(props, level if clamped else None, msg.topic, msg.queue_id)
        try:
            stored = utf8(held.to_properties(), "properties")
        except MessageEncodeError:
            return msg
        return attrs.evolve(
            msg,
            topic=SCHEDULE_TOPIC,
            queue_id=level - 1,
            properties=held,
            properties_bytes=stored,
            tags_code=None,  # the store makes it the deliver time
        )

    # -- offsets ----------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``delayOffset.json`` (absent: every level from 0), then clamp each
        offset into its queue (``correctDelayOffset``)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        table: dict[int, int] = {}
        if text.strip():
            try:
                try:
                    data = json.loads(text)
                except json.JSONDecodeError:
                    data = json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))  # fastjson form
                table = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
            except (ValueError, AttributeError, TypeError) as exc:
                raise ConfigLoadError(f"{self.path}: {exc}") from None
        store = self.store
        for level, st in self.levels.items():
            offset = table.get(level, 0)
            lo = store.get_min_offset(SCHEDULE_TOPIC, st.queue_id)
            hi = store.get_max_offset(SCHEDULE_TOPIC, st.queue_id)
            if offset < lo or offset > hi:
                corrected = min(max(offset, lo), hi)
                if level in table:
                    log.error(
                        "schedule queue %d offset %d outside [%d, %d]: corrected to %d",
                        st.queue_id, offset, lo, hi, corrected,
                    )
                offset = corrected
            st.offset = st.durable = offset
            st.unflushed.clear()

    def offset_table(self, *, durable_only: bool = False) -> dict[int, int]:
        """level -> next queue offset to deliver (``durable_only``: as far as the
        commit log has flushed the deliveries). On the trio thread while running."""
        if not durable_only:
            return {level: st.offset for level, st in self.levels.items()}
        flushed = self.store.flushed_offset if not self.store.closed else 1 << 62
        for st in self.levels.values():
            self._settle(st, flushed)
        return {level: st.durable for level, st in self.levels.items()}

    @staticmethod
    def _settle(st: _Level, flushed: int) -> None:
        pending = st.unflushed
        while pending and pending[0][1] <= flushed:
            st.durable = pending.popleft()[0]

    def persist(self, *, durable_only: bool = True) -> None:
        """Write ``delayOffset.json`` atomically. ``durable_only=False`` (shutdown, after
        the store's final flush) records every delivery. Not while :meth:`run` runs in
        another thread (its own periodic write takes the table on the trio thread)."""
        self._write(self.offset_table(durable_only=durable_only))

    def _write(self, table: dict[int, int]) -> None:
        with self._persist_lock:
            if table == self._written and os.path.exists(self.path):
                return
            write_json_atomic(self.path, {"offsetTable": {str(k): v for k, v in sorted(table.items())}})
            self._written = table

    def offsets_and_max(self) -> list[tuple[int, int, int]]:
        """``buildRunningStats``' figures: (level, delivered offset, the level queue's
        max offset) per level (runtime info's ``scheduleMessageOffset_<level>``)."""
        store = self.store
        if store.closed:
            return []
        return [(level, st.offset, store.get_max_offset(SCHEDULE_TOPIC, st.queue_id)) for level, st in self.levels.items()]

    # -- arrivals (the store's listener, any thread) -------------------------------------------

    def on_message_arriving(self, topic: str, queue_id: int, queue_offset: int, tag: int, store_ts: int) -> None:
        if topic != SCHEDULE_TOPIC:
            return
        st = self.levels.get(queue_id + 1)
        if st is None:
            return
        if threading.get_ident() == self._trio_thread:
            self._arrived(st, tag)
            return
        token = self._token
        if token is not None:
            try:
                token.run_sync_soon(self._arrived, st, tag)
            except trio.RunFinishedError:
                pass

    @staticmethod
    def _arrived(st: _Level, deliver_at: int) -> None:
        if deliver_at < st.deadline:
            st.wake.set()

    # -- delivery -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One task per level plus the periodic offset write, until cancelled. The
        shutdown write (:meth:`persist` with ``durable_only=False``) is the caller's,
        after the store's final flush."""
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.get_ident()
        self.store.add_listener(self.on_message_arriving, SCHEDULE_TOPIC)  # its topic's only
        try:
            async with trio.open_nursery() as nursery:
                for st in self.levels.values():
                    nursery.start_soon(self._level_loop, st)
                nursery.start_soon(self._persist_loop)
                task_status.started()
        finally:
            self._token = None
            self._trio_thread = -1
            self.store.remove_listener(self.on_message_arriving)

    async def _persist_loop(self) -> None:
        while True:
            await trio.sleep(self.flush_interval)
            try:
                table = self.offset_table(durable_only=True)
                await trio.to_thread.run_sync(self._write, table)
            except Exception:
                log.exception("writing %s failed", self.path)

    async def _level_loop(self, st: _Level) -> None:
        while True:
            st.wake = trio.Event()
            st.passes += 1
            try:
                next_due = self._deliver_due(st)
            except StoreClosedError:
                return
            except Exception:
                log.exception("schedule level %d: delivery failed at offset %d", st.level, st.offset)
                next_due = self.clock() + int(RETRY_AFTER_FAILURE * 1000)
            if next_due is None:
                st.deadline = _INF
                timeout = IDLE_RECHECK
            else:
                st.deadline = next_due
                # capped: the due time is on self.clock, the sleep on trio's; re-read
                # after at most IDLE_RECHECK in case the wall clock was set forward
                timeout = min(max(0.0, (next_due - self.clock()) / 1000.0), IDLE_RECHECK)
            if timeout <= 0:
                await trio.lowlevel.checkpoint()
                continue
            with trio.move_on_after(timeout):
                await st.wake.wait()

    def _deliver_due(self, st: _Level) -> int | None:
        """Deliver what is due from ``st.offset`` on (at most :data:`DELIVER_BATCH`);
        the clock ms when the next entry is due, or None when the queue is done."""
        store = self.store
        if store.closed:
            raise StoreClosedError("message store is shut down")
        qid = st.queue_id
        lo = store.get_min_offset(SCHEDULE_TOPIC, qid)
        hi = store.get_max_offset(SCHEDULE_TOPIC, qid)
        if st.offset < lo:
            log.error("schedule queue %d offset %d below its min %d: skipped ahead", qid, st.offset, lo)
            st.offset = lo
        if st.offset > hi:
            log.error("schedule queue %d offset %d above its max %d: moved back", qid, st.offset, hi)
            st.offset = hi
        self._settle(st, store.flushed_offset)
        budget = DELIVER_BATCH
        while st.offset < hi:
            if not budget:
                return self.clock()  # more is due: come back after a checkpoint
            entry = store.get_queue_entry(SCHEDULE_TOPIC, qid, st.offset)
            if entry is None:
                st.offset += 1
                continue
            phys, size, deliver_at = entry
            now = self.clock()
            if deliver_at > now + st.delay_ms:  # correctDeliverTimestamp: the clock went back
                deliver_at = now
            if deliver_at > now:
                return deliver_at
            end = self._deliver(st, phys, size)
            if end is False:
                return self.clock() + int(RETRY_AFTER_FAILURE * 1000)  # same entry again
            st.offset += 1
            st.unflushed.append((st.offset, end or 0))
            budget -= 1
        return None

    def _deliver(self, st: _Level, phys: int, size: int) -> int | None | bool:
        """Put the record at ``phys`` on its real topic (``messageTimeup``). The end of
        the new record; None when there was nothing to put (gone, unusable); False when
        the put failed and must be retried."""
        store = self.store
        view = store.commit_log.get_message(phys, size)
        if view is None:
            log.warning("schedule level %d: record at %d is gone", st.level, phys)
            return None
        try:
            msg, _ = decode_record(view, decompress=False)
        except MessageDecodeError as exc:
            log.error("schedule level %d: record at %d does not decode: %s", st.level, phys, exc)
            return None
        real_topic = msg.properties.get(PROPERTY_REAL_TOPIC)
        try:
            real_qid = int(msg.properties.get(PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            real_qid = -1
        if not real_topic or real_qid < 0:
            log.error(
                "schedule level %d: record at %d has no usable REAL_TOPIC/REAL_QID (%r, %r): skipped",
                st.level, phys, real_topic, msg.properties.get(PROPERTY_REAL_QUEUE_ID),
            )
            return None
        if real_topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("[BUG] the real topic of schedule msg at %d is %s, discard the msg", phys, real_topic)
            return None
        topic_len = len(msg.topic.encode("utf-8"))
        props_at = record_size(len(msg.body), topic_len, 0, msg.sys_flag)
        props = delivered_properties(bytes(view[props_at:]))
        inner = MessageInner(
            topic=real_topic,
            body=msg.body,
            queue_id=real_qid,
            flag=msg.flag,
            properties=decode_properties_bytes(props),
            properties_bytes=props,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            reconsume_times=msg.reconsume_times,
        )
        try:
            result = store.put_message(inner)
        except StoreClosedError:
            raise
        except CreateSegmentError as exc:
            log.error("schedule level %d: re-put of %d failed (%s): retrying", st.level, phys, exc)
            return False
        except PutMessageError as exc:
            log.error("schedule level %d: record at %d cannot be re-put (%s): skipped", st.level, phys, exc)
            return None
        st.delivered += 1
        return result.end_offset
