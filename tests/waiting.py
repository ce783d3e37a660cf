"""Waiting in a test until something happened, not for a while.

First choice: an event the code under test already gives -- a ``trio.Event`` set by the
test's own processor or callback, a future, ``trio.testing.wait_all_tasks_blocked()``,
a line a subprocess prints. Where the code only shows state (a counter, a table, a
file, a listening port), poll it here, bounded: the test fails saying what never
happened, instead of hanging or sleeping "long enough".

``wait_until`` is for trio tests (its timeout is on trio's clock: logical seconds under
a MockClock), ``wait_until_sync`` for plain ones (threads, subprocesses).
"""

from __future__ import annotations

import inspect
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")


def _what(predicate: Callable, what: str | Callable[[], str]) -> str:
    if callable(what):
        return what()
    if what:
        return what
    code = getattr(predicate, "__code__", None)
    if code is None:
        return repr(predicate)
    return f"{predicate.__qualname__} at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"


async def wait_until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    what: str | Callable[[], str] = "",
) -> T:
    """Call ``predicate`` (sync, or async: awaited) until it returns something true, and
    return that; fail after ``timeout`` seconds of trio's clock, saying ``what`` (a text,
    or a function making it then: a log's tail, say) never came true."""
    with trio.move_on_after(timeout):
        while True:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            await trio.sleep(interval)
    raise AssertionError(f"not so within {timeout} s: {_what(predicate, what)}")


def wait_until_sync(
    predicate: Callable[[], T], timeout: float = 10.0, *, interval: float = 0.01, what: str | Callable[[], str] = ""
) -> T:
    """As :func:`wait_until`, blocking, on the real clock (outside trio, or in a thread)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not so within {timeout} s: {_what(predicate, what)}")
        time.sleep(interval)


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port`` now."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True
