"""How long puts take: RocketMQ 4.9.8's ``StoreStatsService`` put-time figures
(``putMessageEntireTimeMax``, ``putMessageDistributeTime``, ``putLatency99``/``999``).

Java times every put and files it in a bucket. Here a put is timed where the commit
log already times it (inside the append lock, where the work is: preparing the record
outside the lock takes microseconds) and only a put of 1 ms or more is recorded, by
:meth:`PutTimes.record_slow`; the commit log compares and moves on for the others. The
sub-millisecond puts are counted by the lock's own counter (``CommitLog.lock_count``),
so the distribution is complete: ``[<=0ms]`` is every put minus the slow ones.

:meth:`PutTimes.take` hands over a period's slow puts and starts the next (the
statistics service calls it once a minute, as Java resets its buckets).
"""

from __future__ import annotations

import bisect

import attrs

from trocket.codecs.java_ints import INT64_MAX

__all__ = ["PutTimes", "PUT_TIME_BUCKETS", "DISTRIBUTE_LIMITS", "DISTRIBUTE_NAMES", "put_time_percentile", "distribute"]


def _buckets() -> tuple[int, ...]:
    """``PUT_MESSAGE_ENTIRE_TIME_BUCKETS``: upper bounds (ms), 1..20 by 1, ..50 by 2,
    ..100 by 5, ..200 by 10, ..500 by 50, ..1000 by 100, ..10000 by 1000, then above."""
    out = []
    at = 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            at += step
            out.append(at)
    out.append(INT64_MAX)  # Long.MAX_VALUE: everything above
    return tuple(out)


#: the percentile buckets' upper bounds in ms (Java's ``TreeMap`` keys; the last is Long.MAX_VALUE)
PUT_TIME_BUCKETS = _buckets()
#: ``PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`` and the bound below which a put falls in each
DISTRIBUTE_NAMES = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)
DISTRIBUTE_LIMITS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)

_NS_PER_MS = 1_000_000


@attrs.define(slots=True, eq=False)
class PutTimes:
    """Puts of 1 ms or more: their count per millisecond value, and the longest since
    the store opened (``putMessageEntireTimeMax``)."""

    max_ms: int = 0
    #: elapsed ms -> puts that took it, since the last :meth:`take`
    slow: dict[int, int] = attrs.field(factory=dict)

    def record_slow(self, elapsed_ns: int) -> None:
        ms = elapsed_ns // _NS_PER_MS
        slow = self.slow
        slow[ms] = slow.get(ms, 0) + 1
        if ms > self.max_ms:
            self.max_ms = ms

    def take(self) -> dict[int, int]:
        """The slow puts recorded since the last call; the next period starts empty."""
        taken, self.slow = self.slow, {}
        return taken


def distribute(puts: int, slow: dict[int, int]) -> list[int]:
    """``putMessageDistributeTime``'s 13 counts for ``puts`` puts of which ``slow`` took
    1 ms or more (the rest counted as 0 ms)."""
    counts = [0] * len(DISTRIBUTE_NAMES)
    fast = puts
    for ms, n in slow.items():
        counts[bisect.bisect_right(DISTRIBUTE_LIMITS, ms) if ms > 0 else 0] += n
        fast -= n
    counts[0] += max(0, fast)
    return counts


def put_time_percentile(puts: int, slow: dict[int, int], px: float) -> float:
    """``findPutMessageEntireTimePX``: the ``px`` quantile (ms) of a period's put times,
    interpolated inside Java's buckets (every put under 1 ms is in the first bucket)."""
    counts = [0] * len(PUT_TIME_BUCKETS)
    fast = puts
    for ms, n in slow.items():
        counts[bisect.bisect_left(PUT_TIME_BUCKETS, ms)] += n
        fast -= n
    counts[0] += max(0, fast)
    total = sum(counts)
    index = int(total * px)
    passed = 0
    for i, count in enumerate(counts):
        if index <= passed + count:
            relative = index - passed
            if i == 0:
                return PUT_TIME_BUCKETS[0] * relative / count if count else 0.0
            low = PUT_TIME_BUCKETS[i - 1]
            return low + ((PUT_TIME_BUCKETS[i] - low) * relative / count if count else 0.0)
        passed += count
    return 0.0
