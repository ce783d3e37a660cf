"""Who is connected: consumer groups, producer groups, and orderly-consume queue locks.

The broker-side bookkeeping of RocketMQ 4.9.8's ``ConsumerManager`` /
``ConsumerGroupInfo``, ``ProducerManager``, ``ClientChannelInfo`` and
``RebalanceLockManager``. Pure state: no I/O, no trio. Channels are the remoting
:class:`~trocket.remoting.Connection` a client's requests came on (the managers are
generic in the channel's type, ``ConsumerManager[Connection]``: any hashable object
will do; tests use plain objects). Who tells clients about changes, closes expired
connections and installs the channel-event listener is
:mod:`trocket.broker.processors.client`.

Time: every manager reads ``self.clock()`` (seconds, :func:`time.monotonic` by default);
methods that depend on time also take ``now=`` so tests can drive them.

Thread safety: the managers are meant to be used from the broker's trio thread (the
processors are async). Readers in other threads get consistent snapshots from the
methods that return lists/dicts (they copy before iterating).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Collection, Generic, Hashable, Iterable, TypeVar

import attrs

from trocket.codecs.bodies.client import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from trocket.codecs.command import LanguageCode

__all__ = [
    "CHANNEL_EXPIRED_TIMEOUT",
    "REBALANCE_LOCK_MAX_LIVE_TIME",
    "ClientChannelInfo",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "ProducerManager",
    "LockEntry",
    "RebalanceLockManager",
]

log = logging.getLogger(__name__)

#: ``ConsumerManager.CHANNEL_EXPIRED_TIMEOUT`` / ``ProducerManager``'s: 120 s without a
#: heartbeat and a client's channel is dropped by the housekeeping scan.
CHANNEL_EXPIRED_TIMEOUT = 120.0
#: ``RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME``
#: (``rocketmq.broker.rebalance.lockMaxLiveTime``): a queue lock not renewed for 60 s
#: may be taken by another client.
REBALANCE_LOCK_MAX_LIVE_TIME = 60.0

#: a client's channel: the remoting Connection in the broker (``ConsumerManager[Connection]``),
#: any hashable object in tests
C = TypeVar("C", bound=Hashable)
Clock = Callable[[], float]


@attrs.define(slots=True, eq=False)
class ClientChannelInfo(Generic[C]):
    """``ClientChannelInfo``: one client connection (channel, clientID, language, version)."""

    channel: C
    client_id: str
    language: LanguageCode | None = None
    version: int = 0
    last_update: float = 0.0


# -- consumers -----------------------------------------------------------------------------


@attrs.define(slots=True, eq=False)
class ConsumerGroupInfo(Generic[C]):
    """``ConsumerGroupInfo``: a consumer group's members (by channel) and subscriptions.

    ``channels`` keeps insertion order; ``subscriptions`` maps topic -> the latest
    :class:`SubscriptionData` (by ``sub_version``)."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[C, ClientChannelInfo[C]] = attrs.field(factory=dict)
    subscriptions: dict[str, SubscriptionData] = attrs.field(factory=dict)
    last_update: float = 0.0

    def find_channel(self, client_id: str) -> ClientChannelInfo[C] | None:
        for info in list(self.channels.values()):
            if info.client_id == client_id:
                return info
        return None

    def all_channels(self) -> list[C]:
        return list(self.channels)

    def all_client_ids(self) -> list[str]:
        """Member clientIDs, sorted, each once (a client reconnecting before its old
        channel is dropped would otherwise appear twice; Java would list it twice)."""
        return sorted({info.client_id for info in list(self.channels.values())})

    def update_channel(
        self,
        info: ClientChannelInfo[C],
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        now: float,
    ) -> bool:
        """``updateChannel``: True when the channel is new to the group."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        updated = False
        old = self.channels.get(info.channel)
        if old is None:
            self.channels[info.channel] = old = info
            updated = True
        elif old.client_id != info.client_id:
            log.error(
                "[BUG] consumer channel exists in the broker with another clientId, group %s: old %s, new %s",
                self.group_name, old.client_id, info.client_id,
            )
            self.channels[info.channel] = old = info
        else:
            old.language = info.language
            old.version = info.version
        self.last_update = now
        old.last_update = now
        return updated

    def update_subscriptions(self, subs: Iterable[SubscriptionData], now: float) -> bool:
        """``updateSubscription``: True when a topic was added or removed (a newer
        ``sub_version`` of a known topic replaces it without counting as a change)."""
        updated = False
        topics = set()
        for sub in subs:
            topics.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                updated = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in topics]:
            del self.subscriptions[topic]
            updated = True
        self.last_update = now
        return updated

    def remove_channel(self, channel: C) -> ClientChannelInfo[C] | None:
        return self.channels.pop(channel, None)


class ConsumerManager(Generic[C]):
    """``ConsumerManager``: consumer group name -> :class:`ConsumerGroupInfo`."""

    def __init__(self, *, channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT, clock: Clock = time.monotonic) -> None:
        self.channel_expired_timeout = channel_expired_timeout
        self.clock = clock
        self._groups: dict[str, ConsumerGroupInfo[C]] = {}

    # -- queries -------------------------------------------------------------------------

    def group_info(self, group: str) -> ConsumerGroupInfo[C] | None:
        """``getConsumerGroupInfo``."""
        return self._groups.get(group)

    def groups(self) -> list[str]:
        return list(self._groups)

    def __contains__(self, group: str) -> bool:
        return group in self._groups

    def consumer_ids(self, group: str) -> list[str]:
        """The group's clientIDs (sorted, unique); [] for an unknown group."""
        info = self._groups.get(group)
        return info.all_client_ids() if info is not None else []

    def channels(self, group: str) -> list[C]:
        info = self._groups.get(group)
        return info.all_channels() if info is not None else []

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo[C] | None:
        info = self._groups.get(group)
        return info.find_channel(client_id) if info is not None else None

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """``findSubscriptionData``: what the group's heartbeats say about ``topic``."""
        info = self._groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def topics_of(self, group: str) -> set[str]:
        """The topics ``group``'s heartbeats subscribe to (empty for a group not online)."""
        info = self._groups.get(group)
        return set(info.subscriptions) if info is not None else set()

    def topic_consumed_by(self, topic: str) -> set[str]:
        """``queryTopicConsumeByWho``: groups whose subscriptions include ``topic``."""
        return {g for g, info in list(self._groups.items()) if topic in info.subscriptions}

    # -- changes -------------------------------------------------------------------------

    def register(
        self,
        group: str,
        channel: C,
        client_id: str,
        consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscriptions: Collection[SubscriptionData] = (),
        *,
        language: LanguageCode | None = None,
        version: int = 0,
        now: float | None = None,
    ) -> bool:
        """``registerConsumer``: add or refresh ``channel`` in ``group``. Returns whether
        the group changed (a new member, or a topic added to or removed from its
        subscriptions): the cue to notify the members."""
        if now is None:
            now = self.clock()
        info = self._groups.get(group)
        if info is None:
            info = self._groups[group] = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where, last_update=now
            )
        member = ClientChannelInfo(channel, client_id, language, version, now)
        r1 = info.update_channel(member, consume_type, message_model, consume_from_where, now)
        r2 = info.update_subscriptions(subscriptions, now)
        return r1 or r2

    def unregister(self, group: str, channel: C) -> bool:
        """``unregisterConsumer``: remove ``channel`` from ``group`` (the group goes when
        its last member does). True if the group existed (Java then notifies the rest)."""
        info = self._groups.get(group)
        if info is None:
            return False
        info.remove_channel(channel)
        if not info.channels:
            self._groups.pop(group, None)
        return True

    def connection_closed(self, channel: C) -> list[str]:
        """``doChannelCloseEvent``: drop ``channel`` from every group; the groups it was in."""
        changed = []
        for group, info in list(self._groups.items()):
            if info.remove_channel(channel) is not None:
                changed.append(group)
                if not info.channels:
                    self._groups.pop(group, None)
        return changed

    def scan_not_active(self, now: float | None = None) -> list[tuple[str, ClientChannelInfo[C]]]:
        """``scanNotActiveChannel``: drop members silent for more than
        ``channel_expired_timeout`` seconds; returns ``(group, member)`` for each (the
        caller closes their connections, as Java does)."""
        if now is None:
            now = self.clock()
        expired: list[tuple[str, ClientChannelInfo[C]]] = []
        limit = self.channel_expired_timeout
        for group, info in list(self._groups.items()):
            for channel, member in list(info.channels.items()):
                if now - member.last_update > limit:
                    del info.channels[channel]
                    expired.append((group, member))
            if not info.channels:
                self._groups.pop(group, None)
        return expired


