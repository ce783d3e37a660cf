"""Typed errors of the message store: one tree under :class:`StoreError`; every
refused put is a :class:`PutMessageError` carrying the
:class:`~trocket.broker.store.results.PutStatus` Java's store would return (the broker
maps that status to its answer in one place, :func:`trocket.broker.errors.put_refused`)."""

from __future__ import annotations

from .results import PutStatus

__all__ = [
    "ConfigLoadError",
    "MessageIllegalError",
    "MessageTooLargeError",
    "PropertiesTooLargeError",
    "PutMessageError",
    "StoreError",
    "StoreLoadError",
]


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StoreLoadError(StoreError):
    """The files on disk do not make a store this configuration can open."""


class ConfigLoadError(StoreError):
    """A persisted JSON table (offsets, topics) is unreadable."""


class PutMessageError(StoreError):
    """A message was refused before it reached the commit log.

    ``status`` is the :class:`~trocket.broker.store.results.PutStatus` a broker maps to
    its response code (Java returns these as ``PutMessageResult`` statuses).
    """

    status: PutStatus = PutStatus.UNKNOWN_ERROR


class MessageIllegalError(PutMessageError):
    """Topic too long, an illegal batch, a field out of its Java range (MESSAGE_ILLEGAL)."""

    status = PutStatus.MESSAGE_ILLEGAL


class MessageTooLargeError(MessageIllegalError):
    """The body is larger than ``max_message_size``, or the record than that plus 64 KiB
    (Java 4.9.8: MESSAGE_ILLEGAL either way) or than a commit-log segment can hold."""

    def __init__(self, size: int, limit: int, what: str = "record") -> None:
        super().__init__(f"message {what} of {size} bytes exceeds the maximum of {limit}")
        self.size = size
        self.limit = limit


class PropertiesTooLargeError(PutMessageError):
    """Properties longer than 32767 bytes (PROPERTIES_SIZE_EXCEEDED)."""

    status = PutStatus.PROPERTIES_SIZE_EXCEEDED
