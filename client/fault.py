"""Latency fault tolerance (Java: ``MQFaultStrategy`` + ``LatencyFaultToleranceImpl``).

After each send the producer reports the broker's latency; a slow or failed broker is
avoided for a while: latency >= 550 ms -> 30 s, >= 1 s -> 60 s, ... a failure (isolation)
counts as 30 s of latency -> 10 min (Java's ``latencyMax`` / ``notAvailableDuration``).
Queue selection (:func:`select_queue`) prefers available brokers other than the one that
just failed, then any available one, then any other, then anything: it never refuses.
Times are trio's clock, in seconds.
"""

from __future__ import annotations

import trio

from trocket.codecs.bodies.client import MessageQueue

from .route import TopicPublishInfo

__all__ = ["LatencyFaultTolerance", "select_queue"]

_LATENCY_MAX = (0.05, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0)
_NOT_AVAILABLE = (0.0, 0.0, 30.0, 60.0, 120.0, 180.0, 600.0)
#: a failed call is reported as this latency (Java: ``isolation ? 30000 : latency``)
ISOLATION_LATENCY = 30.0
#: brokers remembered at most (old entries dropped first; bounded)
MAX_ITEMS = 1024


def not_available_duration(latency: float) -> float:
    for limit, duration in zip(reversed(_LATENCY_MAX), reversed(_NOT_AVAILABLE)):
        if latency >= limit:
            return duration
    return 0.0


class LatencyFaultTolerance:
    """Broker name -> the time until which it is avoided."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._until: dict[str, float] = {}

    def update(self, broker: str, latency: float, isolation: bool = False) -> None:
        if not self.enabled:
            return
        duration = not_available_duration(ISOLATION_LATENCY if isolation else latency)
        if duration <= 0:
            if broker in self._until:
                del self._until[broker]
            return
        if len(self._until) >= MAX_ITEMS and broker not in self._until:
            self._until.pop(next(iter(self._until)))
        self._until[broker] = trio.current_time() + duration

    def is_available(self, broker: str) -> bool:
        until = self._until.get(broker)
        return until is None or trio.current_time() >= until

    def remove(self, broker: str) -> None:
        self._until.pop(broker, None)


def select_queue(info: TopicPublishInfo, faults: LatencyFaultTolerance, last_broker: str | None) -> MessageQueue:
    """One queue, round robin, avoiding ``last_broker`` and brokers in fault."""
    queues = info.queues
    n = len(queues)
    start = info.next_index()
    if n == 1:
        return queues[0]
    fallback_other: MessageQueue | None = None
    fallback_available: MessageQueue | None = None
    for k in range(n):
        mq = queues[(start + k) % n]
        available = faults.is_available(mq.broker_name) if faults.enabled else True
        other = mq.broker_name != last_broker
        if available and other:
            return mq
        if available and fallback_available is None:
            fallback_available = mq
        if other and fallback_other is None:
            fallback_other = mq
    return fallback_available or fallback_other or queues[start % n]
