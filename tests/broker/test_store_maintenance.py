"""The store's cleaning and the system topics, asked for by hand (mqadmin's
cleanUnusedTopic, cleanExpiredCQ, deleteExpiredCommitLog; DefaultMQAdminExt's
getSystemTopicListFromBroker): 316, 306, 329, 305 against a real broker."""

from __future__ import annotations

import os
import time

from trocket.codecs.bodies.namesrv import TopicList
from trocket.codecs.command import RemotingCommand

HOUR = 3600


async def test_system_topic_list_is_the_static_set_and_the_brokers_own(tmp_path, wire):
    async with wire.running_broker(tmp_path, broker_name="broker-x", cluster="ClusterX") as broker, \
            wire.client() as c:
        r = await c.invoke_sync(broker.broker_addr, RemotingCommand.request(305))
        assert r.code == 0, r.remark
        topics = set(TopicList.from_body(r.body).topic_list)
        assert topics == {
            "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
            "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
            "ClusterX", "broker-x", "ClusterX_REPLY_TOPIC",
        }


async def test_clean_unused_topic_drops_queues_without_a_config(tmp_path, wire):
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        cq_dir = broker.store.config.consume_queue_dir
        for topic in ("Kept", "Orphan"):
            assert (await c.invoke_sync(addr, wire.send_v1(topic, b"m"))).code == 0
        # a delayed message: the schedule topic has queues and no config to keep them
        assert (await c.invoke_sync(addr, wire.send_v1("Kept", b"later", properties=wire.props(DELAY="3")))).code == 0
        broker.topics.delete("Orphan")  # its config gone, its queues left (a topics.json edited by hand)
        r = await c.invoke_sync(addr, RemotingCommand.request(316))
        assert (r.code, r.remark) == (0, None)
        assert broker.store.topics() >= {"Kept", "SCHEDULE_TOPIC_XXXX"} and "Orphan" not in broker.store.topics()
        assert "Orphan" not in os.listdir(cq_dir) and not [n for n in os.listdir(cq_dir) if n.startswith(".")]
        # a send afterwards starts the queue again at 0
        r = await c.invoke_sync(addr, wire.send_v1("Orphan", b"new"))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
        # nothing left to clean: SUCCESS all the same
        assert (await c.invoke_sync(addr, RemotingCommand.request(316))).code == 0


async def test_clean_expired_consume_queue_drops_queues_whose_messages_are_gone(tmp_path, wire):
    async with wire.running_broker(tmp_path, commit_log_segment_size=64 * 1024, delete_when="99") as broker, \
            wire.client() as c:
        addr = broker.broker_addr
        store = broker.store
        big = b"x" * 4000
        for _ in range(20):  # Old: the first segment and a half
            assert (await c.invoke_sync(addr, wire.send_v1("Old", big, queue_id=0))).code == 0
        assert (await c.invoke_sync(addr, wire.send_v1("Old", b"d", queue_id=1, properties=wire.props(DELAY="3")))).code == 0
        for _ in range(40):  # New: the segments after it
            assert (await c.invoke_sync(addr, wire.send_v1("New", big, queue_id=0))).code == 0
        files = store.commit_log.files.files
        old = time.time() - 100 * HOUR
        for mf in files[:2]:
            os.utime(mf.path, (old, old))
        result = store.delete_expired(force=True, used_ratio=10)
        assert result.commit_log_segments == 2
        assert 0 <= store.queues.find("Old", 0).max_physic_offset < store.min_phy_offset
        # retention leaves the emptied queue in place; 306 removes it
        assert ("Old" in store.topics()) and store.get_min_offset("Old", 0) == store.get_max_offset("Old", 0) == 20
        r = await c.invoke_sync(addr, RemotingCommand.request(306))
        assert (r.code, r.remark) == (0, None)
        assert store.queues.find("Old", 0) is None and store.queues.find("New", 0) is not None
        # the delayed message's schedule queue expired too, and is never cleaned
        [schedule] = [cq for cq in store.queues if cq.topic == "SCHEDULE_TOPIC_XXXX"]
        assert 0 <= schedule.max_physic_offset < store.min_phy_offset
        cq_dir = store.config.consume_queue_dir
        assert not os.path.exists(os.path.join(cq_dir, "Old", "0"))
        assert not [n for n in os.listdir(cq_dir) if n.startswith(".")]
        r = await c.invoke_sync(addr, wire.send_v1("Old", b"fresh", queue_id=0))
        assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
        assert store.get_max_offset("New", 0) == 40


async def test_delete_expired_commit_log_makes_the_next_passes_manual(tmp_path, wire):
    """329 answers at once; the next 20 retention passes then delete expired segments
    whatever the hour (``delete_when`` never matches here), and only expired ones."""
    async with wire.running_broker(tmp_path, commit_log_segment_size=64 * 1024, delete_when="99") as broker, \
            wire.client() as c:
        addr = broker.broker_addr
        store = broker.store
        for _ in range(60):
            assert (await c.invoke_sync(addr, wire.send_v1("T", b"x" * 4000))).code == 0
        files = store.commit_log.files.files
        assert len(files) >= 4
        old = time.time() - 100 * HOUR
        os.utime(files[0].path, (old, old))
        assert store.delete_expired(used_ratio=10).commit_log_segments == 0  # not the hour: nothing
        r = await c.invoke_sync(addr, RemotingCommand.request(329))
        assert (r.code, r.remark) == (0, None)
        assert store.manual_delete_passes == 20
        result = store.delete_expired(used_ratio=10)
        assert (result.reason, result.commit_log_segments) == ("manual", 1)  # the expired one only
        assert store.manual_delete_passes == 19
        for _ in range(19):
            store.delete_expired(used_ratio=10)
        assert store.manual_delete_passes == 0
        os.utime(store.commit_log.files.files[0].path, (old, old))
        assert store.delete_expired(used_ratio=10).commit_log_segments == 0  # back to the hour's rule
