"""``trocket broker`` with the pre-4.7 blocking replication design, for comparison only
(``ha_sync.py``'s ``blocking`` setup).

    python benchmarks/blocking_send.py broker [the usual trocket broker arguments]

One serial task takes the sends: each is stored, then awaited until the slave
acknowledges it (and, with SYNC_FLUSH, until the group commit covers it), and only
then is the next one taken -- the design RocketMQ 4.7 replaced with the hand-off
trocket's send processor makes (:mod:`trocket.broker.processors.send`). It lives here,
not in the product: nothing but this benchmark wants it. It swaps the broker's send
registration for :class:`BlockingSendProcessor`, a subclass that answers every stored
send this way, then runs the ``trocket`` command line.
"""

from __future__ import annotations

import sys

import trio

from trocket.broker.processors import send
from trocket.codecs.command import RemotingCommand
from trocket.remoting import Connection, ResponseCodeError, error_reply


class BlockingSendProcessor(send.SendProcessor):
    """Every send in one serial task that waits for its slave before the next."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._serial = trio.Lock()
        self._later: send._Later | None = None

    def process_request(self, conn: Connection, request: RemotingCommand) -> None:
        conn.start_handler(self._blocking_send, conn, request)
        return None

    def _answer_later(self, conn: Connection, request: RemotingCommand, later: send._Later) -> None:
        self._later = later  # what the send in hand waits for: _blocking_send awaits it

    async def _blocking_send(self, conn: Connection, request: RemotingCommand) -> None:
        async with self._serial:
            self._later = None
            try:
                answer = super().process_request(conn, request)
            except ResponseCodeError as exc:
                await conn.answer(request, error_reply(exc))
                return
            later = self._later
            if later is None:
                await conn.answer(request, answer)
                return
            replica = None
            if later.replica:
                replica = send._Replica()
                self.transfer.submit(later.result.end_offset, send._Replica.set, replica)
            later.replica = False
            await self._wait_then_answer(conn, request, later, replica)


def register(ctx) -> send.SendProcessor:
    proc = BlockingSendProcessor(ctx)
    proc.entry = ctx.server.register_processor(
        (10, 310, 320), proc, inline=True, limit=ctx.config.send_concurrency, queue=ctx.config.send_queue_capacity
    )
    return proc


def main() -> int:
    send.register = register  # the controller registers the send processor through this name
    from trocket.cli import main as trocket_main

    return trocket_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
