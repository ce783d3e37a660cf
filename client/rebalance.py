"""Which queues of its subscriptions a consumer owns, recomputed on demand.

Java: ``RebalanceImpl.doRebalance`` / ``rebalanceByTopic``. Clustering: each topic's
readable queues (from its route) and the group's client ids (GET_CONSUMER_LIST_BY_GROUP
at one of the topic's brokers) are sorted and split by the consumer's allocation
strategy (:mod:`.rebalance_strategy`; allocate-averagely by default);
broadcasting: every client owns every queue. The result goes to the owner's
``apply(topic, allocated)``, which stops what it no longer owns and starts what is new
(``updateProcessQueueTableInRebalance``). A topic whose route or client list cannot be
read keeps its current queues until the next round.

Rounds run when :meth:`Rebalancer.wakeup` is called (NOTIFY_CONSUMER_IDS_CHANGED, start,
subscribe) and every ``interval`` seconds (``RebalanceService``'s 20 s); after a round
that skipped a topic, within ``retry_interval`` (1 s: a topic created a moment ago is
not yet known to the name server; Java waits for the next 20 s round).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import trio

from trocket.codecs.bodies.client import MessageModel, MessageQueue

from .rebalance_strategy import AllocateAveragely, AllocateStrategy

__all__ = ["Rebalancer"]

log = logging.getLogger(__name__)


class Rebalancer:
    def __init__(
        self,
        *,
        client_id: str,
        model: MessageModel,
        topics: Callable[[], Iterable[str]],
        queues_of: Callable[[str], Awaitable[list[MessageQueue]]],
        consumer_ids: Callable[[str], Awaitable[list[str]]],
        apply: Callable[[str, set[MessageQueue]], Awaitable[None]],
        interval: float = 20.0,
        retry_interval: float = 1.0,
        group: str = "",
        strategy: AllocateStrategy = AllocateAveragely(),
        owned_topics: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.client_id = client_id
        self.model = model
        self._topics = topics
        self._queues_of = queues_of
        self._consumer_ids = consumer_ids
        self._apply = apply
        self.interval = interval
        self.retry_interval = min(retry_interval, interval)
        self._complete = True
        self.group = group
        self.strategy = strategy
        #: topics of the queues held now; those no longer in ``topics()`` are given up
        #: (Java: ``truncateMessageQueueNotMyTopic``, after an unsubscribe)
        self._owned_topics = owned_topics
        self._wake = trio.Event()
        self.rounds = 0

    def wakeup(self) -> None:
        self._wake.set()

    async def run(self, first: bool = True) -> None:
        """Rebalance (now unless ``first`` is false), then at every wakeup or interval,
        until cancelled."""
        if not first:
            with trio.move_on_after(self.interval if self._complete else self.retry_interval):
                await self._wake.wait()
        while True:
            self._wake = trio.Event()
            complete = await self.rebalance_once()
            with trio.move_on_after(self.interval if complete else self.retry_interval):
                await self._wake.wait()

    async def rebalance_once(self) -> bool:
        """One round over every topic; False when a topic was skipped (no route yet, no
        client list): :meth:`run` then tries again after ``retry_interval``."""
        self.rounds += 1
        complete = True
        for topic in list(self._topics()):
            try:
                allocated = await self._allocation(topic)
            except Exception as exc:  # noqa: BLE001 - keep what we own, retry soon
                log.info("rebalance of %s skipped: %s", topic, exc)
                allocated = None
            if allocated is None:
                complete = False
                continue
            try:
                await self._apply(topic, allocated)
            except Exception:  # noqa: BLE001 - a bug or an odd answer must not end the loop
                log.exception("applying the rebalance of %s failed", topic)
                complete = False
        if self._owned_topics is not None:
            subscribed = set(self._topics())
            for topic in sorted(set(self._owned_topics()) - subscribed):
                await self._apply(topic, set())
        self._complete = complete
        return complete

    async def _allocation(self, topic: str) -> set[MessageQueue] | None:
        mqs = await self._queues_of(topic)
        if not mqs:
            return None
        if self.model is MessageModel.BROADCASTING:
            return set(mqs)
        cids = await self._consumer_ids(topic)
        if not cids:
            return None
        return set(self.strategy.allocate(self.group, self.client_id, sorted(mqs), sorted(cids)))
