"""RouteInfoManager on its own: registration rules, removal, expiry (no I/O)."""

from __future__ import annotations

from trocket.broker.namesrv import RouteInfoManager
from trocket.codecs.bodies.namesrv import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from trocket.codecs.bodies.route import BrokerData, QueueData

A = "10.0.0.1:10911"
A_SLAVE = "10.0.0.2:10911"
B = "10.0.0.3:10911"


class FakeConn:
    def __init__(self) -> None:
        self.closed_with: str | None = None

    def close(self, reason: str = "closed locally") -> None:
        self.closed_with = reason


def wrapper(*configs: TopicConfig, counter: int = 1, timestamp: int = 1000) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper.of(configs, counter=counter, timestamp=timestamp)


def manager(**kw) -> RouteInfoManager:
    return RouteInfoManager(clock=lambda: 0.0, **kw)


def test_master_registration_builds_routes():
    rim = manager()
    result = rim.register_broker(
        "C", A, "broker-a", 0, "10.0.0.1:10912",
        wrapper(TopicConfig("T", 4, 4), TopicConfig("TBW102", 8, 8, 7), TopicConfig("%RETRY%G", 1, 1)),
    )
    assert result.master_addr is None and result.ha_server_addr is None
    route = rim.pickup_topic_route_data("%RETRY%G")
    assert route.queue_datas == [QueueData("broker-a", 1, 1, 6, 0)]
    assert route.broker_datas == [BrokerData("C", "broker-a", {0: A})]
    assert rim.pickup_topic_route_data("TBW102").queue_datas[0].perm == 7
    assert rim.pickup_topic_route_data("nope") is None
    assert set(rim.get_all_topic_list().topic_list) == {"T", "TBW102", "%RETRY%G"}
    info = rim.get_all_cluster_info()
    assert info.cluster_addr_table == {"C": ["broker-a"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A}


def test_topic_configs_reread_only_when_the_data_version_changes():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4), counter=1))
    # same version, different content: ignored, as Java
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 8, 8), TopicConfig("U", 1, 1), counter=1))
    assert rim.pickup_topic_route_data("T").queue_datas[0].write_queue_nums == 4
    assert rim.pickup_topic_route_data("U") is None
    # a new version: re-read (added and updated; nothing removed)
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("U", 1, 1), counter=2))
    assert rim.pickup_topic_route_data("U").queue_datas[0].write_queue_nums == 1
    assert rim.pickup_topic_route_data("T") is not None
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 8, 8), counter=2, timestamp=2000))
    assert rim.pickup_topic_route_data("T").queue_datas[0].write_queue_nums == 8
    assert rim.query_broker_topic_config(A) == DataVersion(2000, 2)


def test_slave_gets_its_master_and_adds_no_queues():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, "10.0.0.1:10912", wrapper(TopicConfig("T", 4, 4)))
    result = rim.register_broker("C", A_SLAVE, "broker-a", 1, "10.0.0.2:10912", wrapper(TopicConfig("S", 4, 4)))
    assert result.master_addr == A
    assert result.ha_server_addr == "10.0.0.1:10912"
    assert rim.pickup_topic_route_data("S") is None
    assert rim.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: A, 1: A_SLAVE}
    # the slave promoted to master under the same address: its old id goes
    rim.register_broker("C", A_SLAVE, "broker-a", 0, "", wrapper(counter=9))
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}


def test_routes_over_two_broker_groups_in_hashmap_order():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4)))
    rim.register_broker("C", B, "broker-b", 0, "", wrapper(TopicConfig("T", 2, 2)))
    route = rim.pickup_topic_route_data("T")
    # HashMap(16) buckets: broker-b 8, broker-a 11
    assert [q.broker_name for q in route.queue_datas] == ["broker-b", "broker-a"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b", "broker-a"]


def test_unregister_removes_group_queues_and_cluster():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4), TopicConfig("A", 1, 1)))
    rim.register_broker("C", A_SLAVE, "broker-a", 1, "", wrapper())
    rim.register_broker("C", B, "broker-b", 0, "", wrapper(TopicConfig("T", 4, 4)))
    rim.unregister_broker("C", A_SLAVE, "broker-a", 1)
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: A}
    rim.unregister_broker("C", A, "broker-a", 0)
    assert "broker-a" not in rim.broker_addr_table
    assert rim.pickup_topic_route_data("A") is None
    assert [q.broker_name for q in rim.pickup_topic_route_data("T").queue_datas] == ["broker-b"]
    rim.unregister_broker("C", B, "broker-b", 0)
    assert rim.cluster_addr_table == {}
    assert rim.topic_queue_table == {}
    assert rim.broker_live_table == {}


