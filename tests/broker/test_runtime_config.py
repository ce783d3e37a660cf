"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25) against a real broker: the live
keys take effect at once and are written to the config file; keys that cannot change
live, unknown keys and values of the wrong type are refused and change nothing."""

from __future__ import annotations

import argparse

from trocket.broker.config import BrokerConfig
from trocket.broker.runtime_config import LIVE_KEYS, format_properties
from trocket.cli_broker import config_from_args
from trocket.codecs.bodies.route import TopicRouteData
from trocket.codecs.command import RemotingCommand
from trocket.codecs.java_properties import parse_properties

from ..waiting import wait_until


def get_config(r: RemotingCommand) -> dict[str, str]:
    assert r.code == 0, r.remark
    return {k: v for _, k, v in parse_properties(r.body.decode())}


def update(body: str) -> RemotingCommand:
    return RemotingCommand.request(25, body=body.encode())


async def test_get_and_update_live_keys(tmp_path, wire):
    conf = tmp_path / "broker.conf"
    conf.write_text("# my broker\nbrokerName=broker-a\nmaxMessageSize=4194304\n\nlongPollingEnable=true\n")
    async with wire.running_broker(tmp_path, config_path=str(conf)) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, RemotingCommand.request(26))
        props = get_config(r)
        assert (props["brokerName"], props["brokerClusterName"], props["maxMessageSize"]) == (
            "broker-a", "DefaultCluster", "4194304")
        assert props["flushDiskType"] == "ASYNC_FLUSH" and props["listenPort"] == str(broker.config.listen[1])
        version = r.ext_fields["version"]
        assert (await c.invoke_sync(addr, wire.send_v1("RC", b"x", properties=wire.props()))).code == 0

        r = await c.invoke_sync(addr, update("maxMessageSize=1024\nfileReservedTime=49\nautoCreateTopicEnable=false\n"))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(addr, RemotingCommand.request(26))
        props = get_config(r)
        assert (props["maxMessageSize"], props["fileReservedTime"], props["autoCreateTopicEnable"]) == (
            "1024", "49", "false")
        assert r.ext_fields["version"] != version
        # in effect at once: the send path's limit, the store's retention, topic auto-creation
        r = await c.invoke_sync(addr, wire.send_v1("RC", b"x" * 2000, properties=wire.props()))
        assert r.code == 13 and "limit 1024B" in r.remark
        assert broker.store.config.file_reserved_time_hours == 49 and broker.store.config.max_message_size == 1024
        r = await c.invoke_sync(addr, wire.send_v1("NewTopic", b"x", properties=wire.props()))
        assert r.code == 17  # TOPIC_NOT_EXIST: auto-creation is off now
        # the config file: the changed lines rewritten, the rest kept
        assert conf.read_text() == (
            "# my broker\nbrokerName=broker-a\nmaxMessageSize=1024\n\nlongPollingEnable=true\n"
            "fileReservedTime=49\nautoCreateTopicEnable=false\n"
        )

        # refused, and nothing of the request changed (all or nothing)
        for body, code, remark in [
            ("maxMessageSize=2048\nlistenPort=1", 16, "listenPort cannot change while the broker runs"),
            ("brokerConfigPath=/tmp/x", 16, "Can not update config in black list."),
            ("maxMessageSize=2048\nnoSuchKey=1", 1, "noSuchKey: unknown key"),
            ("maxMessageSize=abc", 1, "expected an integer, got 'abc'"),
            ("maxMessageSize=0", 1, "max_message_size must be positive"),
            ("brokerPermission=9", 1, "a permission is 0-7"),
            ("longPollingEnable=perhaps", 1, "expected true or false"),
            ("", 1, "no key=value"),
        ]:
            r = await c.invoke_sync(addr, update(body))
            assert r.code == code and remark in r.remark, (body, r.remark)
        assert get_config(await c.invoke_sync(addr, RemotingCommand.request(26)))["maxMessageSize"] == "1024"
        assert "2048" not in conf.read_text()


async def test_broker_permission_drains_the_broker(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr, ns = broker.broker_addr, broker.namesrv_addrs[0]
        assert (await c.invoke_sync(addr, wire.send_v1("Drain", b"x", properties=wire.props()))).code == 0
        r = await c.invoke_sync(addr, update("brokerPermission=4"))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(addr, wire.send_v1("Drain", b"y", properties=wire.props()))
        assert r.code == 16 and "sending message is forbidden" in r.remark
        assert (await c.invoke_sync(addr, wire.pull("Drain", 0, 0, sys_flag=4))).code in (0, 19, 21)

        async def read_only() -> bool:  # registered again: the routes show the topics read-only
            r = await c.invoke_sync(ns, RemotingCommand.request(105, ext_fields={"topic": "Drain"}))
            return TopicRouteData.from_body(r.body).queue_datas[0].perm == 4

        await wait_until(read_only, 5, interval=0.05)
        assert (await c.invoke_sync(addr, update("brokerPermission=6"))).code == 0
        assert (await c.invoke_sync(addr, wire.send_v1("Drain", b"z", properties=wire.props()))).code == 0


def test_every_live_key_is_a_known_key_with_a_value():
    props = format_properties(BrokerConfig())
    assert set(LIVE_KEYS) <= set(props)
    assert props["fileReservedTime"] == "72" and props["namesrvAddr"] == "" and props["brokerIP1"] == "127.0.0.1"


def test_changes_without_a_config_file_survive_a_restart(tmp_path):
    store = tmp_path / "store"
    args = argparse.Namespace(config=None, store=str(store), max_message_size=None)
    first = config_from_args(args)
    assert first.config_path == str(store / "config" / "broker.properties")
    (store / "config").mkdir(parents=True)
    (store / "config" / "broker.properties").write_text("maxMessageSize=2048\n")  # what 25 wrote
    assert config_from_args(args).max_message_size == 2048
    # a flag given still wins
    flagged = argparse.Namespace(config=None, store=str(store), max_message_size=4096)
    assert config_from_args(flagged).max_message_size == 4096
