"""Calls from this side on one connection: sync, async and oneway
(``NettyRemotingAbstract.invokeSyncImpl`` / ``invokeAsyncImpl`` / ``invokeOnewayImpl``).

Each call gets a fresh opaque, runs the request hooks, is encoded and queued on the
connection; a two-way call registers a :class:`~.response.ResponseFuture` in the
connection's response table first, which the reader completes. Async and oneway calls
take a permit from a semaphore (RocketMQ's ``semaphoreAsync`` / ``semaphoreOneway``):
past them a call waits up to its timeout, then fails with
:class:`~.errors.RemotingTooManyRequestsError`. One :class:`Invoker` per endpoint; the
endpoint's ``invoke_*`` methods and :meth:`Connection.invoke_sync
<trocket.remoting.connection.Connection.invoke_sync>` and its siblings come here.
"""

from __future__ import annotations

import itertools
from typing import Protocol

import trio

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from trocket.codecs.serialize import encode_command

from .config import EndpointConfig
from .errors import RemotingSendRequestError, RemotingShutdownError, RemotingTooManyRequestsError
from .hooks import HookSet
from .outbox import Outbox
from .response import InvokeCallback, ResponseFuture, ResponseTable

__all__ = ["CallTarget", "Invoker", "next_opaque"]

_opaque_counter = itertools.count()


def next_opaque() -> int:
    """The next request id: one process-wide counter, wrapping as a Java int."""
    n = next(_opaque_counter) & 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


class CallTarget(Protocol):
    """What a call needs of the connection it goes out on (a
    :class:`~trocket.remoting.connection.Connection`)."""

    remote_address: str
    responses: ResponseTable
    outbox: Outbox


class Invoker:
    """The endpoint's outgoing calls; ``closed`` once it shuts down (new calls fail
    with :class:`~.errors.RemotingShutdownError`)."""

    __slots__ = ("config", "hooks", "closed", "async_permits", "oneway_permits")

    def __init__(self, config: EndpointConfig, hooks: HookSet) -> None:
        self.config = config
        self.hooks = hooks
        self.closed = False
        self.async_permits = trio.Semaphore(config.async_permits)
        self.oneway_permits = trio.Semaphore(config.oneway_permits)

    async def _acquire(self, sem: trio.Semaphore, kind: str, permits: int, timeout: float, address: str) -> None:
        try:
            sem.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        if timeout > 0:
            with trio.move_on_after(timeout):
                await sem.acquire()
                return
        raise RemotingTooManyRequestsError(kind, permits, timeout, address)

    def _prepare(self, conn: CallTarget, request: RemotingCommand) -> bytes:
        if self.closed:
            raise RemotingShutdownError("the endpoint is shutting down", conn.remote_address)
        request.opaque = next_opaque()
        for hook in self.hooks.before:
            hook.do_before_request(conn.remote_address, request)
        return encode_command(request)

    async def _send(self, conn: CallTarget, frame: bytes, fut: ResponseFuture) -> None:
        """Queue the frame, within the call's deadline; the outcome goes to ``fut``."""
        outbox = conn.outbox
        try:
            if not outbox.send_nowait(frame):
                with trio.move_on_at(fut.deadline):
                    await outbox.send(frame)
                    return
                fut.expire()
        except RemotingSendRequestError as exc:
            fut.set_exception(exc)
        except BaseException:
            fut.cancel()
            raise

    async def sync(
        self, conn: CallTarget, request: RemotingCommand, timeout: float, begin: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` and wait for its response, at most until ``begin + timeout``
        (``begin`` defaults to now: a caller that connected first passes when it began)."""
        request.flag &= ~(RPC_ONEWAY | RPC_RESPONSE)
        frame = self._prepare(conn, request)
        fut = ResponseFuture(
            request.opaque, request, conn.remote_address, timeout, conn.responses, hooks=self.hooks.after, begin=begin
        )
        conn.responses.add(fut)
        await self._send(conn, frame, fut)
        return await fut.wait()

    async def call_async(
        self,
        conn: CallTarget,
        request: RemotingCommand,
        timeout: float,
        callback: InvokeCallback | None = None,
        begin: float | None = None,
        future_class: type[ResponseFuture] = ResponseFuture,
    ) -> ResponseFuture:
        """Send ``request``; returns once it is queued, with the call's future, a
        ``future_class`` (a :class:`ResponseFuture` subclass may present the outcome its
        own way, as a stub's typed :class:`~.stub.ReplyFuture` does)."""
        if begin is None:
            begin = trio.current_time()
        sem = self.async_permits
        await self._acquire(sem, "async", self.config.async_permits, begin + timeout - trio.current_time(), conn.remote_address)
        try:
            request.flag &= ~(RPC_ONEWAY | RPC_RESPONSE)
            frame = self._prepare(conn, request)
        except BaseException:
            sem.release()
            raise
        fut = future_class(
            request.opaque, request, conn.remote_address, timeout, conn.responses,
            permit=sem, callback=callback, hooks=self.hooks.after, begin=begin,
        )
        conn.responses.add(fut)
        await self._send(conn, frame, fut)
        return fut

    async def oneway(
        self, conn: CallTarget, request: RemotingCommand, timeout: float, begin: float | None = None
    ) -> None:
        """Send ``request`` with the oneway flag; no response is expected. One budget,
        until ``begin + timeout`` (``begin`` defaults to now), for the permit and the
        send; the clock is read only when one of them has to wait."""
        sem = self.oneway_permits
        if begin is not None or sem.value == 0:
            begin = trio.current_time() if begin is None else begin
            await self._acquire(sem, "oneway", self.config.oneway_permits, begin + timeout - trio.current_time(), conn.remote_address)
        else:
            sem.acquire_nowait()
        try:
            request.flag = (request.flag | RPC_ONEWAY) & ~RPC_RESPONSE
            frame = self._prepare(conn, request)
            outbox = conn.outbox
            if not outbox.send_nowait(frame):
                with trio.move_on_after(timeout) if begin is None else trio.move_on_at(begin + timeout):
                    await outbox.send(frame)
                    return
                raise RemotingTooManyRequestsError("oneway", self.config.oneway_permits, timeout, conn.remote_address)
        finally:
            sem.release()
