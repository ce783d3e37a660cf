"""A connection's lifecycle as one state machine, and why it closed.

The states and their transitions (h11's ``_state.py`` is the model: the table is the
whole truth, anything else raises :class:`ConnectionStateError`)::

    OPEN ──stop_reading──> DRAINING ──(handlers done, answers written)──> CLOSING
      └──────────────close / EOF / I/O error / bad input / idle─────────────┘
    CLOSING ──(pending calls failed, socket closed)──> CLOSED

``OPEN`` reads and writes; ``DRAINING`` (graceful close) reads no more requests but
still writes the answers of the handlers running; ``CLOSING`` writes nothing more
(queued frames are dropped) while the connection's tasks wind down; ``CLOSED`` is
final. The write path's own bookkeeping (a write in progress, a direct write
allowed, the socket drained) is I/O detail, not lifecycle, and stays on the
connection. The Java counterpart is Netty's channel state (``isActive``) plus the
``closeChannel`` reasons RocketMQ logs.
"""

from __future__ import annotations

import enum

__all__ = ["ConnState", "CloseReason", "ConnectionStateError", "Lifecycle", "check_transition"]


class ConnState(enum.IntEnum):
    """Ordered: ``state >= CLOSING`` means nothing more is sent (one int compare)."""

    OPEN = 0
    DRAINING = 1
    CLOSING = 2
    CLOSED = 3


class CloseReason(enum.Enum):
    """Why a connection closed; the value is how errors and logs say it."""

    LOCAL = "closed locally"
    PEER = "closed by peer"
    IDLE = "closed idle"
    BAD_INPUT = "closed on bad input"
    IO_ERROR = "failed"
    GRACEFUL = "closed gracefully"
    SHUTDOWN = "shut down"


class ConnectionStateError(RuntimeError):
    """A transition the lifecycle does not have (a bug in the caller)."""


_TRANSITIONS: dict[ConnState, frozenset[ConnState]] = {
    ConnState.OPEN: frozenset({ConnState.DRAINING, ConnState.CLOSING}),
    ConnState.DRAINING: frozenset({ConnState.CLOSING}),
    ConnState.CLOSING: frozenset({ConnState.CLOSED}),
    ConnState.CLOSED: frozenset(),
}


def check_transition(old: ConnState, new: ConnState) -> ConnState:
    """``new`` if the lifecycle goes from ``old`` to ``new``; else raise."""
    if new not in _TRANSITIONS[old]:
        raise ConnectionStateError(f"a connection cannot go from {old.name} to {new.name}")
    return new


class Lifecycle:
    """A connection's state and why it closed, as one object with no I/O (what the
    connection does on each transition -- cancel its reader, close its outbox, fail its
    calls -- is the connection's). ``reason`` is None while open or draining;
    ``detail`` the text a caller gave, ``cause`` the exception that closed it, if one did."""

    __slots__ = ("state", "reason", "detail", "cause")

    def __init__(self) -> None:
        self.state = ConnState.OPEN
        self.reason: CloseReason | None = None
        self.detail: str | None = None
        self.cause: BaseException | None = None

    def to(self, new: ConnState) -> None:
        self.state = check_transition(self.state, new)

    def drain(self) -> bool:
        """OPEN -> DRAINING (a graceful close); False when it was not open."""
        if self.state is not ConnState.OPEN:
            return False
        self.to(ConnState.DRAINING)
        return True

    def close(self, reason: CloseReason | str, cause: BaseException | None = None) -> bool:
        """-> CLOSING with ``reason`` (a ``str``: LOCAL with that text); False, and
        nothing changed, when it is closing or closed already (the first reason wins)."""
        if self.state >= ConnState.CLOSING:
            return False
        if isinstance(reason, str):
            self.detail = reason
            reason = CloseReason.LOCAL
        self.to(ConnState.CLOSING)
        self.reason = reason
        self.cause = cause
        return True

    @property
    def description(self) -> str:
        """How errors and logs say why it closed, e.g. ``failed: [Errno 104] ...``."""
        reason = self.reason
        if reason is None:
            return "open" if self.state is ConnState.OPEN else self.state.name.lower()
        extra = self.detail or (str(self.cause) if self.cause is not None else "")
        return f"{reason.value}: {extra}" if extra else reason.value
