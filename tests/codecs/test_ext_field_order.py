"""The order custom-header fields are merged into ext fields (``serialize.wire_ext_fields``).

Byte-exactness with Java depends on it. RocketMQ 4.9.8:

* JSON, and ROCKETMQ binary for a header that is not a ``FastCodesHeader``:
  ``makeCustomHeaderToNet`` puts every header field (declaration order, nulls left out)
  into the command's extFields ``HashMap`` after what it already holds, and the
  serializer writes the map in HashMap iteration order.
* ROCKETMQ binary for a ``FastCodesHeader`` (SendMessageRequestHeaderV2,
  SendMessageResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader):
  ``FastCodesHeader.encode`` writes the header's fields in declaration order, then the
  extFields map follows in HashMap order.

Ground truth: the frames RocketMQ 4.9.8 wrote (conformance/golden/java-4.9.8), and for
the cases they do not cover, the iteration order ``java.util.HashMap`` (OpenJDK 17)
printed for the same insertions; those orders are written out literally below.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from trocket.codecs import headers as H
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.custom_header import decode_header, encode_header
from trocket.codecs.frame import split_frames
from trocket.codecs.java_hashmap import java_string_hash
from trocket.codecs.serialize import decode_command, encode_command, encode_header_bytes, wire_ext_fields

GOLDEN = Path(__file__).parents[2] / "conformance" / "golden" / "java-4.9.8"
JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def rebuilt(name: str, header, ext: dict[str, str] | None = None) -> RemotingCommand:
    """The golden frame ``name``'s command rebuilt from a header object (its own ext
    fields replaced by ``ext``): what a Java sender holds before encoding."""
    cmd = decode_command(split_frames(golden(name))[0])
    cmd.ext_fields = ext
    cmd.custom_header = header
    return cmd


def binary_header(cmd: RemotingCommand, ext: list[tuple[str, str]]) -> bytes:
    """A ROCKETMQ header written out by hand: the fixed part, no remark, ``ext`` in order."""
    entries = b"".join(
        struct.pack(">H", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
        for k, v in ext
    )
    fixed = struct.pack(">hBhiii", cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, 0)
    return fixed + struct.pack(">i", len(entries)) + entries


SEND_RESPONSE = H.SendMessageResponseHeader(msgId="7F00000100002A9F0000000000000003", queueId=3, queueOffset=42)
PULL = H.PullMessageRequestHeader(
    consumerGroup="cg1", topic="TopicTest", queueId=2, queueOffset=12345678901, maxMsgNums=32, sysFlag=7,
    commitOffset=12345678000, suspendTimeoutMillis=15000, subscription="TagA || TagB", subVersion=1700000000000,
    expressionType="TAG", bname="broker-a",
)


# -- what RocketMQ 4.9.8 wrote ----------------------------------------------------------------


@pytest.mark.parametrize("extra", [
    {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},  # the broker's addExtField order
    {"TRACE_ON": "true", "MSG_REGION": "DefaultRegion"},  # other buckets: insertion order is moot
])
def test_send_response_with_extra_ext_fields_is_byte_exact(extra):
    # The header's fields and two ext fields the broker adds besides them.
    json_cmd = rebuilt("send_message_response__JSON.bin", SEND_RESPONSE, dict(extra))
    assert list(wire_ext_fields(json_cmd)) == ["queueId", "TRACE_ON", "MSG_REGION", "msgId", "queueOffset"]
    assert encode_command(json_cmd) == golden("send_message_response__JSON.bin")

    bin_cmd = rebuilt("send_message_response__ROCKETMQ.bin", SEND_RESPONSE, dict(extra))
    assert list(wire_ext_fields(bin_cmd)) == ["msgId", "queueId", "queueOffset", "TRACE_ON", "MSG_REGION"]
    assert encode_command(bin_cmd) == golden("send_message_response__ROCKETMQ.bin")


def test_pull_request_fields_sharing_buckets_are_byte_exact():
    # maxMsgNums, sysFlag and suspendTimeoutMillis share a bucket of the 16-slot table
    # (as do queueOffset/expressionType and commitOffset/bname): within it, put order.
    json_cmd = rebuilt("pull_message__JSON.bin", PULL)
    assert list(wire_ext_fields(json_cmd)) == [
        "queueId", "maxMsgNums", "sysFlag", "suspendTimeoutMillis", "commitOffset", "bname", "topic",
        "queueOffset", "expressionType", "subscription", "subVersion", "consumerGroup",
    ]
    assert encode_command(json_cmd) == golden("pull_message__JSON.bin")
    assert encode_command(rebuilt("pull_message__ROCKETMQ.bin", PULL)) == golden("pull_message__ROCKETMQ.bin")


def test_send_v2_from_its_header_is_byte_exact():
    cmd = decode_command(split_frames(golden("send_message_v2__ROCKETMQ.bin"))[0])
    header = decode_header(H.SendMessageRequestHeaderV2, cmd.ext_fields)
    for name in ("send_message_v2__JSON.bin", "send_message_v2__ROCKETMQ.bin"):
        assert encode_command(rebuilt(name, header)) == golden(name), name


# -- the same rules where no golden frame reaches: java.util.HashMap's own orders -----------


def test_json_ext_key_with_the_hash_of_a_header_field_comes_first_in_its_bucket():
    # "nTgId" has String.hashCode() of "msgId": one bucket, whatever the capacity. The
    # command's ext fields are in the map before makeCustomHeaderToNet adds the header's.
    assert java_string_hash("nTgId") == java_string_hash("msgId")
    header = H.SendMessageResponseHeader(msgId="M1", queueId=3, queueOffset=42)
    cmd = RemotingCommand(code=0, flag=1, opaque=7, version=409, ext_fields={"nTgId": "x", "MSG_REGION": "R"},
                          custom_header=header)
    assert encode_header_bytes(cmd) == (
        b'{"code":0,"extFields":{"queueId":"3","MSG_REGION":"R","nTgId":"x","msgId":"M1","queueOffset":"42"},'
        b'"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}'
    )


def test_fast_codes_binary_writes_the_header_then_the_map_in_hashmap_order():
    # "Aa" and "BB" share a hash: HashMap keeps them in put order, either way round.
    header = H.SendMessageResponseHeader(msgId="M1", queueId=3, queueOffset=42)
    for extra, map_order in [
        ({"BB": "1", "Aa": "2", "MSG_REGION": "R"}, ["BB", "Aa", "MSG_REGION"]),
        ({"MSG_REGION": "R", "Aa": "2", "BB": "1"}, ["Aa", "BB", "MSG_REGION"]),
    ]:
        cmd = RemotingCommand(code=0, flag=1, opaque=7, ext_fields=extra, custom_header=header, serialize_type=ROCKETMQ)
        expected = [("msgId", "M1"), ("queueId", "3"), ("queueOffset", "42")] + [(k, extra[k]) for k in map_order]
        assert encode_header_bytes(cmd) == binary_header(cmd, expected)


def test_binary_header_without_fast_codes_goes_through_the_hashmap():
    # QueryConsumerOffsetRequestHeader is no FastCodesHeader: binary is ordered like JSON.
    # "tpQic" has the hash of "topic" and was put first.
    assert java_string_hash("tpQic") == java_string_hash("topic")
    header = H.QueryConsumerOffsetRequestHeader(consumerGroup="G", topic="T", queueId=1)
    cmd = RemotingCommand(code=14, opaque=7, ext_fields={"tpQic": "x", "k": "v"}, custom_header=header,
                          serialize_type=ROCKETMQ)
    expected = [("queueId", "1"), ("tpQic", "x"), ("topic", "T"), ("k", "v"), ("consumerGroup", "G")]
    assert encode_header_bytes(cmd) == binary_header(cmd, expected)
    cmd.serialize_type = JSON
    assert list(wire_ext_fields(cmd).items()) == expected


def test_send_v1_is_no_fast_codes_header_in_java():
    # trocket decodes SendMessageRequestHeader (V1) by hand for speed, but Java's class
    # implements only CommandCustomHeader: its binary form is HashMap-ordered, 13 fields
    # in a 32-slot table (sysFlag and reconsumeTimes share a bucket: put order).
    header = H.SendMessageRequestHeader(
        producerGroup="PG", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=1, sysFlag=0,
        bornTimestamp=1700000000000, flag=0, properties="TAGS\x01a\x02", reconsumeTimes=0, maxReconsumeTimes=16,
    )
    java_order = [
        "queueId", "flag", "sysFlag", "reconsumeTimes", "batch", "unitMode", "defaultTopic",
        "defaultTopicQueueNums", "producerGroup", "maxReconsumeTimes", "topic", "bornTimestamp", "properties",
    ]
    for stype in (JSON, ROCKETMQ):
        cmd = RemotingCommand(code=10, opaque=7, custom_header=header, serialize_type=stype)
        assert list(wire_ext_fields(cmd)) == java_order, stype
    fields = encode_header(header)
    assert encode_header_bytes(cmd) == binary_header(cmd, [(k, fields[k]) for k in java_order])


def test_more_than_twelve_entries_resize_the_table():
    # 4 header fields + 10 ext fields = 14 > 12: a 32-slot table, an order unlike 16 slots'.
    extra = ["TRACE_ON", "MSG_REGION", "UNIQ_KEY", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
             "REAL_QID"]
    header = H.UpdateConsumerOffsetRequestHeader(consumerGroup="G", topic="T", queueId=1, commitOffset=5)
    cmd = RemotingCommand(code=15, ext_fields={k: "v" for k in extra}, custom_header=header)
    assert list(wire_ext_fields(cmd)) == [
        "queueId", "TRACE_ON", "commitOffset", "REAL_TOPIC", "RETRY_TOPIC", "MSG_REGION", "KEYS", "topic",
        "UNIQ_KEY", "WAIT", "DELAY", "TAGS", "consumerGroup", "REAL_QID",
    ]


def test_a_header_field_already_in_the_ext_fields_takes_the_header_value():
    # HashMap.put replaces the value and keeps the entry where it is.
    header = H.SendMessageResponseHeader(msgId="M1", queueId=3, queueOffset=42)
    cmd = RemotingCommand(code=0, flag=1, ext_fields={"queueId": "9", "k": "v"}, custom_header=header)
    assert list(wire_ext_fields(cmd).items()) == [("queueId", "3"), ("msgId", "M1"), ("queueOffset", "42"), ("k", "v")]


def test_null_header_fields_are_left_out():
    header = H.SendMessageResponseHeader(msgId="M1", queueId=3, queueOffset=42, transactionId=None)
    for stype in (JSON, ROCKETMQ):
        cmd = RemotingCommand(code=0, flag=1, custom_header=header, serialize_type=stype)
        assert "transactionId" not in wire_ext_fields(cmd)
