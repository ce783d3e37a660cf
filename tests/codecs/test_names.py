import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import InvalidNameError
from trocket.codecs.names import (
    VALID_CHAR_BIT_MAP,
    has_illegal_chars,
    is_not_allowed_send_topic,
    is_system_topic,
    is_valid_group,
    is_valid_topic,
    validate_group,
    validate_topic,
)

ILLEGAL_TOPIC = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
JAVA_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")


def test_bit_map_is_javas():
    assert len(VALID_CHAR_BIT_MAP) == 128
    legal = {chr(i) for i, ok in enumerate(VALID_CHAR_BIT_MAP) if ok}
    assert legal == set("%|-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%group_1", "a|b", "x-y_z", "9", "t" * 127])
def test_valid_topics(name):
    validate_topic(name)
    assert is_valid_topic(name)


@pytest.mark.parametrize(
    ("name", "remark"),
    [
        ("", "The specified topic is blank."),
        ("   ", "The specified topic is blank."),
        ("\t\n\u2003", "The specified topic is blank."),  # Java whitespace, incl. em space
        ("\u00a0", ILLEGAL_TOPIC),  # no-break space is not Java whitespace
        ("a b", ILLEGAL_TOPIC),
        ("topic.name", ILLEGAL_TOPIC),
        ("caf\u00e9", ILLEGAL_TOPIC),
        ("t" * 128, "The specified topic is longer than topic max length."),
        ("." * 200, ILLEGAL_TOPIC),  # characters are checked before length
    ],
)
def test_invalid_topics_have_the_brokers_remark(name, remark):
    with pytest.raises(InvalidNameError) as info:
        validate_topic(name)
    assert str(info.value) == remark
    assert not is_valid_topic(name)


@pytest.mark.parametrize("name", ["please_rename_unique_group_name", "g" * 255, "%DLQ%g"])
def test_valid_groups(name):
    validate_group(name)
    assert is_valid_group(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "the specified group is blank"),
        (" ", "the specified group is blank"),
        ("g" * 256, "the specified group is longer than group max length 255."),
        ("." * 300, "the specified group is longer than group max length 255."),  # length first
        # 128 astral characters are 256 UTF-16 units for Java's String.length().
        ("\U0001f600" * 128, "the specified group is longer than group max length 255."),
        (
            "my group",
            "the specified group[my group] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
    ],
)
def test_invalid_groups_have_validators_messages(name, message):
    with pytest.raises(InvalidNameError) as info:
        validate_group(name)
    assert str(info.value) == message
    assert not is_valid_group(name)


def test_system_topics():
    assert is_system_topic("TBW102")
    assert is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert is_system_topic("rmq_sys_anything")
    assert not is_system_topic("TopicTest")
    assert is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX")
    assert is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not is_not_allowed_send_topic("TBW102")


@settings(max_examples=400)
@given(st.text(st.sampled_from("aZ9%|_-. \u00e9/") | st.characters(), max_size=140))
def test_agrees_with_javas_regex(name):
    assert has_illegal_chars(name) == (JAVA_PATTERN.fullmatch(name) is None and name != "")
    expected = JAVA_PATTERN.fullmatch(name) is not None and len(name) <= 127
    assert is_valid_topic(name) == expected
