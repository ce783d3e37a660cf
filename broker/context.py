"""The seam between the running broker and its request processors.

:class:`BrokerContext` is the typed context every processor gets (RocketMQ's
processors hold the ``BrokerController``; here they get only what they use): the
configuration, the store and its topic, consumer-offset and subscription-group tables, the remoting server
they are registered on, the client-side managers (consumers, producers, rebalance
locks), the long-polling service, the schedule service (delayed messages), the
transaction service (half messages and their checks), the outer API (name-server
registration), replication (``ha``), the statistics (``stats``), the channel listener,
and the hooks back into the controller:

* ``on_topic_created(topic)``: a processor created or changed a topic; the controller
  registers with the name servers soon;
* ``register_now()``: register with the name servers at once and wait (a heartbeat
  or send-back that created a group's retry topic answers only after it; Java's
  ``createTopicInSendMessageBackMethod``).

:class:`BrokerChannelListener` is the server's one channel listener: it calls every
``on_close`` callback (long polling drops the connection's held pulls, the client
processors remove its clients) and forwards every event to the listeners ``add``-ed
to it. A context makes it the listener of its server.

The controller (:mod:`trocket.broker.controller`) builds one context and hands it to
each processor module's ``register(ctx)``; tests build one around a bare server.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Awaitable, Callable

import attrs

from trocket.broker.client_manager import ConsumerManager, ProducerManager, RebalanceLockManager
from trocket.broker.consumer_filter import ConsumerFilters
from trocket.broker.config import BrokerConfig
from trocket.broker.store import ConsumerOffsetManager, MessageStore, SubscriptionGroupManager, TopicConfigManager
from trocket.remoting import ChannelEventListener, Connection, RemotingServer
from trocket.remoting.events import notify

if TYPE_CHECKING:
    from trocket.broker.ha import HAService
    from trocket.broker.long_polling import PullHoldService
    from trocket.broker.outer_api import BrokerOuterAPI
    from trocket.broker.schedule import ScheduleMessageService
    from trocket.broker.transaction import TransactionalMessageService
    from trocket.broker.stats import BrokerStatsService

__all__ = ["BrokerContext", "BrokerChannelListener"]

log = logging.getLogger(__name__)


class BrokerChannelListener(ChannelEventListener):
    """The broker's channel listener: ``on_close`` callbacks, then every event fanned
    out to the listeners given to :meth:`add`. A callback or listener that raises is
    logged (remoting's :func:`~trocket.remoting.events.notify`); the others still run."""

    def __init__(self) -> None:
        self.on_close: list[Callable[[Connection], object]] = []
        self.listeners: list[ChannelEventListener] = []

    def add(self, listener: ChannelEventListener) -> None:
        if listener is not self and listener not in self.listeners:
            self.listeners.append(listener)

    def on_channel_connect(self, remote_addr: str, conn: Connection) -> None:
        for listener in self.listeners:
            notify(listener.on_channel_connect, conn)

    def on_channel_close(self, remote_addr: str, conn: Connection) -> None:
        for callback in self.on_close:
            try:
                callback(conn)
            except Exception:
                log.exception("close callback %r failed", callback)
        for listener in self.listeners:
            notify(listener.on_channel_close, conn)

    def on_channel_exception(self, remote_addr: str, conn: Connection, error: BaseException) -> None:
        for listener in self.listeners:
            notify(listener.on_channel_exception, conn, error)

    def on_channel_idle(self, remote_addr: str, conn: Connection) -> None:
        for listener in self.listeners:
            notify(listener.on_channel_idle, conn)


def _ignore_topic(topic: str) -> None:
    return None


def _seconds(ms: int) -> float:
    return ms / 1000.0


@attrs.define(slots=True, eq=False, kw_only=True)
class BrokerContext:
    """What processors need from the running broker (see the module docstring).

    The client managers default to ones built from ``config`` (client expiry, lock
    lifetime); the channel listener becomes ``server``'s listener (a listener the
    server already had is kept, as one of its fanned-out listeners)."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    server: RemotingServer
    consumers: ConsumerManager[Connection] = attrs.field(
        default=attrs.Factory(
            lambda self: ConsumerManager(channel_expired_timeout=_seconds(self.config.channel_expired_timeout_ms)),
            takes_self=True,
        )
    )
    producers: ProducerManager[Connection] = attrs.field(
        default=attrs.Factory(
            lambda self: ProducerManager(channel_expired_timeout=_seconds(self.config.channel_expired_timeout_ms)),
            takes_self=True,
        )
    )
    locks: RebalanceLockManager = attrs.field(
        default=attrs.Factory(
            lambda self: RebalanceLockManager(max_live_time=_seconds(self.config.rebalance_lock_max_live_ms)),
            takes_self=True,
        )
    )
    channels: BrokerChannelListener = attrs.field(factory=BrokerChannelListener)
    #: the consumer groups' configs (``subscriptionGroup.json``, beside the offsets by default)
    subscriptions: SubscriptionGroupManager = attrs.field(
        default=attrs.Factory(
            lambda self: SubscriptionGroupManager.open(
                os.path.dirname(self.offsets.path), auto_create=self.config.auto_create_subscription_group
            ),
            takes_self=True,
        )
    )
    #: the consumer groups' compiled SQL92 expressions (broker/consumer_filter.py)
    filters: ConsumerFilters = attrs.field(
        default=attrs.Factory(lambda self: ConsumerFilters(self.consumers), takes_self=True)
    )
    #: long polling (broker/long_polling.py); None: pulls are never held
    pull_hold: PullHoldService | None = None
    #: delayed messages (broker/schedule.py); None: DELAY is not acted upon (bare setups)
    schedule: ScheduleMessageService | None = None
    #: transactional messages (broker/transaction): half messages, END_TRANSACTION, the
    #: check service; None: prepared sends are stored as half messages that nothing
    #: ends (bare setups; the controller always makes one)
    transactions: TransactionalMessageService | None = None
    #: replication (broker/ha): the HA server / client and the transfer service; None:
    #: no replication (bare setups)
    ha: HAService | None = None
    #: name-server registration (broker/outer_api.py); set by the controller
    outer_api: BrokerOuterAPI | None = None
    #: the statistics (broker/stats.py: stats items, TPS windows); None in bare setups
    stats: BrokerStatsService | None = None
    on_topic_created: Callable[[str], None] = _ignore_topic
    register_now: Callable[[], Awaitable[object]] | None = None

    def __attrs_post_init__(self) -> None:
        current = self.server.listener
        if current is not None and current is not self.channels:
            self.channels.add(current)
        self.server.listener = self.channels

    def broker_addr(self) -> str:
        """The advertised ``host:port`` (what routes give out; RocketMQ's brokerIP1:listenPort)."""
        return self.config.advertised_addr(self.server)

    def topic_created(self, topic: str) -> None:
        """Call the ``on_topic_created`` hook; a failing hook is logged, never raised."""
        try:
            self.on_topic_created(topic)
        except Exception:
            log.exception("on_topic_created hook failed for %s", topic)
