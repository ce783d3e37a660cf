"""Queue allocation among a consumer group's clients: pluggable strategies.

Java: ``AllocateMessageQueueStrategy`` and its 4.9.8 implementations
(``client/consumer/rebalance``). The rebalancer sorts both lists first, as
``RebalanceImpl`` does (queues by topic, broker name, queue id; client ids as strings),
so every member of the group computes the same split without talking to the others; a
strategy takes them in that order. Every strategy here gives Java's allocation for the
same inputs (``tests/client/test_allocate_strategies.py``, vectors from Java's own
classes: ``tests/acceptance/scripts/AllocateVectors.java``).

A strategy of one's own is any object with a ``name`` and an ``allocate(group,
client_id, all_queues, all_client_ids)`` method (:class:`AllocateStrategy`), given to a
consumer as ``allocate_strategy=``.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from trocket.codecs.bodies.client import MessageQueue

__all__ = [
    "AllocateStrategy",
    "allocate_averagely",
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateConsistentHash",
    "AllocateByConfig",
    "AllocateByMachineRoom",
    "AllocateMachineRoomNearby",
]


@runtime_checkable
class AllocateStrategy(Protocol):
    """``AllocateMessageQueueStrategy``: the queues ``client_id`` consumes of
    ``all_queues`` (sorted), shared among ``all_client_ids`` (sorted)."""

    @property
    def name(self) -> str: ...

    def allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]: ...


def _check(client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``: empty inputs are an error; a
    client not in the list (the broker does not know it yet) gets nothing."""
    if not client_id:
        raise ValueError("client_id is empty")
    if not all_queues:
        raise ValueError("all_queues is empty")
    if not all_client_ids:
        raise ValueError("all_client_ids is empty")
    return client_id in all_client_ids


class _Checked:
    """``AbstractAllocateMessageQueueStrategy``: :func:`_check` the inputs, then the
    strategy's own ``_allocate``."""

    __slots__ = ()

    def allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(client_id, all_queues, all_client_ids):
            return []
        return self._allocate(group, client_id, all_queues, all_client_ids)  # type: ignore[attr-defined]


def allocate_averagely(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragely``: consecutive blocks of the sorted queues, the
    first ``len(mq_all) % len(cid_all)`` clients taking one more. A client not in
    ``cid_all`` gets nothing, as in Java."""
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


@attrs.frozen
class AllocateAveragely(_Checked):
    """``AllocateMessageQueueAveragely`` (the consumers' default): consecutive blocks."""

    name = "AVG"

    def _allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        return allocate_averagely(client_id, all_queues, all_client_ids)


@attrs.frozen
class AllocateAveragelyByCircle(_Checked):
    """``AllocateMessageQueueAveragelyByCircle``: queue i to client i mod n (round robin)."""

    name = "AVG_BY_CIRCLE"

    def _allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        index = list(all_client_ids).index(client_id)
        n = len(all_client_ids)
        return [mq for i, mq in enumerate(all_queues) if i >= index and i % n == index]


def _md5_hash(key: str) -> int:
    """``ConsistentHashRouter.MD5Hash``: the first 4 bytes of the key's MD5, big-endian."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")


def _queue_key(mq: MessageQueue) -> str:
    """``MessageQueue.toString()``, the key a queue is routed by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


@attrs.frozen
class AllocateConsistentHash(_Checked):
    """``AllocateMessageQueueConsistentHash``: a hash ring of ``virtual_nodes`` points per
    client (``<client id>-<i>``, MD5), each queue to the first point at or after its
    key's hash (``ConsistentHashRouter``); a client joining or leaving moves few queues.
    ``hash_function`` replaces MD5 (Java's ``HashFunction``)."""

    virtual_nodes: int = 10
    hash_function: Callable[[str], int] = _md5_hash
    name = "CONSISTENT_HASH"

    def __attrs_post_init__(self) -> None:
        if self.virtual_nodes < 0:
            raise ValueError(f"illegal virtual_nodes: {self.virtual_nodes}")

    def _allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        ring: dict[int, str] = {}  # a later point of the same hash replaces the earlier (TreeMap.put)
        replicas: dict[str, int] = {}
        for cid in all_client_ids:
            existing = replicas.get(cid, 0)  # getExistingReplicas: a repeated id adds further points
            for i in range(self.virtual_nodes):
                ring[self.hash_function(f"{cid}-{i + existing}")] = cid
            replicas[cid] = existing + self.virtual_nodes
        if not ring:
            return []
        points = sorted(ring)
        out = []
        for mq in all_queues:
            at = bisect.bisect_left(points, self.hash_function(_queue_key(mq)))
            if ring[points[at % len(points)]] == client_id:
                out.append(mq)
        return out


@attrs.frozen
class AllocateByConfig:
    """``AllocateMessageQueueByConfig``: always these queues, whatever the group."""

    queues: tuple[MessageQueue, ...] = attrs.field(converter=tuple)
    name = "CONFIG"

    def allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.queues)


@attrs.frozen
class AllocateByMachineRoom(_Checked):
    """``AllocateMessageQueueByMachineRoom``: only queues of brokers named
    ``<room>@<name>`` with a room in ``consumer_idcs``, in blocks, the remainder one
    each to the first clients."""

    consumer_idcs: frozenset[str] = attrs.field(converter=frozenset)
    name = "MACHINE_ROOM"

    def _allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        index = list(all_client_ids).index(client_id)
        mine = []
        for mq in all_queues:
            parts = mq.broker_name.split("@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                mine.append(mq)
        n = len(all_client_ids)
        mod, rem = divmod(len(mine), n)
        out = mine[mod * index:mod * index + mod]
        if rem > index:
            out.append(mine[index + mod * n])
        return out


@attrs.frozen
class AllocateMachineRoomNearby(_Checked):
    """``AllocateMachineRoomNearby``: each room's queues go to that room's clients (by
    ``strategy``); the queues of a room without clients are shared by all.
    ``broker_room(mq)`` and ``consumer_room(client_id)`` say where each is deployed
    (Java's ``MachineRoomResolver``)."""

    strategy: AllocateStrategy
    broker_room: Callable[[MessageQueue], str]
    consumer_room: Callable[[str], str]

    @property
    def name(self) -> str:
        return f"MACHINE_ROOM_NEARBY-{self.strategy.name}"

    def _allocate(
        self, group: str, client_id: str, all_queues: Sequence[MessageQueue], all_client_ids: Sequence[str]
    ) -> list[MessageQueue]:
        queues_by_room: dict[str, list[MessageQueue]] = {}
        for mq in all_queues:
            room = self.broker_room(mq)
            if not room:
                raise ValueError(f"machine room is empty for {mq}")
            queues_by_room.setdefault(room, []).append(mq)
        clients_by_room: dict[str, list[str]] = {}
        for cid in all_client_ids:
            room = self.consumer_room(cid)
            if not room:
                raise ValueError(f"machine room is empty for consumer id {cid}")
            clients_by_room.setdefault(room, []).append(cid)
        here = self.consumer_room(client_id)
        out = []
        local = queues_by_room.pop(here, None)
        if local:
            out += self.strategy.allocate(group, client_id, local, clients_by_room[here])
        for room in sorted(queues_by_room):  # Java's TreeMap order
            if room not in clients_by_room:  # nobody there: everyone shares them
                out += self.strategy.allocate(group, client_id, queues_by_room[room], all_client_ids)
        return out