def test_scan_drops_brokers_silent_past_the_expiry():
    rim = manager(broker_expiry=120.0)
    conn_a, conn_b = FakeConn(), FakeConn()
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4)), conn=conn_a, now=100.0)
    rim.register_broker("C", B, "broker-b", 0, "", wrapper(TopicConfig("T", 4, 4)), conn=conn_b, now=150.0)
    assert rim.scan_not_active(now=220.0) == []  # exactly 120 s: still alive (Java uses <)
    assert rim.scan_not_active(now=220.5) == [A]
    assert conn_a.closed_with is not None and conn_b.closed_with is None
    assert [q.broker_name for q in rim.pickup_topic_route_data("T").queue_datas] == ["broker-b"]
    # re-registering refreshes the time
    rim.register_broker("C", B, "broker-b", 0, "", wrapper(TopicConfig("T", 4, 4)), conn=conn_b, now=260.0)
    assert rim.scan_not_active(now=300.0) == []
    assert rim.scan_not_active(now=381.0) == [B]
    assert rim.pickup_topic_route_data("T") is None
    assert rim.cluster_addr_table == {}


def test_channel_destroy_finds_the_broker_by_connection():
    rim = manager()
    conn = FakeConn()
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4)), conn=conn)
    rim.register_broker("C", B, "broker-b", 0, "", wrapper(TopicConfig("T", 4, 4)), conn=FakeConn())
    assert rim.on_channel_destroy("127.0.0.1:50000", FakeConn()) is None  # a client's connection
    assert rim.on_channel_destroy("127.0.0.1:50001", conn) == A
    assert "broker-a" not in rim.broker_addr_table
    assert rim.cluster_addr_table == {"C": {"broker-b": None}}
    # without a known connection, the remote address is taken as the broker address (Java)
    assert rim.on_channel_destroy(B, None) == B
    assert rim.topic_queue_table == {} and rim.cluster_addr_table == {}


def test_register_without_topic_configs_and_filter_servers():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, "", None, ["10.0.0.1:30000"])
    assert rim.filter_server_table == {A: ["10.0.0.1:30000"]}
    rim.register_broker("C", A, "broker-a", 0, "", wrapper(TopicConfig("T", 4, 4), counter=5), ["10.0.0.1:30000"])
    route = rim.pickup_topic_route_data("T")
    assert route.filter_server_table == {A: ["10.0.0.1:30000"]}
    rim.register_broker("C", A, "broker-a", 0, "", None, [])
    assert rim.filter_server_table == {}
    assert rim.wipe_write_perm_of_broker("broker-a") == 1
    assert rim.pickup_topic_route_data("T").queue_datas[0].perm == 4


def test_delete_topic_drops_every_brokers_queues_until_a_new_version():
    rim = manager()
    rim.register_broker("C", A, "broker-a", 0, None, wrapper(TopicConfig("T", 4, 4), TopicConfig("U", 1, 1)))
    rim.delete_topic("T")
    rim.delete_topic("unknown")
    assert rim.pickup_topic_route_data("T") is None
    assert rim.pickup_topic_route_data("U") is not None
    assert set(rim.get_all_topic_list().topic_list) == {"U"}
    # a registration with a changed data version that still carries T brings it back
    rim.register_broker("C", A, "broker-a", 0, None, wrapper(TopicConfig("T", 4, 4), counter=2))
    assert rim.pickup_topic_route_data("T").queue_datas[0].write_queue_nums == 4
