from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import CodecError, MessageIdError
from trocket.codecs.message import (
    OffsetMessageId,
    UniqueIdGenerator,
    decode_offset_msg_id,
    decode_unique_id,
    encode_offset_msg_id,
    month_start_ms,
    offset_msg_id_from_host_bytes,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def ms(*args, tz=timezone.utc) -> int:
    return (datetime(*args, tzinfo=tz) - _EPOCH) // timedelta(milliseconds=1)


# -- offset ids --------------------------------------------------------------------


def test_offset_id_known_value():
    assert encode_offset_msg_id("127.0.0.1", 10911, 3) == "7F00000100002A9F0000000000000003"
    assert (
        offset_msg_id_from_host_bytes(b"\x7f\x00\x00\x01\x00\x00\x2a\x9f", 3)
        == "7F00000100002A9F0000000000000003"
    )
    assert decode_offset_msg_id("7F00000100002A9F0000000000000003") == OffsetMessageId(
        "127.0.0.1", 10911, 3
    )
    assert (
        decode_offset_msg_id("7f00000100002a9f0000000000000003").port == 10911
    )  # Java upper-cases
    assert decode_offset_msg_id("7F00000100002A9F0000000000000003").host == ("127.0.0.1", 10911)


def test_offset_id_ipv6_and_negative_offset():
    msg_id = encode_offset_msg_id("2001:db8::1", 10911, -1)
    assert msg_id == "20010DB800000000000000000000000100002A9FFFFFFFFFFFFFFFFF"
    assert decode_offset_msg_id(msg_id) == ("2001:db8::1", 10911, -1)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "7F00000100002A9F000000000000003",  # 31 chars
        "7F00000100002A9F00000000000000030",  # 33 chars
        "7G00000100002A9F0000000000000003",  # not hex
        "7F 0000100002A9F0000000000000003",  # fromhex would skip the space
        "7F000001FFFFFFFF0000000000000003",  # port -1
        "7F0000010001000000000000000000003"[:32],  # port 65536
    ],
)
def test_offset_id_rejects(bad):
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(bad)


def test_offset_id_rejects_non_str():
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(b"7F00000100002A9F0000000000000003")  # type: ignore[arg-type]


@settings(max_examples=150)
@given(
    st.ip_addresses().filter(lambda a: getattr(a, "ipv4_mapped", None) is None).map(str),
    st.integers(0, 65535),
    st.integers(-(2**63), 2**63 - 1),
)
def test_offset_id_round_trip(ip, port, offset):
    msg_id = encode_offset_msg_id(ip, port, offset)
    assert len(msg_id) in (32, 56) and msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == (ip, port, offset)


@settings(max_examples=300)
@given(
    st.text(max_size=60)
    | st.text("0123456789abcdefABCDEF", min_size=32, max_size=32)
    | st.text("0123456789ABCDEF", min_size=56, max_size=56)
)
def test_garbage_ids_only_raise_id_errors(text):
    for decode in (decode_offset_msg_id, decode_unique_id):
        try:
            decode(text)
        except CodecError as exc:
            assert isinstance(exc, MessageIdError)


# -- unique ids --------------------------------------------------------------------


def test_unique_id_known_value():
    gen = UniqueIdGenerator("127.0.0.1", 12345, 0x12345678)
    now = ms(2024, 3, 5, 0, 0, 1, 234000)
    # prefix: IP 7F000001, pid (short) 3039, class-loader hash 12345678;
    # then ms since 2024-03-01T00:00Z = 4 d + 1.234 s = 0x149974D2, counter 0000.
    assert gen.prefix == "7F000001303912345678"
    assert gen.next_id(now) == "7F000001303912345678149974D20000"
    assert gen.next_id(now) == "7F000001303912345678149974D20001"


def test_prefix_truncates_like_java_casts():
    gen = UniqueIdGenerator(b"\x0a\x00\x00\x01", 70000, -1)
    assert gen.prefix == "0A0000011170FFFFFFFF"  # (short) 70000 = 0x1170
    gen6 = UniqueIdGenerator("::1", 1, 2)
    assert len(gen6.next_id(0)) == 56


def test_counter_wraps_at_16_bits():
    gen = UniqueIdGenerator("127.0.0.1", 1, 1, counter=0xFFFF)
    now = ms(2024, 3, 1)
    assert gen.next_id(now).endswith("FFFF")
    assert gen.next_id(now).endswith("0000")


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=ms(2020, 1, 1), max_value=ms(2030, 1, 1)),
    st.lists(st.sampled_from([0, 0, 1, 7, 86_400_000, -2000, -5_000_000]), min_size=1, max_size=80),
)
def test_next_id_made_once_per_ms_matches_making_each_id(start, steps):
    """``next_id`` makes the prefix and time part once per millisecond: the ids are the
    ones made from scratch each time, over repeated ms, new ms, days (months roll over)
    and clock steps back."""
    cached = UniqueIdGenerator("127.0.0.1", 1, 1)
    fresh = UniqueIdGenerator("127.0.0.1", 1, 1)
    now = start
    for step in steps:
        now += step
        fresh._head_ms = None  # (white box: nothing kept from the last call)
        assert cached.next_id(now) == fresh.next_id(now)


