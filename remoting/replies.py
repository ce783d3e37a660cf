"""The replies remoting itself sends (RocketMQ's ``RemotingSysResponseCode`` and
``RemotingHelper.exceptionSimpleDesc``): shared by the endpoint's dispatch and
:meth:`Connection.answer <trocket.remoting.connection.Connection.answer>`."""

from __future__ import annotations

import traceback

from trocket.codecs.command import RPC_RESPONSE, RemotingCommand

__all__ = ["SysResponseCode", "exception_simple_desc", "system_response"]


class SysResponseCode:
    """RocketMQ's ``RemotingSysResponseCode``: the replies remoting itself sends."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3


def exception_simple_desc(exc: BaseException) -> str:
    """``Type: message, where`` like RocketMQ's ``RemotingHelper.exceptionSimpleDesc``
    (the exception's text and the innermost frame it was raised in)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    tb = exc.__traceback__
    if tb is not None:
        frame = traceback.extract_tb(tb)[-1]
        text += f", {frame.name}({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
    return text


def system_response(request: RemotingCommand, code: int, remark: str, *, ext_fields: bool) -> RemotingCommand:
    """A system reply to ``request``, ready to encode (opaque, flag, version, serialization set)."""
    return RemotingCommand(
        code=code, opaque=request.opaque, flag=RPC_RESPONSE, remark=remark,
        version=request.version, serialize_type=request.serialize_type,
        ext_fields={} if ext_fields else None,
    )
