import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import CodecError, MessageDecodeError
from trocket.codecs.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    OFFSET_PHYSICAL_OFFSET,
    OFFSET_QUEUE_OFFSET,
    OFFSET_STORE_TIMESTAMP,
    RECORD_FIXED_SIZE,
    HostAddress,
    MessageEncodeError,
    MessageExt,
    decode_record,
    decode_records,
    encode_blank_into,
    encode_offset_msg_id,
    encode_properties_bytes,
    encode_record,
    encode_record_into,
    iter_records,
    patch_record,
    peek_record,
    record_size,
    store_timestamp_offset,
)
from trocket.codecs.message import sysflag as SF

LOCAL = HostAddress("127.0.0.1", 10911)

# Hand-assembled V1 record, every field from the Java layout, IPv4 hosts.
KNOWN = bytes.fromhex(
    "0000005d"  # 1 TOTALSIZE 93 = 91 + body 1 + topic 1 + properties 0
    "daa320a7"  # 2 MAGICCODE (Java -626843481)
    "4ad0cf31"  # 3 BODYCRC: CRC32("B") & 0x7FFFFFFF
    "00000001"  # 4 QUEUEID
    "00000000"  # 5 FLAG
    "0000000000000002"  # 6 QUEUEOFFSET
    "0000000000000003"  # 7 PHYSICALOFFSET
    "00000000"  # 8 SYSFLAG
    "0000000000000004"  # 9 BORNTIMESTAMP
    "7f000001"
    "00000005"  # 10 BORNHOST 127.0.0.1:5
    "0000000000000006"  # 11 STORETIMESTAMP
    "7f000001"
    "00002a9f"  # 12 STOREHOST 127.0.0.1:10911
    "00000007"  # 13 RECONSUMETIMES
    "0000000000000008"  # 14 PREPAREDTRANSACTIONOFFSET
    "00000001"
    "42"  # 15 BODY
    "01"
    "54"  # 16 TOPIC "T"
    "0000"  # 17 PROPERTIES (none)
)
KNOWN_FIELDS = dict(
    topic="T",
    body=b"B",
    queue_id=1,
    queue_offset=2,
    physical_offset=3,
    born_timestamp=4,
    born_host=HostAddress("127.0.0.1", 5),
    store_timestamp=6,
    store_host=LOCAL,
    reconsume_times=7,
    prepared_transaction_offset=8,
)

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    min_size=1,
    max_size=8,
)
_ipv4 = st.ip_addresses(v=4).map(str)
_ipv6 = st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None).map(str)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def message_exts(draw, compressed=False):
    born = draw(_ipv4 | _ipv6)
    store = draw(_ipv4 | _ipv6)
    sys_flag = SF.with_host_flags(draw(st.sampled_from([0, 2, 4, 8, 12])), born, store)
    body = draw(st.binary(max_size=100))
    if compressed:
        sys_flag |= SF.COMPRESSED_FLAG
        body = zlib.compress(body)
    return MessageExt(
        topic=draw(
            st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
                lambda t: len(t.encode()) <= 127
            )
        ),
        body=body,
        flag=draw(i32),
        properties=draw(st.dictionaries(_text, _text, max_size=4)),
        queue_id=draw(i32),
        queue_offset=draw(i64),
        sys_flag=sys_flag,
        born_timestamp=draw(i64),
        born_host=HostAddress(born, draw(st.integers(0, 65535))),
        store_timestamp=draw(i64),
        store_host=HostAddress(store, draw(st.integers(0, 65535))),
        commit_log_offset=draw(i64),
        body_crc=draw(st.integers(0, 2**31 - 1)),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
    )


def test_known_bytes_encode_and_decode():
    buf = bytearray(93)
    assert encode_record_into(buf, 0, **KNOWN_FIELDS) == 93
    assert bytes(buf) == KNOWN
    msg, end = decode_record(KNOWN)
    assert end == 93
    assert (msg.topic, msg.body, msg.queue_id, msg.queue_offset, msg.commit_log_offset) == (
        "T",
        b"B",
        1,
        2,
        3,
    )
    assert (msg.born_timestamp, msg.born_host, msg.store_timestamp, msg.store_host) == (
        4,
        ("127.0.0.1", 5),
        6,
        LOCAL,
    )
    assert (msg.reconsume_times, msg.prepared_transaction_offset, msg.store_size, msg.body_crc) == (
        7,
        8,
        93,
        0x4AD0CF31,
    )
    assert msg.properties == {}
    assert msg.msg_id == "7F00000100002A9F0000000000000003"
    assert encode_record(msg) == KNOWN


