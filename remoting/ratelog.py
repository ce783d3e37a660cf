"""Logging that a flood cannot turn into a flood of lines.

A burst of failing connections (thousands of resets from a load balancer's health
check or a port scan) would otherwise log one line each. :class:`RateLimitedLog`
logs the first ``burst`` messages of every ``interval`` and counts the rest; the
count comes out as one summary line when the interval is over (the endpoint's
periodic scan calls :meth:`flush`, so the summary appears even after the flood
stops). :class:`KeyedRateLimitedLog` does the same per key (a peer's host): one line
per key and interval, the next one saying how many were held back. Time is trio's
clock, so tests drive it with ``MockClock``. RocketMQ has no counterpart (Netty logs
every ``closeChannel``).
"""

from __future__ import annotations

import logging

import trio

__all__ = ["KeyedRateLimitedLog", "RateLimitedLog"]


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


class KeyedRateLimitedLog:
    """At most one line per key every ``interval`` seconds; a key's next line carries
    how many of its messages were held back meanwhile (``held`` in the arguments given
    to the format: the message must end with a ``%d`` for it). At most ``max_keys``
    keys are tracked: past that, keys whose interval is over are forgotten first, and
    if none is, all (so a flood from many keys costs bounded memory)."""

    __slots__ = ("logger", "interval", "max_keys", "_keys")

    def __init__(self, logger: logging.Logger, *, interval: float = 60.0, max_keys: int = 4096) -> None:
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        #: key -> [end of its interval, messages held back in it]
        self._keys: dict[object, list] = {}

    def log(self, key: object, level: int, msg: str, *args) -> bool:
        """Log ``msg % (*args, held)`` unless ``key`` logged within the interval; True if logged."""
        now = trio.current_time()
        entry = self._keys.get(key)
        if entry is not None and now < entry[0]:
            entry[1] += 1
            return False
        held = entry[1] if entry is not None else 0
        if entry is None and len(self._keys) >= self.max_keys:
            self._forget(now)
        self._keys[key] = [now + self.interval, 0]
        self.logger.log(level, msg, *args, held)
        return True

    def _forget(self, now: float) -> None:
        over = [key for key, (end, _) in self._keys.items() if end <= now]
        for key in over:
            del self._keys[key]
        if len(self._keys) >= self.max_keys:
            self._keys.clear()
