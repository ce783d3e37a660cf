"""SlaveSynchronize: a slave copies its master's tables every ``slave_sync_interval_ms``.

As Java's ``SlaveSynchronize.syncAll``, with RocketMQ's admin codes against the master's
broker address (the one the name server gives at registration):

* GET_ALL_TOPIC_CONFIG (21): the topic table, replaced when its data version differs;
  a topic the master deleted since (in the slave's table, not in the master's) also
  loses its consume queues here, as the master's ``deleteTopic`` dropped its own;
* GET_ALL_CONSUMER_OFFSET (43): consumer offsets, replaced and persisted;
* GET_ALL_DELAY_OFFSET (45): ``delayOffset.json``, written and reloaded;
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): the subscription-group table, replaced and
  persisted when its data version differs.

Each step fails alone (logged); the next round tries again.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable

import attrs
import trio

from trocket.codecs.bodies.fastjson import loads
from trocket.codecs.bodies.groups import SubscriptionGroupWrapper
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand

from ..store import TopicConfig
from ..store.atomic_file import write_json_atomic

if TYPE_CHECKING:
    from trocket.remoting import RemotingClient

    from ..context import BrokerContext

__all__ = ["SlaveSynchronize"]

log = logging.getLogger(__name__)


#: Java's ``defaultTopicQueueNums``: the queues a topic learnt from replicated records has at least
DEFAULT_TOPIC_QUEUE_NUMS = 4


class SlaveSynchronize:
    def __init__(self, ctx: BrokerContext, client: RemotingClient, master_addr: Callable[[], str | None], *, timeout: float = 3.0) -> None:
        self.ctx = ctx
        self.client = client
        self.master_addr = master_addr
        self.timeout = timeout
        self.rounds = 0
        self.failures = 0
        #: topics learnt from replicated records since the master's table was last asked for
        self.learnt: set[str] = set()

    def learn_topic(self, topic: str, queue_id: int, queue_offset: int, tag: int, store_ts: int) -> None:
        """The slave's store listener: a replicated record of a topic the slave has no
        config for (or of a queue beyond its config) gives it one -- read and write queues
        enough for what arrived, at least Java's default 4, perm 6 -- registered soon, so
        every acknowledged message is readable from the slave after a failover whatever
        the timing (Java's slave waits for its next copy of the master's table). The next
        copy replaces it; one taken before the master had the topic keeps it (``learnt``)."""
        topics = self.ctx.topics
        tc = topics.select(topic)
        if tc is not None and queue_id < tc.read_queue_nums:
            return
        nums = max(queue_id + 1, DEFAULT_TOPIC_QUEUE_NUMS, tc.read_queue_nums if tc is not None else 0)
        topics.update(TopicConfig(topic, nums, nums) if tc is None else attrs.evolve(tc, read_queue_nums=nums, write_queue_nums=nums))
        self.learnt.add(topic)
        log.info("slave: learnt topic %s (%d queues) from the records it replicated", topic, nums)
        self.ctx.topic_created(topic)

    async def run(self, interval: float, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.sync_all()
            await trio.sleep(interval)

    async def sync_all(self) -> bool:
        """One round; True when every table was copied."""
        addr = self.master_addr()
        if not addr:
            return False
        ok = True
        for step in (self._topics, self._consumer_offsets, self._delay_offsets, self._subscription_groups):
            try:
                await step(addr)
            except Exception as exc:  # noqa: BLE001 - each step fails alone
                ok = False
                self.failures += 1
                log.warning("slave sync %s from master %s failed: %s", step.__name__.strip("_"), addr, exc)
        self.rounds += 1
        return ok

    async def _call(self, addr: str, code: int) -> Any:
        response = await self.client.invoke_sync(addr, RemotingCommand.request(code), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {response.code}: {response.remark}")
        return loads(response.body or b"{}")

    async def _topics(self, addr: str) -> None:
        # A topic learnt from its records before this request left is in the table the
        # master answers (the master makes a topic before it stores its first record):
        # the table decides about it, and one it lacks was deleted. Only a topic learnt
        # while the table was on its way may be newer than the table: that one stays (the
        # next copy has it), and its queues are not dropped.
        self.learnt = set()
        data = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        version = data.get("dataVersion") or {}
        counter, timestamp = int(version.get("counter", 0)), int(version.get("timestamp", 0))
        topics = self.ctx.topics
        if (counter, timestamp) == (topics.data_version_counter, topics.data_version_timestamp):
            return
        table = {str(name): TopicConfig.from_json(raw) for name, raw in (data.get("topicConfigTable") or {}).items()}
        learnt = self.learnt
        for name in learnt - table.keys():
            kept = topics.select(name)
            if kept is not None:
                table[name] = kept
        gone = topics.all().keys() - table.keys()
        await trio.to_thread.run_sync(topics.replace_all, table, counter, timestamp)
        log.info("slave sync: %d topics from master %s (data version %d)", len(table), addr, counter)
        if gone:
            await self._drop_queues(gone)

    async def _drop_queues(self, gone: set[str]) -> None:
        """The consume queues of the topics the master deleted (its ``cleanUnusedTopic``).
        Detached here, on the trio thread, where the HA client dispatches: a topic the
        master created meanwhile cannot lose a queue built between two steps."""
        store = self.ctx.store
        keep = store.queues.topics() - gone
        detached = store.clean_unused_topics(keep)
        store.destroy_detached(detached)
        for d in detached:
            await trio.to_thread.run_sync(d.remove_files)
            log.info("slave sync: topic %s deleted on the master, its consume queues destroyed", d.topic)

    async def _consumer_offsets(self, addr: str) -> None:
        data = await self._call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = {
            str(key): {int(q): int(o) for q, o in queues.items()}
            for key, queues in (data.get("offsetTable") or {}).items()
        }
        offsets = self.ctx.offsets
        offsets.replace_all(table)
        await trio.to_thread.run_sync(offsets.persist)

    async def _delay_offsets(self, addr: str) -> None:
        schedule = self.ctx.schedule
        if schedule is None:
            return
        data = await self._call(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        table = {str(int(k)): int(v) for k, v in (data.get("offsetTable") or {}).items()}
        os.makedirs(os.path.dirname(schedule.path), exist_ok=True)
        await trio.to_thread.run_sync(write_json_atomic, schedule.path, {"offsetTable": table})
        schedule.load()

    async def _subscription_groups(self, addr: str) -> None:
        response = await self.client.invoke_sync(
            addr, RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), self.timeout
        )
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {response.code}: {response.remark}")
        wrapper = SubscriptionGroupWrapper.from_body(response.body or b"{}")
        groups = self.ctx.subscriptions
        if (wrapper.counter, wrapper.timestamp) == (groups.data_version_counter, groups.data_version_timestamp):
            return
        await trio.to_thread.run_sync(groups.replace_all, wrapper.table, wrapper.counter, wrapper.timestamp)
        log.info("slave sync: %d subscription groups from master %s (data version %d)", len(wrapper.table), addr,
                 wrapper.counter)
