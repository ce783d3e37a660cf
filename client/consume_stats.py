"""A push consumer's per-topic pull and consume rates, as Java 4.9.8's
``ConsumerStatsManager`` keeps them for GET_CONSUMER_RUNNING_INFO's ``statusTable``
(what mqadmin ``consumerStatus`` prints under ``#Consumer RT&TPS#``).

Per topic five counters (Java's ``StatsItem``: a running ``value`` and ``times``): pull
RT (ms per FOUND pull), pull TPS (messages per FOUND pull), consume RT (ms per listener
call), consume OK and consume failed (messages per call). The consume and pull paths only
add to the counters' two ints (no call, no allocation: :class:`StatsItem` is a plain
slotted object they hold); :meth:`ConsumerStatsManager.run` samples them as Java's
``StatsItemSet`` does: every 10 s into a minute window of 7 samples, every 10 min into an
hour window of 7 (an item's first sample is preceded by a zero one 10 s / 10 min
earlier). A snapshot of a window is Java's ``computeStatsData``: sum = last value - first,
tps = sum per second between them, avgpt = sum per call. :class:`ConsumeStatus` is
``consumeStatus``: pullRT, pullTPS, consumeOKTPS and consumeFailedTPS from the minute,
consumeRT from the minute (the hour's when the minute summed 0), consumeFailedMsgs the
hour's sum.
"""

from __future__ import annotations

import time
from collections import deque

import attrs
import trio

from trocket.codecs.bodies.running import ConsumeStatus

__all__ = ["ConsumerStatsManager", "StatsItem", "TopicStats", "MINUTE_SAMPLING_S", "HOUR_SAMPLING_S"]

#: ``StatsItemSet``'s sampling periods and the samples a window keeps
MINUTE_SAMPLING_S = 10.0
HOUR_SAMPLING_S = 600.0
_WINDOW = 7

_Sample = tuple[int, int, int]  # (epoch ms, times, value): Java's CallSnapshot


def _window() -> deque[_Sample]:
    return deque(maxlen=_WINDOW)


@attrs.define(slots=True, eq=False)
class StatsItem:
    """``StatsItem``: the hot paths do ``item.value += n; item.times += 1``."""

    value: int = 0
    times: int = 0
    minute: deque[_Sample] = attrs.field(factory=_window)
    hour: deque[_Sample] = attrs.field(factory=_window)

    def sample(self, window: deque[_Sample], now_ms: int, period_ms: int) -> None:
        """``samplingInSeconds`` / ``samplingInMinutes``."""
        if not window:
            window.append((now_ms - period_ms, 0, 0))
        window.append((now_ms, self.times, self.value))


def snapshot(window: deque[_Sample]) -> tuple[int, float, float]:
    """``computeStatsData``: (sum, tps, avgpt) between the window's first and last sample."""
    if not window:
        return 0, 0.0, 0.0
    (t0, n0, v0), (t1, n1, v1) = window[0], window[-1]
    total = v1 - v0
    calls = n1 - n0
    return total, total * 1000.0 / (t1 - t0), (total / calls if calls > 0 else 0.0)


@attrs.define(slots=True, eq=False)
class TopicStats:
    """The five items of one topic (Java keys them ``topic@group``)."""

    pull_rt: StatsItem = attrs.field(factory=StatsItem)
    pull_tps: StatsItem = attrs.field(factory=StatsItem)
    consume_rt: StatsItem = attrs.field(factory=StatsItem)
    consume_ok: StatsItem = attrs.field(factory=StatsItem)
    consume_failed: StatsItem = attrs.field(factory=StatsItem)

    def items(self) -> tuple[StatsItem, ...]:
        return self.pull_rt, self.pull_tps, self.consume_rt, self.consume_ok, self.consume_failed

    def status(self) -> ConsumeStatus:
        """``ConsumerStatsManager.consumeStatus``."""
        rt_sum, _, consume_rt = snapshot(self.consume_rt.minute)
        if rt_sum == 0:
            consume_rt = snapshot(self.consume_rt.hour)[2]
        return ConsumeStatus(
            pull_rt=snapshot(self.pull_rt.minute)[2],
            pull_tps=snapshot(self.pull_tps.minute)[1],
            consume_rt=consume_rt,
            consume_ok_tps=snapshot(self.consume_ok.minute)[1],
            consume_failed_tps=snapshot(self.consume_failed.minute)[1],
            consume_failed_msgs=snapshot(self.consume_failed.hour)[0],
        )


class ConsumerStatsManager:
    """One consumer's :class:`TopicStats` by topic (the topic as the broker knows it)."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicStats] = {}

    def topic(self, topic: str) -> TopicStats:
        """The topic's counters (made on first use; the hot paths fetch them once)."""
        got = self._topics.get(topic)
        if got is None:
            got = self._topics[topic] = TopicStats()
        return got

    def status(self, topic: str) -> ConsumeStatus:
        """The topic's :class:`ConsumeStatus` (all zero for a topic not seen yet)."""
        got = self._topics.get(topic)
        return ConsumeStatus() if got is None else got.status()

    def sample(self, now_ms: int, *, hour: bool) -> None:
        """One sampling pass: every item's minute window (and its hour window)."""
        minute_ms, hour_ms = int(MINUTE_SAMPLING_S * 1000), int(HOUR_SAMPLING_S * 1000)
        for stats in list(self._topics.values()):
            for item in stats.items():
                item.sample(item.minute, now_ms, minute_ms)
                if hour:
                    item.sample(item.hour, now_ms, hour_ms)

    async def run(self) -> None:
        """Sample every 10 s, the hour windows every 10 min (at the first pass too, as
        Java's schedules start at once), until cancelled."""
        per_hour = int(HOUR_SAMPLING_S / MINUTE_SAMPLING_S)
        tick = 0
        deadline = trio.current_time()
        while True:
            self.sample(int(time.time() * 1000), hour=tick % per_hour == 0)
            tick += 1
            deadline += MINUTE_SAMPLING_S
            await trio.sleep_until(deadline)
