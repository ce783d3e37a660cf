"""``async with`` for services that run their tasks in a nursery of their own."""

from __future__ import annotations

from types import TracebackType
from typing import Any, AsyncContextManager

import trio

__all__ = ["ServiceContextManager", "exit_owned_nursery"]


async def exit_owned_nursery(
    cm: AsyncContextManager[Any], exc_type: type[BaseException] | None, exc: BaseException | None,
    tb: TracebackType | None,
) -> bool | None:
    """``cm.__aexit__(...)``, but the body's own exception comes back as itself.

    A strict trio nursery wraps whatever the ``async with`` body raised in an
    ExceptionGroup. The nursery is our implementation detail, so a caller of
    ``async with RemotingClient() as c: await c.invoke_sync(...)`` gets the
    ``RemotingConnectError`` it can catch, not a group. Errors of our own background
    tasks still arrive grouped with it.
    """
    try:
        return await cm.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        if exc is not None:
            match, rest = group.split(lambda e: e is exc)
            if match is not None and rest is None:
                raise exc from None
        raise


class ServiceContextManager:
    """The ``async with service:`` of every trocket service (remoting's client and
    server, the name server, the broker, the client's instance, producer, consumers).

    A service defines the two methods it has anyway, and nothing else for this:

    - ``async def run(self, *, task_status=trio.TASK_STATUS_IGNORED)``: start, call
      ``task_status.started(self)`` once usable, serve until :meth:`aclose` or
      cancellation. It is also how the service runs in a nursery of the caller's:
      ``await nursery.start(service.run)``.
    - ``async def aclose(self)``: the graceful stop; ``run`` returns once it is done.

    ``async with service as s:`` starts ``run`` in a nursery the service owns and enters
    once it is started. A clean exit awaits ``aclose()``. An exit by exception (or an
    ``aclose`` that fails or is cancelled) stops at once: :meth:`_abort`, then the
    owned nursery is cancelled; the body's error is re-raised unwrapped
    (:func:`exit_owned_nursery`).

    A service whose tasks must know that they are being stopped, not failing, when the
    nursery's cancellation reaches them (a flag such as "shutting down" read as they
    unwind) overrides :meth:`_abort` to set that flag; by default it does nothing.
    """

    _service_nursery_manager: AsyncContextManager[trio.Nursery] | None = None
    _service_nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        """Called synchronously before an ``async with`` exit by exception cancels the
        service's nursery (see the class docstring)."""

    def _cancel(self) -> None:
        self._abort()
        if self._service_nursery is not None:
            self._service_nursery.cancel_scope.cancel()

    async def __aenter__(self) -> Any:
        manager = self._service_nursery_manager = trio.open_nursery()
        nursery = self._service_nursery = await manager.__aenter__()
        try:
            await nursery.start(self.run)
        except BaseException as exc:
            await exit_owned_nursery(manager, type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        manager = self._service_nursery_manager
        assert manager is not None, "__aexit__ without __aenter__"
        if exc_type is None:
            try:
                await self.aclose()
            except BaseException as close_exc:  # e.g. an enclosing scope cancelled the close
                self._cancel()
                await exit_owned_nursery(manager, type(close_exc), close_exc, close_exc.__traceback__)
                raise
        else:
            self._cancel()
        return await exit_owned_nursery(manager, exc_type, exc, tb)
