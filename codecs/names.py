"""Topic and group name rules of RocketMQ 4.9.8, by lookup table.

Topics follow the broker's ``TopicValidator.validateTopic`` (checked in this order:
blank, characters outside ``[%|a-zA-Z0-9_-]``, more than 127 chars) and the error
message is the exact remark the Java broker puts in its SYSTEM_ERROR response. Groups
follow the client's ``Validators.checkGroup`` (blank, more than 255 chars, characters),
with its messages. "Blank" is ``UtilAll.isBlank``: empty or only Java whitespace
(``Character.isWhitespace``). Lengths are Java ``String.length()``, i.e. UTF-16 units,
which only matters for the group length check (non-ASCII topics fail the character
check first).

The character check uses Java's 128-entry ``VALID_CHAR_BIT_MAP``: a character is legal
if it is below 128 and its entry is set. Results are cached, since brokers check the
same few names on every request.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from .errors import InvalidNameError

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "GROUP_MAX_LENGTH",
    "NOT_ALLOWED_SEND_TOPICS",
    "REPLY_TOPIC_POSTFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIX",
    "TOPIC_MAX_LENGTH",
    "VALID_CHAR_BIT_MAP",
    "has_illegal_chars",
    "is_not_allowed_send_topic",
    "is_system_topic",
    "is_valid_group",
    "is_valid_topic",
    "validate_group",
    "validate_topic",
]

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"  # MixAll
#: ``MixAll.REPLY_TOPIC_POSTFIX``: a cluster's reply topic is ``<cluster>_REPLY_TOPIC``.
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"

#: ``TopicValidator.SYSTEM_TOPIC_SET`` (plus anything starting ``rmq_sys_``).
SYSTEM_TOPICS: frozenset[str] = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
#: ``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``: clients may not send to these.
NOT_ALLOWED_SEND_TOPICS: frozenset[str] = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)

#: ``TopicValidator.VALID_CHAR_BIT_MAP``: legal characters, by code point, below 128.
VALID_CHAR_BIT_MAP: tuple[bool, ...] = tuple(
    chr(i) in "%-_|" or chr(i).isdigit() or ("A" <= chr(i) <= "Z") or ("a" <= chr(i) <= "z")
    for i in range(128)
)
# str.translate table deleting every legal character: what is left is illegal. Built
# from the bit map so the two cannot disagree; runs in C.
_DELETE_LEGAL = {i: None for i, ok in enumerate(VALID_CHAR_BIT_MAP) if ok}
# Character.isWhitespace: separators except no-break spaces, plus the ASCII controls below.
_JAVA_NON_WHITESPACE_SPACES = frozenset("\u00a0\u2007\u202f")
_JAVA_WHITESPACE_CONTROLS = frozenset("\t\n\u000b\f\r\u001c\u001d\u001e\u001f")


def has_illegal_chars(name: str) -> bool:
    """``TopicValidator.isTopicOrGroupIllegal``: any char >= 128 or unset in the bit map."""
    return not name.isascii() or bool(name.translate(_DELETE_LEGAL))


def _java_is_whitespace(ch: str) -> bool:
    if ch in _JAVA_WHITESPACE_CONTROLS:
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _JAVA_NON_WHITESPACE_SPACES


def _is_blank(name: str) -> bool:
    # UtilAll.isBlank (commons-lang style): empty or all Character.isWhitespace.
    return all(map(_java_is_whitespace, name))


def _java_length(name: str) -> int:
    if name.isascii():
        return len(name)
    return len(name.encode("utf-16-le", "surrogatepass")) // 2


@lru_cache(maxsize=8192)
def _topic_problem(topic: str) -> str | None:
    if _is_blank(topic):
        return "The specified topic is blank."
    if has_illegal_chars(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_PATTERN}"
    if _java_length(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


@lru_cache(maxsize=8192)
def _group_problem(group: str) -> str | None:
    if _is_blank(group):
        return "the specified group is blank"
    if _java_length(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if has_illegal_chars(group):
        return (
            f"the specified group[{group}] contains illegal characters, allowing only "
            f"{VALID_PATTERN}"
        )
    return None


def validate_topic(topic: str) -> None:
    """Raise :class:`InvalidNameError` with the Java broker's remark if ``topic`` is illegal."""
    problem = _topic_problem(topic)
    if problem is not None:
        raise InvalidNameError(problem)


def validate_group(group: str) -> None:
    """Raise :class:`InvalidNameError` with ``Validators.checkGroup``'s message if illegal."""
    problem = _group_problem(group)
    if problem is not None:
        raise InvalidNameError(problem)


def is_valid_topic(topic: str) -> bool:
    return _topic_problem(topic) is None


def is_valid_group(group: str) -> bool:
    return _group_problem(group) is None


def is_system_topic(topic: str) -> bool:
    """``TopicValidator.isSystemTopic``.

    The broker's remark for it: ``The topic[<topic>] is conflict with system topic.``
    """
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """``TopicValidator.isNotAllowedSendTopic``.

    The broker answers NO_PERMISSION with ``Sending message to topic[<topic>] is forbidden.``
    """
    return topic in NOT_ALLOWED_SEND_TOPICS