def test_sizes_and_offsets():
    assert record_size(0, 0, 0) == RECORD_FIXED_SIZE == 91
    assert record_size(10, 5, 7) == 113
    assert record_size(0, 0, 0, SF.BORNHOST_V6_FLAG) == 103
    assert record_size(0, 0, 0, SF.BORNHOST_V6_FLAG | SF.STOREHOSTADDRESS_V6_FLAG) == 115
    assert (OFFSET_QUEUE_OFFSET, OFFSET_PHYSICAL_OFFSET, OFFSET_STORE_TIMESTAMP) == (20, 28, 56)
    assert store_timestamp_offset(0) == 56
    assert store_timestamp_offset(SF.STOREHOSTADDRESS_V6_FLAG) == 56
    assert store_timestamp_offset(SF.BORNHOST_V6_FLAG) == 68
    assert MESSAGE_MAGIC_CODE == (0xAABBCCDD ^ (1880681586 + 8)) == (-626843481) & 0xFFFFFFFF
    assert BLANK_MAGIC_CODE == (0xBBCCDDEE ^ (1880681586 + 8)) == (-875286124) & 0xFFFFFFFF


@pytest.mark.parametrize("sys_flag", [0, SF.BORNHOST_V6_FLAG])
def test_prepare_outside_lock_then_patch(sys_flag):
    born = HostAddress("::1", 7) if sys_flag else HostAddress("10.1.2.3", 7)
    fields = dict(
        KNOWN_FIELDS,
        born_host=born,
        sys_flag=sys_flag,
        queue_offset=0,
        physical_offset=0,
        store_timestamp=0,
    )
    prepared = bytearray(record_size(1, 1, 0, sys_flag))
    encode_record_into(prepared, 0, **fields)
    segment = bytearray(4096)
    view = memoryview(segment)
    at = 1000
    view[at : at + len(prepared)] = prepared
    patch_record(
        view, at, queue_offset=41, physical_offset=1_000_000 + at, store_timestamp=1_700_000_000_000
    )
    msg, end = decode_record(segment, at)
    assert end == at + len(prepared)
    assert (msg.queue_offset, msg.commit_log_offset, msg.store_timestamp) == (
        41,
        1_000_000 + at,
        1_700_000_000_000,
    )
    assert msg.born_host == born and msg.born_timestamp == 4
    direct = bytearray(len(prepared))
    encode_record_into(
        direct,
        0,
        **dict(
            fields,
            queue_offset=41,
            physical_offset=1_000_000 + at,
            store_timestamp=1_700_000_000_000,
        ),
    )
    assert segment[at:end] == direct


def test_raw_properties_string_is_stored_verbatim():
    raw = "WAIT\x01true\x02UNIQ_KEY\x01AB\x02"  # C++ client style, trailing separator
    buf = bytearray(200)
    size = encode_record_into(buf, 0, topic=b"T", body=b"", properties=raw, store_host=LOCAL)
    assert raw.encode() in buf
    msg, _ = decode_record(buf[:size])
    assert msg.properties == {"WAIT": "true", "UNIQ_KEY": "AB"}
    assert msg.body == b""


def test_compressed_body():
    body = b"hello " * 1000
    stored = zlib.compress(body, 5)
    rec = encode_record(
        MessageExt("T", stored, sys_flag=SF.COMPRESSED_FLAG, store_host=LOCAL, body_crc=123)
    )
    msg, _ = decode_record(rec)
    assert msg.body == body and msg.sys_flag == SF.COMPRESSED_FLAG
    raw, _ = decode_record(rec, decompress=False)
    assert raw.body == stored
    skipped, _ = decode_record(rec, read_body=False)
    assert skipped.body == b""


@pytest.mark.parametrize("stored", [b"not zlib at all", zlib.compress(b"x" * 100)[:-3]])
def test_corrupt_zlib_is_a_decode_error(stored):
    rec = encode_record(MessageExt("T", stored, sys_flag=SF.COMPRESSED_FLAG, store_host=LOCAL))
    with pytest.raises(MessageDecodeError):
        decode_record(rec)
    assert decode_record(rec, decompress=False)[0].body == stored


