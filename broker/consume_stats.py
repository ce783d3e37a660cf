"""How far each consumer group is: per queue, the broker's offset, the group's committed
offset and the store time of the last message it consumed (Java's ``OffsetWrapper``),
as ``AdminBrokerProcessor.getConsumeStats`` (GET_CONSUME_STATS, 208) and
``fetchAllConsumeStatsInBroker`` (GET_BROKER_CONSUME_STATS, 317) compute them, and the
figures the metrics endpoint publishes per group and topic.

Plain functions over the store, the topic table and the consumer-offset table: the
admin processors and the snapshot (:mod:`.snapshot`) share them, so an answer and a
metric can never disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .client_manager import ConsumerManager
    from .store import ConsumerOffsetManager, MessageStore, TopicConfigManager

__all__ = ["QueueOffsets", "queue_offsets", "consumed_topics", "total_diff", "topic_matters"]


@attrs.define(slots=True, frozen=True)
class QueueOffsets:
    """``OffsetWrapper`` of one queue: ``last_timestamp`` is the store time of the
    group's last consumed message (0 when it consumed none)."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    @property
    def diff(self) -> int:
        """Messages not consumed yet (``brokerOffset - consumerOffset``)."""
        return self.broker_offset - self.consumer_offset


def queue_offsets(
    store: MessageStore, offsets: ConsumerOffsetManager, group: str, topic: str, queue_count: int,
) -> list[QueueOffsets]:
    """The group's offsets on queues ``0 .. queue_count - 1`` of ``topic`` (Java: the
    topic's read queues for 208, its write queues for 317); a negative offset counts
    as 0, as Java's."""
    out = []
    for queue_id in range(queue_count):
        broker_offset = max(0, store.get_max_offset(topic, queue_id))
        consumer_offset = max(0, offsets.query_offset(group, topic, queue_id))
        last = 0
        if consumer_offset > 0:
            ts = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
            if ts > 0:
                last = ts
        out.append(QueueOffsets(topic, queue_id, broker_offset, consumer_offset, last))
    return out


def total_diff(queues: list[QueueOffsets]) -> int:
    """``ConsumeStats.computeTotalDiff``."""
    return sum(q.diff for q in queues)


def topic_matters(consumers: ConsumerManager, group: str, topic: str) -> bool:
    """Java's filter in 208/317: a group online (with subscriptions) that does not
    subscribe to ``topic`` has no consume stats for it."""
    if consumers.find_subscription(group, topic) is not None:
        return True
    info = consumers.group_info(group)
    return info is None or not info.subscriptions


def consumed_topics(
    offsets: ConsumerOffsetManager, topics: TopicConfigManager, group: str, topic: str | None = None,
) -> list[str]:
    """``whichTopicByConsumer`` (or just ``topic``), those with a topic config, sorted."""
    names = {topic} if topic else offsets.topics_of_group(group)
    return sorted(t for t in names if topics.select(t) is not None)
