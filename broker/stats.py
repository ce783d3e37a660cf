"""The broker's statistics: RocketMQ 4.9.8's ``BrokerStatsManager`` (stats items with
minute, hour and day windows), ``StoreStatsService`` (put and get TPS over 10, 60 and
600 s) and ``BrokerStats`` (the totals at midnight), as one service with a loop.

Where the counts come from. Java increments a stats item (a map lookup, often a string
built for its key) for every send and pull. Here the counters stay plain ints on the
objects that see the events, and :meth:`BrokerStatsService.refresh` gathers them once
per pass (every second, and before every snapshot):

* puts, per topic and queue: a put counts nothing itself. A pass reads each consume
  queue's entries appended since the last pass (their number from the queue's max
  offset, their record bytes from the entries' size fields,
  :meth:`~.store.consume_queue.ConsumeQueue.sizes_between`). Even two attribute
  increments per put cost the send path 1% (callgrind: the counters outgrow CPython's
  small ints, so each increment allocates). So a topic's puts are every message stored
  on its queues (a send, a retry, a delayed message delivered); Java's
  ``TOPIC_PUT_NUMS`` counts the sends only. A slave counts none (Java's slave stores
  by replication, which no put statistic sees);
* gets, per queue and consumer group: the pull processor's ``gets`` table, one entry
  per found pull (not per message), taken whole by each pass;
* sends back, per topic and group: the send-back processor's ``sent_back``;
* the broker's totals: the send and pull processors' counters (``put_messages``,
  ``found``, ``missed``, ``found_messages``), the commit log's put times.

Windows, as Java's: each stats item is sampled every 10 s (the last 7 samples: a
minute), every 10 min (7: an hour) and every hour (25: a day); a window's figures are
its sum, TPS and average per call (:class:`StatsSnapshot`). The store's TPS are sampled
every second, 601 samples kept: TPS over the last 10, 60 and 600 s. Timestamps are trio
time (:func:`trio.current_time`, in ms), so tests on a ``MockClock`` see exact windows.

Everything runs on the broker's trio thread (the sampling task, the processors' counter
updates, the snapshots), so nothing is locked; the consume queues' counters may also be
advanced by a worker thread's put, which a pass then sees on its next read.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING

import attrs
import trio

from .store.put_times import distribute, put_time_percentile

if TYPE_CHECKING:
    from .processors.pull import PullProcessor
    from .processors.send import SendProcessor
    from .processors.send_back import SendBackProcessor
    from .store import MessageStore

__all__ = [
    "BrokerStatsService",
    "StatsItem",
    "StatsItemSet",
    "StatsSnapshot",
    "StoreTps",
    "STATS_NAMES",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "QUEUE_PUT_NUMS",
    "QUEUE_PUT_SIZE",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "QUEUE_GET_NUMS",
    "QUEUE_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "BROKER_PUT_NUMS",
    "BROKER_GET_NUMS",
    "java_double",
]

log = logging.getLogger(__name__)

# ``org.apache.rocketmq.common.stats.Stats`` names served here
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE,
    QUEUE_GET_NUMS, QUEUE_GET_SIZE, SNDBCK_PUT_NUMS, BROKER_PUT_NUMS, BROKER_GET_NUMS,
)

#: ``StatsItem``'s windows: (sampling interval ms, samples kept)
MINUTE = (10_000, 7)
HOUR = (600_000, 7)
DAY = (3_600_000, 25)
#: ``StoreStatsService``: a sample a second, 600 intervals kept
STORE_SAMPLE_MS = 1000
STORE_SAMPLES = 601
#: the TPS windows of ``putTps`` & co. (seconds)
TPS_WINDOWS = (10, 60, 600)
#: Java resets the put-time distribution once a minute (``printTPSInterval``)
PUT_TIMES_PERIOD_MS = 60_000


def java_double(value: float) -> str:
    """``String.valueOf(double)``: ``0.0``, ``12.5``, ``1.0E7``, ``1.0E-4`` (the shortest
    digits that read back as the value, as Java 19+ and Python's ``repr`` choose)."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(float(value))  # always with a point in this range
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    exp10 = exponent + len(digits) - 1
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exp10}"


