"""RPC hooks: code that sees every request before it is sent or processed, and
every response after it arrives or is produced (RocketMQ's ``RPCHook``).

Hooks are plain synchronous calls on the hot path: keep them cheap. A hook that
raises stops the exchange: on the calling side the call fails with that
exception; on the processing side the peer gets SYSTEM_ERROR with the
exception's description as remark (as RocketMQ's ACL hook does), or the code and
remark of a :class:`~trocket.remoting.errors.ResponseCodeError` it raised.

Two kinds: a hook with both methods (:class:`RPCHook`) sees requests and responses; a
hook with only ``do_before_request`` (:class:`RequestHook`: access control, request
logging) sees requests only. Only the first kind takes a connection off its fast
path, where a processor's answer is a frame it encoded itself
(:class:`~trocket.remoting.connection.PreparedResponse`) and no command is made: a
response hook has to be shown one. :class:`HookSet` sorts the hooks an endpoint has
by what they implement.

RocketMQ's own hooks live with their users: the client's ACL signing in
:mod:`trocket.client.acl`, the broker's verification in :mod:`trocket.broker.acl`
(both request hooks).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import attrs

from trocket.codecs.command import RemotingCommand

__all__ = ["RPCHook", "RequestHook", "HookSet"]


@runtime_checkable
class RequestHook(Protocol):
    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        """Called before a request is sent (caller side) or processed (server side)."""


@runtime_checkable
class RPCHook(RequestHook, Protocol):
    def do_after_response(
        self, remote_addr: str | None, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Called after a response arrived (caller side) or when it is answered
        (processing side, in :meth:`Connection.answer
        <trocket.remoting.connection.Connection.answer>`: at once, or later for a
        processor that returned ``None`` and answers afterwards; for a oneway request,
        with what the processor returned, ``None`` as a rule)."""


@attrs.define(slots=True, eq=False)
class HookSet:
    """An endpoint's hooks, by kind, in registration order: ``before`` every hook with
    ``do_before_request``, ``after`` every hook with ``do_after_response``. Shared by
    reference with the endpoint's connections and invoker (each reads the tuple it
    needs; :meth:`add` replaces the tuples, never mutates them)."""

    before: tuple[RequestHook, ...] = ()
    after: tuple[RPCHook, ...] = ()

    @classmethod
    def of(cls, hooks: Iterable[RequestHook]) -> HookSet:
        hook_set = cls()
        for hook in hooks:
            hook_set.add(hook)
        return hook_set

    def add(self, hook: RequestHook) -> None:
        before = callable(getattr(hook, "do_before_request", None))
        after = callable(getattr(hook, "do_after_response", None))
        if not (before or after):
            raise TypeError(f"{hook!r} is no RPC hook: it has neither do_before_request nor do_after_response")
        if before:
            self.before = (*self.before, hook)
        if after:
            self.after = (*self.after, hook)  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        return bool(self.before or self.after)
