import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import CodecError, MessageDecodeError
from trocket.codecs.message import (
    Message,
    MessageEncodeError,
    append_properties,
    decode_properties,
    decode_properties_bytes,
    encode_properties,
    encode_properties_bytes,
)
from trocket.codecs.message import properties as P

GOLDEN = Path(__file__).parents[2] / "conformance" / "golden" / "java-4.9.8" / "manifest.json"

# Names and values that survive the format: no separators, not empty, valid UTF-8.
_prop_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    min_size=1,
    max_size=12,
)
prop_maps = st.dictionaries(_prop_text, _prop_text, max_size=8)


def java_string2message_properties(s: str) -> dict[str, str]:
    """Line-by-line port of 4.9.8's MessageDecoder.string2messageProperties (indexOf)."""
    result = {}
    length = len(s)
    index = 0
    while index < length:
        new_index = s.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = s.find("\x01", index)
            if index < kv < new_index - 1:
                result[s[index:kv]] = s[kv + 1 : new_index]
        index = new_index + 1
    return result


def test_java_names():
    assert P.PROPERTY_KEYS == "KEYS"
    assert P.PROPERTY_TAGS == "TAGS"
    assert P.PROPERTY_WAIT_STORE_MSG_OK == "WAIT"
    assert P.PROPERTY_DELAY_TIME_LEVEL == "DELAY"
    assert P.PROPERTY_REAL_QUEUE_ID == "REAL_QID"
    assert P.PROPERTY_TRANSACTION_PREPARED == "TRAN_MSG"
    assert P.PROPERTY_PRODUCER_GROUP == "PGROUP"
    assert P.PROPERTY_TRACE_SWITCH == "TRACE_ON"
    assert P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert P.PROPERTY_CONSUME_START_TIMESTAMP == "CONSUME_START_TIME"
    assert P.PROPERTY_CLUSTER == "CLUSTER"
    assert "UNIQ_KEY" in P.SYSTEM_PROPERTY_NAMES and "CLUSTER" in P.SYSTEM_PROPERTY_NAMES


def test_encode_has_no_trailing_separator():
    assert encode_properties({}) == ""
    assert encode_properties({"WAIT": "true"}) == "WAIT\x01true"
    assert encode_properties({"A": "1", "B": "2"}) == "A\x011\x02B\x012"
    assert encode_properties({"A": "1", "N": None, "B": "2"}) == "A\x011\x02B\x012"
    assert encode_properties({"N": None}) == ""
    assert encode_properties_bytes({"K": "\u00e9"}) == b"K\x01\xc3\xa9"


def test_java_order_matches_golden_send_message_v2():
    # A Java 4.9.8 producer's SEND_MESSAGE_V2 "i" field, as captured.
    frames = {f["file"]: f for f in json.loads(GOLDEN.read_text())["frames"]}
    wire = frames["send_message_v2__JSON.bin"]["extFields"]["i"]
    msg = Message.create("TopicTest", b"x", tags="TagA", keys="OrderID188")
    msg.unique_key = "7F00000100002A9F0000000000000000"  # setUniqID runs after the constructor
    assert encode_properties(msg.properties, java_order=True) == wire
    assert encode_properties(msg.properties) != wire  # insertion order is not Java's
    assert wire == (
        "KEYS\x01OrderID188\x02UNIQ_KEY\x017F00000100002A9F0000000000000000"
        "\x02WAIT\x01true\x02TAGS\x01TagA"
    )


def test_decode_with_and_without_trailing_separator():
    expected = {"KEYS": "k1 k2", "WAIT": "true"}
    assert decode_properties("KEYS\x01k1 k2\x02WAIT\x01true") == expected
    assert decode_properties("KEYS\x01k1 k2\x02WAIT\x01true\x02") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("\x02\x02", {}),
        ("A\x011\x02\x02B\x012", {"A": "1", "B": "2"}),  # empty item skipped
        ("noseparator\x02B\x012", {"B": "2"}),  # item without \x01 skipped, like Java
        ("\x01v\x02B\x012", {"B": "2"}),  # empty key skipped
        ("k\x01\x02B\x012", {"B": "2"}),  # empty value skipped
        ("k\x01a\x01b", {"k": "a\x01b"}),  # value runs to the item's end
        ("A\x011\x02A\x012", {"A": "2"}),  # last one wins
        ("ab", {}),
    ],
)
def test_decode_follows_java(text, expected):
    assert decode_properties(text) == expected
    assert java_string2message_properties(text) == expected


@settings(max_examples=300)
@given(st.text(st.sampled_from("ab\x01\x02\u00e9"), max_size=30))
def test_decode_equals_java_port(text):
    assert decode_properties(text) == java_string2message_properties(text)


