"""Latency fault tolerance (``MQFaultStrategy``'s table) and queue selection."""

from __future__ import annotations

import trio
import trio.testing

from trocket.client import MessageQueue
from trocket.client.fault import LatencyFaultTolerance, not_available_duration, select_queue
from trocket.client.route import TopicPublishInfo


def test_java_table():
    assert [not_available_duration(x) for x in (0.01, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0, 30.0)] == [
        0, 0, 30, 60, 120, 180, 600, 600
    ]


async def test_a_failed_broker_is_avoided_then_forgiven(autojump_clock):
    faults = LatencyFaultTolerance()
    info = TopicPublishInfo([MessageQueue("T", b, q) for b in ("a", "b") for q in range(2)])
    faults.update("a", 0.01, isolation=True)  # 30 s of latency: 600 s out
    assert {select_queue(info, faults, None).broker_name for _ in range(8)} == {"b"}
    faults.update("b", 1.2)  # slow: 60 s out; both out -> still a queue, never an error
    assert select_queue(info, faults, None).broker_name in ("a", "b")
    await trio.sleep(61)  # logical time: past the 60 s the slow broker was out for
    assert faults.is_available("b") and not faults.is_available("a")
    faults.update("a", 0.002)  # a quick answer clears it at once
    assert faults.is_available("a")


async def test_last_broker_avoided_when_fault_tolerance_is_off():
    faults = LatencyFaultTolerance(enabled=False)
    info = TopicPublishInfo([MessageQueue("T", b, q) for b in ("a", "b") for q in range(2)])
    assert {select_queue(info, faults, "a").broker_name for _ in range(8)} == {"b"}
