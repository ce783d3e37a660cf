"""Routes as producers and consumers use them (Java: ``TopicPublishInfo`` and
``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``topicRouteData2TopicSubscribeInfo``).

A topic's publish info is its writable queues on brokers that have a master, in broker-name
order; the subscribe info its readable queues on every broker. ``PermName``: 4 read, 2 write.
"""

from __future__ import annotations

import random

import attrs

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.bodies.route import TopicRouteData

__all__ = [
    "PERM_READ",
    "PERM_WRITE",
    "MASTER_ID",
    "TopicPublishInfo",
    "publish_info",
    "subscribe_queues",
    "default_route",
    "MAX_ROUTE_QUEUES",
    "route_queue_count",
]

PERM_READ = 0x4
PERM_WRITE = 0x2
MASTER_ID = 0

#: the most queues a route may list (all its brokers together): a route beyond it is
#: refused at once rather than expanded (a topic created with 2^31-1 queues would have
#: the client build billions of queue objects in its event loop). A trocket broker
#: creates at most 1024 per topic (``maxQueueNumsPerTopic``).
MAX_ROUTE_QUEUES = 1 << 16


def route_queue_count(route: TopicRouteData) -> int:
    """The queues a route lists: each broker's larger of its read and write counts (and
    an ``orderTopicConf``'s)."""
    n = sum(max(qd.read_queue_nums, qd.write_queue_nums, 0) for qd in route.queue_datas)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            num = item.partition(":")[2]
            if num.isdigit():
                n += int(num)
    return n


@attrs.define(slots=True)
class TopicPublishInfo:
    """``TopicPublishInfo``: the queues a send may go to, and the round-robin index."""

    queues: list[MessageQueue] = attrs.field(factory=list)
    route: TopicRouteData | None = None
    order_topic: bool = False
    #: set when the info came from TBW102 (the topic does not exist yet)
    from_default: bool = False
    #: ``sendWhichQueue``: a random start, as Java's ThreadLocalIndex
    index: int = attrs.field(factory=lambda: random.randrange(1 << 16))

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def next_index(self) -> int:
        i = self.index = (self.index + 1) & 0x7FFFFFFF
        return i


def publish_info(topic: str, route: TopicRouteData, *, from_default: bool = False) -> TopicPublishInfo:
    """``topicRouteData2TopicPublishInfo`` (the non-ordered branch; an ``orderTopicConf``
    ``brokerName:num;...`` is honoured as Java does)."""
    queues: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, num = item.partition(":")
            if num.isdigit():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(num)))
        return TopicPublishInfo(queues, route, order_topic=True, from_default=from_default)
    masters = {bd.broker_name for bd in route.broker_datas if bd.broker_addrs.get(MASTER_ID)}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return TopicPublishInfo(queues, route, from_default=from_default)


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: every readable queue."""
    out: list[MessageQueue] = []
    for qd in route.queue_datas:
        if qd.perm & PERM_READ:
            out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out


def default_route(route: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """TBW102's route with each broker's queue counts cut to ``queue_nums``
    (``defaultTopicQueueNums``), as ``updateTopicRouteInfoFromNameServer(isDefault=true)``."""
    qds = [
        attrs.evolve(
            qd,
            read_queue_nums=min(queue_nums, qd.read_queue_nums),
            write_queue_nums=min(queue_nums, qd.write_queue_nums),
        )
        for qd in route.queue_datas
    ]
    return attrs.evolve(route, queue_datas=qds)
