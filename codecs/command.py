"""``RemotingCommand``: the one message shape of RocketMQ's remoting protocol."""

from __future__ import annotations

import enum
from typing import Any, Callable, ClassVar

import attrs

__all__ = [
    "LanguageCode",
    "SerializeType",
    "RemotingCommand",
    "RPC_RESPONSE",
    "RPC_ONEWAY",
]

#: flag bit 0: the command is a response.
RPC_RESPONSE = 0b01
#: flag bit 1: the request wants no response.
RPC_ONEWAY = 0b10


class LanguageCode(enum.IntEnum):
    """``org.apache.rocketmq.remoting.protocol.LanguageCode``: JSON writes the name,
    the ROCKETMQ binary header the code byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(enum.IntEnum):
    """The header serialization, carried in the high byte of the protocol word."""

    JSON = 0
    ROCKETMQ = 1


@attrs.define(slots=True, eq=True, repr=True)
class RemotingCommand:
    """A request or response, as RocketMQ's ``RemotingCommand``.

    ``ext_fields`` keeps its insertion order, and decoding keeps the wire order, so a
    decoded command re-encodes to the same bytes. ``custom_header`` is an optional
    header object (see :mod:`trocket.codecs.headers`) merged into the ext fields when
    the command is encoded, in the order RocketMQ's Java encoder would write them.
    ``serialize_type`` is the header serialization to write with (Java's
    ``serializeTypeCurrentRPC``); a decoded command carries the one it arrived in.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes = b""
    custom_header: Any = None
    serialize_type: SerializeType = SerializeType.JSON

    # -- flags --------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_oneway(self) -> None:
        self.flag |= RPC_ONEWAY

    def mark_response(self) -> None:
        self.flag |= RPC_RESPONSE

    # -- builders -----------------------------------------------------------------

    @classmethod
    def request(
        cls,
        code: int,
        header: Any = None,
        *,
        body: bytes = b"",
        ext_fields: dict[str, str] | None = None,
        remark: str | None = None,
        opaque: int = 0,
        oneway: bool = False,
        version: int = 0,
        language: LanguageCode = LanguageCode.JAVA,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> RemotingCommand:
        """A request (``createRequestCommand``); remoting assigns the opaque on send."""
        return build_command(
            cls, code, language, version, opaque, RPC_ONEWAY if oneway else 0, remark, ext_fields, body, header,
            serialize_type,
        )

    #: ``RemotingCommand.response(code, remark=None, header=None, *, body=b"", ext_fields=None,
    #: opaque=0, version=0, language=JAVA, serialize_type=JSON)``: a response
    #: (``createResponseCommand``), not yet tied to a request (:func:`response_command`,
    #: set below as this class method: its compiled twin takes the keywords in C)
    response: ClassVar[Callable[..., RemotingCommand]]

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        header: Any = None,
        *,
        body: bytes = b"",
        ext_fields: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """A response to this request: same opaque, same serialization."""
        return build_command(
            RemotingCommand, code, LanguageCode.JAVA, self.version, self.opaque, RPC_RESPONSE, remark, ext_fields,
            body, header, self.serialize_type,
        )

    def add_ext_field(self, key: str, value: str) -> None:
        if self.ext_fields is None:
            self.ext_fields = {}
        self.ext_fields[key] = value


_new = object.__new__


def build_command(
    cls: type[RemotingCommand], code: int, language: LanguageCode, version: int, opaque: int, flag: int,
    remark: str | None, ext_fields: dict[str, str] | None, body: bytes, header: Any, serialize_type: SerializeType,
) -> RemotingCommand:
    """A command of ``cls`` with these fields, the builders' one way. A RemotingCommand
    by slot stores (attrs' keyword ``__init__`` costs three times as much, on every
    request and answer: valid while the class has no validators or converters); a
    subclass by its ``__init__``, which also sets the defaults of the fields it adds."""
    if cls is not RemotingCommand:
        return cls(code, language, version, opaque, flag, remark, ext_fields, body, header, serialize_type)
    cmd = _new(RemotingCommand)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext_fields
    cmd.body = body
    cmd.custom_header = header
    cmd.serialize_type = serialize_type
    return cmd


def response_command(
    cls: type[RemotingCommand],
    code: int,
    remark: str | None = None,
    header: Any = None,
    *,
    body: bytes = b"",
    ext_fields: dict[str, str] | None = None,
    opaque: int = 0,
    version: int = 0,
    language: LanguageCode = LanguageCode.JAVA,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """A response (``createResponseCommand``), not yet tied to a request:
    ``RemotingCommand.response`` (its class method). Every processor's answer is made
    by it, so its keyword call is compiled (a Python frame with keywords cost as much
    as filling the command)."""
    return build_command(cls, code, language, version, opaque, RPC_RESPONSE, remark, ext_fields, body, header, serialize_type)


def ext_fields_descriptor(member: Any) -> Any:
    """``RemotingCommand.ext_fields``' descriptor: the slot's own, ``member``. Its compiled
    twin wraps it so that a decoder may leave a request's ext fields undecoded until they
    are first read (a send request's, which the send processor reads from the header's
    text, :func:`~trocket.codecs.headers.fast.command_send_fields`): every reader still
    gets the dict the decode makes."""
    return member


# (imported here, last: the compiled module imports this one, RemotingCommand defined)
from .accel import accelerated  # noqa: E402

build_command = accelerated(build_command)
response_command = accelerated(response_command)
RemotingCommand.response = classmethod(response_command)  # type: ignore[assignment]
ext_fields_descriptor = accelerated(ext_fields_descriptor)
RemotingCommand.ext_fields = ext_fields_descriptor(RemotingCommand.__dict__["ext_fields"])  # type: ignore[method-assign]
