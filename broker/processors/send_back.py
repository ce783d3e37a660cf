"""CONSUMER_SEND_MSG_BACK 36: a consumer gives a message back for a later retry.

RocketMQ 4.9.8's ``SendMessageProcessor.asyncConsumerSendMsgBack``. The header
(``offset`` = the message's commit-log offset, ``group``, ``delayLevel``, optional
``maxReconsumeTimes``, ``unitMode``) names a stored message; the broker stores a copy:

* on ``%RETRY%<group>`` (a random one of the group's ``retryQueueNums`` queues, 1 by
  default; the topic is created with that many queues, perm 6, as on heartbeat), or on
  ``%DLQ%<group>`` (1 queue, perm 6) once the message's ``reconsumeTimes`` reached the
  group's ``retryMaxTimes`` (16 by default; a client from 3.4.9 on may send its own
  ``maxReconsumeTimes``) or when ``delayLevel < 0``. A group whose ``retryQueueNums``
  is 0 keeps no retries: SUCCESS, nothing stored. An unknown group with
  ``autoCreateSubscriptionGroup`` off: SUBSCRIPTION_GROUP_NOT_EXIST;
* with ``reconsumeTimes + 1``, the original body (compressed or not, with its sysFlag),
  flag, born timestamp and born host;
* with the original properties plus ``RETRY_TOPIC=<original topic>`` (kept if already
  set, so a message retried again still names its real topic), ``WAIT=false``,
  ``ORIGIN_MESSAGE_ID`` (kept if set, else the original's offset message id) and
  ``DELAY``: ``delayLevel``, 0 meaning "broker decides" = ``3 + reconsumeTimes``,
  capped at the highest level of ``messageDelayLevel`` (18 by default); ``0`` on a
  DLQ copy. The property string is written in Java's ``HashMap`` order, as a Java
  broker writes it.

The retry copy is delayed as in Java: the broker's schedule service
(:mod:`trocket.broker.schedule`) stores it on ``SCHEDULE_TOPIC_XXXX`` (queue
``level - 1``, with ``REAL_TOPIC=%RETRY%<group>`` and ``REAL_QID=0``) and puts it on
``%RETRY%<group>`` once the level's delay has passed (10 s at level 3 ... 2 h at 18 by
default), where consumers pull it; it arrives there without ``DELAY``, ``REAL_TOPIC``
and ``REAL_QID``. A DLQ copy is stored on ``%DLQ%<group>`` at once. (A context without
a schedule service -- bare test setups -- stores the retry copy at once.)

Answers: SUCCESS once stored; SYSTEM_ERROR ``look message by offset failed, <offset>``
when no message starts there; NO_PERMISSION when the broker or the retry topic is not
writable; SYSTEM_ERROR with the store's status when the put fails (a shut-down store
too: Java's ``SERVICE_NOT_AVAILABLE`` status); SYSTEM_ERROR naming the field for a
malformed header. Refusals are raised (:mod:`trocket.broker.errors`) and answered by
remoting, always with an ``extFields`` object. The retry copy goes through the send
path's pre-put step (:mod:`trocket.broker.pre_put`) for its delay, as Java's
``putMessage`` delays it.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import ConsumerSendMsgBackRequestHeader
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    utf8,
)
from trocket.codecs.names import DLQ_GROUP_TOPIC_PREFIX, is_valid_topic
from trocket.remoting import Connection

from ..errors import BrokerError, NoPermissionError, SubscriptionGroupNotExistError
from ..pre_put import PrePut, pre_put
from ..store import MessageInner, MessageStore, PutMessageError, TopicConfig
from ..store.topic_config import PERM_WRITE
from ..transaction.records import read_stored
from . import SUBSCRIPTION_GROUP_NOT_EXIST_URL, decode_request_header, reply, suggest_todo
from .client import PERM_RW, ensure_retry_topic, retry_topic

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = [
    "SendBackProcessor",
    "register",
    "send_back",
    "look_message",
    "dlq_topic",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "MAX_DELAY_LEVEL",
    "DLQ_NUMS_PER_GROUP",
]

log = logging.getLogger(__name__)

#: ``SubscriptionGroupConfig.retryMaxTimes`` default.
DEFAULT_MAX_RECONSUME_TIMES = 16
#: levels of the default ``messageDelayLevel`` ("1s 5s 10s 30s 1m ... 2h"): 18.
MAX_DELAY_LEVEL = 18
#: ``MixAll.DLQ_NUMS_PER_GROUP``.
DLQ_NUMS_PER_GROUP = 1
#: ``MQVersion.Version.V3_4_9.ordinal()``: from this client version on the header's
#: ``maxReconsumeTimes`` replaces the group's ``retryMaxTimes``
VERSION_3_4_9 = 121


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def look_message(store: MessageStore, commit_log_offset: int) -> MessageExt | None:
    """``lookMessageByOffset`` without inflating the body (the copy keeps the stored
    bytes and sysFlag, as Java's ``decode(buf, true, false)``); None when no record
    starts at ``commit_log_offset``."""
    stored = read_stored(store, commit_log_offset)
    return stored.msg if stored is not None else None


async def _ensure_dlq_topic(ctx: BrokerContext, group: str) -> TopicConfig | None:
    topic = dlq_topic(group)
    tc = ctx.topics.select(topic)
    if tc is not None or not is_valid_topic(topic):
        return tc
    tc = await trio.to_thread.run_sync(ctx.topics.create_in_send_back, topic, DLQ_NUMS_PER_GROUP, PERM_RW, 0)
    ctx.topic_created(topic)
    return tc


async def send_back(
    ctx: BrokerContext, pre_put: PrePut, header: ConsumerSendMsgBackRequestHeader,
    counts: dict[tuple[str, str], int] | None = None, *, version: int = 0,
) -> RemotingCommand:
    """Store the retry (or dead-letter) copy of the message at ``header.offset``
    (through ``pre_put``, the send path's step: the delay). ``counts`` (the
    statistics' SNDBCK_PUT_NUMS) gets one more for (the message's original topic,
    the group) once the copy is stored; ``version`` is the request's (a client from
    3.4.9 on may name its own ``maxReconsumeTimes``)."""
    group = header.group
    sg = ctx.subscriptions.find(group)
    if sg is None:
        raise SubscriptionGroupNotExistError(
            f"subscription group not exist, {group} {suggest_todo(SUBSCRIPTION_GROUP_NOT_EXIST_URL)}"
        )
    if not ctx.config.broker_permission & PERM_WRITE:
        broker_ip = ctx.broker_addr().rpartition(":")[0]
        raise NoPermissionError(f"the broker[{broker_ip}] sending message is forbidden")
    if sg.retry_queue_nums <= 0:  # the group keeps no retries: given back means dropped
        return reply(ResponseCode.SUCCESS)

    new_topic = retry_topic(group)
    queue_id = random.randrange(sg.retry_queue_nums)
    tc = await ensure_retry_topic(ctx, group, header.unitMode, sg.retry_queue_nums)
    if tc is None:
        raise BrokerError(f"topic[{new_topic}] not exist")
    if not tc.perm & PERM_WRITE:
        raise NoPermissionError(f"the topic[{new_topic}] sending message is forbidden")

    msg = look_message(ctx.store, header.offset)
    if msg is None:
        raise BrokerError(f"look message by offset failed, {header.offset}")

    # lookMessageByOffset's map (the stored string's order) and what Java puts in it
    props = JavaHashMap(msg.properties.items())
    if props.get(PROPERTY_RETRY_TOPIC) is None:
        props[PROPERTY_RETRY_TOPIC] = msg.topic
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"

    delay_level = header.delayLevel
    schedule = ctx.schedule
    max_times = sg.retry_max_times
    if version >= VERSION_3_4_9 and header.maxReconsumeTimes is not None:
        max_times = header.maxReconsumeTimes
    if msg.reconsume_times >= max_times or delay_level < 0:
        new_topic = dlq_topic(group)
        queue_id = 0  # DLQ_NUMS_PER_GROUP queues
        tc = await _ensure_dlq_topic(ctx, group)
        if tc is None:
            raise BrokerError(f"topic[{new_topic}] not exist")
        props[PROPERTY_DELAY_TIME_LEVEL] = "0"
    else:
        if delay_level == 0:
            delay_level = 3 + msg.reconsume_times
        max_level = schedule.max_level if schedule is not None else MAX_DELAY_LEVEL
        props[PROPERTY_DELAY_TIME_LEVEL] = str(min(delay_level, max_level))

    origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
    props[PROPERTY_ORIGIN_MESSAGE_ID] = origin if origin and origin.strip() else msg.msg_id

    inner = MessageInner(
        topic=new_topic,
        body=msg.body,
        queue_id=queue_id,  # one of the group's retryQueueNums retry queues / the DLQ queue
        flag=msg.flag,
        properties=props,
        properties_bytes=utf8(props.to_properties(), "properties"),
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times + 1,
    )
    # the retry copy onto SCHEDULE_TOPIC_XXXX until its level's delay passed (a DLQ
    # copy's level is 0: stored as it is)
    inner = pre_put.rewrite(inner, header)
    try:
        result = await ctx.store.async_put_message(inner, wait=False)
    except PutMessageError as exc:  # Java: SYSTEM_ERROR with the put's status
        raise BrokerError(exc.status.value) from None
    if not result.ok:
        raise BrokerError(result.status.value)
    if counts is not None:
        key = (props[PROPERTY_RETRY_TOPIC], group)
        counts[key] = counts.get(key, 0) + 1
    log.debug(
        "sent back %s of %s for group %s to %s via %s (reconsume %d)",
        msg.msg_id, props[PROPERTY_RETRY_TOPIC], group, new_topic, inner.topic, inner.reconsume_times,
    )
    return reply(ResponseCode.SUCCESS)


class SendBackProcessor:
    """36; in a task of its own (the store's put and a new retry topic's registration
    may wait), within the endpoint's default limits."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.pre_put = pre_put(ctx, dead_letter=False)
        #: (original topic, group) -> messages sent back (read by broker/stats.py)
        self.sent_back: dict[tuple[str, str], int] = {}

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ConsumerSendMsgBackRequestHeader, request)
        return await send_back(self.ctx, self.pre_put, header, self.sent_back, version=request.version)


def register(ctx: BrokerContext) -> SendBackProcessor:
    """Register 36 on ``ctx.server``."""
    proc = SendBackProcessor(ctx)
    ctx.server.register_processor(int(RequestCode.CONSUMER_SEND_MSG_BACK), proc)
    return proc
