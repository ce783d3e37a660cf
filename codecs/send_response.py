"""A successful send's answer, encoded from a template: the frame bytes of each shape
are prepared once and only the values that change are filled in.

Java's broker answers SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE with a
``SendMessageResponseHeader`` (msgId, queueId, queueOffset) plus a few constant ext
fields (``MSG_REGION``, ``TRACE_ON``). The generic encoder (:func:`.serialize.encode_command`)
builds a dict and runs the JSON (or binary) serializer over the whole header on every
answer; here the header is the template's constant text with the message id, queue id,
queue offset, code and opaque put in by ``%``-formatting (JSON) or one ``struct`` pack
and a join (ROCKETMQ). The bytes are the generic encoder's, exactly
(``tests/codecs/test_send_response.py`` compares both over many values).

:class:`SendResponseCommand` is a :class:`~.command.RemotingCommand` like any other
(RPC hooks see and may change every field); :func:`.serialize.encode_command` asks it
for its frame, and it uses the template only while it still has the template's shape
(no remark, no body, no custom header, the ext fields in the template's order with
the template's constants, values that need no JSON escaping, fields in range) --
anything else goes through the generic encoder.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping

import attrs

from .command import LanguageCode, RemotingCommand, SerializeType
from .header_binary import _encode_ext
from .header_json import fastjson_quote

__all__ = ["SendResponseCommand", "SendResponseTemplate", "encode_send_ok"]

_new = object.__new__
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_JAVA = LanguageCode.JAVA
_KEYS = ("msgId", "queueId", "queueOffset")
#: the frame prefix and the binary header's fixed part, then the ext block's length
_BIN_HEAD = struct.Struct(">iIhBhiiii")
_JSON_PREFIX = struct.Struct(">iI")
_I32 = struct.Struct(">i")
_MAX_HEADER = 0xFFFFFF
_MAX_SHAPES = 256
#: values written as they are in JSON (no escaping): offset message ids (upper hex,
#: comma-joined for a batch) and decimal numbers
_PLAIN = re.compile(r"[0-9A-Za-z,\-]*").fullmatch


class SendResponseTemplate:
    """The frames of send answers with ``extra`` (constant ext fields after the
    response header's three, e.g. ``MSG_REGION``/``TRACE_ON``), both serializations."""

    __slots__ = ("extra", "keys", "tail_values", "_json_tail", "_json_parts", "_bin_tail", "_bin_ext_const", "ok_parts")

    def __init__(self, extra: Mapping[str, str]) -> None:
        for key in extra:
            if key in _KEYS:
                raise ValueError(f"{key!r} is one of the response header's own fields")
        self.extra = dict(extra)
        #: the ext keys in wire order, and the constant values after the header's three
        self.keys = (*_KEYS, *self.extra)
        self.tail_values = tuple(self.extra.values())
        self._json_tail = "".join("," + fastjson_quote(k) + ":" + fastjson_quote(v) for k, v in self.extra.items())
        #: (code, flag, language, version) -> the JSON text around the values
        self._json_parts: dict[tuple, tuple[str, str, str]] = {}
        self._bin_tail = _encode_ext(self.extra) if self.extra else b""
        # the ext block minus the three values: their key prefixes and length fields
        self._bin_ext_const = sum(2 + len(k) + 4 for k in _KEYS) + len(self._bin_tail)
        # SUCCESS as the send processor answers it (flag RPC_RESPONSE, JAVA, version 0),
        # for :func:`encode_send_ok`'s compiled twin: the JSON text around the values
        # (before the msgId, after the queue offset, after the opaque), the binary ext tail
        # and the binary ext block's constant length
        head, mid, tail = self._json_text(0, 1, _JAVA, 0)
        self.ok_parts = (
            head.encode(), mid.encode(), tail.encode(), self._bin_tail, self._bin_ext_const,
        )

    def _json_text(self, code: int, flag: int, language: LanguageCode, version: int) -> tuple[str, str, str]:
        """The JSON header's text before the msgId, between the queue offset and the
        opaque, and after the opaque (fastjson's alphabetical field order)."""
        if len(self._json_parts) >= _MAX_SHAPES:
            self._json_parts.clear()
        parts = self._json_parts[code, flag, language, version] = (
            '{"code":%d,"extFields":{"msgId":"' % code,
            '"%s},"flag":%d,"language":"%s","opaque":' % (self._json_tail, flag, language.name),
            ',"serializeTypeCurrentRPC":"JSON","version":%d}' % version,
        )
        return parts

    def frame(
        self,
        serialize_type: int,
        code: int,
        opaque: int,
        msg_id: str,
        queue_id: str,
        queue_offset: str,
        *,
        flag: int = 1,
        version: int = 0,
        language: LanguageCode = _JAVA,
    ) -> bytes | None:
        """The whole frame (length prefix included), or None when these values do not
        fit the template (the caller then encodes the generic way). ``queue_id`` and
        ``queue_offset`` are the ext fields' strings."""
        if not _PLAIN(msg_id + "," + queue_id + "," + queue_offset):
            return None
        return self._fill(serialize_type, code, opaque, msg_id, queue_id, queue_offset, flag, version, language)

    def _fill(
        self, serialize_type: int, code: int, opaque: int, msg_id: str, queue_id: str, queue_offset: str,
        flag: int, version: int, language: LanguageCode,
    ) -> bytes | None:
        """:meth:`frame` for values known to be plain (see ``_PLAIN``)."""
        if serialize_type == _JSON:
            parts = self._json_parts.get((code, flag, language, version))
            if parts is None:
                parts = self._json_text(code, flag, language, version)
            header = "".join((
                parts[0], msg_id, '","queueId":"', queue_id, '","queueOffset":"', queue_offset,
                parts[1], str(opaque), parts[2],
            )).encode("utf-8")
            hlen = len(header)
            if hlen > _MAX_HEADER:
                return None
            return _JSON_PREFIX.pack(4 + hlen, hlen) + header
        if serialize_type == _ROCKETMQ:
            m = msg_id.encode("utf-8")
            q = queue_id.encode("utf-8")
            o = queue_offset.encode("utf-8")
            ext_len = self._bin_ext_const + len(m) + len(q) + len(o)
            hlen = 21 + ext_len  # 13 fixed bytes, remark length, ext length
            if hlen > _MAX_HEADER or not -0x8000 <= code <= 0x7FFF or not -0x8000 <= version <= 0x7FFF:
                return None
            try:
                head = _BIN_HEAD.pack(4 + hlen, 0x1000000 | hlen, code, language, version, opaque, flag, 0, ext_len)
            except struct.error:
                return None
            pack = _I32.pack
            return b"".join((
                head,
                b"\x00\x05msgId", pack(len(m)), m,
                b"\x00\x07queueId", pack(len(q)), q,
                b"\x00\x0bqueueOffset", pack(len(o)), o,
                self._bin_tail,
            ))
        return None

    def command(
        self, code: int, msg_id: str, queue_id: int, queue_offset: int, *, id_is_plain: bool = False
    ) -> SendResponseCommand:
        """The response command (flag RPC_RESPONSE, ext fields in wire order); remoting
        sets its opaque and serialization from the request. ``id_is_plain``: the caller
        vouches that ``msg_id`` needs no JSON escaping (a store's offset message id:
        upper hex, comma-joined for a batch), which spares checking it per answer."""
        cmd = _new(SendResponseCommand)
        cmd.code = int(code)
        cmd.language = _JAVA
        cmd.version = 0
        cmd.opaque = 0
        cmd.flag = 1
        cmd.remark = None
        q = str(queue_id)
        o = str(queue_offset)
        cmd.ext_fields = {"msgId": msg_id, "queueId": q, "queueOffset": o, **self.extra}
        cmd.body = b""
        cmd.custom_header = None
        cmd.serialize_type = _JSON
        cmd.template = self
        # an offset message id is hex (alphanumerics need no JSON escape; a batch's has
        # commas: the pattern); the queue id and offset are decimal numbers
        cmd.plain = (msg_id, q, o) if id_is_plain or msg_id.isalnum() or _PLAIN(msg_id) else None
        return cmd


def encode_send_ok(
    template: SendResponseTemplate, serialize_type: int, opaque: int, msg_id: str, queue_id: int, queue_offset: int
) -> bytes | None:
    """The frame of a send's SUCCESS answer to a request of ``serialize_type`` and
    ``opaque``: the bytes :func:`.serialize.encode_command` writes for
    ``template.command(0, msg_id, queue_id, queue_offset)`` once remoting has tied it to
    that request (opaque, response flag, serialization), with no command made. None
    when the values are off the template's shape (the caller answers the usual way).
    For a processor that answers a request itself, when no RPC hook has to see the
    command; ``msg_id`` must need no JSON escaping (checked)."""
    if (
        opaque.__class__ is not int or queue_id.__class__ is not int or queue_offset.__class__ is not int
        or msg_id.__class__ is not str
    ):
        return None
    q = str(queue_id)
    o = str(queue_offset)
    if not _PLAIN(msg_id):
        return None
    return template._fill(serialize_type, 0, opaque, msg_id, q, o, 1, 0, _JAVA)


@attrs.define(slots=True, eq=True, repr=True)
class SendResponseCommand(RemotingCommand):
    """A send's answer that encodes itself from its :class:`SendResponseTemplate` while
    it has the template's shape (see the module docstring); made by
    :meth:`SendResponseTemplate.command`."""

    template: SendResponseTemplate | None = attrs.field(default=None, eq=False, repr=False)
    #: the three values as made (known plain); the ext fields' still being these very
    #: objects spares checking them again
    plain: tuple[str, str, str] | None = attrs.field(default=None, eq=False, repr=False)

    def encode_frame(self) -> bytes | None:
        """The frame from the template, or None: encode it the generic way."""
        template = self.template
        ext = self.ext_fields
        if (
            template is None
            or self.remark is not None
            or self.body
            or self.custom_header is not None
            or ext.__class__ is not dict
            or tuple(ext) != template.keys
        ):
            return None
        values = tuple(ext.values())
        if values[3:] != template.tail_values:
            return None
        msg_id, queue_id, queue_offset = values[:3]
        if (
            msg_id.__class__ is not str or queue_id.__class__ is not str or queue_offset.__class__ is not str
            or self.code.__class__ is not int or self.opaque.__class__ is not int
            or self.flag.__class__ is not int or self.version.__class__ is not int
            or self.language.__class__ is not LanguageCode
        ):
            return None
        plain = self.plain
        if plain is not None and msg_id is plain[0] and queue_id is plain[1] and queue_offset is plain[2]:
            return template._fill(
                self.serialize_type, self.code, self.opaque, msg_id, queue_id, queue_offset,
                self.flag, self.version, self.language,
            )
        return template.frame(
            self.serialize_type, self.code, self.opaque, msg_id, queue_id, queue_offset,
            flag=self.flag, version=self.version, language=self.language,
        )


from .accel import accelerated  # noqa: E402

encode_send_ok = accelerated(encode_send_ok)
