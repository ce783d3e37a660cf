"""The typed errors of the remoting layer, in one tree.

Everything a caller of :mod:`trocket.remoting` can see fail ends in a
:class:`RemotingError`. The tree mirrors RocketMQ's ``RemotingException``
family (connect, send, timeout, too-many-requests) plus what Python makes
explicit: a connection that closed under a pending call, an endpoint that shut
down, and bytes that did not decode (wrapping the codecs' error as ``__cause__``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trocket.codecs.command import RemotingCommand

__all__ = [
    "ResponseCodeError",
    "RemotingError",
    "RemotingConnectError",
    "RemotingSendRequestError",
    "RemotingConnectionClosedError",
    "RemotingShutdownError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
    "RemotingCancelledError",
    "RemotingDecodeError",
    "RemotingFrameError",
    "RemotingCommandDecodeError",
]


class ResponseCodeError(Exception):
    """A failure that is answered with a response code: raise it (or a subclass) from a
    processor and the peer gets ``code`` with the message as remark, through the usual
    answer path (response hooks see it). Not a bug, so not logged as one.

    Subclasses name their code once, as h2's errors carry their error code::

        class TopicNotExistError(ResponseCodeError):
            code = 17

        raise TopicNotExistError(f"topic[{topic}] not exist")

    ``code=`` on an instance overrides the class's; :func:`~trocket.remoting.replies.error_reply`
    makes the answer. A server whose answers carry more than a code and a remark (the
    name server's version) builds the whole answer itself and sets it as ``response``:
    that is then sent as it is.
    """

    #: the response code the peer gets (RocketMQ's SYSTEM_ERROR unless a subclass says)
    code: int = 1
    #: the whole answer, when the raiser built it (else :func:`error_reply` makes one)
    response: RemotingCommand | None = None

    def __init__(self, remark: str, *, code: int | None = None) -> None:
        super().__init__(remark)
        if code is not None:
            self.code = code

    @property
    def remark(self) -> str:
        return str(self)


class RemotingError(Exception):
    """Base of every remoting failure. ``address`` is the peer, when one is known."""

    def __init__(self, message: str, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address


class RemotingConnectError(RemotingError):
    """A connection could not be made (refused, unreachable, timed out, TLS failed)."""


class RemotingSendRequestError(RemotingError):
    """A request could not be handed to the connection (it was closed or broken)."""


class RemotingConnectionClosedError(RemotingSendRequestError):
    """The connection closed while the call was waiting for its response. Its
    ``__cause__`` is what closed the connection, when something did (the
    ``OSError`` of a reset, the :class:`RemotingDecodeError` of bad input)."""


class RemotingShutdownError(RemotingConnectionClosedError):
    """The endpoint was shut down while the call was pending."""


class RemotingTimeoutError(RemotingError):
    """No response within the timeout; carries the peer and the time waited."""

    def __init__(self, address: str | None, elapsed: float, timeout: float) -> None:
        super().__init__(
            f"wait response on the channel <{address}> timeout, "
            f"{elapsed * 1000:.0f}(ms) of {timeout * 1000:.0f}(ms)",
            address,
        )
        self.elapsed = elapsed
        self.timeout = timeout


class RemotingTooManyRequestsError(RemotingError):
    """No async/oneway permit became free within the timeout (RocketMQ's
    ``RemotingTooMuchRequestException``): the caller is going faster than the peer."""

    def __init__(self, kind: str, permits: int, timeout: float, address: str | None = None) -> None:
        super().__init__(
            f"too many {kind} requests in flight: all {permits} permits still taken "
            f"after {timeout * 1000:.0f}(ms)",
            address,
        )
        self.kind = kind
        self.permits = permits
        self.timeout = timeout


class RemotingCancelledError(RemotingError):
    """The call was cancelled by its caller before a response came."""


class RemotingDecodeError(RemotingError):
    """Bytes from the peer did not decode; the connection is closed. ``__cause__``
    is the codecs' :class:`~trocket.codecs.errors.CodecError`."""


class RemotingFrameError(RemotingDecodeError):
    """The byte stream is not RocketMQ framing (junk, oversized length, TLS/HTTP)."""


class RemotingCommandDecodeError(RemotingDecodeError):
    """A frame arrived whole but its command header did not decode."""
