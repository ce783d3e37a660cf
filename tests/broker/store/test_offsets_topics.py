from __future__ import annotations

import json
import os

import pytest

from trocket.broker.store import ConfigLoadError, ConsumerOffsetManager, TopicConfig, TopicConfigManager
from trocket.broker.store.topic_config import PERM_INHERIT


def test_consumer_offsets_persist_and_reload(tmp_path):
    mgr = ConsumerOffsetManager.open(str(tmp_path))
    assert mgr.query_offset("G", "T", 0) == -1
    mgr.commit_offset("G", "T", 0, 42)
    mgr.commit_offset("G", "T", 3, -1)  # clients send -1
    mgr.commit_offset("H", "T", 0, 7)
    assert mgr.dirty
    mgr.persist()
    assert not mgr.dirty
    assert not os.path.exists(mgr.path + ".tmp")
    data = json.loads(open(mgr.path).read())
    assert data == {"offsetTable": {"T@G": {"0": 42, "3": -1}, "T@H": {"0": 7}}}
    again = ConsumerOffsetManager.open(str(tmp_path))
    assert again.query_offset("G", "T", 0) == 42 and again.query_offset("G", "T", 3) == -1
    assert again.groups_of_topic("T") == {"G", "H"} and again.topics_of_group("G") == {"T"}


def test_consumer_offsets_java_form_and_corruption(tmp_path):
    path = tmp_path / "consumerOffset.json"
    path.write_text('{"offsetTable":{"T@G":{0:5,1:6}}}')  # fastjson's unquoted keys
    assert ConsumerOffsetManager.open(str(tmp_path)).query_all("G", "T") == {0: 5, 1: 6}
    path.write_text('{"offsetTable": {"T@G": ')
    with pytest.raises(ConfigLoadError):
        ConsumerOffsetManager.open(str(tmp_path))


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    mgr = ConsumerOffsetManager.open(str(tmp_path))
    mgr.commit_offset("G", "T", 0, 1)
    mgr.persist()
    mgr.commit_offset("G", "T", 0, 2)
    import trocket.broker.store.atomic_file as af

    def boom(*a):
        raise OSError("disk gone")

    monkeypatch.setattr(af.os, "replace", boom)
    with pytest.raises(OSError):
        mgr.persist()
    monkeypatch.undo()
    assert ConsumerOffsetManager.open(str(tmp_path)).query_offset("G", "T", 0) == 1


def test_default_topics_as_4_9_8(tmp_path):
    mgr = TopicConfigManager.open(str(tmp_path), cluster_name="DefaultCluster", broker_name="broker-a")
    tbw = mgr.select("TBW102")
    assert (tbw.read_queue_nums, tbw.write_queue_nums, tbw.perm) == (8, 8, 7)
    assert mgr.select("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    assert mgr.select("BenchmarkTest").write_queue_nums == 1024
    assert mgr.select("DefaultCluster").perm == 7 and mgr.select("DefaultCluster").read_queue_nums == 16
    assert mgr.select("broker-a").write_queue_nums == 1
    for name in ("SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "DefaultCluster_REPLY_TOPIC"):
        assert mgr.select(name) is not None
    assert mgr.select("RMQ_SYS_TRACE_TOPIC") is None


def test_topic_auto_create_persist_reload(tmp_path):
    mgr = TopicConfigManager.open(str(tmp_path))
    tc = mgr.create_in_send("NewTopic", client_default_queue_nums=4)
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag) == (4, 4, 6, 0)
    assert mgr.create_in_send("Big", client_default_queue_nums=64).write_queue_nums == 8
    assert mgr.create_in_send("X", default_topic="NoSuchDefault") is None
    mgr.update(TopicConfig("Ordered", 2, 2, 6, order=True))
    retry = mgr.create_in_send_back("%RETRY%G", 1, 6)
    assert retry.read_queue_nums == 1
    again = TopicConfigManager.open(str(tmp_path))
    assert again.select("NewTopic") == tc
    assert again.select("Ordered").order is True
    assert again.data_version_counter == mgr.data_version_counter >= 4
    data = json.loads(open(mgr.path).read())
    assert data["topicConfigTable"]["NewTopic"]["perm"] == 6
    assert not data["topicConfigTable"]["NewTopic"]["perm"] & PERM_INHERIT
    assert again.delete("NewTopic") and TopicConfigManager.open(str(tmp_path)).select("NewTopic") is None
