"""The typed errors of the codecs layer.

Every malformed input the codecs can see ends in one of these, never in a bare
``struct.error``, ``UnicodeDecodeError`` or ``KeyError``: callers (the remoting
reader, the conformance runner, Spark executors) catch :class:`CodecError` and
know the bytes were at fault, not the program.
"""

from __future__ import annotations


class CodecError(ValueError):
    """Base of every error raised while decoding or encoding wire data."""


# -- framing ---------------------------------------------------------------------


class FrameError(CodecError):
    """The byte stream does not hold a well-formed RocketMQ frame."""


class FrameTooLargeError(FrameError):
    """A frame announces a length above the configured maximum."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame length {length} exceeds the maximum of {limit} bytes")
        self.length = length
        self.limit = limit


class NotRocketMQError(FrameError):
    """The first bytes of a connection belong to another protocol (TLS, HTTP, HTTP/2)."""

    def __init__(self, protocol: str, prefix: bytes) -> None:
        super().__init__(
            f"peer speaks {protocol}, not RocketMQ remoting (first bytes {prefix[:16]!r})"
        )
        self.protocol = protocol
        self.prefix = prefix


class TruncatedFrameError(FrameError):
    """Input ended inside a frame."""


# -- command header ----------------------------------------------------------------


class HeaderDecodeError(CodecError):
    """A command header (JSON or ROCKETMQ binary) could not be decoded."""


class HeaderEncodeError(CodecError):
    """A command cannot be written in the requested serialization."""


class CustomHeaderError(CodecError):
    """A custom header field is missing or does not parse; ``field`` names it."""

    def __init__(self, header: str, field: str, reason: str) -> None:
        super().__init__(f"{header}.{field}: {reason}")
        self.header = header
        self.field = field
        self.reason = reason


# -- RocketMQ formats -------------------------------------------------------------


class MessageDecodeError(CodecError):
    """A message, batch body or stored-message record is malformed."""


class MessageEncodeError(CodecError):
    """A message, batch body or stored-message record cannot be written as RocketMQ would
    (a topic over 127 UTF-8 bytes, properties over 32767 bytes, an int out of its Java range)."""


class MessageIdError(CodecError):
    """A unique or offset message id is malformed."""


# -- captures --------------------------------------------------------------------


class CaptureFormatError(CodecError):
    """The bytes are not a well-formed trocket capture."""


class TruncatedCaptureError(CaptureFormatError):
    """The capture ends inside a record (a writer was cut off, or still writing)."""


class InvalidNameError(CodecError):
    """A topic or group name breaks RocketMQ's naming rules."""
