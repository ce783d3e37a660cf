"""The pre-put step: rewrites of a message between the send's checks and the store.

Java spreads these over three places -- the send processor's ``handleRetryAndDLQ``
(a retried message past its reconsume limit goes to ``%DLQ%<group>``),
``CommitLog.putMessage`` (a ``DELAY`` level above 0 stores the message on
``SCHEDULE_TOPIC_XXXX`` until it is due) and the transaction bridge (a prepared
message is stored on the half topic). Here they are one ordered tuple of steps
(:class:`PrePut`, made by :func:`pre_put`), each a function ``rewrite(msg, header)``
that returns the message to store instead, or ``None`` to leave it to the next step,
with the topic prefixes and property names that can trigger it (so the send path skips
the step for a message none of them matches, without a call). The first step that
rewrites a message ends the step, which is Java's rule too: a dead-lettered message is
not delayed (Java sets its level to 0), a prepared message is not delayed before its
commit.

Two kinds of step, as in Java: one that changes where the message is addressed
(dead letter) changes it in place and returns it -- the answer names its new queue, as
Java's ``queueIdInt``; one that stores a different record (delay, half message) returns
a new message -- the answer names the queue the message was addressed to. A new
rewrite is a step added to the tuple, in the order Java applies it: dead letter, half
message, delay.

Triggers: topic prefixes, property names, and sysflag bits (the transaction type's
prepared bit: a prepared send is a half message whether it says so with ``TRAN_MSG`` or
with its sysflag).

A send's message comes with its stored properties bytes and no map (``properties``
empty); a step that rewrites properties makes the map Java's send processor hands on
from the send header's string (:func:`sent_items`): the half step as a plain dict that
becomes the half message's map, the delay step as a :class:`JavaHashMap`
(:func:`pre_put_map`). A send-back's message carries its map.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple, Protocol

from trocket.codecs.headers.fast import SendFields
from trocket.codecs.java_hashmap import JavaHashMap, decode_properties
from trocket.codecs.message.properties import (
    PROPERTY_CLUSTER,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    get_property,
)
from trocket.codecs.message.sysflag import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from trocket.codecs.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

from .errors import NoPermissionError
from .store import MessageInner, PutResult
from .store.topic_config import PERM_READ, PERM_WRITE
from .transaction import TransactionalMessageService, half_message

if TYPE_CHECKING:
    from .context import BrokerContext
    from .schedule import ScheduleMessageService

__all__ = [
    "DEFAULT_MAX_RECONSUME_TIMES",
    "PrePut",
    "PrePutStep",
    "dead_letter_step",
    "delay_step",
    "half_step",
    "pre_put",
    "pre_put_map",
    "sent_items",
]

#: ``MixAll.DEFAULT_MAX_RECONSUME_TIMES`` / SubscriptionGroupConfig.retryMaxTimes.
DEFAULT_MAX_RECONSUME_TIMES = 16


class Request(Protocol):
    """What a step reads of the request that brought the message (the send header's
    fields, a send-back header)."""

    maxReconsumeTimes: int | None


def sent_items(props: str, cluster: str) -> dict[str, str]:
    """A single send's properties (``props``, as the send header carries them) as 4.9.8's
    send processor hands them on to the store when the store rewrites the message (the
    delay branch, the half message): ``CLUSTER`` put and ``WAIT``, removed for the
    stored string, put back (now at its bucket's tail). A dict in the map's insertion
    order, no key removed for good (a ``HashMap`` of it has the capacity of its size)."""
    items = decode_properties(props)
    items[PROPERTY_CLUSTER] = cluster
    wait = items.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    if wait is not None:
        items[PROPERTY_WAIT_STORE_MSG_OK] = wait
    return items


def pre_put_map(props: str, cluster: str) -> JavaHashMap:
    """:func:`sent_items` as the ``HashMap`` a step rewrites (the delay's)."""
    return JavaHashMap(sent_items(props, cluster).items())


class PrePutStep(NamedTuple):
    """One rewrite, and when it can apply at all: only to a message whose topic starts
    with one of ``topic_prefixes``, whose properties string holds one of
    ``property_names`` or whose sysflag has one of the bits of ``sys_flags`` (the send
    path tests those before it calls any step: most messages are never looked at
    again)."""

    #: the message to store instead, or None (unchanged; the next step sees it)
    rewrite: Callable[[MessageInner, Request], MessageInner | None]
    topic_prefixes: tuple[str, ...] = ()
    property_names: tuple[str, ...] = ()
    sys_flags: int = 0
    #: told ``(msg, stored, result)`` once a record a step made (``stored``, from the
    #: message sent, ``msg``) is stored where ``result`` says (each step's is told of
    #: every step's records: it knows its own); the send path calls them
    after_put: Callable[[MessageInner, MessageInner, PutResult], None] | None = None


class PrePut:
    """The ordered steps, and the union of their triggers."""

    __slots__ = ("steps", "topic_prefixes", "property_names", "sys_flags", "after_put")

    def __init__(self, steps: tuple[PrePutStep, ...]) -> None:
        self.steps = steps
        self.topic_prefixes = tuple(p for step in steps for p in step.topic_prefixes)
        self.property_names = tuple(n for step in steps for n in step.property_names)
        self.sys_flags = 0
        for step in steps:
            self.sys_flags |= step.sys_flags
        self.after_put = tuple(step.after_put for step in steps if step.after_put is not None)

    def may_rewrite(self, topic: str, properties: str, sys_flag: int = 0) -> bool:
        """Whether any step can apply (the send path inlines this test)."""
        return (
            topic.startswith(self.topic_prefixes)
            or bool(sys_flag & self.sys_flags)
            or any(name in properties for name in self.property_names)
        )

    def rewrite(self, msg: MessageInner, header: Request) -> MessageInner:
        """``msg`` as the first step that rewrites it leaves it (itself when none does)."""
        for step in self.steps:
            stored = step.rewrite(msg, header)
            if stored is not None:
                return stored
        return msg


def dead_letter_step(ctx: BrokerContext) -> PrePutStep:
    """``handleRetryAndDLQ``: a message sent to ``%RETRY%<group>`` with as many reconsume
    times as the header's ``maxReconsumeTimes`` or more (else the group's
    ``retryMaxTimes``, 16 by default; Java's ``reconsumeTimes >= maxReconsumeTimes``)
    goes to ``%DLQ%<group>``, queue 0; the topic is made (1 queue, perm 6) if it is new."""
    topics = ctx.topics
    subscriptions = ctx.subscriptions

    def dead_letter(msg: MessageInner, header: Request) -> MessageInner | None:
        topic = msg.topic
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        max_times = header.maxReconsumeTimes
        if max_times is None:
            sg = subscriptions.find(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
            max_times = sg.retry_max_times if sg is not None else DEFAULT_MAX_RECONSUME_TIMES
        if msg.reconsume_times < max_times:
            return None
        dlq = DLQ_GROUP_TOPIC_PREFIX + topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        if topics.select(dlq) is None:
            topics.create_in_send_back(dlq, 1, PERM_READ | PERM_WRITE, 0)
            ctx.topic_created(dlq)
        msg.topic = dlq
        msg.queue_id = 0
        return msg

    return PrePutStep(dead_letter, topic_prefixes=(RETRY_GROUP_TOPIC_PREFIX,))


def half_step(ctx: BrokerContext) -> PrePutStep:
    """A prepared send -- ``TRAN_MSG`` true (Java's test, ``Boolean.parseBoolean``) or a
    prepared transaction type in its sysflag -- is stored as a half message
    (:func:`~trocket.broker.transaction.half_message`), unless the broker refuses them
    (``rejectTransactionMessage``: NO_PERMISSION, Java's remark). A rolled-back
    transaction type without ``TRAN_MSG`` is stored as it is (and never indexed), as
    Java stores it. Once stored, the half message is kept for its END
    (:meth:`~trocket.broker.transaction.TransactionalMessageService.prepared`; the
    context's service is made here when it has none yet: bare setups)."""
    config = ctx.config
    cluster = config.cluster
    if ctx.transactions is None:
        ctx.transactions = TransactionalMessageService(ctx)

    def half(msg: MessageInner, header: Request) -> MessageInner | None:
        if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_PREPARED_TYPE:
            flag = get_property(msg.properties_bytes, PROPERTY_TRANSACTION_PREPARED)
            if flag is None or flag.lower() != "true":
                return None
        if config.reject_transaction_message:
            ip = config.advertised_addr(ctx.server).rpartition(":")[0]
            raise NoPermissionError(f"the broker[{ip}] sending transaction message is forbidden")
        if not msg.properties and type(header) is SendFields:  # a send's: its map from its header
            return half_message(msg, sent_items(header.properties or "", cluster))
        return half_message(msg)

    return PrePutStep(
        half, property_names=(PROPERTY_TRANSACTION_PREPARED,), sys_flags=TRANSACTION_PREPARED_TYPE,
        after_put=ctx.transactions.prepared,
    )


def delay_step(schedule: ScheduleMessageService, cluster: str) -> PrePutStep:
    """A ``DELAY`` level above 0: stored on ``SCHEDULE_TOPIC_XXXX`` until due
    (:meth:`~trocket.broker.schedule.ScheduleMessageService.rewrite`)."""

    def delay(msg: MessageInner, header: Request) -> MessageInner | None:
        if not msg.properties and type(header) is SendFields:  # a send's: its map from its header
            msg.properties = pre_put_map(header.properties or "", cluster)
        stored = schedule.rewrite(msg)
        return None if stored is msg else stored

    return PrePutStep(delay, property_names=("DELAY",))


def pre_put(ctx: BrokerContext, *, dead_letter: bool = True) -> PrePut:
    """The broker's steps, in Java's order: dead letter, half message, delay (a context
    without a schedule service -- bare test setups -- does not delay). The send-back
    path leaves the dead-letter step out (``dead_letter=False``): it decides the DLQ
    itself, on the stored message's count, and Java's never runs ``handleRetryAndDLQ``."""
    steps = [dead_letter_step(ctx), half_step(ctx)] if dead_letter else [half_step(ctx)]
    if ctx.schedule is not None:
        steps.append(delay_step(ctx.schedule, ctx.config.cluster))
    return PrePut(tuple(steps))
