"""A one-line progress display for the command line (``trocket send``, ``trocket consume``,
``trocket capture`` over long files).

The line is redrawn in place (``\\r``) on stderr, at most every ``interval`` seconds, and
only when stderr is a terminal: piped or redirected output stays clean. With a known
total it shows a bar and ``done/total``; without one (a consumer running until Ctrl-C) a
running count. Either way it ends with the rate since the start::

    [###############...............] 500/1000  failed 2  12,345 msg/s
    1,234 consumed  6,789 msg/s

``text`` replaces that with a line of the caller's (``capture``: the share of a file read).
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Callable, ClassVar, TextIO

__all__ = ["ProgressLine"]

BAR_WIDTH = 30


class ProgressLine:
    """``update(done, extra)`` as work goes on, ``close()`` at the end (ends the line).

    ``total`` None (or 0) means unknown; ``label`` names the count then ("consumed").
    ``enabled`` None: on when ``stream`` (default stderr) is a terminal. ``text(done)``,
    if given, is the whole line instead of the bar or count and the rate.
    """

    _drawn_lines: ClassVar[weakref.WeakSet[ProgressLine]] = weakref.WeakSet()

    def __init__(
        self,
        total: int | None,
        *,
        label: str = "done",
        unit: str = "msg/s",
        interval: float = 0.1,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        text: Callable[[int], str] | None = None,
    ) -> None:
        self.total = total or None
        self.label = label
        self.unit = unit
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self.text = text
        self.on = _isatty(self.stream) if enabled is None else enabled
        self.begin = time.perf_counter()
        self._last = float("-inf")
        self._drawn = False

    def render(self, done: int, extra: str = "", now: float | None = None) -> str:
        """The line's text (without the leading ``\\r``)."""
        if self.text is not None:
            return self.text(done)
        now = time.perf_counter() if now is None else now
        total = self.total
        if total:
            filled = int(BAR_WIDTH * min(max(done, 0), total) / total)
            text = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"
        else:
            text = f"{done:,} {self.label}"
        if extra:
            text += f"  {extra}"
        rate = done / max(now - self.begin, 1e-9)
        return f"{text}  {rate:,.0f} {self.unit} "

    def update(self, done: int, extra: str = "", *, force: bool = False) -> None:
        if not self.on:
            return
        now = time.perf_counter()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self.stream.write("\r" + self.render(done, extra, now))
        self.stream.flush()
        self._drawn = True
        ProgressLine._drawn_lines.add(self)

    def close(self, *, clear: bool = False) -> None:
        """End the line: a newline, so what follows starts on its own line, or with
        ``clear`` the line erased. An update afterwards draws a new line."""
        if self.on and self._drawn:
            self.stream.write("\r\x1b[K" if clear else "\n")
            self.stream.flush()
            self._drawn = False
        ProgressLine._drawn_lines.discard(self)

    @classmethod
    def close_all(cls) -> None:
        """End every line still drawn (an interrupted command's: the prompt then starts
        on a line of its own; ``trocket.interrupt``'s rule)."""
        for line in list(cls._drawn_lines):
            line.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
