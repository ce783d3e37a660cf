"""The name server's answers: every one carries an ``extFields`` object (real clients
need one) and the name server's version (Java's name server sets
``rocketmq.remoting.version`` to 4.9.8's, so all its answers carry it).

:func:`decode_request_header` is how a processor reads its request's custom header: a
header that does not decode raises :class:`NamesrvRequestError`, a remoting
:class:`~trocket.remoting.ResponseCodeError` that carries the name server's whole
answer (SYSTEM_ERROR, ``Type: message``), which remoting sends as the processor's answer.
"""

from __future__ import annotations

from typing import TypeVar

from trocket.codecs.codes import ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.errors import CodecError
from trocket.remoting import ResponseCodeError

__all__ = ["NAMESRV_VERSION", "NamesrvRequestError", "answer", "decode_request_header", "error_answer"]

T = TypeVar("T")

#: ``MQVersion.CURRENT_VERSION`` of 4.9.8 (V4_9_8): NamesrvStartup sets it as the
#: remoting version, so every answer of a Java name server carries it.
NAMESRV_VERSION = 409


def answer(code: int, remark: str | None = None, header: object = None, body: bytes = b"") -> RemotingCommand:
    """An answer of the name server."""
    return RemotingCommand.response(code, remark, header, body=body, ext_fields={}, version=NAMESRV_VERSION)


def error_answer(exc: BaseException, what: str | None = None) -> RemotingCommand:
    """SYSTEM_ERROR with ``Type: message`` (after ``what: ``, when given) as remark."""
    text = f"{type(exc).__name__}: {exc}"
    return answer(ResponseCode.SYSTEM_ERROR, f"{what}: {text}" if what else text)


class NamesrvRequestError(ResponseCodeError):
    """A request the name server refuses with :func:`error_answer` of ``cause``."""

    def __init__(self, cause: BaseException, what: str | None = None) -> None:
        refusal = error_answer(cause, what)
        super().__init__(refusal.remark or "", code=refusal.code)
        self.response = refusal


def decode_request_header(cls: type[T], request: RemotingCommand) -> T:
    """The request's custom header as ``cls``, or :class:`NamesrvRequestError`."""
    try:
        return decode_header(cls, request.ext_fields)
    except CodecError as exc:
        raise NamesrvRequestError(exc) from None
