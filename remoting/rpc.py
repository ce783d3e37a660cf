"""The contract of a typed service, shared by its server and its callers.

A :class:`Method` names one call: its request code, the custom-header classes of its
request and of its response (declared with :func:`~trocket.codecs.custom_header.header`;
each carries its codec), and whether it is oneway. A :class:`Reply` is what a call
answers: a response header and a body. Errors are exceptions that know their answer:
a :class:`ServiceError` subclass declares its response ``code``; a handler raises it and
remoting answers it as it answers every :class:`~.errors.ResponseCodeError` (one place:
:func:`~.replies.error_reply`); a caller gets the same class back from :func:`error_for`
(through its stub's ``errors``), or a :class:`ServiceError` carrying the code when it
does not know it. The codes of
remoting's own replies map to :class:`RemoteSystemError`, :class:`RemoteBusyError` and
:class:`RequestCodeNotSupportedError`.

The server side is :mod:`.service`, the calling side :mod:`.stub`; both use only
remoting's public API (``register_processor``, ``invoke_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from trocket.codecs.accel import accelerated
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import codec_of

from .errors import ResponseCodeError
from .replies import SysResponseCode

__all__ = [
    "Method",
    "Reply",
    "ServiceError",
    "RemoteSystemError",
    "RemoteBusyError",
    "RequestCodeNotSupportedError",
    "error_for",
    "error_table",
]

Req = TypeVar("Req")
Resp = TypeVar("Resp")
H = TypeVar("H")


@attrs.define(slots=True)
class Reply(Generic[H]):
    """An answer: the response header (``None`` for a method without one) and the body.
    (A handler makes one per answer with a body, a sync call gets one: the compiled
    twin, the same class in C, makes them without a Python frame.)"""

    header: H
    body: bytes = b""


Reply = accelerated(Reply)  # type: ignore[misc]


class Method(Generic[Req, Resp]):
    """One call of a service: ``Method(code, request=HeaderClass, response=HeaderClass)``.

    ``request``/``response`` are ``@header`` classes, or ``None`` for a call whose
    request or response carries no header. ``oneway=True``: the caller expects no
    answer. A method is also what a :class:`~.stub.Stub` class declares, under the
    name its callers use (``put = PUT``)."""

    __slots__ = ("code", "request", "response", "oneway", "name", "decode_request", "decode_response")

    def __init__(
        self,
        code: int,
        *,
        request: type[Req] | None = None,
        response: type[Resp] | None = None,
        oneway: bool = False,
    ) -> None:
        if oneway and response is not None:
            raise ValueError("a oneway method has no response")
        self.code = int(code)
        self.request = request
        self.response = response
        self.oneway = oneway
        self.name: str | None = None
        # the classes' codecs, fetched once (TypeError here for a class that is not a header)
        self.decode_request: Callable[[Mapping[str, str] | None], Req] | None = (
            None if request is None else codec_of(request).decode
        )
        self.decode_response: Callable[[Mapping[str, str] | None], Resp] | None = (
            None if response is None else codec_of(response).decode
        )

    def __set_name__(self, owner: type, name: str) -> None:
        if self.name is None:
            self.name = name

    def __get__(self, stub: Any, owner: type | None = None) -> Any:
        if stub is None:
            return self
        return stub._bind(self)  # a Stub binds its methods in __init__; this is the rare path

    def __repr__(self) -> str:
        request = None if self.request is None else self.request.__name__
        response = None if self.response is None else self.response.__name__
        return f"Method({self.code}, request={request}, response={response}{', oneway=True' if self.oneway else ''})"


class ServiceError(ResponseCodeError):
    """An error a service answers with: its response ``code``, its text the remark.

    Subclass it and declare ``code`` (any int but 0, SUCCESS, and remoting's own 1-3)::

        class NotFound(ServiceError):
            code = 404

    A handler raises ``NotFound("no such key")``; remoting answers it, as every
    :class:`~.errors.ResponseCodeError`; the caller's stub raises ``NotFound("no such
    key")`` when it lists the class in its ``errors``. A class is rebuilt on the calling
    side from its remark alone: ``cls(remark)``."""

    code: ClassVar[int] = SysResponseCode.SYSTEM_ERROR  # type: ignore[misc]
    _SYSTEM: ClassVar[frozenset[int]] = frozenset(
        {SysResponseCode.SYSTEM_ERROR, SysResponseCode.SYSTEM_BUSY, SysResponseCode.REQUEST_CODE_NOT_SUPPORTED}
    )

    def __init__(self, remark: str | None = None, *, code: int | None = None) -> None:
        super().__init__("" if remark is None else remark, code=code)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__ and not cls.__module__ == __name__:
            code = cls.__dict__["code"]
            if type(code) is not int or code == SysResponseCode.SUCCESS or code in ServiceError._SYSTEM:
                raise TypeError(
                    f"{cls.__name__}.code = {code!r}: a service error's code is an int other than 0 (SUCCESS) "
                    "and 1-3 (remoting's own replies)"
                )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, remark={self.remark!r})"


class RemoteSystemError(ServiceError):
    """The service failed (SYSTEM_ERROR): a handler raised something that is not a
    :class:`ServiceError`, or a request header did not decode; the remark says what."""

    code = SysResponseCode.SYSTEM_ERROR


class RemoteBusyError(ServiceError):
    """The service was too busy to take the call (SYSTEM_BUSY): its handler's limit
    and queue were full. Retry later."""

    code = SysResponseCode.SYSTEM_BUSY


class RequestCodeNotSupportedError(ServiceError):
    """The peer serves no handler for the request code (REQUEST_CODE_NOT_SUPPORTED)."""

    code = SysResponseCode.REQUEST_CODE_NOT_SUPPORTED


_SYSTEM_ERRORS: dict[int, type[ServiceError]] = {
    cls.code: cls for cls in (RemoteSystemError, RemoteBusyError, RequestCodeNotSupportedError)
}


def error_table(errors: Iterable[type[ServiceError]]) -> dict[int, type[ServiceError]]:
    """Response code -> error class: remoting's three, then ``errors`` (one class per code)."""
    table = dict(_SYSTEM_ERRORS)
    for cls in errors:
        if not (isinstance(cls, type) and issubclass(cls, ServiceError)) or cls.code in _SYSTEM_ERRORS:
            raise TypeError(f"{cls!r} is not a ServiceError subclass with a code of its own")
        if table.get(cls.code, cls) is not cls:
            raise ValueError(f"{cls.__name__} and {table[cls.code].__name__} both declare code {cls.code}")
        table[cls.code] = cls
    return table


def error_for(response: RemotingCommand, table: Mapping[int, type[ServiceError]]) -> ServiceError:
    """The error a non-SUCCESS ``response`` says: its class from ``table`` (see
    :func:`error_table`), else a :class:`ServiceError` carrying the code."""
    cls = table.get(response.code)
    if cls is None:
        return ServiceError(response.remark, code=response.code)
    return cls(response.remark)
