"""``async with`` for services that run their tasks in a nursery of their own."""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["ServiceContextManager", "exit_owned_nursery"]


async def exit_owned_nursery(cm: Any, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
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
    """``async with service:`` starts ``_cm_run(task_status=...)`` in a nursery the
    service owns; a clean exit awaits ``_cm_close()`` (the graceful stop), an exit by
    exception calls ``_cm_abort()`` (cancel at once) and re-raises the body's error
    unwrapped. Subclasses set ``self._cm_nursery = None`` and define the three."""

    _cm_nursery: Any

    async def _cm_run(self, *, task_status: Any) -> None:
        raise NotImplementedError

    async def _cm_close(self) -> None:
        raise NotImplementedError

    def _cm_abort(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Any:
        self._cm_nursery = trio.open_nursery()
        nursery = await self._cm_nursery.__aenter__()
        try:
            await nursery.start(self._cm_run)
        except BaseException as exc:
            await exit_owned_nursery(self._cm_nursery, type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
        if exc_type is None:
            try:
                await self._cm_close()
            except BaseException as close_exc:  # e.g. an enclosing scope cancelled the close
                self._cm_abort()
                await exit_owned_nursery(self._cm_nursery, type(close_exc), close_exc, close_exc.__traceback__)
                raise
        else:
            self._cm_abort()
        return await exit_owned_nursery(self._cm_nursery, exc_type, exc, tb)