# -- producers -----------------------------------------------------------------------------


class ProducerManager(Generic[C]):
    """``ProducerManager``: producer group -> channel -> :class:`ClientChannelInfo`."""

    def __init__(self, *, channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT, clock: Clock = time.monotonic) -> None:
        self.channel_expired_timeout = channel_expired_timeout
        self.clock = clock
        self._groups: dict[str, dict[C, ClientChannelInfo[C]]] = {}

    def groups(self) -> list[str]:
        return list(self._groups)

    def __contains__(self, group: str) -> bool:
        return group in self._groups

    def members(self, group: str) -> list[ClientChannelInfo[C]]:
        return list(self._groups.get(group, {}).values())

    def channels(self, group: str) -> list[C]:
        return list(self._groups.get(group, {}))

    def client_ids(self, group: str) -> list[str]:
        return sorted({m.client_id for m in self.members(group)})

    def find_channel(self, client_id: str) -> C | None:
        """``findChannel``: a live channel of the producer with ``client_id``, any group."""
        for table in list(self._groups.values()):
            for channel, member in list(table.items()):
                if member.client_id == client_id:
                    return channel
        return None

    def snapshot(self) -> dict[str, list[ClientChannelInfo[C]]]:
        """``getGroupChannelTable`` (GET_ALL_PRODUCER_INFO): group -> members."""
        return {g: list(t.values()) for g, t in list(self._groups.items())}

    def register(
        self, group: str, channel: C, client_id: str, *, language: LanguageCode | None = None, version: int = 0,
        now: float | None = None,
    ) -> bool:
        """``registerProducer``; True when the channel is new to the group."""
        if now is None:
            now = self.clock()
        table = self._groups.setdefault(group, {})
        member = table.get(channel)
        if member is None:
            table[channel] = ClientChannelInfo(channel, client_id, language, version, now)
            return True
        member.client_id = client_id
        member.last_update = now
        return False

    def unregister(self, group: str, channel: C) -> bool:
        """``unregisterProducer``; True if the channel was a member."""
        table = self._groups.get(group)
        if table is None:
            return False
        removed = table.pop(channel, None) is not None
        if not table:
            self._groups.pop(group, None)
        return removed

    def connection_closed(self, channel: C) -> list[str]:
        """``doChannelCloseEvent``: the groups ``channel`` was removed from."""
        changed = []
        for group, table in list(self._groups.items()):
            if table.pop(channel, None) is not None:
                changed.append(group)
                if not table:
                    self._groups.pop(group, None)
        return changed

    def scan_not_active(self, now: float | None = None) -> list[tuple[str, ClientChannelInfo[C]]]:
        """``scanNotActiveChannel``: drop producers silent for too long."""
        if now is None:
            now = self.clock()
        expired: list[tuple[str, ClientChannelInfo[C]]] = []
        for group, table in list(self._groups.items()):
            for channel, member in list(table.items()):
                if now - member.last_update > self.channel_expired_timeout:
                    del table[channel]
                    expired.append((group, member))
            if not table:
                self._groups.pop(group, None)
        return expired