@attrs.define(slots=True, frozen=True)
class StatsSnapshot:
    """``StatsSnapshot``: a window's sum, TPS, average per call and calls."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


_EMPTY = StatsSnapshot()


def _window(samples: deque[tuple[float, int, int]]) -> StatsSnapshot:
    """``computeStatsData`` over (timestamp ms, times, value) samples."""
    if not samples:
        return _EMPTY
    t0, times0, value0 = samples[0]
    t1, times1, value1 = samples[-1]
    total = value1 - value0
    span = t1 - t0
    tps = total * 1000.0 / span if span else 0.0
    calls = times1 - times0
    return StatsSnapshot(total, tps, total / calls if calls > 0 else 0.0, calls)


class StatsItem:
    """``StatsItem``: a cumulative value and call count, with its three windows."""

    __slots__ = ("value", "times", "minute", "hour", "day")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self.minute: deque[tuple[float, int, int]] = deque(maxlen=MINUTE[1])
        self.hour: deque[tuple[float, int, int]] = deque(maxlen=HOUR[1])
        self.day: deque[tuple[float, int, int]] = deque(maxlen=DAY[1])

    def add(self, value: int, times: int) -> None:
        self.value += value
        self.times += times

    def sample(self, samples: deque[tuple[float, int, int]], now_ms: float, interval_ms: int) -> None:
        """``samplingInSeconds`` & co.: the first sample of a window is preceded by a
        zero one an interval earlier, as Java's."""
        if not samples:
            samples.append((now_ms - interval_ms, 0, 0))
        samples.append((now_ms, self.times, self.value))

    def in_minute(self) -> StatsSnapshot:
        return _window(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return _window(self.hour)

    def in_day(self) -> StatsSnapshot:
        return _window(self.day)


class StatsItemSet:
    """``StatsItemSet``: a stats name's items by key (``topic``, ``topic@group``, ...)."""

    __slots__ = ("name", "items")

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: dict[str, StatsItem] = {}

    def add(self, key: str, value: int, times: int) -> None:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = StatsItem()
        item.add(value, times)

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def sample(self, window: str, now_ms: float, interval_ms: int) -> None:
        for item in self.items.values():
            item.sample(getattr(item, window), now_ms, interval_ms)

    def delete(self, matches: Callable[[str], bool]) -> None:
        for key in [k for k in self.items if matches(k)]:
            del self.items[key]


class StoreTps:
    """One of ``StoreStatsService``'s sampled totals: (timestamp ms, total) once a
    second, the last 601 kept; :meth:`tps` over the last N seconds (None until N
    seconds of samples exist, as Java prints an empty string then)."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque(maxlen=STORE_SAMPLES)

    def sample(self, now_ms: float, total: int) -> None:
        self.samples.append((now_ms, total))

    def tps(self, seconds: int) -> float | None:
        samples = self.samples
        if len(samples) <= seconds:
            return None
        t0, v0 = samples[-(seconds + 1)]
        t1, v1 = samples[-1]
        return (v1 - v0) / (t1 - t0) * 1000.0 if t1 > t0 else 0.0

    def text(self) -> str:
        """Java's ``"<10 s> <60 s> <600 s>"`` (an empty part for a window not yet filled)."""
        return " ".join("" if v is None else java_double(v) for v in (self.tps(s) for s in TPS_WINDOWS))


def _now_ms() -> float:
    return trio.current_time() * 1000.0


def seconds_to_midnight(now: float | None = None) -> float:
    """Seconds from ``now`` (epoch seconds) to the next local midnight
    (``UtilAll.computeNextMorningTimeMillis``)."""
    if now is None:
        now = time.time()
    lt = time.localtime(now)
    midnight = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    return max(1.0, midnight - now)


def _next_after(at: float, step: float, now: float) -> float:
    """The first ``at + k * step`` (k >= 1) later than ``now``: the schedule kept, the
    missed points skipped."""
    at += step
    if at <= now:
        at += math.floor((now - at) / step + 1) * step
    return at


@attrs.define(slots=True, eq=False)
class _Seen:
    """How far a pass read a consume queue (the next queue offset to count)."""

    cq: object
    offset: int


class BrokerStatsService:
    """The statistics of one broker (see the module docstring). Built with the store;
    the controller points ``send``, ``pull`` and ``send_back`` at its processors, then
    starts :meth:`run` in its services nursery."""

    def __init__(self, store: MessageStore, cluster: str, *, clock: Callable[[], float] = _now_ms) -> None:
        self.store = store
        self.cluster = cluster
        self.clock = clock
        self.send: SendProcessor | None = None
        self.pull: PullProcessor | None = None
        self.send_back: SendBackProcessor | None = None
        self.sets: dict[str, StatsItemSet] = {name: StatsItemSet(name) for name in STATS_NAMES}
        # StoreStatsService: totals since start and their samples
        self.put_total = 0
        self.put_size_total = 0
        self.put_tps = StoreTps()
        self.get_found_tps = StoreTps()
        self.get_miss_tps = StoreTps()
        self.get_transferred_tps = StoreTps()
        # BrokerStats: totals at the last two midnights
        self.put_total_yesterday_morning = 0
        self.put_total_today_morning = 0
        self.get_total_yesterday_morning = 0
        self.get_total_today_morning = 0
        # put times of the last complete minute (putMessageDistributeTime, putLatency99)
        self.put_times_puts = 0
        self.put_times_slow: dict[int, int] = {}
        self._put_times_lock_count = store.commit_log.lock_count
        self._seen: dict[tuple[str, int], _Seen] = {}
        self._broker_put_seen = 0
        self._broker_get_seen = 0
        self.started_ms = clock()
        self._baseline()

    # -- gathering --------------------------------------------------------------------

    def _baseline(self) -> None:
        """What the queues held at start is not put since start."""
        for key, cq in self.store.queues._queues.items():
            self._seen[key] = _Seen(cq, cq.max_offset)

    def refresh(self) -> None:
        """Add what the counters gained since the last call to the stats items and
        the store totals (cheap: once per queue, per found-pull key and per send back)."""
        self._refresh_puts()
        pull = self.pull
        if pull is not None:
            gets, pull.gets = pull.gets, {}
            if gets:
                self._add_gets(gets)
        back = self.send_back
        if back is not None and back.sent_back:
            sent, back.sent_back = back.sent_back, {}
            items = self.sets[SNDBCK_PUT_NUMS]
            for (topic, group), n in sent.items():
                items.add(f"{topic}@{group}", n, n)
        broker_key = self.cluster
        if self.send is not None:
            n = self.send.put_messages - self._broker_put_seen
            if n:
                self._broker_put_seen += n
                self.sets[BROKER_PUT_NUMS].add(broker_key, n, n)
        if pull is not None:
            n = pull.found_messages - self._broker_get_seen
            if n:
                self._broker_get_seen += n
                self.sets[BROKER_GET_NUMS].add(broker_key, n, n)

    def _refresh_puts(self) -> None:
        seen = self._seen
        counting = not self.store.slave
        sets = self.sets
        topic_nums, topic_size = sets[TOPIC_PUT_NUMS], sets[TOPIC_PUT_SIZE]
        queue_nums, queue_size = sets[QUEUE_PUT_NUMS], sets[QUEUE_PUT_SIZE]
        queues = self.store.queues._queues
        for key, cq in queues.items():
            last = seen.get(key)
            if last is None or last.cq is not cq:
                # a queue made since the last pass (a new topic, or one deleted and made again)
                seen[key] = last = _Seen(cq, 0)
            end = cq.max_offset
            if end <= last.offset:
                continue
            start, last.offset = last.offset, end
            if not counting:
                continue
            dn, ds = cq.sizes_between(start, end)
            if not dn:
                continue
            topic, queue_id = key
            self.put_total += dn
            self.put_size_total += ds
            # Java: one call per send; here per message (the queues count messages)
            topic_nums.add(topic, dn, dn)
            topic_size.add(topic, ds, dn)
            qkey = f"{topic}@{queue_id}"
            queue_nums.add(qkey, dn, dn)
            queue_size.add(qkey, ds, dn)
        if len(seen) > len(queues):
            for key in [k for k in seen if k not in queues]:
                del seen[key]

    def _add_gets(self, gets: dict[tuple[str, int, str], list[int]]) -> None:
        sets = self.sets
        group_nums, group_size = sets[GROUP_GET_NUMS], sets[GROUP_GET_SIZE]
        queue_nums, queue_size = sets[QUEUE_GET_NUMS], sets[QUEUE_GET_SIZE]
        for (topic, queue_id, group), (count, size) in gets.items():
            key = f"{topic}@{group}"
            group_nums.add(key, count, 1)
            group_size.add(key, size, 1)
            qkey = f"{topic}@{queue_id}@{group}"
            queue_nums.add(qkey, count, 1)
            queue_size.add(qkey, size, 1)

    # -- sampling ---------------------------------------------------------------------

    def sample_store(self, now_ms: float | None = None) -> None:
        """``StoreStatsService.sampling``: one sample of each store total."""
        if now_ms is None:
            now_ms = self.clock()
        self.refresh()
        pull = self.pull
        self.put_tps.sample(now_ms, self.put_total)
        self.get_found_tps.sample(now_ms, pull.found if pull is not None else 0)
        self.get_miss_tps.sample(now_ms, pull.missed if pull is not None else 0)
        self.get_transferred_tps.sample(now_ms, pull.found_messages if pull is not None else 0)

    def sample_items(self, window: str, now_ms: float | None = None) -> None:
        """One sample of every stats item's ``window`` (``minute``, ``hour`` or ``day``)."""
        if now_ms is None:
            now_ms = self.clock()
        self.refresh()
        interval = {"minute": MINUTE, "hour": HOUR, "day": DAY}[window][0]
        for items in self.sets.values():
            items.sample(window, now_ms, interval)

    def rotate_put_times(self) -> None:
        """The last minute's put times become the reported ones (Java resets its
        buckets once a minute)."""
        log_ = self.store.commit_log
        count = log_.lock_count
        self.put_times_puts = count - self._put_times_lock_count
        self._put_times_lock_count = count
        self.put_times_slow = log_.put_times.take()

    def record_midnight(self) -> None:
        """``BrokerStats.record``: today's totals so far become the morning's."""
        self.refresh()
        self.put_total_yesterday_morning = self.put_total_today_morning
        self.get_total_yesterday_morning = self.get_total_today_morning
        self.put_total_today_morning = self.put_total
        self.get_total_today_morning = self.get_total_now
        log.info(
            "yesterday put message total: %d, get message total: %d",
            self.put_total_today_morning - self.put_total_yesterday_morning,
            self.get_total_today_morning - self.get_total_yesterday_morning,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample until cancelled: the store totals every second, the stats items'
        windows every 10 s / 10 min / hour, the put times every minute, the daily
        totals at local midnight."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sampling)
            nursery.start_soon(self._midnights)
            task_status.started()

    async def _sampling(self) -> None:
        """A pass a second; each window's sample when its interval has passed. After a
        stall (a long blocking call, a suspended process) the missed passes are not made
        up: the next one samples once and the TPS spans the gap."""
        step = STORE_SAMPLE_MS / 1000.0
        start = trio.current_time()
        next_at = start + step
        due = {
            "minute": start + MINUTE[0] / 1000.0,
            "hour": start + HOUR[0] / 1000.0,
            "day": start + DAY[0] / 1000.0,
            "put_times": start + PUT_TIMES_PERIOD_MS / 1000.0,
        }
        periods = {"minute": MINUTE[0], "hour": HOUR[0], "day": DAY[0], "put_times": PUT_TIMES_PERIOD_MS}
        while True:
            await trio.sleep_until(next_at)
            t = trio.current_time()
            next_at = _next_after(next_at, step, t)
            now = self.clock()
            try:
                self.sample_store(now)
                for name, at in due.items():
                    if t + 1e-9 < at:
                        continue
                    due[name] = _next_after(at, periods[name] / 1000.0, t)
                    if name == "put_times":
                        self.rotate_put_times()
                    else:
                        self.sample_items(name, now)
            except Exception:  # a statistic must never stop the broker
                log.exception("statistics sampling failed")

    async def _midnights(self) -> None:
        while True:
            await trio.sleep(seconds_to_midnight())
            try:
                self.record_midnight()
            except Exception:
                log.exception("recording the daily totals failed")

    # -- reading ----------------------------------------------------------------------

    @property
    def get_total_now(self) -> int:
        """``getMessageTransferedMsgCount``: messages delivered by pulls since start."""
        return self.pull.found_messages if self.pull is not None else 0

    def item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        """``BrokerStatsManager.getStatsItem``: None for an unknown name or key."""
        items = self.sets.get(stats_name)
        return items.get(stats_key) if items is not None else None

    def group_get_tps(self, group: str, topic: str) -> float:
        """``tpsGroupGetNums``: the group's messages per second on ``topic`` over the last minute."""
        item = self.item(GROUP_GET_NUMS, f"{topic}@{group}")
        return item.in_minute().tps if item is not None else 0.0

    def put_distribution(self) -> list[int]:
        return distribute(self.put_times_puts, self.put_times_slow)

    def put_latency(self, px: float) -> float:
        return put_time_percentile(self.put_times_puts, self.put_times_slow, px)

    def topic_items(self, stats_name: str) -> Iterator[tuple[str, StatsItem]]:
        return iter(list(self.sets[stats_name].items.items()))
