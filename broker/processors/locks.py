"""Orderly-consume queue locks: LOCK_BATCH_MQ 41 and UNLOCK_BATCH_MQ 42.

RocketMQ 4.9.8's ``AdminBrokerProcessor.lockBatchMQ`` / ``unlockBatchMQ`` over
:class:`~trocket.broker.client_manager.RebalanceLockManager`:

* 41, body ``{"consumerGroup","clientId","mqSet":[{topic,brokerName,queueId}...]}``:
  lock (or renew) every queue that is free, expired (60 s without renewal) or already
  the caller's -> SUCCESS + ``{"lockOKMQSet":[...]}`` with those queues (in request
  order); queues held by another live client are left out (the C++ client tries again
  before each pull).
* 42, same body: release the caller's locks -> SUCCESS.

A malformed body -> SYSTEM_ERROR "lock batch request does not decode: ..." (nothing
logged: a client's bad body is its error, not the broker's); the connection stays up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trocket.codecs.bodies.client import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.remoting import Connection

from . import reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["LockProcessor", "register"]


class LockProcessor:
    """41 and 42 over ``ctx.locks``, inline on the connection's reader (they never block)."""

    codes = (int(RequestCode.LOCK_BATCH_MQ), int(RequestCode.UNLOCK_BATCH_MQ))

    def __init__(self, ctx: BrokerContext) -> None:
        self.locks = ctx.locks

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        lock = request.code == RequestCode.LOCK_BATCH_MQ
        try:
            body = (LockBatchRequestBody if lock else UnlockBatchRequestBody).decode(request.body)
        except BodyDecodeError as exc:
            what = "lock" if lock else "unlock"
            return reply(ResponseCode.SYSTEM_ERROR, f"{what} batch request does not decode: {exc}")
        if lock:
            locked = self.locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
            return reply(ResponseCode.SUCCESS, body=LockBatchResponseBody(locked).encode())
        self.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return reply(ResponseCode.SUCCESS)


def register(ctx: BrokerContext) -> LockProcessor:
    """Register 41 and 42 on ``ctx.server`` (inline: they never block)."""
    proc = LockProcessor(ctx)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, inline=True)
    return proc
