"""SQL92 subscriptions on a real broker (``enablePropertyFilter=true``): CHECK_CLIENT_CONFIG,
heartbeats, pulls with and without the subscription in them, the scan past refused
records, retry topics with ``filterSupportRetry`` (issue 25)."""

from __future__ import annotations

import json

from trocket.broker.outer_api import BROKER_VERSION
from trocket.codecs.command import RemotingCommand
from trocket.codecs.message.record import decode_records

FLAG_COMMIT_SUSPEND = 0x3  # a push consumer's pull: no subscription in it


def heartbeat(group: str, topic: str, expression: str, expression_type: str = "SQL92",
              sub_version: int = 1, client_id: str = "c1") -> RemotingCommand:
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": topic, "subString": expression, "expressionType": expression_type,
                                 "classFilterMode": False, "subVersion": sub_version, "tagsSet": [], "codeSet": []}]}]}
    return RemotingCommand.request(34, ext_fields={}, body=json.dumps(body).encode())


def check_config(expression: str, expression_type: str = "SQL92") -> RemotingCommand:
    body = {"clientId": "c1", "group": "G", "subscriptionData": {
        "topic": "T", "subString": expression, "expressionType": expression_type}}
    return RemotingCommand.request(46, ext_fields={}, body=json.dumps(body).encode())


def values(resp: RemotingCommand, key: str = "a") -> list[str]:
    assert resp.code == 0, (resp.code, resp.remark)
    return [m.properties.get(key) for m in decode_records(resp.body)]


async def send_all(c, addr, wire, topic: str, props_list: list[dict[str, str]]) -> None:
    for p in props_list:
        r = await c.invoke_sync(addr, wire.send_v1(topic, b"x", properties=wire.props(**p)))
        assert r.code == 0, r.remark


async def test_check_client_config_compiles_sql92(tmp_path, wire):
    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert (await c.invoke_sync(addr, check_config("a > 5 AND b IN ('x')"))).code == 0
        r = await c.invoke_sync(addr, check_config("a = NULL"))
        assert (r.code, r.remark) == (23, "java.lang.RuntimeException: 'NULL' cannot be compared.")
        r = await c.invoke_sync(addr, check_config("a > 5", "FOO"))
        assert (r.code, r.remark) == (23, None)
        assert broker.ctx.filters.compiled == 1 and broker.ctx.filters.compile_errors == 1
        # compiled once: asking again reuses the cached result
        await c.invoke_sync(addr, check_config("a = NULL"))
        assert broker.ctx.filters.compile_errors == 1


async def test_heartbeat_subscription_filters_the_pull(tmp_path, wire):
    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, heartbeat("G", "ST", "a > 5 OR TAGS = 'T1'"))
        assert r.code == 0 and r.version == BROKER_VERSION  # the Java client checks it before a SQL92 pull
        await send_all(c, addr, wire, "ST", [{"a": str(i)} for i in range(10)] + [{"tags": "T1"}, {"a": "x"}])
        r = await c.invoke_sync(addr, wire.pull("ST", group="G", sys_flag=FLAG_COMMIT_SUSPEND, subscription=None,
                                                expression_type="SQL92"))
        assert values(r) == ["6", "7", "8", "9", None]
        assert r.ext_fields["nextBeginOffset"] == "12"
        # the group changes its expression (a newer subVersion): the next pull uses the new one
        await c.invoke_sync(addr, heartbeat("G", "ST", "a BETWEEN 2 AND 3", sub_version=2))
        r = await c.invoke_sync(addr, wire.pull("ST", group="G", sys_flag=FLAG_COMMIT_SUSPEND, subscription=None,
                                                expression_type="SQL92"))
        assert values(r) == ["2", "3"]


