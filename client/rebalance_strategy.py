"""Queue allocation among a consumer group's clients.

Java: ``AllocateMessageQueueAveragely`` (the default of ``DefaultMQPushConsumer`` and
``DefaultLitePullConsumer``). Both lists are sorted first, as ``RebalanceImpl`` sorts
them (queues by topic, broker name, queue id; client ids as strings), so every member
of the group computes the same split without talking to the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from trocket.codecs.bodies.client import MessageQueue

__all__ = ["allocate_averagely"]


def allocate_averagely(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """The queues ``current_cid`` consumes: consecutive blocks of the sorted queues, the
    first ``len(mq_all) % len(cid_all)`` clients taking one more. A client not in
    ``cid_all`` (the broker does not know it yet) gets nothing, as in Java."""
    mqs = sorted(mq_all)
    cids = sorted(cid_all)
    if not mqs or current_cid not in cids:
        return []
    index = cids.index(current_cid)
    n_mq, n_cid = len(mqs), len(cids)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mqs[(start + i) % n_mq] for i in range(max(0, count))]
