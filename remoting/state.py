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

__all__ = ["ConnState", "CloseReason", "ConnectionStateError", "check_transition"]


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
