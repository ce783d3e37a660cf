"""Exiting a nursery that an ``async with`` object opened for its own tasks."""

from __future__ import annotations

from typing import Any


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
