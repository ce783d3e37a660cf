import pytest

from trocket.codecs.errors import MessageDecodeError
from trocket.codecs.message import (
    HostAddress,
    Message,
    MessageEncodeError,
    MessageExt,
    body_crc,
    bytes_to_ip,
    ip_to_bytes,
    java_parse_int,
)
from trocket.codecs.message import sysflag as SF


def test_create_sets_wait_like_java_constructor():
    msg = Message.create("T", b"body")
    assert msg.properties == {"WAIT": "true"}
    msg = Message.create("T", b"b", tags="TagA", keys="k1 k2", wait_store_msg_ok=False)
    assert list(msg.properties) == ["TAGS", "KEYS", "WAIT"]
    assert msg.properties["WAIT"] == "false"
    assert not msg.wait_store_msg_ok
    assert Message("T").properties == {}  # the plain constructor adds nothing


def test_tags_keys_delay_uniq():
    msg = Message("T", b"")
    assert msg.tags is None and msg.keys == [] and msg.delay_time_level == 0
    assert msg.wait_store_msg_ok  # absent means true
    msg.tags = "A||B"
    msg.keys = ["k1", "k2", " k3 "]
    assert msg.properties["KEYS"] == "k1 k2  k3"  # joined with spaces, then trimmed
    assert msg.keys == ["k1", "k2", "k3"]
    msg.keys = "  raw  "
    assert msg.properties["KEYS"] == "  raw  "  # setKeys(String) stores as is
    msg.delay_time_level = 3
    assert msg.properties["DELAY"] == "3" and msg.delay_time_level == 3
    msg.unique_key = "ABC"
    assert msg.unique_key == "ABC"
    msg.clear_property("TAGS")
    assert msg.tags is None


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("TRUE", True), ("yes", False), ("", False)]
)
def test_wait_parses_like_boolean_parse_boolean(raw, expected):
    assert Message("T", properties={"WAIT": raw}).wait_store_msg_ok is expected


@pytest.mark.parametrize("raw", ["", "1.5", " 1", "1_0", "x", "2147483648", "\u0661"])
def test_delay_level_rejects_what_parse_int_rejects(raw):
    with pytest.raises(MessageDecodeError):
        _ = Message("T", properties={"DELAY": raw}).delay_time_level


def test_java_parse_int_accepts_signs():
    assert java_parse_int("+7") == 7
    assert java_parse_int("-2147483648") == -(2**31)


def test_put_user_property():
    msg = Message("T")
    msg.put_user_property("color", "red")
    assert msg.properties["color"] == "red"
    with pytest.raises(ValueError, match="used by system"):
        msg.put_user_property("UNIQ_KEY", "x")
    with pytest.raises(ValueError, match="blank"):
        msg.put_user_property("k", " \t")


def test_message_ext_msg_id_is_lazy_and_follows_its_inputs():
    ext = MessageExt("T", store_host=HostAddress("127.0.0.1", 10911), commit_log_offset=3)
    assert ext._msg_id_cache is None  # nothing computed yet
    assert ext.msg_id == "7F00000100002A9F0000000000000003"
    assert ext._msg_id_cache[2] == ext.msg_id  # cached
    ext.commit_log_offset = 4
    assert ext.msg_id == "7F00000100002A9F0000000000000004"
    ext.store_host = HostAddress("10.0.0.1", 10911)
    assert ext.msg_id == "0A00000100002A9F0000000000000004"
    assert MessageExt("T", msg_id="X").msg_id == "X"
    ext.msg_id = "Y"
    assert ext.msg_id == "Y"


def test_client_msg_id_prefers_uniq_key():
    ext = MessageExt("T", store_host=HostAddress("127.0.0.1", 10911), commit_log_offset=3)
    assert ext.client_msg_id == ext.msg_id
    ext.unique_key = "U"
    assert ext.client_msg_id == "U"


def test_message_ext_equality_ignores_cache():
    a = MessageExt("T", body=b"x")
    b = MessageExt("T", body=b"x")
    assert a.msg_id  # fills the cache
    assert a == b


def test_body_crc_is_java_crc32_masked():
    # java.util.zip.CRC32 of "123456789" is 0xCBF43926; RocketMQ keeps 31 bits.
    assert body_crc(b"123456789") == 0x4BF43926
    assert body_crc(b"") == 0
    assert body_crc(memoryview(b"123456789")) == 0x4BF43926


def test_sysflag_helpers():
    assert (SF.COMPRESSED_FLAG, SF.MULTI_TAGS_FLAG) == (1, 2)
    assert (
        SF.TRANSACTION_PREPARED_TYPE,
        SF.TRANSACTION_COMMIT_TYPE,
        SF.TRANSACTION_ROLLBACK_TYPE,
    ) == (4, 8, 12)
    assert (SF.BORNHOST_V6_FLAG, SF.STOREHOSTADDRESS_V6_FLAG) == (0x10, 0x20)
    flag = SF.COMPRESSED_FLAG | SF.TRANSACTION_PREPARED_TYPE
    assert SF.get_transaction_value(flag) == SF.TRANSACTION_PREPARED_TYPE
    assert SF.reset_transaction_value(flag, SF.TRANSACTION_COMMIT_TYPE) == SF.COMPRESSED_FLAG | 8
    assert SF.clear_compressed_flag(flag) == 4
    assert SF.is_compressed(flag) and not SF.is_compressed(4)
    assert SF.with_host_flags(1, "::1", "10.0.0.1") == 1 | 0x10
    assert SF.with_host_flags(0x31, "1.2.3.4", "::ffff:1.2.3.4") == 1  # mapped counts as v4


def test_hosts():
    assert ip_to_bytes("127.0.0.1") == b"\x7f\x00\x00\x01"
    assert ip_to_bytes("::ffff:10.0.0.1") == b"\x0a\x00\x00\x01"
    assert len(ip_to_bytes("fe80::1")) == 16
    assert bytes_to_ip(b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert bytes_to_ip(b"\x00" * 10 + b"\xff\xff\x0a\x00\x00\x01") == "10.0.0.1"
    assert bytes_to_ip(b"\x00" * 15 + b"\x01") == "::1"
    assert str(HostAddress("127.0.0.1", 10911)) == "127.0.0.1:10911"
    with pytest.raises(MessageEncodeError):
        ip_to_bytes("localhost")
