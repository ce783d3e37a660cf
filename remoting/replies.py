"""The replies remoting itself sends (RocketMQ's ``RemotingSysResponseCode`` and
``RemotingHelper.exceptionSimpleDesc``): shared by the endpoint's dispatch and
:meth:`Connection.answer <trocket.remoting.connection.Connection.answer>`."""

from __future__ import annotations

import traceback
from typing import Protocol

from trocket.codecs.command import RPC_RESPONSE, RemotingCommand

from .errors import ResponseCodeError

__all__ = ["PreparedResponse", "SysResponseCode", "error_reply", "exception_simple_desc", "system_response"]


class SysResponseCode:
    """RocketMQ's ``RemotingSysResponseCode``: the replies remoting itself sends."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3


class PreparedResponse(Protocol):
    """An answer that can write its own frame: what a processor returns (or gives to
    :meth:`Connection.answer <trocket.remoting.connection.Connection.answer>`) instead
    of a command when it can encode its answer more cheaply than a command can be made
    and encoded (the broker answers a stored send from a template this way).

    Remoting asks for :meth:`frame_for` when no response hook has to see the answer,
    else for :meth:`command` (then the answer goes the usual way: opaque, flag and
    serialization from the request, the hooks, the encoder)."""

    def frame_for(self, request: RemotingCommand) -> bytes | None:
        """The whole frame answering ``request`` (its opaque and serialization, the
        response flag, length prefix included); None: use :meth:`command`."""

    def command(self) -> RemotingCommand:
        """The same answer as a command."""


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


def error_reply(error: ResponseCodeError, *, ext_fields: bool = True) -> RemotingCommand:
    """The answer an error carries: its code, its message as remark, an empty ext-fields
    object unless ``ext_fields`` is False (RocketMQ's Java clients accept either; the
    C++ client crashes on a response without one); the error's own ``response`` when it
    carries one. Remoting ties it to its request (opaque, serialization) when it is sent."""
    if error.response is not None:
        return error.response
    return RemotingCommand(code=error.code, flag=RPC_RESPONSE, remark=str(error), ext_fields={} if ext_fields else None)
