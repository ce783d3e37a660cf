"""The client's typed errors (Java: ``MQClientException`` / ``MQBrokerException`` /
``RemotingException``, made distinct by what the caller can do about them).

Every error carries ``attempts`` (what was tried: broker, address, queue, the answer or
the cause, how long it took) and ``elapsed`` (seconds since the operation began), and its
message says both, so a failed send explains itself::

    SendTimeoutError: send to topic T took 3001 ms of its 3000 ms budget; tried:
      #1 broker-a 127.0.0.1:10911 queue 2: connect failed: ... (3000 ms)

- :class:`SendTimeoutError`: the budget ran out (route lookup, retries and the wait).
- :class:`BrokerBusyError`: SYSTEM_BUSY / flow control (the broker answered, it is full).
- :class:`NoRouteError`: no name server knows the topic and the TBW102 fallback failed.
- :class:`MessageRefusedError`: the message itself is wrong (illegal topic, empty or
  oversized body) - refused before sending, or by the broker (MESSAGE_ILLEGAL, ...).
- :class:`ClientConnectError`: no connection could be made (name server or broker);
  :class:`ConnectionLostError` when it closed under a pending call.
- :class:`ClientTimeoutError`: any other call out of time (SendTimeoutError's base).
- :class:`BrokerResponseError`: any other non-success answer (its ``code`` and ``remark``).
"""

from __future__ import annotations

import attrs

__all__ = [
    "Attempt",
    "ClientError",
    "ClientTimeoutError",
    "SendTimeoutError",
    "RequestTimeoutError",
    "BrokerBusyError",
    "NoRouteError",
    "MessageRefusedError",
    "ClientConnectError",
    "ConnectionLostError",
    "BrokerResponseError",
    "ClientStateError",
]


@attrs.define(slots=True, frozen=True)
class Attempt:
    """One try: where it went and how it ended (``outcome`` is a short text)."""

    target: str  # "broker-a 127.0.0.1:10911 queue 2", "namesrv 127.0.0.1:9876"
    outcome: str
    elapsed: float

    def __str__(self) -> str:
        return f"{self.target}: {self.outcome} ({self.elapsed * 1000:.0f} ms)"


class ClientError(Exception):
    """Base of every client failure."""

    def __init__(
        self, message: str, *, attempts: tuple[Attempt, ...] | list[Attempt] = (), elapsed: float | None = None
    ) -> None:
        self.summary = message
        self.attempts = tuple(attempts)
        self.elapsed = elapsed
        text = message
        if elapsed is not None:
            text += f" (after {elapsed * 1000:.0f} ms)"
        if self.attempts:
            text += "; tried: " + "; ".join(f"#{i} {a}" for i, a in enumerate(self.attempts, 1))
        super().__init__(text)


class ClientTimeoutError(ClientError):
    """A call or operation ran out of time."""


class SendTimeoutError(ClientTimeoutError):
    """A send's one budget ran out (route lookup, retries and the wait together)."""


class RequestTimeoutError(ClientTimeoutError):
    """A request (request-reply) was sent but its reply did not come in time (Java's
    ``RequestTimeoutException``)."""


class BrokerResponseError(ClientError):
    """A broker or name server answered with a non-success ``code``."""

    def __init__(self, message: str, *, code: int, remark: str | None = None, **kw) -> None:
        self.code = code
        self.remark = remark
        super().__init__(message, **kw)


class BrokerBusyError(BrokerResponseError):
    """SYSTEM_BUSY (flow control, a full processor queue, page cache busy)."""


class NoRouteError(ClientError):
    """No route for the topic (name servers do not know it, TBW102 fallback too)."""


class MessageRefusedError(BrokerResponseError):
    """The message cannot be sent: checked before sending (``code`` is MESSAGE_ILLEGAL,
    13, as Java's ``Validators``) or refused by the broker."""


class ClientConnectError(ClientError):
    """No connection could be made to any address tried."""


class ConnectionLostError(ClientConnectError):
    """The connection closed (reset, closed by the peer) while a call was waiting."""


class ClientStateError(ClientError):
    """The client is not started, or already shut down."""
