"""PULL_MESSAGE (11): RocketMQ 4.9's ``PullMessageProcessor`` with long polling.

Checks, each with Java's code and remark (refusals are raised as
:mod:`trocket.broker.errors` and answered by remoting): broker read permission (NO_PERMISSION),
consumer group name (SUBSCRIPTION_GROUP_NOT_EXIST: an illegal name is a group that
cannot exist), the group's subscription-group config (created with the defaults when
``autoCreateSubscriptionGroup``, else SUBSCRIPTION_GROUP_NOT_EXIST; ``consumeEnable``
false -> NO_PERMISSION), topic (TOPIC_NOT_EXIST; ``%RETRY%<group>`` is created on demand
with 1 queue, perm 6), topic read permission, queue id (SYSTEM_ERROR), subscription: a
TAG expression, or a SQL92 one (:mod:`trocket.broker.consumer_filter`) -- SYSTEM_ERROR
``The broker does not support consumer to filter message by SQL92`` unless
``enablePropertyFilter``; from the group's heartbeat (a broadcasting group whose config
has ``consumeBroadcastEnable`` false -> NO_PERMISSION; one older than the pull's
``subVersion`` -> SUBSCRIPTION_NOT_LATEST ``the consumer's subscription not latest``), a
SQL92 one without filter data (it did not compile) -> FILTER_DATA_NOT_EXIST, with filter
data older than the pull's ``subVersion`` -> FILTER_DATA_NOT_LATEST ``the consumer's
consumer filter data not latest`` (:class:`~trocket.broker.consumer_filter.ConsumerFilters`
keeps each group's filter data by Java's rules); carried by the pull,
SUBSCRIPTION_PARSE_FAILED ``parse the consumer's subscription failed``.

Reading: the store filters by tag hash in the consume queue (the subscription's code
set); the records found are then checked against the exact tag strings (a hash
collision must not deliver a foreign tag) -- what is left is the FOUND body, the
stored records back to back. A SQL92 subscription is evaluated on each record's
properties while the store reads, which scans on past the records it refuses (as
Java's ``isMatchedByCommitLog``); with ``filterSupportRetry`` a group's retry topic is
filtered too, each record by the expression of the topic it came from. Statuses map to codes as in Java, the remark is the
status name, and every answer carries a ``PullMessageResponseHeader``:
``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset`` and ``maxOffset``.
``suggestWhichBrokerId`` is 0 (the master) unless the master has ``slaveReadEnable``:
then the group's ``whichBrokerWhenConsumeSlowly`` (1) for a consumer reading further
behind the log's end than ``accessMessageInMemoryMaxRatio`` of the RAM (Java's
``suggestPullingFromSlave``), else the group's ``brokerId`` (0). A slave serves pulls as
a master does (see :attr:`~trocket.broker.config.BrokerConfig.slave_read_enable`).

=====================  ==========================================================
FOUND                  SUCCESS (0) with the records
NO_MESSAGE_IN_QUEUE    PULL_OFFSET_MOVED (21) if the pull's offset is not 0, else 19
OFFSET_OVERFLOW_ONE    PULL_NOT_FOUND (19) -- held when the suspend bit is set
OFFSET_FOUND_NULL      PULL_NOT_FOUND (19) -- held too
OFFSET_OVERFLOW_BADLY  PULL_OFFSET_MOVED (21)
OFFSET_TOO_SMALL       PULL_OFFSET_MOVED (21)
NO_MATCHED_MESSAGE     PULL_RETRY_IMMEDIATELY (20)
MESSAGE_WAS_REMOVING   PULL_RETRY_IMMEDIATELY (20)
=====================  ==========================================================

A pull with sysFlag bit 1 stores ``commitOffset`` as the group's offset (first run
only, as Java). A held pull is re-run by :mod:`trocket.broker.long_polling` and
answered through its connection. A pull that would be held while ``max_held_pulls``
are held already is answered SYSTEM_BUSY ``[PULL_HOLD_FULL]``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from trocket.codecs.bodies.client import EXPRESSION_TYPE_SQL92, MessageModel, SubscriptionData
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import InvalidNameError
from trocket.codecs.headers import PullMessageRequestHeader, PullMessageResponseHeader
from trocket.codecs.message.properties import PROPERTY_TAGS, get_property
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, validate_group
from trocket.codecs.sql92 import FilterCompileError
from trocket.remoting import Connection, ResponseCodeError, error_reply

from ..consumer_filter import RecordFilter, record_properties_bytes
from ..errors import (
    BrokerError,
    FilterDataNotExistError,
    FilterDataNotLatestError,
    NoPermissionError,
    SubscriptionGroupNotExistError,
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SubscriptionParseFailedError,
    SystemBusyError,
    TopicNotExistError,
)
from ..long_polling import HeldPull
from ..store import GetStatus, tags_hash
from ..store.topic_config import PERM_READ, PERM_WRITE
from . import (
    APPLY_TOPIC_URL,
    SAME_GROUP_DIFFERENT_TOPIC_URL,
    SUBSCRIPTION_GROUP_NOT_EXIST_URL,
    decode_request_header,
    reply,
    suggest_todo,
)

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["PullProcessor", "Subscription", "parse_subscription", "record_tags", "register"]

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8

_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}

_perf_ns = time.perf_counter_ns


def record_tags(record: memoryview | bytes) -> str | None:
    """The TAGS property of a stored record, without decoding the rest."""
    return get_property(record_properties_bytes(record), PROPERTY_TAGS)


class Subscription:
    """``SubscriptionData`` of a TAG expression: ``tags`` None means ``*``."""

    __slots__ = ("expression", "tags", "codes")

    def __init__(self, expression: str, tags: frozenset[str] | None) -> None:
        self.expression = expression
        self.tags = tags
        self.codes = None if tags is None else frozenset(tags_hash(t) for t in tags)

    def matches(self, tags: str | None) -> bool:
        return self.tags is None or (tags is not None and tags in self.tags)


_ALL = Subscription("*", None)


def parse_subscription(expression: str | None) -> Subscription:
    """``FilterAPI.buildSubscriptionData``: ``"*"``/empty = everything, else
    ``"TagA || TagB"``."""
    if not expression or expression.strip() == "*":
        return _ALL
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    if not tags:
        return _ALL
    return Subscription(expression, tags)


class PullProcessor:
    """The pull processor (one per broker), inline on the connection's reader; also
    long polling's re-runner of held pulls."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.consumers = ctx.consumers
        self.subscriptions = ctx.subscriptions
        self.filters = ctx.filters
        #: ``filterSupportRetry``: a retry topic is filtered with the original topics' expressions
        self.filter_retry = ctx.config.filter_support_retry
        self.hold = ctx.pull_hold
        self.long_polling = ctx.config.long_polling
        #: a master with ``slaveReadEnable`` sends slow consumers to its slave (id 1)
        self.slave_read = ctx.config.slave_read_enable and not ctx.config.is_slave
        self.short_polling_ms = ctx.config.short_polling_time_ms
        # counters (GET_BROKER_RUNTIME_INFO and broker/stats.py)
        self.found = 0
        self.found_messages = 0
        self.found_bytes = 0
        self.not_found = 0
        self.held = 0
        #: store reads that found nothing to deliver (Java's getMessageTimesTotalMiss:
        #: a held pull's re-runs count again)
        self.missed = 0
        #: the longest store read (``getMessageEntireTimeMax``), ns
        self.get_time_max_ns = 0
        #: (topic, queue id, group) -> [messages, bytes] delivered
        self.gets: dict[tuple[str, int, str], list[int]] = {}
        if self.hold is not None:
            self.hold.rerun = self.rerun

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Runs inline on the connection's reader: a pull never blocks (the store reads
        from memory maps), so it needs neither a task nor a thread."""
        header = decode_request_header(PullMessageRequestHeader, request)
        return self.pull(conn, request, header, True)

    def rerun(self, held: HeldPull) -> RemotingCommand | None:
        """Re-run a held pull (woken or timed out); never suspends again. A refusal now
        (the topic deleted meanwhile, ...) is its answer."""
        try:
            return self.pull(held.conn, held.request, held.state, False)
        except ResponseCodeError as exc:
            return error_reply(exc)

    # -- the pull ----------------------------------------------------------------------------

    def pull(self, conn: Connection, request: RemotingCommand, header: PullMessageRequestHeader, allow_suspend: bool) -> RemotingCommand | None:
        config = self.config
        if not config.broker_permission & PERM_READ:
            raise NoPermissionError(f"the broker[{config.advertised_addr().rpartition(':')[0]}] pulling message is forbidden")
        group = header.consumerGroup
        try:
            validate_group(group)
        except InvalidNameError as exc:
            raise SubscriptionGroupNotExistError(
                f"subscription group [{group}] does not exist, {exc}{suggest_todo(SUBSCRIPTION_GROUP_NOT_EXIST_URL)}"
            ) from None
        sg = self.subscriptions.find(group)  # auto-created (not persisted here) when allowed
        if sg is None:
            raise SubscriptionGroupNotExistError(
                f"subscription group [{group}] does not exist, {suggest_todo(SUBSCRIPTION_GROUP_NOT_EXIST_URL)}"
            )
        if not sg.consume_enable:
            raise NoPermissionError(f"subscription group no permission, {group}")
        topic = header.topic
        sys_flag = header.sysFlag
        tc = self.topics.select(topic)
        if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and topic[len(RETRY_GROUP_TOPIC_PREFIX):] == group:
            tc = self.topics.create_in_send_back(topic, 1, PERM_READ | PERM_WRITE, 0)
            self.ctx.topic_created(topic)
        if tc is None:
            log.warning("the topic %s not exist, consumer: %s", topic, conn.remote_address)
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please! {suggest_todo(APPLY_TOPIC_URL)}")
        if not tc.perm & PERM_READ:
            raise NoPermissionError(f"the topic[{topic}] pulling message is forbidden")
        queue_id = header.queueId
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            raise BrokerError(
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{conn.remote_address}]"
            )
        record_filter = None
        if sys_flag & FLAG_SUBSCRIPTION:
            expression_type = header.expressionType
            if expression_type and expression_type.upper() != "TAG":
                record_filter = self._sql_filter(group, topic, header.subscription, expression_type)
                sub = _ALL
            else:
                sub = parse_subscription(header.subscription)
        else:
            data = self._registered_subscription(group, topic, sg.consume_broadcast_enable)
            if data.sub_version < header.subVersion:
                log.warning("The broker's subscription is not latest, group: %s %s", group, data.sub_string)
                raise SubscriptionNotLatestError("the consumer's subscription not latest")
            if data.is_tag_type:
                sub = parse_subscription(data.sub_string)
            else:
                filter_data = self.filters.filter_data(group, topic)
                # what registered() tests, on the subscription already looked up
                if filter_data is None or data.expression_type != EXPRESSION_TYPE_SQL92 or not data.sub_string:
                    raise FilterDataNotExistError(
                        "The broker's consumer filter data is not exist!Your expression may be wrong!"
                    )
                if filter_data.client_version < header.subVersion:
                    log.warning("The broker's consumer filter data is not latest, group: %s, topic: %s, serverV: %d, "
                                "clientV: %d", group, topic, filter_data.client_version, header.subVersion)
                    raise FilterDataNotLatestError("the consumer's consumer filter data not latest")
                # Java filters with the filter data's expression (ExpressionMessageFilter)
                record_filter = self._sql_filter(group, topic, filter_data.expression, data.expression_type)
                sub = _ALL
        if self.filter_retry and record_filter is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            record_filter = self.filters.retry_filter(topic[len(RETRY_GROUP_TOPIC_PREFIX):])

        offset = header.queueOffset
        t0 = _perf_ns()
        result = self.store.get_message(
            group, topic, queue_id, offset, max(1, header.maxMsgNums), sub.codes, record_filter
        )
        elapsed = _perf_ns() - t0
        if elapsed > self.get_time_max_ns:
            self.get_time_max_ns = elapsed
        status = result.status
        body = b""
        if status is GetStatus.FOUND:
            if sub.tags is not None:
                self._exact_tag_check(result, sub)
                status = result.status
            if status is GetStatus.FOUND:
                body = result.joined()
                count = len(result.buffers)
                self.found += 1
                self.found_messages += count
                self.found_bytes += len(body)
                # per queue and group, once per pull (the statistics sum them per pass)
                key = (topic, queue_id, group)
                got = self.gets.get(key)
                if got is None:
                    self.gets[key] = [count, len(body)]
                else:
                    got[0] += count
                    got[1] += len(body)
            result.release()
        if status is not GetStatus.FOUND:
            self.missed += 1
        if status is GetStatus.NO_MESSAGE_IN_QUEUE or status is GetStatus.NO_MATCHED_LOGIC_QUEUE:
            code = ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _CODES[status]

        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET:
            self.offsets.commit_offset(group, topic, queue_id, header.commitOffset)

        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and sys_flag & FLAG_SUSPEND and self.hold is not None:
            polling_ms = header.suspendTimeoutMillis if self.long_polling else self.short_polling_ms
            held = HeldPull(
                conn, request, topic, queue_id, offset, self.hold.deadline_for(polling_ms), sub.codes, header
            )
            if self.hold.suspend(held):
                self.held += 1
                return None
            raise SystemBusyError(
                f"[PULL_HOLD_FULL]broker busy: {self.hold.max_held} pull requests are held already, "
                "start flow control for a while"
            )
        if code == ResponseCode.PULL_NOT_FOUND:
            self.not_found += 1
        header = PullMessageResponseHeader(
            # Java, with slaveReadEnable: the group's whichBrokerWhenConsumeSlowly (1) for a
            # slow consumer, else its brokerId (0); the master otherwise
            suggestWhichBrokerId=(
                (sg.which_broker_when_consume_slowly if result.suggest_pulling_from_slave else sg.broker_id)
                if self.slave_read else 0
            ),
            nextBeginOffset=result.next_begin_offset,
            minOffset=result.min_offset,
            maxOffset=result.max_offset,
        )
        return reply(code, status.value, None, body, header)

    @staticmethod
    def _exact_tag_check(result, sub: Subscription) -> None:
        """Drop records whose TAGS only collide with the subscription's hashes."""
        keep = []
        keep_offsets = []
        dropped = []
        for buf, qoff in zip(result.buffers, result.queue_offsets):
            if sub.matches(record_tags(buf)):
                keep.append(buf)
                keep_offsets.append(qoff)
            else:
                dropped.append(buf)
        if not dropped:
            return
        for buf in dropped:
            buf.release()
        result.buffers = keep
        result.queue_offsets = keep_offsets
        result.buffer_total_size = sum(len(b) for b in keep)
        if not keep:
            result.status = GetStatus.NO_MATCHED_MESSAGE

    def _registered_subscription(self, group: str, topic: str, broadcast_enable: bool) -> SubscriptionData:
        """Without the subscription bit Java uses what the group's heartbeat said (and
        refuses a broadcasting group its config does not let consume that way)."""
        info = self.consumers.group_info(group)
        if info is None:
            raise SubscriptionNotExistError(
                "the consumer's group info not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL)
            )
        if not broadcast_enable and info.message_model is MessageModel.BROADCASTING:
            raise NoPermissionError(f"the consumer group[{group}] can not consume by broadcast way")
        data = info.subscriptions.get(topic)
        if data is None:
            raise SubscriptionNotExistError(
                "the consumer's subscription not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL)
            )
        return data

    def _sql_filter(self, group: str, topic: str, expression: str | None, expression_type: str) -> RecordFilter:
        """The record filter of a SQL92 subscription; SYSTEM_ERROR while
        ``enablePropertyFilter`` is off, SUBSCRIPTION_PARSE_FAILED for an expression that
        does not compile (Java 4.9.8 would deliver everything unfiltered there: its
        ``ConsumerFilterManager.build`` returns null, and the ``assert`` after it is off
        in production)."""
        if not self.config.enable_property_filter:
            raise BrokerError(f"The broker does not support consumer to filter message by {expression_type}")
        if expression_type != EXPRESSION_TYPE_SQL92:
            raise SubscriptionParseFailedError("parse the consumer's subscription failed")
        try:
            return self.filters.record_filter(group, topic, expression or "")
        except FilterCompileError:
            raise SubscriptionParseFailedError("parse the consumer's subscription failed") from None


def register(ctx: BrokerContext) -> PullProcessor:
    """Register 11 on ``ctx.server`` (inline) and make it long polling's re-runner."""
    proc = PullProcessor(ctx)
    ctx.server.register_processor(int(RequestCode.PULL_MESSAGE), proc, inline=True)
    return proc
