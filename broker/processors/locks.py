"""Orderly-consume queue locks: LOCK_BATCH_MQ 41 and UNLOCK_BATCH_MQ 42.

RocketMQ 4.9.8's ``AdminBrokerProcessor.lockBatchMQ`` / ``unlockBatchMQ`` over
:class:`~trocket.broker.client_manager.RebalanceLockManager`:

* 41, body ``{"consumerGroup","clientId","mqSet":[{topic,brokerName,queueId}...]}``:
  lock (or renew) every queue that is free, expired (60 s without renewal) or already
  the caller's -> SUCCESS + ``{"lockOKMQSet":[...]}`` with those queues (in request
  order); queues held by another live client are left out (the C++ client tries again
  before each pull).
* 42, same body: release the caller's locks -> SUCCESS.

A malformed body -> SYSTEM_ERROR with the reason; the connection stays up.
"""

from __future__ import annotations

from typing import Any

from trocket.codecs.bodies.client import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand

from . import reply
from .client import Processor, guarded

__all__ = ["register"]


def make_lock_batch_mq(ctx: Any) -> Processor:
    async def lock_batch_mq(conn: Any, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.decode(request.body)
        locked = ctx.locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        return reply(ResponseCode.SUCCESS, body=LockBatchResponseBody(locked).encode())

    return lock_batch_mq


def make_unlock_batch_mq(ctx: Any) -> Processor:
    async def unlock_batch_mq(conn: Any, request: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.decode(request.body)
        ctx.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return reply(ResponseCode.SUCCESS)

    return unlock_batch_mq


def register(ctx: Any) -> None:
    """Register 41 and 42 on ``ctx.server`` (inline: they never block)."""
    if ctx.locks is None:
        raise ValueError("BrokerContext.locks must be set before registering")
    server = ctx.server
    server.register_processor(RequestCode.LOCK_BATCH_MQ, guarded(make_lock_batch_mq(ctx)), inline=True)
    server.register_processor(RequestCode.UNLOCK_BATCH_MQ, guarded(make_unlock_batch_mq(ctx)), inline=True)
