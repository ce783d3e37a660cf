"""``Message`` and ``MessageExt``: what producers send and what the store hands back.

Accessors mirror ``org.apache.rocketmq.common.message.Message`` of 4.9.8 (tags, keys,
delay level, WAIT, ``UNIQ_KEY``). One Java habit is *not* copied by the plain
constructor: Java's ``new Message(topic, body)`` always puts ``WAIT=true``; use
:meth:`Message.create` for that. Property values are read the Java way
(``Integer.parseInt``, ``Boolean.parseBoolean``); a value Java cannot parse raises
:class:`MessageDecodeError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from ..errors import MessageDecodeError
from .hosts import HostAddress
from .msgid import encode_offset_msg_id
from .properties import (
    KEY_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    SYSTEM_PROPERTY_NAMES,
)

__all__ = ["Message", "MessageExt", "java_parse_int"]

_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_UNKNOWN_HOST = HostAddress("0.0.0.0", 0)


def java_parse_int(text: str, what: str = "value") -> int:
    """``Integer.parseInt``: sign, ASCII digits, 32-bit range; else :class:`MessageDecodeError`."""
    if _JAVA_INT.match(text):
        value = int(text)
        if -(2**31) <= value < 2**31:
            return value
    raise MessageDecodeError(f"{what} is not a Java int: {text!r}")


def _java_trim(text: str) -> str:
    # String.trim() strips every char <= U+0020, not only whitespace.
    return text.strip("".join(map(chr, range(0x21))))


@attrs.define(slots=True, eq=True)
class Message:
    """A message as a producer builds it: topic, body, flag, properties, transaction id."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = attrs.field(factory=dict)
    transaction_id: str | None = None

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> Message:
        """Like Java's ``new Message(topic, tags, keys, flag, body, waitStoreMsgOK)``.

        Sets ``TAGS`` and ``KEYS`` when non-empty and always sets ``WAIT``, in that
        order (the order matters for :func:`encode_properties` with ``java_order``).
        """
        properties = {PROPERTY_TAGS: tags} if tags else {}
        msg = cls(topic, body, flag, properties)
        if keys:
            msg.keys = keys
        properties[PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        return msg

    # -- properties --------------------------------------------------------------

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def put_user_property(self, name: str, value: str) -> None:
        """``putUserProperty``: refuses system names and blank names or values (``ValueError``)."""
        if name in SYSTEM_PROPERTY_NAMES:
            raise ValueError(f"The Property<{name}> is used by system, input another please")
        if not _java_trim(value) or not _java_trim(name):
            raise ValueError("The name or value of property can not be null or blank string!")
        self.properties[name] = value

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str) -> None:
        self.properties[PROPERTY_TAGS] = value

    @property
    def keys(self) -> list[str]:
        """``KEYS`` split on spaces, empty parts dropped (as the broker's index service does)."""
        raw = self.properties.get(PROPERTY_KEYS)
        return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []

    @keys.setter
    def keys(self, value: str | Iterable[str]) -> None:
        # setKeys(String) stores as is; setKeys(Collection) joins with a space and trims.
        if not isinstance(value, str):
            value = _java_trim("".join(f"{k}{KEY_SEPARATOR}" for k in value))
        self.properties[PROPERTY_KEYS] = value

    @property
    def delay_time_level(self) -> int:
        raw = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return 0 if raw is None else java_parse_int(raw, PROPERTY_DELAY_TIME_LEVEL)

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[PROPERTY_DELAY_TIME_LEVEL] = str(int(level))

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT``: true when absent, else ``Boolean.parseBoolean`` (only ``true``, any case)."""
        raw = self.properties.get(PROPERTY_WAIT_STORE_MSG_OK)
        return True if raw is None else raw.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[PROPERTY_WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def unique_key(self) -> str | None:
        """The client-generated ``UNIQ_KEY`` (the message id applications see)."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @unique_key.setter
    def unique_key(self, value: str) -> None:
        self.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = value


@attrs.define(slots=True, eq=True)
class MessageExt(Message):
    """A stored message: the 17 record fields (body, topic and properties in :class:`Message`).

    ``msg_id`` is the offset message id, computed from ``store_host`` and
    ``commit_log_offset`` on first read and cached (recomputed if either has changed
    since); pass ``msg_id=`` (or assign it) to set it outright. ``client_msg_id`` is what
    Java's ``MessageClientExt`` shows applications: ``UNIQ_KEY`` if present, else the
    offset id.
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = _UNKNOWN_HOST
    store_timestamp: int = 0
    store_host: HostAddress = _UNKNOWN_HOST
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    _msg_id: str | None = attrs.field(default=None, eq=False, repr=False)
    # (store_host, commit_log_offset, id) of the last computed id. A cache checked on read
    # rather than reset on write: attrs would route every __init__ assignment through a
    # __setattr__ hook, tripling the cost of decoding a record.
    _msg_id_cache: tuple[HostAddress, int, str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )

    @property
    def msg_id(self) -> str:
        """Offset message id (store host + commit-log offset), computed lazily and cached."""
        if self._msg_id is not None:
            return self._msg_id
        host = self.store_host
        offset = self.commit_log_offset
        cache = self._msg_id_cache
        if cache is None or cache[1] != offset or cache[0] != host:
            cache = self._msg_id_cache = (
                host,
                offset,
                encode_offset_msg_id(host[0], host[1], offset),
            )
        return cache[2]

    @msg_id.setter
    def msg_id(self, value: str | None) -> None:
        self._msg_id = value

    @property
    def client_msg_id(self) -> str:
        """``MessageClientExt.getMsgId``: ``UNIQ_KEY`` if set, else :attr:`msg_id`."""
        uniq = self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return uniq if uniq is not None else self.msg_id
