"""The floor of the send path: the fastest Python responder of the broker's shape.

Run by ``broker_produce.py --part floor`` in its own process. It listens on
``--port`` and answers every request frame of RocketMQ's remoting protocol (JSON
headers, as the C++ client writes them) with precomputed bytes patched with the
request's code-dependent answer and opaque:

* SEND_MESSAGE (10), SEND_MESSAGE_V2 (310): a successful send's answer of the exact
  shape ``trocket broker`` writes (``msgId``/``queueId``/``queueOffset`` plus
  ``MSG_REGION``/``TRACE_ON``; canned values, the queue offset counting up);
* anything else (the client's heartbeat 34, unregister 35, ...): code 0 with an empty
  ``extFields`` object (which the C++ client needs on every answer).

No store, no checks, no header decode past finding ``code`` (the header's first field,
as Java's and the C++ client's JSON writers order them) and ``opaque``: what
it costs per message is the socket and event-loop work any responder of this shape
does (one read per batch of requests, one write per batch of answers), plus the least
Python that finds the frames. Four loops, one per ``--mode``:

* ``blocking``: a thread per connection, blocking ``recv_into`` then ``sendall`` --
  two syscalls per batch, no readiness wait at all;
* ``epoll``: one thread, ``select.epoll`` (level-triggered), non-blocking sockets:
  ``epoll_wait`` + ``recv_into`` + ``send`` per batch;
* ``trio``: trio's ``serve_tcp`` and a ``SocketStream``: ``receive_some`` then
  ``send_all`` -- the idiomatic trio server;
* ``trio-fd``: trio, but the socket syscalls made directly as trocket's connection
  makes them (``wait_readable`` only after a read that did not fill the buffer, a
  ``readv`` and one non-blocking ``write``): trio's run loop and its epoll re-arm
  are what is left of the framework's cost.

It prints ``listening`` once bound, then serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import socket
import sys
import threading

_REQ = re.compile(rb'"code":(\d+),.*?"opaque":(-?\d+)', re.S)  # (any other field order)
_CODE = re.compile(rb'\{"code":(\d+)')
_NUMBER = re.compile(rb'-?\d+')
_SEND_CODES = (b"10", b"310")
_MSG_ID = "7F00000100002A9F"
_EMPTY = b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":%s,"serializeTypeCurrentRPC":"JSON","version":0}'


class Answers:
    """The answer bytes for a buffer of request frames (``feed``), and the partial
    frame that is left over."""

    def __init__(self) -> None:
        self.rest = b""
        self.offset = 0

    def feed(self, data) -> bytes:
        if self.rest:
            data = self.rest + bytes(data)
        end = len(data)
        pos = 0
        out = []
        match = _REQ.search
        code_at = _CODE.match
        number_at = _NUMBER.match
        while end - pos >= 8:
            total = int.from_bytes(data[pos:pos + 4], "big")
            if end - pos - 4 < total:
                break
            hlen = int.from_bytes(data[pos + 5:pos + 8], "big")
            header = bytes(data[pos + 8:pos + 8 + hlen])
            pos += 4 + total
            # ``code`` first and ``opaque`` after ``extFields`` (the writers sort the keys):
            # two anchored matches and a find, not a lazy scan over the ext fields (which
            # cost this floor ~30k instructions a frame)
            m = code_at(header)
            at = header.rfind(b'"opaque":')
            n = number_at(header, at + 9) if m is not None and at >= 0 else None
            if n is not None:
                code, opaque = m.group(1), n.group()
            else:
                m = match(header)
                if m is None:
                    continue
                code, opaque = m.group(1), m.group(2)
            if code in _SEND_CODES:
                offset = self.offset
                self.offset = offset + 1
                header = (
                    b'{"code":0,"extFields":{"msgId":"%s%016X","queueId":"0","queueOffset":"%d",'
                    b'"MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,"language":"JAVA",'
                    b'"opaque":%s,"serializeTypeCurrentRPC":"JSON","version":0}'
                    % (_MSG_ID.encode(), offset * 300, offset, opaque)
                )
            else:
                header = _EMPTY % opaque
            hl = len(header)  # frame length (header-length word + header), then JSON + length
            out.append((4 + hl).to_bytes(4, "big") + hl.to_bytes(4, "big") + header)
        self.rest = bytes(data[pos:]) if pos < end else b""
        return b"".join(out)


def serve_blocking(listener: socket.socket) -> None:
    def conn_loop(sock: socket.socket) -> None:
        answers = Answers()
        buf = bytearray(65536)
        view = memoryview(buf)
        with sock:
            while True:
                try:
                    n = sock.recv_into(buf)
                except OSError:
                    return
                if not n:
                    return
                out = answers.feed(view[:n])
                if out:
                    try:
                        sock.sendall(out)
                    except OSError:
                        return

    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=conn_loop, args=(sock,), daemon=True).start()


def serve_epoll(listener: socket.socket) -> None:
    listener.setblocking(False)
    ep = select.epoll()
    ep.register(listener.fileno(), select.EPOLLIN)
    conns: dict[int, tuple[socket.socket, Answers]] = {}
    buf = bytearray(65536)
    view = memoryview(buf)
    lfd = listener.fileno()
    while True:
        for fd, _ in ep.poll():
            if fd == lfd:
                try:
                    sock, _ = listener.accept()
                except BlockingIOError:
                    continue
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conns[sock.fileno()] = (sock, Answers())
                ep.register(sock.fileno(), select.EPOLLIN)
                continue
            sock, answers = conns[fd]
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:
                continue
            except OSError:
                n = 0
            if not n:
                ep.unregister(fd)
                del conns[fd]
                sock.close()
                continue
            out = answers.feed(view[:n])
            if out:
                try:
                    sent = sock.send(out)
                    if sent < len(out):  # rare: finish it blocking
                        sock.setblocking(True)
                        sock.sendall(out[sent:])
                        sock.setblocking(False)
                except OSError:
                    pass


def serve_trio(listener: socket.socket, fd_mode: bool) -> None:
    import trio

    async def stream_conn(stream: trio.SocketStream) -> None:
        answers = Answers()
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                out = answers.feed(data)
                if out:
                    await stream.send_all(out)
        except trio.BrokenResourceError:
            return

    async def fd_conn(stream: trio.SocketStream) -> None:
        sock = stream.socket
        answers = Answers()
        buf = bytearray(65536)
        view = memoryview(buf)
        size = len(buf)
        wait_readable = trio.lowlevel.wait_readable
        checkpoint = trio.lowlevel.checkpoint
        drained = True
        fd = sock.fileno()
        bufs = (buf,)
        readv = os.readv
        while True:
            if drained:
                await wait_readable(fd)
            else:
                await checkpoint()
            try:
                n = readv(fd, bufs)
            except BlockingIOError:
                drained = True
                continue
            except OSError:
                return
            if not n:
                return
            drained = n < size
            out = answers.feed(view[:n])
            if out:
                try:
                    sent = os.write(fd, out)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    return
                if sent < len(out):
                    await stream.send_all(out[sent:])

    async def main() -> None:
        tl = trio.SocketListener(trio.socket.from_stdlib_socket(listener))
        await trio.serve_listeners(fd_conn if fd_mode else stream_conn, [tl])

    trio.run(main)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=("blocking", "epoll", "trio", "trio-fd"), required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print("listening", flush=True)
    if args.mode == "blocking":
        serve_blocking(listener)
    elif args.mode == "epoll":
        serve_epoll(listener)
    else:
        serve_trio(listener, args.mode == "trio-fd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
