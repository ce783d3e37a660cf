"""RouteInfoManager: the name server's tables, as RocketMQ 4.9.8's ``RouteInfoManager``.

Five tables, in memory only:

- ``topic_queue_table``: topic -> broker name -> :class:`QueueData` (built from the
  TopicConfigs a *master* registers);
- ``broker_addr_table``: broker name -> :class:`BrokerData` (cluster, id -> address);
- ``cluster_addr_table``: cluster -> broker names;
- ``broker_live_table``: broker address -> :class:`BrokerLiveInfo` (last registration
  time, topic-config data version, connection, HA address);
- ``filter_server_table``: broker address -> filter server addresses.

A master's topic configs are (re-)read only when its registration is its first or its
:class:`DataVersion` changed, as Java does; topics are added or updated, never removed,
by a registration (a topic deleted on a broker stays routed until DELETE_TOPIC_IN_NAMESRV,
:meth:`delete_topic`, or until the broker goes).
A broker goes away on UNREGISTER_BROKER, when its connection closes
(:meth:`on_channel_destroy`) or when it has been silent for ``broker_expiry`` seconds
(:meth:`scan_not_active`). Everything runs on the trio thread, so no lock is needed.

Answers are built in Java's iteration order, so the bodies match a Java name server's
byte for byte: a topic's queue datas and broker datas are in ``HashMap`` order of the
broker names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from trocket.codecs.bodies.namesrv import (
    ClusterInfo,
    DataVersion,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
)
from trocket.codecs.bodies.route import MASTER_ID, BrokerData, QueueData, TopicRouteData, java_map_order
from trocket.codecs.message.sysflag import TOPIC_FLAG_UNIT, TOPIC_FLAG_UNIT_SUB

if TYPE_CHECKING:
    from trocket.remoting import Channel

__all__ = ["RouteInfoManager", "BrokerLiveInfo", "BROKER_CHANNEL_EXPIRED_TIME"]

log = logging.getLogger(__name__)

#: ``RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME``: 2 minutes, in seconds.
BROKER_CHANNEL_EXPIRED_TIME = 120.0

#: ``PermName.PERM_WRITE``.
_PERM_WRITE = 0x2
_PERM_READ = 0x4


@attrs.define(slots=True, eq=False)
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    #: the connection the broker registered over, or None
    conn: Channel | None
    ha_server_addr: str | None


class RouteInfoManager:
    """The name server's route tables. ``clock`` gives seconds (monotonic); the
    server passes ``trio.current_time`` so tests can run on a mock clock."""

    def __init__(
        self,
        *,
        broker_expiry: float = BROKER_CHANNEL_EXPIRED_TIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_expiry = broker_expiry
        self.clock = clock
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # ordered sets
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration ------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None = None,
        conn: Channel | None = None,
        *,
        now: float | None = None,
    ) -> RegisterBrokerResult:
        """``registerBroker``: add the broker (and its cluster), refresh its live info,
        and, for a master whose data version changed (or on its first registration),
        create or update the queue data of each of its topics."""
        result = RegisterBrokerResult()
        if now is None:
            now = self.clock()
        if topic_config_wrapper is None:
            topic_config_wrapper = TopicConfigSerializeWrapper()

        self.cluster_addr_table.setdefault(cluster_name, {})[broker_name] = None

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # a slave switched to master (or back) re-registers the same address under a
        # new id: drop the old entry first
        for old_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[old_id]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        version = topic_config_wrapper.data_version
        if broker_id == MASTER_ID and (self.is_broker_topic_config_changed(broker_addr, version) or register_first):
            for tc in topic_config_wrapper.topic_config_table.values():
                self._create_and_update_queue_data(broker_name, tc)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(now, attrs.evolve(version), conn, ha_server_addr)
        if previous is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr or "none")

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def is_broker_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, broker_addr: str, now: float | None = None) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update = self.clock() if now is None else now

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        queues = self.topic_queue_table.get(tc.topic_name)
        if queues is None:
            self.topic_queue_table[tc.topic_name] = {broker_name: qd}
            log.info("new topic registered, %s %s", tc.topic_name, qd)
            return
        old = queues.get(broker_name)
        queues[broker_name] = qd
        if old is not None and old != qd:
            log.info("topic changed, %s OLD: %s NEW: %s", tc.topic_name, old, qd)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """``wipeWritePermOfBroker``: clear the write bit of the broker's queues (the
        topics it serves: the count)."""
        count = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm &= ~_PERM_WRITE
                count += 1
        return count

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """``addWritePermOfBroker``: the broker's queues read + write again (Java sets
        the permission to 6, whatever it was)."""
        count = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm = _PERM_READ | _PERM_WRITE
                count += 1
        return count

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        """``getTopicsByCluster``: the topics with queues on a broker of ``cluster``."""
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList([t for t, queues in self.topic_queue_table.items() if any(n in queues for n in names)])

    def get_unit_topics(self) -> TopicList:
        """``getUnitTopics`` (GET_UNIT_TOPIC_LIST): the unit topics."""
        return self._topics_where(lambda flag: bool(flag & TOPIC_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        """``getHasUnitSubTopicList`` (GET_HAS_UNIT_SUB_TOPIC_LIST): the topics a unit-mode
        group subscribes."""
        return self._topics_where(lambda flag: bool(flag & TOPIC_FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        """``getHasUnitSubUnUnitTopicList`` (GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST): those of
        them that are not unit topics."""
        return self._topics_where(lambda flag: not flag & TOPIC_FLAG_UNIT and bool(flag & TOPIC_FLAG_UNIT_SUB))

    def _topics_where(self, pick: Callable[[int], bool]) -> TopicList:
        """``topicQueueTableIter``: the topics whose first broker's queue data (first in
        the HashMap order of the broker names, as Java iterates it) has a
        ``topicSysFlag`` that ``pick`` takes (Java looks at that one only)."""
        return TopicList([
            topic for topic, queues in self.topic_queue_table.items()
            if queues and pick(queues[java_map_order(queues)[0]].topic_sys_flag)
        ])

    def get_system_topic_list(self) -> TopicList:
        """``getSystemTopicList``: the cluster names and broker names (topics of their
        own on every broker), and the first broker's first address."""
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(names)
        addr = None
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                addr = next(iter(bd.broker_addrs.values()))
                break
        return TopicList(list(dict.fromkeys(topics)), addr)

    def delete_topic(self, topic: str) -> None:
        """``deleteTopic``: forget the topic's queue datas (every broker's)."""
        if self.topic_queue_table.pop(topic, None) is not None:
            log.info("deleteTopic, remove the route of %s", topic)

    # -- removal -----------------------------------------------------------------------

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """``unregisterBroker``: forget the broker; when its group has no address left,
        the group, its cluster membership and its queues go too."""
        live = self.broker_live_table.pop(broker_addr, None)
        log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if live else "Failed", broker_addr)
        self.filter_server_table.pop(broker_addr, None)
        remove_broker_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            broker_data.broker_addrs.pop(broker_id, None)
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_broker_name = True
        if remove_broker_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.pop(broker_name, None)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        emptied = []
        for topic, queues in self.topic_queue_table.items():
            if queues.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s", topic, broker_name)
            if not queues:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]

    def scan_not_active(self, now: float | None = None) -> list[str]:
        """``scanNotActiveBroker``: drop brokers whose last registration is more than
        ``broker_expiry`` seconds before ``now``, closing their connections. Returns the
        addresses dropped."""
        if now is None:
            now = self.clock()
        expired = [
            (addr, live) for addr, live in self.broker_live_table.items() if live.last_update + self.broker_expiry < now
        ]
        for addr, live in expired:
            log.warning("The broker channel expired, %s %.0fms", addr, self.broker_expiry * 1000)
            self.broker_live_table.pop(addr, None)
            if live.conn is not None:
                try:
                    live.conn.close("broker expired")
                except Exception:  # noqa: BLE001 - closing is best effort
                    log.debug("closing the connection of %s failed", addr, exc_info=True)
            self.on_channel_destroy(addr, live.conn)
        return [addr for addr, _ in expired]

    def on_channel_destroy(self, remote_addr: str | None, conn: Channel | None) -> str | None:
        """``onChannelDestroy``: a connection went away; if a broker registered over it
        (else: if a broker has ``remote_addr`` as its address), forget that broker.
        Returns the broker address dropped, if any."""
        found = None
        if conn is not None:
            for addr, live in self.broker_live_table.items():
                if live.conn is conn:
                    found = addr
                    break
        if found is None:
            found = remote_addr
        else:
            log.info("the broker's channel destroyed, %s, clean it's data structure at once", found)
        if not found:
            return None
        hit = self.broker_live_table.pop(found, None) is not None
        self.filter_server_table.pop(found, None)
        broker_name_found = None
        remove_broker_name = False
        for name, broker_data in list(self.broker_addr_table.items()):
            for broker_id, addr in list(broker_data.broker_addrs.items()):
                if addr == found:
                    broker_name_found = name
                    del broker_data.broker_addrs[broker_id]
                    log.info("remove brokerAddr[%d, %s] from brokerAddrTable, because channel destroyed", broker_id, addr)
                    break
            if not broker_data.broker_addrs:
                remove_broker_name = True
                del self.broker_addr_table[name]
                log.info("remove brokerName[%s] from brokerAddrTable, because channel destroyed", name)
            if broker_name_found is not None:
                break
        if broker_name_found is not None and remove_broker_name:
            for cluster, names in list(self.cluster_addr_table.items()):
                if broker_name_found in names:
                    del names[broker_name_found]
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topic_by_broker_name(broker_name_found)
        return found if (hit or broker_name_found is not None) else None

    # -- queries -----------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """``pickupTopicRouteData``: the topic's route, or None when no broker serves it."""
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return None
        # new ArrayList<>(queueDataMap.values()) and a HashSet of its keys: both in
        # HashMap order of the broker names
        names = java_map_order(queues)
        route = TopicRouteData(queue_datas=[attrs.evolve(queues[n]) for n in names])
        for name in names:
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None:
                continue
            clone = BrokerData(broker_data.cluster, broker_data.broker_name, dict(broker_data.broker_addrs))
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        route.filter_server_table[addr] = list(servers)
        if not route.broker_datas:
            return None
        return route

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {
                name: BrokerData(bd.cluster, bd.broker_name, dict(bd.broker_addrs))
                for name, bd in self.broker_addr_table.items()
            },
            {name: list(names) for name, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(list(self.topic_queue_table))