# -- rebalance locks -------------------------------------------------------------------------


@attrs.define(slots=True)
class LockEntry:
    client_id: str
    last_update: float


class RebalanceLockManager:
    """``RebalanceLockManager``: which client holds each queue of a group (orderly
    consumption). A lock lives ``max_live_time`` seconds (60) unless renewed."""

    def __init__(self, *, max_live_time: float = REBALANCE_LOCK_MAX_LIVE_TIME, clock: Clock = time.monotonic) -> None:
        self.max_live_time = max_live_time
        self.clock = clock
        self._table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: float) -> bool:
        return now - entry.last_update > self.max_live_time

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now: float | None = None) -> bool:
        """``isLocked``: held by ``client_id`` and not expired (renews it, as Java does)."""
        if now is None:
            now = self.clock()
        entry = self._table.get(group, {}).get(mq)
        if entry is not None and entry.client_id == client_id and not self._expired(entry, now):
            entry.last_update = now
            return True
        return False

    def _try(self, table: dict[MessageQueue, LockEntry], mq: MessageQueue, client_id: str, now: float, group: str) -> bool:
        entry = table.get(mq)
        if entry is None:
            table[mq] = LockEntry(client_id, now)
            return True
        if entry.client_id == client_id:
            if self._expired(entry, now):
                log.debug("lock of %s for %s in %s had expired; taken again by its holder", mq, client_id, group)
            entry.last_update = now
            return True
        if self._expired(entry, now):
            log.info(
                "rebalance lock of %s in group %s expired (held by %s); now held by %s",
                mq, group, entry.client_id, client_id,
            )
            entry.client_id = client_id
            entry.last_update = now
            return True
        log.debug("rebalance lock of %s in group %s is held by %s; %s refused", mq, group, entry.client_id, client_id)
        return False

    def try_lock(self, group: str, mq: MessageQueue, client_id: str, now: float | None = None) -> bool:
        """``tryLock``: take or renew the lock of one queue."""
        if now is None:
            now = self.clock()
        return self._try(self._table.setdefault(group, {}), mq, client_id, now, group)

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now: float | None = None
    ) -> list[MessageQueue]:
        """``tryLockBatch``: the queues of ``mqs`` that ``client_id`` holds afterwards
        (free, expired, or already its own), in request order."""
        if now is None:
            now = self.clock()
        table = self._table.setdefault(group, {})
        locked = [mq for mq in mqs if self._try(table, mq, client_id, now, group)]
        if not table:
            self._table.pop(group, None)
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """``unlockBatch``: release the queues ``client_id`` holds; returns those released."""
        table = self._table.get(group)
        if table is None:
            return []
        released = []
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                continue
            if entry.client_id == client_id:
                del table[mq]
                released.append(mq)
            else:
                log.debug("unlock of %s in %s by %s refused: held by %s", mq, group, client_id, entry.client_id)
        if not table:
            self._table.pop(group, None)
        return released

    def holder(self, group: str, mq: MessageQueue, now: float | None = None) -> str | None:
        """The clientID holding ``mq`` now (None when free or expired)."""
        if now is None:
            now = self.clock()
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, now):
            return None
        return entry.client_id
