"""The replay rule table: what may change per request code, and nothing else."""

from __future__ import annotations

from trocket.codecs.command import RemotingCommand
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.record import encode_record
from trocket.conformance.rules import Rewriter, compare_responses


def _resp(code=0, ext=None, body=b"", remark=None):
    return RemotingCommand.response(code, remark, ext_fields=ext, body=body)


def test_send_answers_may_differ_in_msg_id_and_offset_only():
    a = _resp(ext={"msgId": "7F0000010000000000000001", "queueId": "1", "queueOffset": "5"})
    b = _resp(ext={"msgId": "7F0000010000000000000999", "queueId": "1", "queueOffset": "77"})
    assert compare_responses(10, a, b) == []
    c = _resp(ext={"msgId": "x", "queueId": "2", "queueOffset": "77"})
    assert [d.field for d in compare_responses(10, a, c)] == ["ext.queueId"]
    # the same ext difference under a code without that rule is a difference
    assert [d.field for d in compare_responses(15, a, b)] == ["ext.msgId", "ext.queueOffset"]


def _stored(offset: int, store_port: int, topic: str = "T", body: bytes = b"hello") -> bytes:
    m = MessageExt(topic=topic, body=body, properties={"UNIQ_KEY": "abc", "MAX_OFFSET": str(offset + 1)})
    m.queue_id, m.queue_offset, m.commit_log_offset = 1, offset, offset * 100
    m.born_timestamp, m.store_timestamp = 1000, 2000 + offset
    m.born_host, m.store_host = HostAddress("127.0.0.1", 5555 + offset), HostAddress("127.0.0.1", store_port)
    return encode_record(m)


def test_pulled_messages_compare_without_offsets_hosts_and_store_times():
    a = _resp(ext={"nextBeginOffset": "1"}, body=_stored(0, 10911))
    b = _resp(ext={"nextBeginOffset": "9"}, body=_stored(8, 20911))
    assert compare_responses(11, a, b) == []
    c = _resp(ext={"nextBeginOffset": "1"}, body=_stored(0, 10911, body=b"other"))
    assert [d.field for d in compare_responses(11, a, c)] == ["body"]
    # a topic rewrite applies to the expected messages
    d = _resp(ext={"nextBeginOffset": "1"}, body=_stored(0, 10911, topic="U"))
    assert compare_responses(11, a, d, Rewriter.parse(["topic=T:U"])) == []


def test_routes_compare_without_broker_addresses():
    route = b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:%d"},"brokerName":"b","cluster":"c"}],"queueDatas":[]}'
    assert compare_responses(105, _resp(body=route % 10911), _resp(body=route % 20911)) == []
    other = route.replace(b'"b"', b'"x"')
    assert [d.field for d in compare_responses(105, _resp(body=route % 1), _resp(body=other % 1))] == ["body"]


def test_code_and_remark_differences_are_reported():
    diffs = compare_responses(14, _resp(0, {"offset": "3"}), _resp(22, {"offset": "4"}, remark="not found"))
    assert [(d.field, d.expected, d.got) for d in diffs] == [("code", 0, 22), ("remark", None, "not found")]


def test_rewriter_renames_ext_values_json_bodies_and_remarks_whole_words_only():
    rw = Rewriter.parse(["topic=T1:T2", "group=G:H"])
    cmd = RemotingCommand.request(34, ext_fields={"topic": "T1", "consumerGroup": "G", "other": "T1x"},
                                  body=b'{"groupName":"G","topic":"T1","retry":"%RETRY%G"}',
                                  remark="topic T1 and T10")
    out = rw.command(cmd)
    assert out.ext_fields == {"topic": "T2", "consumerGroup": "H", "other": "T1x"}
    assert out.body == b'{"groupName":"H","topic":"T2","retry":"%RETRY%H"}'
    assert out.remark == "topic T2 and T10"
    assert cmd.ext_fields["topic"] == "T1"  # the original is left alone
