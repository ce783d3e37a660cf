"""Whole commands to and from frames: the protocol word, the header serializer
picked by the frame's type byte, custom-header merging, and the body.

``encode_command`` returns a complete frame (length prefix included);
``decode_command`` takes one payload as :class:`~trocket.codecs.frame.FrameDecoder`
yields it (length prefix stripped).
"""

from __future__ import annotations

import struct

from .command import RemotingCommand, SerializeType
from .custom_header import JAVA_FAST_CODES_HEADERS, encode_header, encode_header_wire
from .errors import HeaderDecodeError, HeaderEncodeError
from .header_binary import decode_binary_header, encode_binary_header
from .header_json import decode_json_header, encode_json_header
from .java_hashmap import hashmap_order, hashmap_ordered

__all__ = ["encode_command", "decode_command", "encode_header_bytes", "wire_ext_fields"]

_PREFIX = struct.Struct(">iI")  # total length, protocol word
_WORD = struct.Struct(">I")
_MAX_HEADER = 0xFFFFFF


def wire_ext_fields(cmd: RemotingCommand) -> dict[str, str] | None:
    """The ext fields as they go on the wire, with the custom header merged in.

    Without a custom header the command's own ext fields are written in their order
    (a decoded command keeps wire order). With one, the merge follows RocketMQ 4.9.8:
    JSON, and binary headers that are not a Java ``FastCodesHeader``, put every field
    into the extFields ``HashMap`` (``makeCustomHeaderToNet``), so all are written in
    HashMap order; a binary ``FastCodesHeader`` writes its own fields first, in
    declaration order, then the remaining map in HashMap order. Which classes are
    ``FastCodesHeader`` their declaration says (``@header(java_fast_codes=True)``); that is
    not the set of hand-written codecs: trocket also decodes SendMessageRequestHeader (V1)
    by hand, which Java encodes through the map.
    """
    header = cmd.custom_header
    ext = cmd.ext_fields
    if header is None:
        return ext
    if cmd.serialize_type == SerializeType.ROCKETMQ and type(header) in JAVA_FAST_CODES_HEADERS:
        fields = encode_header(header)
        if not ext:
            return fields
        merged = dict(fields)
        for key in hashmap_order(ext):
            if key not in merged:
                merged[key] = ext[key]
        return merged
    if ext:
        return hashmap_ordered([*ext.items(), *encode_header(header).items()])
    return encode_header_wire(header)


def encode_header_bytes(cmd: RemotingCommand) -> bytes:
    """The serialized header alone, in ``cmd.serialize_type``."""
    ext = wire_ext_fields(cmd)
    if cmd.serialize_type == SerializeType.JSON:
        return encode_json_header(cmd, ext)
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return encode_binary_header(cmd, ext)
    raise HeaderEncodeError(f"unknown serialize type {cmd.serialize_type!r}")


def encode_command(cmd: RemotingCommand) -> bytes:
    """One complete frame: ``[total length][type|header length][header][body]``.

    A subclass of :class:`RemotingCommand` with an ``encode_frame()`` (e.g.
    :class:`~.send_response.SendResponseCommand`) is asked first; ``None`` from it
    means: encode it here, the generic way."""
    if cmd.__class__ is not RemotingCommand:
        encode_frame = getattr(cmd, "encode_frame", None)
        if encode_frame is not None:
            frame = encode_frame()
            if frame is not None:
                return frame
    header = encode_header_bytes(cmd)
    hlen = len(header)
    if hlen > _MAX_HEADER:
        raise HeaderEncodeError(f"header of {hlen} bytes exceeds the 24-bit length field")
    body = cmd.body or b""
    prefix = _PREFIX.pack(4 + hlen + len(body), (int(cmd.serialize_type) << 24) | hlen)
    return b"".join((prefix, header, body))


def decode_command(payload: bytes) -> RemotingCommand:
    """Decode one frame payload (no length prefix) into a command."""
    if len(payload) < 4:
        raise HeaderDecodeError(f"frame of {len(payload)} bytes has no protocol word")
    (word,) = _WORD.unpack_from(payload, 0)
    stype = word >> 24
    hlen = word & _MAX_HEADER
    if hlen > len(payload) - 4:
        raise HeaderDecodeError(
            f"bad header length {hlen}: the frame holds only {len(payload) - 4} bytes after the protocol word"
        )
    header = payload[4 : 4 + hlen]
    if stype == 0:
        cmd = decode_json_header(header)
    elif stype == 1:
        cmd = decode_binary_header(header)
    else:
        raise HeaderDecodeError(f"unknown serialize type {stype} in protocol word 0x{word:08X}")
    cmd.body = payload[4 + hlen :]
    return cmd


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
from .accel import accelerated  # noqa: E402

decode_command = accelerated(decode_command)
encode_command = accelerated(encode_command)
