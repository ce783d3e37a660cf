"""The one Ctrl-C rule of every ``trocket`` command (and of the examples' clients).

Ctrl-C (SIGINT) stops a command at once; what it did so far is printed (the summary
line of ``send``, ``consume``, ``replay``, ``analyze``), an open progress line is ended,
no traceback is shown, and the exit status is 130. SIGTERM does the same with 143
(128 + the signal's number, the shell's convention and the JVM's: ``mqbroker``
stopped with Ctrl-C exits 130 too). A server (``broker``, ``namesrv``, ``capture
proxy``) still shuts down cleanly first: its shutdown is what it did so far.

The rule is in two pieces:

- :func:`run` runs the whole command (``trocket/cli.py``'s ``main``, the examples'
  ``main``) under :func:`rule`: SIGTERM is
  turned into what SIGINT does (a ``KeyboardInterrupt``, raised by Python's handler
  or delivered by trio's), and :func:`exit_status` then maps either to 130/143; an
  interrupt that escapes the command, bare or inside trio's exception groups, is one of
  them (:func:`is_interrupt`).
- :func:`stop_on_signal` is for a command that has a summary to print: its body is
  cancelled on the first SIGINT/SIGTERM (no ``KeyboardInterrupt`` in a random task),
  the command prints its summary after the block and returns; the signal is noted, so
  the exit status is still 130/143.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import FrameType

import attrs

__all__ = ["EXIT_SIGINT", "EXIT_SIGTERM", "Stop", "exit_status", "is_interrupt", "note", "received", "rule", "run",
           "stop_on_signal"]

EXIT_SIGINT = 128 + signal.SIGINT  # 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143

_received: int | None = None


def note(signum: int) -> None:
    """Remember the (first) signal that stopped the command."""
    global _received
    if _received is None:
        _received = signum


def received() -> int | None:
    """The signal that stopped the command, if one did."""
    return _received


def exit_status() -> int:
    """130 after SIGINT, 143 after SIGTERM."""
    return 128 + (_received or signal.SIGINT)


def is_interrupt(exc: BaseException) -> bool:
    """``exc`` is a KeyboardInterrupt, or an exception group holding one (trio raises it
    in whatever task runs when it comes; what fails beside it is its consequence), or an
    error raised while one was unwinding (a library's cleanup that fails because the
    interrupt cut its connection short: Py4J's, when ``analyze`` is stopped mid-call)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BaseExceptionGroup):
            if exc.split(KeyboardInterrupt)[0] is not None:
                return True
        elif isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__context__
    return False


def _sigterm(signum: int, frame: FrameType | None) -> None:
    note(signal.SIGTERM)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):  # Python's default (raises) or trio's (raises or delivers)
        handler(signal.SIGINT, frame)
    else:  # SIGINT ignored or default-action: still stop
        raise KeyboardInterrupt


@contextmanager
def rule() -> Iterator[None]:
    """SIGTERM handled as SIGINT while the block runs (the previous handler restored
    after); the signal noted afresh for each command run in the process."""
    global _received
    _received = None
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(fn: Callable[..., int], *args: object) -> int:
    """``fn(*args)``'s exit status under the rule: 130/143 when a signal stopped it,
    whether ``fn`` caught it (and printed its summary) or not; an open progress line
    ended; no traceback."""
    from trocket.progress import ProgressLine

    with rule():
        try:
            status = fn(*args)
        except BaseException as exc:
            if not is_interrupt(exc):
                raise
            ProgressLine.close_all()
            return exit_status()
        ProgressLine.close_all()
        return exit_status() if _received is not None else status


@attrs.define(slots=True)
class Stop:
    """What :func:`stop_on_signal` saw: the signal, or None when the body ended by itself."""

    signum: int | None = None

    @property
    def interrupted(self) -> bool:
        return self.signum is not None


@asynccontextmanager
async def stop_on_signal(graceful: Callable[[], object] | None = None) -> AsyncIterator[Stop]:
    """Run the block until it ends or SIGINT/SIGTERM comes; then it is cancelled (its
    ``async with`` exits run, cancelled: they must not wait long) and the signal noted.
    The caller prints its summary after the block and returns.

    ``graceful``: called instead of cancelling, for a body that stops quickly by itself
    when told (a consumer committing its offsets); a second signal cancels it."""
    import trio

    stop = Stop()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for signum in signals:
                        if graceful is not None and stop.signum is None:
                            note(signum)
                            stop.signum = signum
                            graceful()
                            continue
                        note(signum)
                        stop.signum = stop.signum or signum
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch)
                try:
                    yield stop
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # the body's own exception, which the nursery wrapped: the caller's to catch
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
