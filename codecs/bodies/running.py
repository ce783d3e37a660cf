"""A consumer's answers to the broker's forwarded admin calls (RocketMQ 4.9.8):

* ``ConsumerRunningInfo`` (GET_CONSUMER_RUNNING_INFO 307 response body): the client's
  ``properties``, ``subscriptionSet``, ``mqTable`` (``MessageQueue`` -> ``ProcessQueueInfo``,
  written with object keys as fastjson writes a ``TreeMap<MessageQueue, ...>``),
  ``statusTable`` (topic -> ``ConsumeStatus``) and ``jstack``;
* ``ConsumeMessageDirectlyResult`` (CONSUME_MESSAGE_DIRECTLY 309 response body).

Only the encoders: the trocket client writes these, mqadmin reads them.
"""

from __future__ import annotations

import enum

import attrs

from .client import MessageQueue, SubscriptionData
from .fastjson import Bean, dumps_bytes

__all__ = [
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "ProcessQueueInfo",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "CMResult",
    "ConsumeMessageDirectlyResult",
]

#: ``ConsumerRunningInfo``'s property names (mqadmin ``consumerStatus`` reads them)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@attrs.define(slots=True, kw_only=True)
class ProcessQueueInfo:
    """``ProcessQueueInfo``: one owned queue's cache (timestamps in epoch ms)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_mib: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_json(self) -> Bean:
        return Bean(
            commitOffset=self.commit_offset,
            cachedMsgMinOffset=self.cached_msg_min_offset,
            cachedMsgMaxOffset=self.cached_msg_max_offset,
            cachedMsgCount=self.cached_msg_count,
            cachedMsgSizeInMiB=self.cached_msg_size_mib,
            transactionMsgMinOffset=0,
            transactionMsgMaxOffset=0,
            transactionMsgCount=0,
            locked=self.locked,
            tryUnlockTimes=self.try_unlock_times,
            lastLockTimestamp=self.last_lock_timestamp,
            droped=self.dropped,  # sic: Java's property name
            lastPullTimestamp=self.last_pull_timestamp,
            lastConsumeTimestamp=self.last_consume_timestamp,
        )


@attrs.define(slots=True, kw_only=True)
class ConsumeStatus:
    """``ConsumeStatus``: a topic's pull and consume rates (RTs in ms, TPS per second)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json(self) -> Bean:
        return Bean(
            pullRT=self.pull_rt,
            pullTPS=self.pull_tps,
            consumeRT=self.consume_rt,
            consumeOKTPS=self.consume_ok_tps,
            consumeFailedTPS=self.consume_failed_tps,
            consumeFailedMsgs=self.consume_failed_msgs,
        )


@attrs.define(slots=True, kw_only=True)
class ConsumerRunningInfo:
    """``ConsumerRunningInfo`` (all property values are strings, as a Java ``Properties``)."""

    properties: dict[str, str] = attrs.field(factory=dict)
    subscriptions: list[SubscriptionData] = attrs.field(factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = attrs.field(factory=dict)
    status_table: dict[str, ConsumeStatus] = attrs.field(factory=dict)
    jstack: str | None = None

    def to_json(self) -> Bean:
        # TreeSet / TreeMap: sorted (SubscriptionData by topic then expression, as its compareTo)
        subs = sorted(self.subscriptions, key=lambda s: (s.topic, s.sub_string or ""))
        return Bean(
            properties=dict(self.properties),
            subscriptionSet=[s.to_json() for s in subs],
            mqTable={mq: self.mq_table[mq].to_json() for mq in sorted(self.mq_table)},
            statusTable={t: self.status_table[t].to_json() for t in sorted(self.status_table)},
            jstack=self.jstack,
        )

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())


class CMResult(enum.Enum):
    """``CMResult``: what CONSUME_MESSAGE_DIRECTLY's callback did."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@attrs.define(slots=True, kw_only=True)
class ConsumeMessageDirectlyResult:
    """``ConsumeMessageDirectlyResult``."""

    order: bool = False
    auto_commit: bool = True
    consume_result: CMResult
    remark: str | None = None
    spent_time_ms: int = 0

    def to_json(self) -> Bean:
        return Bean(
            autoCommit=self.auto_commit,
            consumeResult=self.consume_result.value,
            order=self.order,
            remark=self.remark,
            spentTimeMills=self.spent_time_ms,  # sic: Java's property name
        )

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())
