"""SQL92 subscriptions in trocket's consumers (issue 25): ``MessageSelector.by_sql`` for the
push and lite-pull consumers, the start-time check (CHECK_CLIENT_CONFIG), and ``trocket
consume --sql``, against an in-process broker with ``enablePropertyFilter``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from trocket.client import MessageSelector
from trocket.client.consumer import ConsumeResult, PushConsumer
from trocket.client.consumer_lite import PullConsumer
from trocket.client.errors import BrokerResponseError
from trocket.client.message import new_message
from trocket.client.producer import Producer
from trocket.client.subscription import build

from .conftest import running_broker

TROCKET = [str(Path(sys.executable).with_name("trocket"))]


async def produce(ns: str, topic: str, n: int) -> None:
    async with Producer("SqlPG", ns) as producer:
        for i in range(n):
            await producer.send(new_message(topic, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd",
                                            properties={"a": str(i)}))


def test_selector_builds_a_sql92_subscription():
    sub = build("T", MessageSelector.by_sql("a > 5"))
    assert (sub.expression_type, sub.sub_string, sub.tags_set) == ("SQL92", "a > 5", [])
    assert build("T", MessageSelector.by_tag("A || B")).tags_set == ["A", "B"]
    with pytest.raises(ValueError, match="Expression can't be null! SQL92"):
        build("T", MessageSelector.by_sql(""))


async def test_push_consumer_by_sql(tmp_path):
    async with running_broker(tmp_path, enable_property_filter=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "SqlT", 20)
        got: list[int] = []
        done = trio.Event()

        async def on_message(msg):
            got.append(int(msg.properties["a"]))
            if len(got) == 5:
                done.set()
            return ConsumeResult.SUCCESS

        sel = MessageSelector.by_sql("a >= 10 AND TAGS = 'even'")
        async with PushConsumer("SqlCG", ns, {"SqlT": sel}, on_message, consume_from="first"):
            with trio.fail_after(10):
                await done.wait()
            await trio.sleep(0.3)  # nothing else comes
        assert sorted(got) == [10, 12, 14, 16, 18]


async def test_lite_pull_consumer_by_sql(tmp_path):
    async with running_broker(tmp_path, enable_property_filter=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "SqlL", 20)
        async with PullConsumer("SqlLG", ns, consume_from="first") as c:
            c.subscribe("SqlL", MessageSelector.by_sql("a BETWEEN 3 AND 6 OR a IN ('19')"))
            got: list[int] = []
            with trio.fail_after(10):
                while len(got) < 5:
                    got.extend(int(m.properties["a"]) for m in await c.poll(timeout=1))
            assert await c.poll(timeout=0.3) == []
        assert sorted(got) == [3, 4, 5, 6, 19]


async def test_a_bad_expression_fails_the_start(tmp_path):
    async with running_broker(tmp_path, enable_property_filter=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "SqlB", 1)
        consumer = PushConsumer("SqlBG", ns, {"SqlB": MessageSelector.by_sql("a = NULL")}, lambda m: None)
        with pytest.raises(BrokerResponseError) as info:
            async with consumer:
                pass
        exc = info.value
        assert exc.code == 23 and exc.remark == "java.lang.RuntimeException: 'NULL' cannot be compared."
        assert "SQL92 subscription of SqlBG to SqlB refused by" in str(exc)


async def test_a_broker_without_property_filter_fails_the_start(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "SqlD", 1)
        async with PullConsumer("SqlDG", ns) as c:
            c.subscribe("SqlD", MessageSelector.by_sql("a > 1"))
        consumer = PullConsumer("SqlDG2", ns)
        consumer.subscribe("SqlD", MessageSelector.by_sql("a > 1"))
        with pytest.raises(BrokerResponseError) as info:
            async with consumer:
                pass
        assert info.value.remark == "The broker does not support consumer to filter message by SQL92"


async def test_cli_consume_sql(tmp_path):
    async with running_broker(tmp_path, enable_property_filter=True) as broker:
        ns = ";".join(broker.namesrv_addrs)
        await produce(ns, "SqlC", 20)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with trio.fail_after(60):
            done = await trio.run_process(
                [*TROCKET, "consume", "-n", ns, "-t", "SqlC", "-g", "SqlCG", "--count", "3", "--from", "first",
                 "--json", "--sql", "a < 3"], capture_stdout=True, capture_stderr=True, check=False, env=env)
        assert done.returncode == 0, done.stderr.decode()
        assert sorted(json.loads(line)["body"] for line in done.stdout.decode().splitlines()) == ["m0", "m1", "m2"]
        with trio.fail_after(60):
            bad = await trio.run_process(
                [*TROCKET, "consume", "-n", ns, "-t", "SqlC", "-g", "SqlCG2", "--count", "1", "--sql", "a >"],
                capture_stdout=True, capture_stderr=True, check=False, env=env)
        assert bad.returncode == 1
        err = bad.stderr.decode()
        assert err.startswith("trocket: error: SQL92 subscription of SqlCG2 to SqlC refused by") and \
            'ParseException: Encountered "<EOF>" at line 1, column 3.' in err, err
