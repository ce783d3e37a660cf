"""A JSON-ready description of one frame, for people: ``trocket decode`` prints it."""

from __future__ import annotations

import struct
from typing import Any

import attrs

from .codes import request_code_name, response_code_name
from .command import RemotingCommand
from .custom_header import decode_header
from .errors import CodecError
from .frame import split_frames
from .headers import REQUEST_HEADERS, RESPONSE_HEADERS
from .serialize import decode_command

__all__ = ["describe_frame", "describe_command", "frame_payload"]


def frame_payload(data: bytes) -> bytes:
    """The payload of ``data``: a whole frame (length prefix checked) or a bare payload."""
    if len(data) >= 4 and struct.unpack_from(">i", data)[0] == len(data) - 4:
        [payload] = split_frames(data)
        return payload
    return data


def _preview(body: bytes, n: int) -> dict[str, Any]:
    head = bytes(body[:n])
    out: dict[str, Any] = {"length": len(body), "hex": head.hex()}
    try:
        out["utf8"] = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= max(len(head) - 3, 1):  # cut inside a multi-byte char at the end
            out["utf8"] = head[: exc.start].decode("utf-8")
    if len(body) > n:
        out["truncated"] = True
    return out


def _custom_header(cmd: RemotingCommand, request_code: int | None) -> dict[str, Any] | None:
    if cmd.is_response:
        cls = RESPONSE_HEADERS.get(request_code) if request_code is not None else None
    else:
        cls = REQUEST_HEADERS.get(cmd.code)
    if cls is None:
        return None
    try:
        header = decode_header(cls, cmd.ext_fields)
    except CodecError as exc:
        return {"class": cls.__name__, "error": str(exc)}
    return {"class": cls.__name__, "fields": attrs.asdict(header)}


def describe_command(cmd: RemotingCommand, *, request_code: int | None = None, preview: int = 64) -> dict[str, Any]:
    if cmd.is_response:
        kind = "response"
        name = response_code_name(cmd.code)
    else:
        kind = "oneway request" if cmd.is_oneway else "request"
        name = request_code_name(cmd.code)
    return {
        "type": kind,
        "serializeType": cmd.serialize_type.name,
        "code": cmd.code,
        "codeName": name,
        "language": cmd.language.name,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "remark": cmd.remark,
        "extFields": cmd.ext_fields,
        "customHeader": _custom_header(cmd, request_code),
        "body": _preview(cmd.body, preview),
    }


def describe_frame(data: bytes, *, request_code: int | None = None, preview: int = 64) -> dict[str, Any]:
    """Decode ``data`` (frame or payload) and describe it; raises :class:`CodecError`."""
    return describe_command(decode_command(frame_payload(data)), request_code=request_code, preview=preview)
