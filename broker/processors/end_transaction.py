"""END_TRANSACTION 37: a producer commits or rolls back a half message.

RocketMQ 4.9.8's ``EndTransactionProcessor``. The header names the half message
(``commitLogOffset``, ``tranStateTableOffset``: where the prepared send's answer said it
went) and how it ends (``commitOrRollback``: 8 commit, 12 rollback, 0 unknown;
``fromTransactionCheck`` when it answers a CHECK_TRANSACTION_STATE). Every real client
sends it oneway; a two-way request gets Java's answers:

* SUCCESS once ended: a commit stored the real message and the op record, a rollback the
  op record;
* SYSTEM_ERROR ``RemotingCommandException: commitOrRollback field wrong`` for any other
  type (Java's ``checkFields``); SLAVE_NOT_AVAILABLE on a slave;
* SYSTEM_ERROR ``Find prepared transaction message failed`` when no half message starts
  at ``commitLogOffset`` (Java looks only for *a* message there); ``The producer group
  wrong`` / ``The transaction state table offset wrong`` / ``The commit log offset
  wrong`` when the header does not match it;
* SYSTEM_ERROR when the transaction was already ended, or discarded by the checks
  (Java would commit it again: see :mod:`trocket.broker.transaction.service`);
* the commit's put refused: Java's ``sendFinalMessage`` codes and remarks.

"Unknown" (0) leaves the half message to the checks: Java answers nothing at all, a
two-way request here gets SUCCESS (no real client asks). The decisions are
:meth:`~trocket.broker.transaction.TransactionalMessageService.end`'s; the processor runs
inline on the connection's reader (the puts are short and never wait: Java's
``sendFinalMessage`` does not wait for the flush or the slave either). The oneway
requests of one read are ended together once the reader has handled the whole read and
written the answers of the other requests in it
(:func:`~trocket.remoting.connection.call_after_read`): Java ends transactions in a pool
of their own, so a producer's next prepared send, often in the same read, does not wait
for the previous END's three reads and two puts; and ended together, their records are
dispatched once (:meth:`~trocket.broker.transaction.TransactionalMessageService.end_all`).
Nothing is answered either way, and the ENDs of one connection keep their order.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RPC_ONEWAY, RemotingCommand
from trocket.codecs.custom_header import codec_of
from trocket.codecs.errors import CustomHeaderError
from trocket.codecs.headers import EndTransactionRequestHeader
from trocket.remoting import Connection, call_after_read

from ..transaction import TransactionalMessageService
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["EndTransactionProcessor", "register"]

_decode = codec_of(EndTransactionRequestHeader).decode


class EndTransactionProcessor:
    """37, inline."""

    def __init__(self, service: TransactionalMessageService) -> None:
        self.service = service
        #: the connection whose read is running and the oneway ENDs of it not ended yet
        #: (its reader ends them after the read, before any other task runs)
        self._batch: tuple[Connection, list[EndTransactionRequestHeader]] | None = None

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:  # the header's codec itself (decode_request_header's error, below, when it fails)
            header = _decode(request.ext_fields)
        except CustomHeaderError:
            header = decode_request_header(EndTransactionRequestHeader, request)
        if request.flag & RPC_ONEWAY:  # (is_oneway, inline)
            batch = self._batch
            if batch is not None and batch[0] is conn:
                batch[1].append(header)
                return None
            headers = [header]
            if call_after_read(partial(self._end_batch, headers)):
                self._batch = (conn, headers)  # ended once the answers of this read are out
                return None
            self.service.end_all(headers)
            return None
        self.service.end(header)
        return reply(ResponseCode.SUCCESS)

    def _end_batch(self, headers: list[EndTransactionRequestHeader]) -> None:
        """The oneway ENDs of one read: refusals have nobody to go to (counted by the
        service, as Java logs them)."""
        batch = self._batch
        if batch is not None and batch[1] is headers:
            self._batch = None
        self.service.end_all(headers)


def register(ctx: BrokerContext) -> EndTransactionProcessor:
    """Register 37 on ``ctx.server`` (``ctx.transactions`` is made if the context has
    none: bare setups)."""
    if ctx.transactions is None:
        ctx.transactions = TransactionalMessageService(ctx)
    proc = EndTransactionProcessor(ctx.transactions)
    ctx.server.register_processor(int(RequestCode.END_TRANSACTION), proc, inline=True)
    return proc