@settings(max_examples=150)
@given(prop_maps, st.booleans())
def test_round_trip(props, java_order):
    text = encode_properties(props, java_order=java_order)
    assert decode_properties(text) == props
    assert decode_properties(text + "\x02") == props
    assert decode_properties_bytes(encode_properties_bytes(props, java_order=java_order)) == props


@settings(max_examples=200)
@given(st.binary(max_size=64))
def test_decode_bytes_only_raises_codec_errors(data):
    try:
        decode_properties_bytes(data)
    except CodecError as exc:
        assert isinstance(exc, MessageDecodeError)


def test_decode_bytes_rejects_invalid_utf8():
    with pytest.raises(MessageDecodeError):
        decode_properties_bytes(b"K\x01\xff")
    assert decode_properties_bytes(memoryview(b"K\x01v")) == {"K": "v"}


def test_encode_limits():
    with pytest.raises(MessageEncodeError):
        encode_properties_bytes({"K": "v" * 40000})
    assert len(encode_properties_bytes({"K": "v" * 32765})) == 32767
    with pytest.raises(MessageEncodeError):
        encode_properties_bytes({"K": "\ud800"})  # lone surrogate


def test_append_properties_like_commitlog_batch():
    assert append_properties(b"A\x011", b"CLUSTER\x01c") == b"A\x011\x02CLUSTER\x01c"
    assert append_properties(b"A\x011\x02", b"CLUSTER\x01c") == b"A\x011\x02CLUSTER\x01c"
    assert append_properties(b"", b"CLUSTER\x01c") == b"CLUSTER\x01c"
    assert append_properties(b"A\x011", b"") == b"A\x011"


def test_get_property_reads_one_key_from_str_or_bytes():
    from trocket.codecs.message.properties import get_property

    props = "KEYS\x01k1\x02XTAGS\x01no\x02TAGS\x01TagA\x02EMPTY\x01\x02WAIT\x01true"
    for form in (props, props.encode(), memoryview(props.encode())):
        assert get_property(form, "TAGS") == "TagA"  # not the XTAGS that contains it
        assert get_property(form, "KEYS") == "k1"  # at the very start
        assert get_property(form, "WAIT") == "true"  # at the end, no trailing separator
        assert get_property(form, "EMPTY") is None  # empty reads as absent
        assert get_property(form, "DELAY") is None
    assert get_property(None, "TAGS") is None and get_property(b"", "TAGS") is None
    # as Java's map: the last item with a value wins, an empty value is no value
    for form in ("TAGS\x01a\x02TAGS\x01b", "TAGS\x01a\x02TAGS\x01b\x02TAGS\x01", "XTAGS\x01c\x02TAGS\x01a\x02TAGS\x01b"):
        assert get_property(form, "TAGS") == "b" == decode_properties(form)["TAGS"], form
        assert get_property(form.encode(), "TAGS") == "b", form
    assert get_property("TAGS\x01a\x02TAGS\x01", "TAGS") == "a"
    assert get_property("K\x01xTAGS\x01b", "TAGS") is None  # inside another item's value
    assert get_property(b"TAGS\x01\xff\xfe", "TAGS") == "\ufffd\ufffd"  # undecodable bytes replaced


# -- without_properties_bytes: the broker's cuts of a stored properties string ----------------------


def _without_reference(data: bytes, drop: frozenset[bytes]) -> bytes:
    """What without_properties_bytes means, item by item: the items whose key is in
    ``drop`` dropped, every other byte kept."""
    return b"\x02".join(p for p in data.split(b"\x02") if p.partition(b"\x01")[0] not in drop) if data else b""


_items = st.sampled_from([b"A\x01a", b"B\x01b", b"C\x01", b"", b"BB\x01x", b"X\x01B\x01y", b"Q\x01\x01", b"B\x01", b"\xff\x01\xfe"])


@settings(max_examples=400)
@given(
    st.lists(_items, max_size=6), st.booleans(),
    st.sampled_from([frozenset({b"B"}), frozenset({b"B", b"C"}), frozenset({b"Z"}), frozenset()]),
)
def test_without_properties_bytes_matches_its_definition(items, trailing, drop):
    data = b"\x02".join(items) + (b"\x02" if trailing and items else b"")
    assert P.without_properties_bytes(data, drop) == _without_reference(data, drop)


def test_without_properties_bytes_on_java_order_is_javas_order():
    """A string in HashMap order, keys cut: the order Java writes the map without them."""
    from trocket.codecs.java_hashmap import JavaHashMap

    m = JavaHashMap((k, k.lower()) for k in ("TAGS", "KEYS", "REAL_TOPIC", "PGROUP", "UNIQ_KEY", "CLUSTER", "REAL_QID",
                                            "TRAN_MSG", "WAIT", "A1", "B22"))
    cut = {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"}
    text = m.to_properties()
    got = P.without_properties_bytes(text.encode(), frozenset(k.encode() for k in cut))
    assert got == m.to_properties(without=cut).encode()