def test_check_crc():
    rec = bytearray(KNOWN)
    assert decode_record(rec, check_crc=True)[0].body == b"B"
    rec[8:12] = struct.pack(">i", 1)
    assert decode_record(rec)[0].body_crc == 1
    with pytest.raises(MessageDecodeError, match="BODYCRC"):
        decode_record(rec, check_crc=True)


def test_magic_codes():
    blank = bytearray(16)
    encode_blank_into(blank, 0, 16)
    assert peek_record(blank) == (16, BLANK_MAGIC_CODE)
    with pytest.raises(MessageDecodeError, match="blank"):
        decode_record(blank)
    bad = bytearray(KNOWN)
    bad[4:8] = b"\x00\x00\x00\x00"
    with pytest.raises(MessageDecodeError, match="magic"):
        decode_record(bad)
    assert decode_record(bad, check_magic=False)[0].topic == "T"  # Java never checks


def test_v2_magic_with_short_topic_length_decodes():
    topic = "t" * 200
    v1 = encode_record(MessageExt("x", b"B", store_host=LOCAL, properties={"A": "1"}))
    head = bytearray(v1[: 88 + 1])  # fixed part + body
    head[4:8] = bytes.fromhex("daa320ab")
    rest = struct.pack(">h", 200) + topic.encode() + struct.pack(">h", 3) + b"A\x011"
    head[0:4] = struct.pack(">i", len(head) + len(rest))
    msg, _ = decode_record(bytes(head) + rest)
    assert msg.topic == topic and msg.properties == {"A": "1"}


def test_ipv6_hosts_and_offset_id():
    msg = MessageExt(
        "T",
        b"x",
        sys_flag=SF.BORNHOST_V6_FLAG | SF.STOREHOSTADDRESS_V6_FLAG,
        born_host=HostAddress("fe80::1", 1),
        store_host=HostAddress("2001:db8::2", 10911),
        commit_log_offset=5,
    )
    rec = encode_record(msg)
    assert len(rec) == 91 + 24 + 2
    out, _ = decode_record(rec)
    assert out.store_host == ("2001:db8::2", 10911)
    assert out.msg_id == encode_offset_msg_id("2001:db8::2", 10911, 5)
    assert len(out.msg_id) == 56


def test_ipv4_host_under_v6_flag_is_written_mapped():
    msg = MessageExt("T", sys_flag=SF.STOREHOSTADDRESS_V6_FLAG, store_host=LOCAL)
    rec = encode_record(msg)
    assert b"\x00" * 10 + b"\xff\xff\x7f\x00\x00\x01" in rec
    out, _ = decode_record(rec)
    assert out.store_host == LOCAL  # Java reads the mapped address back as Inet4Address
    assert encode_record(out) == rec


def test_encode_errors():
    with pytest.raises(MessageEncodeError, match="127"):
        encode_record(MessageExt("t" * 128))
    assert len(encode_record(MessageExt("t" * 127))) == 91 + 127
    with pytest.raises(MessageEncodeError, match="IPv6"):
        encode_record(MessageExt("T", store_host=HostAddress("::1", 1)))
    with pytest.raises(MessageEncodeError):
        encode_record(MessageExt("T", queue_id=2**31))
    with pytest.raises(MessageEncodeError):
        encode_record(MessageExt("T", properties={"K": "v" * 40000}))
    with pytest.raises(MessageEncodeError, match="does not fit"):
        encode_record_into(bytearray(50), 0, topic="T")
    with pytest.raises(MessageEncodeError):
        encode_blank_into(bytearray(4), 0, 4)


def test_every_truncation_is_a_decode_error():
    for cut in range(len(KNOWN)):
        with pytest.raises(MessageDecodeError):
            decode_record(KNOWN[:cut])


@pytest.mark.parametrize(
    ("at", "value"),
    [
        (0, struct.pack(">i", 94)),  # TOTALSIZE past the end
        (0, struct.pack(">i", 92)),  # TOTALSIZE shorter than the fields
        (0, struct.pack(">i", -1)),
        (84, struct.pack(">i", -1)),  # negative body length
        (84, struct.pack(">i", 2)),  # body swallows the topic length
        (89, b"\x80"),  # negative topic length
        (89, b"\x05"),  # topic runs past the record
        (91, b"\xff\xff"),  # negative properties length
        (91, b"\x00\x01"),  # properties past TOTALSIZE
        (90, b"\xff"),  # topic not UTF-8
        (52, struct.pack(">i", 70000)),  # born port out of range
        (68, struct.pack(">i", -1)),  # store port out of range
    ],
)
def test_malformed_fields(at, value):
    rec = bytearray(KNOWN)
    rec[at : at + len(value)] = value
    with pytest.raises(MessageDecodeError):
        decode_record(bytes(rec))