async def test_bad_expressions_are_refused_at_pull(tmp_path, wire):
    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        await send_all(c, addr, wire, "ST", [{"a": "1"}])
        await c.invoke_sync(addr, heartbeat("G", "ST", "a >"))
        r = await c.invoke_sync(addr, wire.pull("ST", group="G", sys_flag=FLAG_COMMIT_SUSPEND, subscription=None,
                                                expression_type="SQL92"))
        assert (r.code, r.remark) == (27, "The broker's consumer filter data is not exist!Your expression may be wrong!")
        r = await c.invoke_sync(addr, wire.pull("ST", group="G", subscription="a >", expression_type="SQL92"))
        assert (r.code, r.remark) == (23, "parse the consumer's subscription failed")


async def test_subscription_and_filter_data_not_latest(tmp_path, wire):
    """A pull without its subscription and with a ``subVersion`` newer than the broker's
    (PullMessageProcessor 4.9.8): SUBSCRIPTION_NOT_LATEST when the group's subscription is
    older, FILTER_DATA_NOT_LATEST when its filter data is. The filter data follows Java's
    ConsumerFilterManager: a newer version that does not compile removes it; a client of
    the group with an older, valid one then registers it (no data to be newer than), while
    the group's subscription stays the newest -- the filter data lags the pull."""
    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, \
            wire.client() as c1, wire.client() as c2:
        addr = broker.broker_addr
        await send_all(c1, addr, wire, "ST", [{"a": str(i)} for i in range(10)])

        def pull(sub_version: int):
            return wire.pull("ST", group="G", sys_flag=FLAG_COMMIT_SUSPEND, subscription=None,
                             expression_type="SQL92", sub_version=sub_version)

        await c1.invoke_sync(addr, heartbeat("G", "ST", "a > 7", sub_version=100, client_id="c1"))
        assert values(await c1.invoke_sync(addr, pull(100))) == ["8", "9"]
        r = await c1.invoke_sync(addr, pull(101))  # newer than the heartbeat's
        assert (r.code, r.remark) == (25, "the consumer's subscription not latest")
        # c1's newer expression does not compile: the filter data goes
        await c1.invoke_sync(addr, heartbeat("G", "ST", "a >", sub_version=200, client_id="c1"))
        r = await c1.invoke_sync(addr, pull(200))
        assert (r.code, r.remark) == (27, "The broker's consumer filter data is not exist!Your expression may be wrong!")
        # c2 of the same group, an older valid expression: the filter data (there is none),
        # not the subscription (200 is newer)
        await c2.invoke_sync(addr, heartbeat("G", "ST", "a < 2", sub_version=150, client_id="c2"))
        assert broker.ctx.filters.filter_data("G", "ST").client_version == 150
        r = await c1.invoke_sync(addr, pull(200))
        assert (r.code, r.remark) == (28, "the consumer's consumer filter data not latest")
        # c2's own pulls (version 150) filter with the filter data's expression
        assert values(await c2.invoke_sync(addr, pull(150))) == ["0", "1"]


async def test_the_scan_goes_past_refused_records(tmp_path, wire):
    """Java's getMessage scans on past what the filter refuses: one pull of 32 finds the
    two matches among 300 records."""
    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        await send_all(c, addr, wire, "ST", [{"a": "1" if i in (150, 299) else "0"} for i in range(300)])
        r = await c.invoke_sync(addr, wire.pull("ST", max_msgs=32, subscription="a = 1", expression_type="SQL92"))
        assert values(r) == ["1", "1"] and r.ext_fields["nextBeginOffset"] == "300"
        # nothing matching: NO_MATCHED_MESSAGE, and the next offset moves on
        r = await c.invoke_sync(addr, wire.pull("ST", max_msgs=32, subscription="a = 2", expression_type="SQL92"))
        assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (20, "NO_MATCHED_MESSAGE", "300")


