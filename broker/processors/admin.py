"""Admin and query codes: 17, 28, 29, 30, 31, 33, 215, 305, 316, 306, 329, 323
(``AdminBrokerProcessor`` and ``QueryMessageProcessor`` of RocketMQ 4.9).

* UPDATE_AND_CREATE_TOPIC (17): validate (``TopicValidator``: SYSTEM_ERROR with its
  remark; system topics refused), create or replace, persist ``topics.json``, and
  re-register with the name servers so routes show the topic at once.
* GET_BROKER_RUNTIME_INFO (28): body ``KVTable`` ``{"table": {...}}`` (strings), with
  Java's key names where they apply plus trocket's (append-lock share, held pulls).
* SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31): ``offset``.
* VIEW_MESSAGE_BY_ID (33): the stored record at a commit-log offset (from an offset
  message id) as the body; SYSTEM_ERROR "can not find message by the offset, N".
* DELETE_TOPIC_IN_BROKER (215): 4.9's ``deleteTopic``: a blank or system topic is
  refused (SYSTEM_ERROR); otherwise the topic config goes (``topics.json`` persisted,
  SUCCESS even for an unknown topic, as Java), then ``cleanUnusedTopic`` drops the
  consume queues of every topic without a config (files removed; see
  :meth:`MessageStore.clean_unused_topics`), and the broker registers again. Consumer
  offsets stay, as in 4.9 (5.x's ``cleanOffsetByTopic`` is not 4.9). A send to the topic
  afterwards auto-creates it again, its queues starting at 0. The name server keeps the
  route until DELETE_TOPIC_IN_NAMESRV (216), as with Java.

* GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): ``TopicList`` of ``TopicValidator``'s system
  topics and the broker's own default topics (its cluster and broker names, the reply
  topic, a custom trace topic: :attr:`TopicConfigManager.system_topics`).
* CLEAN_UNUSED_TOPIC (316): 215's ``cleanUnusedTopic`` alone: the consume queues of every
  topic without a config go (not the schedule and op topics). SUCCESS always.
* CLEAN_EXPIRED_CONSUMEQUEUE (306): ``cleanExpiredConsumerQueue``: each consume queue whose
  messages have all left the commit log goes (not the schedule topic's; see
  :meth:`MessageStore.clean_expired_consume_queues`). SUCCESS always.
* DELETE_EXPIRED_COMMITLOG (329): ``executeDeleteFilesManually``: the next 20 retention
  passes (every ``cleanResourceInterval``) run whatever the hour and disk, deleting
  commit-log segments older than ``fileReservedTime`` as a manual pass does; the answer,
  SUCCESS, comes before they run, as Java's.
* RESUME_CHECK_HALF_MESSAGE (323): the message at ``msgId`` (an offset id) stored again on
  the half queue with ``TRANSACTION_CHECK_TIMES`` 0, so the checks ask its producer again
  (:meth:`TransactionalMessageService.resume_check`). Java's remarks: SYSTEM_ERROR
  "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC." when no
  message is found there (a missing or bad id: Java's exceptions), "Put message back to
  RMQ_SYS_TRANS_HALF_TOPIC failed." when the store refuses the put (a slave). Java
  re-puts the body decompressed with the compressed flag still set; here the body goes
  as stored.

* GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45):
  the master's tables a slave copies (``SlaveSynchronize``, see
  :mod:`trocket.broker.ha.sync`): the topic wrapper with its data version,
  ``{"offsetTable": ...}``, ``delayOffset.json``'s text (the subscription groups, 201,
  are :mod:`.groups`').

Offsets of consumer groups (14/15) and the client codes belong to the client
processors, not here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from trocket.codecs.bodies.fastjson import Bean, dumps_bytes
from trocket.codecs.bodies.namesrv import TopicList
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CodecError, InvalidNameError
from trocket.codecs.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    ResumeCheckHalfMessageRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    ViewMessageRequestHeader,
)
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.names import is_system_topic, validate_topic
from trocket.remoting import Connection

from ..store import PutMessageError, TopicConfig
from ..store.queue_table import DetachedTopic
from ..store.store import MANUAL_DELETE_PASSES
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["AdminProcessor", "register"]

log = logging.getLogger(__name__)

_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]


class AdminProcessor:
    """17, 28, 29, 30, 31, 33, 215, 305, 316, 306, 329, 323 and the slave's; ``runtime_info()`` gives
    28's table (the controller's)."""

    def __init__(self, ctx: BrokerContext, *, runtime_info: Callable[[], dict[str, str]] | None = None) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.topics = ctx.topics
        self.runtime_info = runtime_info
        self._handlers: dict[int, Handler] = {
            int(RequestCode.UPDATE_AND_CREATE_TOPIC): self.update_and_create_topic,
            int(RequestCode.GET_BROKER_RUNTIME_INFO): self.get_broker_runtime_info,
            int(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP): self.search_offset_by_timestamp,
            int(RequestCode.GET_MAX_OFFSET): self.get_max_offset,
            int(RequestCode.GET_MIN_OFFSET): self.get_min_offset,
            int(RequestCode.VIEW_MESSAGE_BY_ID): self.view_message_by_id,
            int(RequestCode.GET_ALL_TOPIC_CONFIG): self.get_all_topic_config,
            int(RequestCode.GET_ALL_CONSUMER_OFFSET): self.get_all_consumer_offset,
            int(RequestCode.GET_ALL_DELAY_OFFSET): self.get_all_delay_offset,
            int(RequestCode.DELETE_TOPIC_IN_BROKER): self.delete_topic,
            int(RequestCode.CLEAN_UNUSED_TOPIC): self.clean_unused_topic,
            int(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE): self.clean_expired_consume_queue,
            int(RequestCode.DELETE_EXPIRED_COMMITLOG): self.delete_expired_commit_log,
            int(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER): self.get_system_topic_list_from_broker,
            int(RequestCode.RESUME_CHECK_HALF_MESSAGE): self.resume_check_half_message,
        }
        #: Java's ``deleteTopic`` is ``synchronized``: one deletion (or cleaning) at a time
        self._delete_lock = trio.Lock()

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return await self._handlers[request.code](conn, request)

    # -- 17 ----------------------------------------------------------------------------------

    async def update_and_create_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(CreateTopicRequestHeader, request)
        topic = header.topic
        try:
            validate_topic(topic)
        except InvalidNameError as exc:
            return reply(ResponseCode.SYSTEM_ERROR, str(exc))
        if is_system_topic(topic) or topic == self.ctx.config.cluster or topic == self.ctx.config.broker_name:
            return reply(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        if header.readQueueNums <= 0 or header.writeQueueNums <= 0:
            return reply(
                ResponseCode.SYSTEM_ERROR,
                f"illegal queue numbers: readQueueNums={header.readQueueNums}, "
                f"writeQueueNums={header.writeQueueNums} (both must be positive)",
            )
        limit = self.ctx.config.max_queue_nums_per_topic
        if header.readQueueNums > limit or header.writeQueueNums > limit:  # issue 24: no route of 2^31 queues
            return reply(
                ResponseCode.SYSTEM_ERROR,
                f"illegal queue numbers: readQueueNums={header.readQueueNums}, "
                f"writeQueueNums={header.writeQueueNums} (at most {limit} per topic: maxQueueNumsPerTopic)",
            )
        if header.topicFilterType not in _FILTER_TYPES:
            return reply(
                ResponseCode.SYSTEM_ERROR,
                f"illegal topicFilterType {header.topicFilterType!r}: SINGLE_TAG or MULTI_TAG",
            )
        tc = TopicConfig(
            topic,
            header.readQueueNums,
            header.writeQueueNums,
            header.perm,
            header.topicFilterType,
            header.topicSysFlag or 0,
            bool(header.order),
        )
        log.info("updating topic %s from %s: %s", topic, conn.remote_address, tc)
        await trio.to_thread.run_sync(self.topics.update, tc)
        self.ctx.topic_created(topic)
        return reply(ResponseCode.SUCCESS)

    # -- 215 ---------------------------------------------------------------------------------

    async def delete_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(DeleteTopicRequestHeader, request)
        topic = header.topic
        if not topic.strip():
            return reply(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
        if is_system_topic(topic):
            return reply(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        log.info("deleteTopic %s called by %s", topic, conn.remote_address)
        async with self._delete_lock:
            await trio.to_thread.run_sync(self.topics.delete, topic)
            await self._clean_unused_topics()
        self.ctx.topic_created(topic)  # the topic table changed: register again
        return reply(ResponseCode.SUCCESS)

    async def _clean_unused_topics(self) -> None:
        """``cleanUnusedTopic(topicConfigTable.keySet())``: the queues of every topic
        without a config go (call under ``_delete_lock``)."""
        keep = self.topics.all().keys()
        await self._destroy(await trio.to_thread.run_sync(self.store.clean_unused_topics, keep), "cleanUnusedTopic")

    async def _destroy(self, detached: list[DetachedTopic], what: str) -> None:
        """Detached queues unmapped here, on the trio thread, between two pulls (pulls
        read there), their files removed; the transaction service told when its queues
        went."""
        self.store.destroy_detached(detached)
        for d in detached:
            await trio.to_thread.run_sync(d.remove_files)
            log.info("%s: %s %s destroyed", what, d.topic, ",".join(str(cq.queue_id) for cq in d.queues) or "(topic)")
        if self.ctx.transactions is not None and detached:
            self.ctx.transactions.queues_removed({d.topic for d in detached})

    # -- 316 / 306 / 329: the store's cleaning, by hand ----------------------------------

    async def clean_unused_topic(self, conn, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanUnusedTopic start (from %s)", conn.remote_address)
        async with self._delete_lock:
            await self._clean_unused_topics()
        log.warning("invoke cleanUnusedTopic end")
        return reply(ResponseCode.SUCCESS)

    async def clean_expired_consume_queue(self, conn, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke cleanExpiredConsumeQueue start (from %s)", conn.remote_address)
        async with self._delete_lock:
            detached = await trio.to_thread.run_sync(self.store.clean_expired_consume_queues)
            await self._destroy(detached, "cleanExpiredConsumerQueue")
        log.warning("invoke cleanExpiredConsumeQueue end")
        return reply(ResponseCode.SUCCESS)

    async def delete_expired_commit_log(self, conn, request: RemotingCommand) -> RemotingCommand:
        log.warning("invoke deleteExpiredCommitLog (from %s): the next %d retention passes run as manual ones",
                    conn.remote_address, MANUAL_DELETE_PASSES)
        self.store.execute_delete_files_manually()
        return reply(ResponseCode.SUCCESS)

    # -- 305 ---------------------------------------------------------------------------------

    async def get_system_topic_list_from_broker(self, conn, request: RemotingCommand) -> RemotingCommand:
        return reply(ResponseCode.SUCCESS, body=TopicList(sorted(self.topics.system_topics)).to_body())

    # -- 323 ---------------------------------------------------------------------------------

    async def resume_check_half_message(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ResumeCheckHalfMessageRequestHeader, request)
        transactions = self.ctx.transactions
        try:
            offset = decode_offset_msg_id(header.msgId or "").offset
            if transactions is None:
                raise LookupError("no transaction service")
            transactions.resume_check(offset)
        except PutMessageError as exc:
            log.error("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed: %s", exc)
            return reply(ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        except (CodecError, ValueError, LookupError) as exc:
            log.error("resumeCheckHalfMessage %r: %s", header.msgId, exc)
            return reply(
                ResponseCode.SYSTEM_ERROR, "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
            )
        return reply(ResponseCode.SUCCESS)

    # -- 28 ----------------------------------------------------------------------------------

    async def get_broker_runtime_info(self, conn, request: RemotingCommand) -> RemotingCommand:
        table = self.runtime_info() if self.runtime_info is not None else {}
        body = dumps_bytes(Bean(table={str(k): str(v) for k, v in table.items()}))
        return reply(ResponseCode.SUCCESS, body=body)

    # -- 29 / 30 / 31 ------------------------------------------------------------------------

    async def search_offset_by_timestamp(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(SearchOffsetRequestHeader, request)
        offset = self.store.get_offset_by_time(header.topic, header.queueId, header.timestamp)
        return reply(ResponseCode.SUCCESS, header=SearchOffsetResponseHeader(offset=offset))

    async def get_max_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetMaxOffsetRequestHeader, request)
        offset = self.store.get_max_offset(header.topic, header.queueId)
        return reply(ResponseCode.SUCCESS, header=GetMaxOffsetResponseHeader(offset=offset))

    async def get_min_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetMinOffsetRequestHeader, request)
        offset = self.store.get_min_offset(header.topic, header.queueId)
        return reply(ResponseCode.SUCCESS, header=GetMinOffsetResponseHeader(offset=offset))

    # -- 33 ----------------------------------------------------------------------------------

    async def view_message_by_id(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ViewMessageRequestHeader, request)
        view = self.store.select_one_message_by_offset(header.offset) if header.offset >= 0 else None
        if view is None:
            return reply(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}")
        try:
            body = bytes(view)
        finally:
            view.release()
        return reply(ResponseCode.SUCCESS, body=body)


    # -- 21 / 43 / 45 / 201: what a slave copies (SlaveSynchronize) ----------------------

    async def get_all_topic_config(self, conn, request: RemotingCommand) -> RemotingCommand:
        from ..outer_api import topic_config_wrapper_of

        return reply(ResponseCode.SUCCESS, body=topic_config_wrapper_of(self.topics).to_body())

    async def get_all_consumer_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        table = self.ctx.offsets.snapshot()
        return reply(ResponseCode.SUCCESS, body=dumps_bytes(Bean(offsetTable=table)))

    async def get_all_delay_offset(self, conn, request: RemotingCommand) -> RemotingCommand:
        schedule = self.ctx.schedule
        if schedule is None:
            return reply(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        table = schedule.offset_table(durable_only=False)
        return reply(ResponseCode.SUCCESS, body=dumps_bytes(Bean(offsetTable=table)))


def register(ctx: BrokerContext, *, runtime_info: Callable[[], dict[str, str]] | None = None) -> AdminProcessor:
    """Register the admin codes on ``ctx.server`` (tasks, ``admin_concurrency`` at once)."""
    proc = AdminProcessor(ctx, runtime_info=runtime_info)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, limit=ctx.config.admin_concurrency, queue=1024)
    return proc