def test_iter_records_pull_body():
    one = encode_record(MessageExt("A", b"1", store_host=LOCAL, commit_log_offset=0))
    two = encode_record(MessageExt("B", b"2", store_host=LOCAL, commit_log_offset=len(one)))
    body = one + two
    assert [m.topic for m in iter_records(body)] == ["A", "B"]
    assert [m.msg_id for m in decode_records(body)][1].endswith("%016X" % len(one))
    assert decode_records(b"") == []
    broken = body + b"\x00\x00"
    with pytest.raises(MessageDecodeError):
        decode_records(broken)
    assert [m.topic for m in iter_records(broken, strict=False)] == ["A", "B"]  # Java's decodes()


@settings(max_examples=120)
@given(message_exts())
def test_round_trip(msg):
    rec = encode_record(msg)
    props = encode_properties_bytes(msg.properties)
    assert len(rec) == record_size(len(msg.body), len(msg.topic.encode()), len(props), msg.sys_flag)
    out, end = decode_record(rec)
    assert end == len(rec)
    assert out.store_size == len(rec)
    msg.store_size = len(rec)
    assert out == msg
    assert out.msg_id == msg.msg_id
    assert encode_record(out) == rec
    buf = bytearray(len(rec) + 10)
    assert encode_record_into(
        buf,
        5,
        topic=msg.topic,
        body=msg.body,
        properties=msg.properties,
        queue_id=msg.queue_id,
        flag=msg.flag,
        queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_timestamp=msg.store_timestamp,
        store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        body_crc=msg.body_crc,
    ) == len(rec)
    assert buf[5 : 5 + len(rec)] == rec


@settings(max_examples=40)
@given(message_exts(compressed=True))
def test_round_trip_compressed(msg):
    rec = encode_record(msg)
    assert decode_record(rec, decompress=False)[0].body == msg.body
    assert decode_record(rec)[0].body == zlib.decompress(msg.body)


@settings(max_examples=300)
@given(st.binary(max_size=160), st.booleans())
def test_garbage_only_raises_decode_errors(data, check_magic):
    try:
        decode_records(data, check_magic=check_magic, check_crc=True)
    except CodecError as exc:
        assert isinstance(exc, MessageDecodeError)
    list(iter_records(data, check_magic=check_magic, strict=False))  # never raises


@settings(max_examples=300)
@given(st.data())
def test_mutated_records_only_raise_decode_errors(data):
    rec = bytearray(
        KNOWN
        + encode_record(
            MessageExt("T", zlib.compress(b"x" * 50), sys_flag=1, properties={"A": "b"})
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        rec[data.draw(st.integers(0, len(rec) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_records(bytes(rec), check_magic=False)
    except CodecError as exc:
        assert isinstance(exc, MessageDecodeError)


def test_record_head_reads_the_fixed_part_as_decode_record_does():
    from trocket.codecs.message.record import record_head

    for born, store in (("10.0.0.1", "10.0.0.2"), ("::1", "10.0.0.2"), ("10.0.0.1", "fe80::1")):
        flag = SF.with_host_flags(SF.COMPRESSED_FLAG | SF.TRANSACTION_PREPARED_TYPE, born, store)
        msg = MessageExt(
            topic="T", body=b"zbody", flag=7, properties={"K": "v"}, queue_id=3, queue_offset=11, sys_flag=flag,
            born_timestamp=1234, born_host=HostAddress(born, 81), store_timestamp=5678,
            store_host=HostAddress(store, 82), commit_log_offset=99, reconsume_times=2, prepared_transaction_offset=7,
        )
        raw = b"\x00" * 5 + encode_record(msg)
        head = record_head(raw, 5)
        got, _ = decode_record(raw, 5, decompress=False)
        assert (head.queue_id, head.flag, head.queue_offset, head.physical_offset, head.sys_flag) == (3, 7, 11, 99, flag)
        assert (head.born_timestamp, head.born_port, head.store_timestamp, head.store_port) == (1234, 81, 5678, 82)
        assert (head.reconsume_times, head.prepared_transaction_offset) == (2, 7)
        assert raw[head.body_position : head.body_position + head.body_length] == got.body == b"zbody"
        assert head.total_size == got.store_size
