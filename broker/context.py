"""The seam between the running broker and its request processors.

:class:`BrokerContext` is what every processor module's ``register(ctx)`` gets: the
configuration, the store and its managers, the remoting server to register on, and
the client-side managers (consumers, producers, rebalance locks), the long-polling
service and the schedule service (delayed messages). The controller
(:mod:`trocket.broker.controller`) builds one and hands it to each processor module.
"""

from __future__ import annotations

from typing import Any

import attrs

from trocket.broker.config import BrokerConfig
from trocket.broker.store import ConsumerOffsetManager, MessageStore, TopicConfigManager
from trocket.remoting import RemotingServer

__all__ = ["BrokerContext"]


@attrs.define(slots=True, eq=False)
class BrokerContext:
    """What processors need from the running broker."""

    config: BrokerConfig  # broker/config.py
    store: MessageStore  # trocket.broker.store
    topics: TopicConfigManager  # trocket.broker.store (topic_config)
    offsets: ConsumerOffsetManager  # trocket.broker.store (offsets)
    server: RemotingServer  # trocket.remoting
    consumers: Any = None  # ConsumerManager (broker/client_manager.py)
    producers: Any = None  # ProducerManager (same)
    locks: Any = None  # RebalanceLockManager (same)
    pull_hold: Any = None  # the long-polling service (broker/long_polling.py)
    schedule: Any = None  # ScheduleMessageService (broker/schedule.py): delayed messages

    def broker_addr(self) -> str:
        """The advertised ``host:port`` (what routes give out; RocketMQ's brokerIP1:listenPort)."""
        return self.config.advertised_addr(self.server)