def test_month_rollover_and_clock_steps():
    gen = UniqueIdGenerator("127.0.0.1", 1, 1, start_ms=ms(2024, 2, 20))
    feb = ms(2024, 2, 1)
    assert gen.next_id(ms(2024, 2, 29, 23, 59, 59, 999000))[20:28] == "%08X" % (
        ms(2024, 2, 29, 23, 59, 59, 999000) - feb
    )
    assert gen.next_id(ms(2024, 3, 1, 0, 0, 0, 5000))[20:28] == "00000005"  # new month
    # Clock steps back into February: under 1000 s is written as 0 (Java's NTP guard) ...
    assert gen.next_id(ms(2024, 3, 1) - 100)[20:28] == "00000000"
    # ... further back the negative int is written as is.
    assert gen.next_id(ms(2024, 3, 1) - 3_600_000)[20:28] == "FFC91180"


def test_late_in_month_int_wraps_and_reads_back_unsigned():
    gen = UniqueIdGenerator("127.0.0.1", 1, 1)
    now = ms(2024, 3, 31)
    uid = gen.next_id(now)
    assert uid[20:28] == "9A7EC800"  # 30 days in ms > 2**31: Java's (int) goes negative
    info = decode_unique_id(uid, now_ms=now + 1000)
    assert info.ms_in_month == 30 * 86_400_000
    assert info.approx_time_ms == now


def test_time_zone_is_the_callers():
    shanghai = timezone(timedelta(hours=8))
    assert month_start_ms(ms(2024, 2, 29, 17), shanghai) == ms(2024, 3, 1, tz=shanghai)
    assert month_start_ms(ms(2024, 2, 29, 17)) == ms(2024, 2, 1)
    assert month_start_ms(ms(2024, 1, 15), months=-1) == ms(2023, 12, 1)
    assert month_start_ms(ms(2024, 12, 15), months=1) == ms(2025, 1, 1)
    gen = UniqueIdGenerator("127.0.0.1", 1, 1, tz=shanghai)
    assert gen.next_id(ms(2024, 3, 1, 1, tz=shanghai))[20:28] == "%08X" % 3_600_000


def test_decode_unique_id_parts():
    gen = UniqueIdGenerator("192.168.1.20", 4242, -2)
    now = ms(2024, 3, 5, 12)
    gen.next_id(now)
    uid = gen.next_id(now)
    info = decode_unique_id(uid, now_ms=now + 5000)
    assert (info.ip, info.pid, info.class_loader_hash, info.counter) == (
        "192.168.1.20",
        4242,
        -2,
        1,
    )
    assert info.ms_in_month == now - ms(2024, 3, 1)
    assert info.approx_time_ms == now
    assert decode_unique_id(uid).approx_time_ms is None
    assert decode_unique_id(uid.lower()).pid == 4242


def test_nearly_time_assumes_previous_month_when_in_the_future():
    gen = UniqueIdGenerator("127.0.0.1", 1, 1)
    created = ms(2024, 2, 20)
    uid = gen.next_id(created)
    # Read back in March, the 19-days span would be in the future: February is assumed.
    assert decode_unique_id(uid, now_ms=ms(2024, 3, 2)).approx_time_ms == created
    # Read back two months later, only the span is known: Java's rule says April 20.
    assert decode_unique_id(uid, now_ms=ms(2024, 4, 25)).approx_time_ms == ms(2024, 4, 20)


@settings(max_examples=150)
@given(
    st.ip_addresses().filter(lambda a: getattr(a, "ipv4_mapped", None) is None).map(str),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(ms(2000, 1, 1), ms(2100, 1, 1)),
    st.integers(0, 2**16 - 1),
)
def test_unique_id_round_trip(ip, pid, loader_hash, now, counter):
    gen = UniqueIdGenerator(ip, pid, loader_hash, counter=counter)
    uid = gen.next_id(now)
    assert len(uid) in (32, 56) and uid == uid.upper()
    info = decode_unique_id(uid, now_ms=now + 1)
    assert (info.ip, info.pid, info.class_loader_hash, info.counter) == (
        ip,
        pid & 0xFFFF,
        loader_hash,
        counter,
    )
    assert info.ms_in_month == now - month_start_ms(now)
    assert info.approx_time_ms == now