async def test_held_pull_answers_the_first_match(tmp_path, wire):
    import trio

    async with wire.running_broker(tmp_path, enable_property_filter=True) as broker, wire.client() as c:
        addr = broker.broker_addr
        await send_all(c, addr, wire, "ST", [{"a": "0"}])
        got = {}

        async def pull() -> None:
            got["r"] = await c.invoke_sync(addr, wire.pull("ST", offset=1, subscription="a = 1",
                                                           expression_type="SQL92", suspend_ms=5000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pull)
            await wire_held(broker)
            await send_all(c, addr, wire, "ST", [{"a": "1"}])
        assert values(got["r"]) == ["1"]


async def wire_held(broker) -> None:
    from .conftest import held_count_reaches

    await held_count_reaches(broker, 1)


async def test_retry_topic_filtered_with_filter_support_retry(tmp_path, wire):
    for support, expected in ((True, ["7"]), (False, ["7", "1"])):
        async with wire.running_broker(tmp_path / str(support), enable_property_filter=True,
                                       filter_support_retry=support) as broker, wire.client() as c:
            addr = broker.broker_addr
            await c.invoke_sync(addr, heartbeat("G", "ST", "a > 5"))
            await send_all(c, addr, wire, "%RETRY%G", [{"a": "7", "RETRY_TOPIC": "ST"}, {"a": "1", "RETRY_TOPIC": "ST"}])
            r = await c.invoke_sync(addr, wire.pull("%RETRY%G", group="G", subscription="*"))
            assert values(r) == expected


async def test_disabled_by_default(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        r = await c.invoke_sync(addr, check_config("a > 5"))
        assert (r.code, r.remark) == (1, "The broker does not support consumer to filter message by SQL92")
        await c.invoke_sync(addr, heartbeat("G", "ST", "a > 5"))
        await send_all(c, addr, wire, "ST", [{"a": "6"}])
        r = await c.invoke_sync(addr, wire.pull("ST", group="G", sys_flag=FLAG_COMMIT_SUSPEND, subscription=None,
                                                expression_type="SQL92"))
        assert (r.code, r.remark) == (1, "The broker does not support consumer to filter message by SQL92")


def test_filter_data_unused_for_a_day_is_dropped():
    """ConsumerFilterManager.clean: filter data no heartbeat subscribes with any more (the
    group gone, or now a TAG subscription) is marked dead and dropped once dead for the
    clean span (24 h); subscribed again before that, it stays."""
    from trocket.broker.client_manager import ConsumerManager
    from trocket.broker.consumer_filter import FILTER_DATA_CLEAN_S, ConsumerFilters
    from trocket.codecs.bodies.client import EXPRESSION_TYPE_SQL92, SubscriptionData

    consumers: ConsumerManager = ConsumerManager(clock=lambda: 0.0)
    filters = ConsumerFilters(consumers)
    sql = [SubscriptionData("T", "a > 5", sub_version=1, expression_type=EXPRESSION_TYPE_SQL92)]
    for group in ("Gone", "Back", "Stays"):
        consumers.register(group, group + "-conn", group + "@c", subscriptions=sql, now=0.0)
        filters.register(group, sql)
    consumers.unregister("Gone", "Gone-conn")
    consumers.unregister("Back", "Back-conn")
    assert filters.clean(now=10.0) == 0  # marked dead, kept
    assert filters.filter_data("Gone", "T") is not None
    consumers.register("Back", "Back-conn2", "Back@c", subscriptions=sql, now=20.0)  # subscribes again
    assert filters.clean(now=10.0 + FILTER_DATA_CLEAN_S - 1) == 0
    assert filters.clean(now=10.0 + FILTER_DATA_CLEAN_S) == 1
    assert filters.filter_data("Gone", "T") is None
    assert filters.filter_data("Back", "T") is not None and filters.filter_data("Stays", "T") is not None
    consumers.unregister("Back", "Back-conn2")  # gone again: a new day from now
    assert filters.clean(now=20.0 + FILTER_DATA_CLEAN_S) == 0
    assert filters.clean(now=20.0 + 2 * FILTER_DATA_CLEAN_S) == 1
    assert filters.filter_data("Back", "T") is None and filters.filter_data("Stays", "T") is not None
