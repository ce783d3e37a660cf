"""A connection's write side: the bounded queue of encoded frames, direct writes, corking
and the writer task (Netty's ``writeAndFlush`` and its outbound buffer).

What goes out how:

* A frame sent when nothing is queued and no write is in progress goes straight to the
  socket (plain TCP, non-blocking, :mod:`.fdio`): no task switch for the common
  request/response case. Only the first frame of a burst goes direct (a write to a
  socket a peer process waits on costs it a wake-up); the rest queue up.
* Queued frames go out together, in one write: when the reader has handled a read
  (:meth:`Outbox.end_read`: the answers of its inline processors, corked meanwhile), when
  a burst reaches ``flush_frames`` (the peer starts on the first part while this side
  makes the rest), when an owner of a :meth:`cork` ends it, or from the writer task
  (:meth:`run`), which writes what a direct write could not and waits for room.
* The queue is bounded by frames and bytes (a single frame larger than the byte bound
  still goes through when the queue is empty); :meth:`send_nowait` says ``False`` when
  it is full and :meth:`send` waits for room: backpressure onto whoever produces.

The reader (new data) and the writer (queue drained) allow the next direct write; a
read that completed several calls does not (their callers' next requests go out
together, in the writer's one write). Once closed, sending raises
:class:`~.errors.RemotingSendRequestError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .errors import RemotingSendRequestError
from .fdio import write_all, write_nowait

if TYPE_CHECKING:
    from .config import EndpointConfig
    from .tap import TapRecorder

__all__ = ["Outbox"]


class Outbox:
    """One connection's outbound frames (see the module docstring). ``last_io`` is when
    it last wrote; ``tap`` records what is sent (None: not tapped)."""

    __slots__ = (
        "frames",
        "nbytes",
        "max_frames",
        "max_bytes",
        "closed",
        "corked",
        "address",
        "last_io",
        "tap",
        "_fd",
        "_stream",
        "_sending",
        "_direct_ok",
        "_hold_direct",
        "_flush_frames",
        "_writer",
        "_space",
        "_now",
    )

    def __init__(self, stream: trio.abc.Stream, fd: int, config: EndpointConfig, address: str) -> None:
        """``fd``: the plain-TCP socket's descriptor for direct writes, or -1 (TLS:
        everything goes through the writer task and ``stream.send_all``)."""
        self.frames: list[bytes | memoryview] = []
        self.nbytes = 0
        self.max_frames = config.outbound_max_frames
        self.max_bytes = config.outbound_max_bytes
        self.closed = False
        #: the reader (or a :meth:`cork` owner) is producing a batch; it flushes it itself
        self.corked = False
        self.address = address
        self._now = trio.lowlevel.current_clock().current_time  # trio.current_time, less two calls
        self.last_io = self._now()
        self.tap: TapRecorder | None = None
        self._fd = fd
        self._stream = stream
        self._sending = False  # the writer is writing (or waiting for room to)
        self._direct_ok = fd >= 0
        # a read completed several calls while the writer was mid-write: the writer must
        # not re-allow direct writes when it finishes (the woken callers' requests are its)
        self._hold_direct = False
        self._flush_frames = config.flush_frames if fd >= 0 else 1 << 62
        self._writer = trio.lowlevel.ParkingLot()
        self._space = trio.lowlevel.ParkingLot()

    @property
    def writing(self) -> bool:
        """The writer task is writing, or waiting for room to."""
        return self._sending

    # -- sending -------------------------------------------------------------------------

    def send_nowait(self, frame: bytes) -> bool:
        """Send or queue an encoded frame without waiting; ``False`` when the queue is
        full (nothing done: :meth:`send` waits for room)."""
        if self.closed:
            raise RemotingSendRequestError(f"connection to {self.address} is closed", self.address)
        frames = self.frames
        if frames or self.corked or not self._direct_ok:
            if frames and (len(frames) >= self.max_frames or self.nbytes >= self.max_bytes):
                return False
            frames.append(frame)
            self.nbytes += len(frame)
            n = len(frames)
            if n == 1 and not self.corked and self._writer:
                self._writer.unpark()
            if n >= self._flush_frames and not self._sending:
                # a long burst: hand the peer a first part now so it works while we
                # produce the rest, instead of both sides taking turns
                self._flush_direct()
        else:
            self._direct_ok = False  # one direct write per burst; the rest batch up
            n = write_nowait(self._fd, frame)
            if n < len(frame):  # the socket is full (or broken: the writer reports it)
                frames.append(memoryview(frame)[n:] if n else frame)
                self.nbytes += len(frame) - n
                if self._writer:
                    self._writer.unpark()
            else:
                self.last_io = self._now()
        tap = self.tap
        if tap is not None:
            tap.sent(frame)
        return True

    async def send(self, frame: bytes) -> None:
        """Send or queue ``frame``, waiting for room (backpressure);
        :class:`~.errors.RemotingSendRequestError` if the outbox closes meanwhile."""
        while not self.send_nowait(frame):
            if self._writer:
                self._writer.unpark()  # the queue may have been filled while corked
            await self._space.park()

    def cork(self) -> bool:
        """Hold what is sent from now on until :meth:`uncork`, which writes it with one
        write: for answers completed together outside the reader (e.g. many sends one
        replication acknowledgement covers). Returns whether it was corked already
        (pass that to :meth:`uncork`). No await may come between the two."""
        was = self.corked
        self.corked = True
        return was

    def uncork(self, was_corked: bool = False) -> None:
        """End a :meth:`cork` (a no-op when it was corked already: its owner flushes)."""
        if not was_corked:
            self.corked = False
            if not self.closed:
                self._flush_direct()

    def end_read(self, completed: int) -> None:
        """The reader handled a read (it corked the outbox for it): write what it queued
        with one direct write, and decide whether the next frame may go direct -- not
        when the read completed several calls (their callers' next requests go out
        together, in the writer's one write)."""
        self.corked = False
        if not self.closed:
            self._flush_direct(stamp=False)  # the read stamped the connection a moment ago
        if self._fd >= 0:
            if completed >= 2:
                self._direct_ok = False
                self._hold_direct = True
            elif not self._sending:
                self._direct_ok = True
                self._hold_direct = False

    def _flush_direct(self, stamp: bool = True) -> None:
        """Write the queued frames now, from this task, with one non-blocking write;
        the writer task gets whatever the socket does not take."""
        frames = self.frames
        if not frames:
            return
        if self._sending or self._fd < 0:
            if self._writer:
                self._writer.unpark()
            return
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        n = write_nowait(self._fd, data)
        if n == len(data):
            self.frames = []
            self.nbytes = 0
            if stamp:
                self.last_io = self._now()
        else:
            self.frames = [memoryview(data)[n:]]
            self.nbytes = len(data) - n
            if self._writer:
                self._writer.unpark()
        if self._space:
            self._space.unpark_all()

    # -- the writer task -------------------------------------------------------------------

    async def _take(self) -> list[bytes | memoryview]:
        """Every queued frame; ``[]`` once closed and empty."""
        while not self.frames:
            if self.closed:
                return []
            await self._writer.park()
        frames = self.frames
        self.frames = []
        self.nbytes = 0
        if self._space:
            self._space.unpark_all()
        return frames

    async def run(self) -> None:
        """The writer task: write what is queued, one write for all of it, until the
        outbox is closed and empty. Raises what the socket raises (the connection
        closes on it); no direct write happens once it has ended."""
        fd = self._fd
        send_all = self._stream.send_all if fd < 0 else None
        current_time = self._now
        try:
            while True:
                frames = await self._take()
                if not frames:
                    return
                self._sending = True
                self._direct_ok = False
                self._hold_direct = False  # what a read's woken callers queued is in hand
                data = frames[0] if len(frames) == 1 else b"".join(frames)
                if send_all is None:
                    await write_all(fd, data)
                else:
                    await send_all(data)
                self._sending = False
                self.last_io = current_time()
                if not self.frames and fd >= 0 and not self._hold_direct:
                    self._direct_ok = True
        finally:
            self._sending = True  # no direct writes past this point
            self._direct_ok = False

    def close(self, *, discard: bool) -> None:
        """No more sending; ``discard`` drops what is queued, else the writer writes it
        and ends."""
        self.closed = True
        if discard:
            self.frames = []
            self.nbytes = 0
        self._writer.unpark_all()
        self._space.unpark_all()
