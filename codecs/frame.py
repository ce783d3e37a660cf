"""Length-prefixed framing: ``[4B total length][payload]``, sans-I/O.

The payload is ``[1B serialize type | 3B header length][header][body]``; the total
length counts the payload only, not its own four bytes (as Netty's
``LengthFieldBasedFrameDecoder(maxFrameLength, 0, 4, 0, 4)`` in RocketMQ).

:class:`FrameDecoder` follows h11's receive-buffer style: feed it whatever chunks the
transport delivers, then pull whole payloads out. It never touches a socket.
"""

from __future__ import annotations

import struct

from .errors import FrameError, FrameTooLargeError, NotRocketMQError, TruncatedFrameError

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "MIN_FRAME_LENGTH",
    "FrameDecoder",
    "sniff_foreign_protocol",
    "split_frames",
]

#: RocketMQ's ``com.rocketmq.remoting.frameMaxLength`` default: 16 MiB.
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
#: The smallest legal payload: the 4-byte protocol word with an empty header.
MIN_FRAME_LENGTH = 4

_LENGTH = struct.Struct(">i")
_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"TRAC", b"CONN")


def sniff_foreign_protocol(prefix: bytes) -> str | None:
    """Name the protocol if the first bytes of a stream are plainly not RocketMQ.

    Looks at most at the first four bytes; returns ``None`` when they may be RocketMQ.
    """
    if len(prefix) >= 2 and prefix[0] == 0x16 and prefix[1] == 0x03:
        return "TLS (a ClientHello)"
    head = bytes(prefix[:4])
    if head == b"PRI ":
        return "HTTP/2 (connection preface)"
    if head in _HTTP_METHODS:
        return "HTTP/1.x (a request line)"
    if head == b"SSH-":
        return "SSH"
    return None


class FrameDecoder:
    """Incremental frame splitter with a maximum frame length.

    >>> d = FrameDecoder()
    >>> d.feed(b"\\x00\\x00\\x00\\x04\\x00\\x00")
    >>> d.next_frame() is None
    True
    >>> d.feed(b"\\x00\\x00")
    >>> d.next_frame()
    b'\\x00\\x00\\x00\\x00'

    Errors are sticky: after a :class:`~trocket.codecs.errors.FrameError` the stream
    cannot be resynchronised, so every later call raises the same error.
    """

    __slots__ = ("_buf", "_pos", "_max", "_sniff", "_error")

    def __init__(
        self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, *, sniff: bool = True
    ) -> None:
        if max_frame_length < MIN_FRAME_LENGTH:
            raise ValueError(f"max_frame_length must be at least {MIN_FRAME_LENGTH}")
        self._buf = bytearray()
        self._pos = 0
        self._max = max_frame_length
        self._sniff = sniff  # only for the first bytes of a stream
        self._error: FrameError | None = None

    @property
    def max_frame_length(self) -> int:
        return self._max

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        if self._pos:
            # Compact lazily: only once the consumed prefix outweighs what is left,
            # so a burst of small frames costs one memmove, not one per frame.
            if self._pos >= len(self._buf) - self._pos:
                del self._buf[: self._pos]
                self._pos = 0
        self._buf += data

    def next_frame(self) -> bytes | None:
        """Return the next whole payload (without its length prefix), or ``None``."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available < 4:
            if self._sniff and available:
                self._check_foreign(bytes(buf[pos:]))
            return None
        if self._sniff:
            self._check_foreign(bytes(buf[pos : pos + 4]))
            self._sniff = False
        (length,) = _LENGTH.unpack_from(buf, pos)
        if length < MIN_FRAME_LENGTH or length > self._max:
            self._fail(length)
        end = pos + 4 + length
        if end > len(buf):
            return None
        frame = bytes(buf[pos + 4 : end])
        self._pos = end
        return frame

    def __iter__(self):
        """Yield every whole payload buffered so far."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def close(self) -> None:
        """Declare end of stream; raises if it cut a frame short."""
        if self._error is None and self.buffered:
            self._error = TruncatedFrameError(
                f"stream ended with {self.buffered} bytes of an incomplete frame"
            )
            raise self._error

    def _check_foreign(self, prefix: bytes) -> None:
        protocol = sniff_foreign_protocol(prefix)
        if protocol is not None:
            self._error = NotRocketMQError(protocol, prefix)
            raise self._error

    def _fail(self, length: int) -> None:
        if length > self._max:
            self._error = FrameTooLargeError(length, self._max)
        else:
            self._error = FrameError(
                f"impossible frame length {length} (a frame holds at least "
                f"{MIN_FRAME_LENGTH} bytes)"
            )
        raise self._error


def split_frames(
    data: bytes, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
) -> list[bytes]:
    """Split a complete byte string into payloads; raises if it ends mid-frame."""
    decoder = FrameDecoder(max_frame_length, sniff=False)
    decoder.feed(data)
    frames = list(decoder)
    decoder.close()
    return frames


# The compiled twin when built (codecs/accel.py); the class above stays the reference.
from .accel import accelerated  # noqa: E402

FrameDecoder = accelerated(FrameDecoder)
