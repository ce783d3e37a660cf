"""The frames row of one frame, decoded with trocket.codecs (no Spark)."""

from __future__ import annotations

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.serialize import encode_command
from trocket.spark.rows import FRAME_FIELDS, TO_CLIENT, TO_SERVER, endpoints, frame_row

COLS = [name for name, _ in FRAME_FIELDS]


def row(frame: bytes, direction: str = TO_SERVER) -> dict:
    r = frame_row("cap", 7, 16, 1_000, "10.0.0.5:40000", "10.0.0.1:10911", direction, frame)
    assert len(r) == len(COLS)
    return dict(zip(COLS, r))


def test_send_v2_request_in_rocketmq_serialization_gives_topic_group_queue():
    ext = {"a": "PG", "b": "orders", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1", "h": "0"}
    cmd = RemotingCommand.request(310, ext_fields=ext, body=b"x" * 10, opaque=77, language=LanguageCode.CPP,
                                  serialize_type=SerializeType.ROCKETMQ)  # fmt: skip
    frame = encode_command(cmd)
    r = row(frame)
    assert (r["kind"], r["code"], r["code_name"], r["opaque"]) == ("request", 310, "SEND_MESSAGE_V2", 77)
    assert (r["serialize"], r["language"]) == ("ROCKETMQ", "CPP")
    assert (r["topic"], r["group"], r["queue_id"]) == ("orders", "PG", 3)
    assert (r["frame_len"], r["body_len"]) == (len(frame), 10)
    assert r["header_len"] == len(frame) - 8 - 10
    assert r["connection"] == "10.0.0.5:40000->10.0.0.1:10911"
    assert r["ext"] == ext and r["decode_error"] is None


def test_json_response_and_oneway_request():
    resp = encode_command(RemotingCommand.response(17, "no topic", opaque=5, ext_fields={"queueOffset": "42", "msgId": "AB"}))
    r = row(resp, TO_CLIENT)
    assert (r["kind"], r["code"], r["code_name"], r["remark"]) == ("response", 17, "TOPIC_NOT_EXIST", "no topic")
    assert (r["queue_offset"], r["msg_id"], r["serialize"]) == (42, "AB", "JSON")
    oneway = encode_command(RemotingCommand.request(40, ext_fields={"consumerGroup": "CG"}, oneway=True, opaque=9))
    r = row(oneway, TO_CLIENT)
    assert (r["kind"], r["code_name"], r["group"], r["direction"]) == ("oneway", "NOTIFY_CONSUMER_IDS_CHANGED", "CG", TO_CLIENT)


def test_a_frame_whose_header_does_not_decode_is_kept_with_its_error():
    r = row(b"\x00\x00\x00\x0c\x00\x00\x00\x08{garbage")
    assert r["kind"] is None and r["code"] is None
    assert r["frame_len"] == 16 and r["decode_error"]


def test_out_of_range_ext_numbers_become_null_not_errors():
    cmd = RemotingCommand.request(11, ext_fields={"topic": "t", "queueId": str(1 << 40), "queueOffset": "x"})
    r = row(encode_command(cmd))
    assert r["queue_id"] is None and r["queue_offset"] is None and r["topic"] == "t"


def test_endpoints_from_the_recorder_role():
    assert endpoints("s:1", "c:2", sent=True, recorder_is_client=False) == ("c:2", "s:1", TO_CLIENT)
    assert endpoints("s:1", "c:2", sent=False, recorder_is_client=False) == ("c:2", "s:1", TO_SERVER)
    assert endpoints("c:2", "s:1", sent=True, recorder_is_client=True) == ("c:2", "s:1", TO_SERVER)
