"""Logging that a flood cannot turn into a flood of lines.

A burst of failing connections (thousands of resets from a load balancer's health
check or a port scan) would otherwise log one line each. :class:`RateLimitedLog`
logs the first ``burst`` messages of every ``interval`` and counts the rest; the
count comes out as one summary line when the interval is over (the endpoint's
periodic scan calls :meth:`flush`, so the summary appears even after the flood
stops). Time is trio's clock, so tests drive it with ``MockClock``. RocketMQ has
no counterpart (Netty logs every ``closeChannel``).
"""

from __future__ import annotations

import logging

import trio

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    __slots__ = ("logger", "burst", "interval", "_window_end", "_logged", "_suppressed", "_what")

    def __init__(self, logger: logging.Logger, *, burst: int = 5, interval: float = 10.0, what: str = "messages") -> None:
        self.logger = logger
        self.burst = burst
        self.interval = interval
        self._what = what
        self._window_end = -float("inf")
        self._logged = 0
        self._suppressed = 0

    @property
    def suppressed(self) -> int:
        """Messages held back in the current interval (not yet summarised)."""
        return self._suppressed

    def log(self, level: int, msg: str, *args) -> bool:
        """Log ``msg % args`` unless this interval's burst is used up; True if logged."""
        now = trio.current_time()
        if now >= self._window_end:
            self.flush(now)
            self._window_end = now + self.interval
            self._logged = 0
        if self._logged < self.burst:
            self._logged += 1
            self.logger.log(level, msg, *args)
            return True
        self._suppressed += 1
        return False

    def flush(self, now: float | None = None) -> int:
        """Log the summary of an interval that is over; returns how many it counted."""
        if now is None:
            now = trio.current_time()
        n = self._suppressed
        if not n or now < self._window_end:
            return 0
        self._suppressed = 0
        self.logger.info("%d more %s suppressed in the last %.0f s", n, self._what, self.interval)
        return n
