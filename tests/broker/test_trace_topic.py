"""``traceTopicEnable`` / ``msgTraceTopicName`` (issue 25): the broker creates the trace topic
at start as Java's TopicConfigManager does (1 read and 1 write queue, perm 6) and the name
server routes it; off (the default), there is none."""

from __future__ import annotations

from trocket.broker.store.topic_config import PERM_READ, PERM_WRITE


async def test_trace_topic_created_at_start(tmp_path, wire):
    async with wire.running_broker(tmp_path / "on", trace_topic_enable=True, msg_trace_topic_name="MyTrace") as broker:
        tc = broker.topics.select("MyTrace")
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, PERM_READ | PERM_WRITE)
        assert broker.topics.select("RMQ_SYS_TRACE_TOPIC") is None
    async with wire.running_broker(tmp_path / "off") as broker:
        assert broker.topics.select("RMQ_SYS_TRACE_TOPIC") is None
