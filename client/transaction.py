"""TransactionProducer: RocketMQ 4.9's ``TransactionMQProducer`` on trio (Java:
``DefaultMQProducerImpl.sendMessageInTransaction`` / ``endTransaction`` /
``checkTransactionState``).

::

    class Orders:
        async def execute(self, msg, arg):          # the local transaction
            await db.insert(arg)
            return LocalTransactionState.COMMIT_MESSAGE

        async def check(self, msg):                 # the broker asks how it ended
            return COMMIT_MESSAGE if await db.has(msg.keys) else ROLLBACK_MESSAGE

    async with TransactionProducer("PG", namesrv="127.0.0.1:9876", listener=Orders()) as producer:
        result = await producer.send_in_transaction(new_message("Orders", b"..."), arg=order)

As Java's:

- :meth:`TransactionProducer.send_in_transaction` drops a ``DELAY`` property, marks the
  message prepared (``TRAN_MSG=true``, ``PGROUP``, the prepared sysflag) and sends it
  (sync, with the producer's retries and budget); once stored (SEND_OK) it runs the
  listener's ``execute(msg, arg)`` -- ``None`` or an exception mean UNKNOW -- and ends the
  transaction with END_TRANSACTION (oneway): commit, rollback, or unknown (the broker
  checks later). A store that answered FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT /
  SLAVE_NOT_AVAILABLE is rolled back. A failed END_TRANSACTION is logged, not raised
  (the broker's check ends it). Returns a :class:`TransactionSendResult`.
- The broker's CHECK_TRANSACTION_STATE for the group (it reaches the client instance,
  which hands it here) runs the listener's ``check(msg)`` -- at most
  ``check_concurrency`` at once (Java's ``checkThreadPoolMaxSize``, 1), at most
  ``check_queue`` waiting (``checkRequestHoldMax``, 2000: more are dropped and logged);
  an exception or ``None`` is UNKNOW -- and answers with END_TRANSACTION
  (``fromTransactionCheck``) to that broker.

The listener's methods may be coroutine functions (awaited in the trio thread) or plain
functions (run in a worker thread, so a blocking database call does not stop the
client).
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from trocket.codecs.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.message.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MSG_REGION,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from trocket.codecs.message.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from trocket.codecs.namespace import without_namespace

from .errors import ClientError, ClientStateError
from .message import Message, MessageExt, SendResult, SendStatus
from .producer import Producer
from .trace import end_transaction_context

__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "local_state",
]

log = logging.getLogger(__name__)

#: Java's ``TransactionMQProducer`` defaults: one check at a time, 2000 waiting
CHECK_CONCURRENCY = 1
CHECK_QUEUE = 2000
#: ``endTransactionOneway``'s timeout for a check's answer (Java: 3000 ms)
CHECK_ANSWER_TIMEOUT = 3.0


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState`` (``UNKNOW`` is Java's spelling)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}
_NOT_STORED_SAFELY = (SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE)


class TransactionListener(Protocol):
    """``TransactionListener``: each method returns a :class:`LocalTransactionState`
    (``None`` counts as UNKNOW), plain or as a coroutine."""

    def execute(self, msg: Message, arg: Any) -> Any:
        """The local transaction of ``msg`` (``executeLocalTransaction``)."""

    def check(self, msg: MessageExt) -> Any:
        """How the local transaction of ``msg`` ended (``checkLocalTransaction``)."""


@attrs.define(slots=True)
class TransactionSendResult(SendResult):
    """``TransactionSendResult``: the prepared send's result and how the local
    transaction ended."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def local_state(value: Any) -> LocalTransactionState:
    """What a listener returned as a state: ``None`` is UNKNOW; anything else than a
    :class:`LocalTransactionState` a ``TypeError``."""
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise TypeError(f"a transaction listener returned {value!r}, not a LocalTransactionState")
    return value


async def _call(fn: Callable[..., Any], *args: Any, limiter: trio.CapacityLimiter | None = None) -> Any:
    """``fn(*args)``: awaited when it is a coroutine function, else in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await trio.to_thread.run_sync(fn, *args, limiter=limiter)
    if inspect.isawaitable(result):  # a plain function that returned a coroutine
        return await result
    return result


def _exception_text(exc: BaseException) -> str:
    """Java's ``Throwable.toString``: ``Type: message``."""
    return f"{type(exc).__name__}: {exc}"


class TransactionProducer(Producer):
    """A producer group that sends in transactions (see the module docstring).
    ``listener`` has ``execute(msg, arg)`` and ``check(msg)``; the other arguments are
    :class:`~trocket.client.producer.Producer`'s."""

    def __init__(
        self,
        group: str,
        namesrv: Any = None,
        listener: TransactionListener | None = None,
        *,
        check_concurrency: int = CHECK_CONCURRENCY,
        check_queue: int = CHECK_QUEUE,
        **kw: Any,
    ) -> None:
        super().__init__(group, namesrv, **kw)
        if check_concurrency < 1 or check_queue < 0:
            raise ValueError("check_concurrency must be >= 1 and check_queue >= 0")
        self.listener = listener
        self.check_queue = check_queue
        self._check_limiter = trio.CapacityLimiter(check_concurrency)
        #: checks running or waiting for a slot (at most check_concurrency + check_queue)
        self._checks_pending = 0
        self._transaction_handle = self
        #: checks answered, dropped (queue full), failed (the listener raised)
        self.checks_answered = 0
        self.checks_dropped = 0

    # -- send_in_transaction ----------------------------------------------------------------

    async def send_in_transaction(self, msg: Message, arg: Any = None, *, timeout: float | None = None) -> TransactionSendResult:
        """Send ``msg`` prepared, run the local transaction, end it (see the module
        docstring). Raises what the prepared send raises."""
        listener = self._listener()
        result = await self.send_prepared(msg, timeout=timeout)
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = local_state(await _call(listener.execute, msg, arg))
            except Exception as exc:  # the local transaction failed: UNKNOW, the broker checks
                log.info("local transaction of %s raised", result.msg_id, exc_info=True)
                error = exc
        elif result.status in _NOT_STORED_SAFELY:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        return await self.finish_transaction(result, state, error, msg)

    async def finish_transaction(
        self, result: SendResult, state: LocalTransactionState, error: BaseException | None = None,
        msg: Message | None = None,
    ) -> TransactionSendResult:
        """:meth:`end_transaction`, a failure logged (the broker's check ends it then),
        and the :class:`TransactionSendResult`."""
        try:
            await self.end_transaction(result, state, error, msg)
        except ClientError as exc:
            log.warning("local transaction of %s ended %s, but END_TRANSACTION failed: %s",
                        result.msg_id, state.value, exc)
        return TransactionSendResult(
            status=result.status, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id, queue=result.queue,
            queue_offset=result.queue_offset, transaction_id=result.transaction_id, region_id=result.region_id,
            trace_on=result.trace_on, local_transaction_state=state,
        )

    def _listener(self) -> TransactionListener:
        if self.listener is None:
            raise ClientStateError(f"transaction producer {self.group} has no transaction listener")
        return self.listener

    async def send_prepared(self, msg: Message, *, timeout: float | None = None) -> SendResult:
        """The prepared send alone (the first step of :meth:`send_in_transaction`; the
        blocking facade runs the local transaction in the caller's thread between it and
        :meth:`finish_transaction`)."""
        self._check_running()
        props = msg.properties
        props.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # "ignore DelayTimeLevel parameter"
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        begin = trio.current_time()
        p = self._prepare(msg)
        p.sys_flag |= TRANSACTION_PREPARED_TYPE
        result = await self._send_loop(p, begin, begin + (timeout or self.config.send_timeout), self.config.retries)
        if result.status is SendStatus.SEND_OK:
            if result.transaction_id is not None:
                props["__transactionId__"] = result.transaction_id
            msg.transaction_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.transaction_id
        return result

    async def end_transaction(
        self, result: SendResult, state: LocalTransactionState, error: BaseException | None = None,
        msg: Message | None = None,
    ) -> None:
        """END_TRANSACTION (oneway) for the prepared send ``result`` (``endTransaction``);
        with trace on, an EndTransaction record of ``msg`` first (Java's hook)."""
        broker = result.queue.broker_name
        addr = self.instance.master_addr(broker)
        if self.tracer is not None and msg is not None:
            self._trace_end(msg, result.msg_id, addr, state, msg.transaction_id, False)
        if addr is None:
            raise ClientError(f"no master address for broker {broker} to end the transaction of {result.msg_id}")
        offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id).offset
        header = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=result.queue_offset, commitLogOffset=offset,
            commitOrRollback=_END_TYPE[state], fromTransactionCheck=False, msgId=result.msg_id,
            transactionId=result.transaction_id, bname=broker,
        )
        remark = f"executeLocalTransactionBranch exception: {_exception_text(error)}" if error is not None else None
        await self._api.end_transaction_oneway(addr, header, remark, self.config.send_timeout)

    def _trace_end(self, msg: Message, msg_id: str, addr: str | None, state: LocalTransactionState,
                   transaction_id: str | None, from_check: bool) -> None:
        """``EndTransactionTraceHookImpl``: an EndTransaction record (none for a message
        of the trace topic)."""
        assert self.tracer is not None
        if msg.topic.startswith(self.config.trace_topic):
            return
        props = msg.properties
        self.tracer.append(end_transaction_context(
            self._trace_group, without_namespace(msg.topic, self._namespace), msg_id, props.get(PROPERTY_TAGS),
            props.get(PROPERTY_KEYS), addr, transaction_id, state.value, from_check, props.get(PROPERTY_MSG_REGION),
        ))

    # -- the broker's checks --------------------------------------------------------------------

    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """The instance hands a CHECK_TRANSACTION_STATE here (on the connection's reader:
        queued, never run here)."""
        if self.listener is None or self._nursery is None:
            log.warning("transaction check of %s for group %s: no listener", header.msgId, self.group)
            return
        if self._checks_pending >= self._check_limiter.total_tokens + self.check_queue:
            self.checks_dropped += 1
            log.warning("transaction check of %s dropped: %d checks already waiting", header.msgId, self.check_queue)
            return
        self._checks_pending += 1
        try:
            self._nursery.start_soon(self._answer_check, addr, msg, header)
        except RuntimeError:  # the producer is closing
            self._checks_pending -= 1

    async def _answer_check(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """``checkTransactionState``'s task: the listener's answer as END_TRANSACTION."""
        try:
            async with self._check_limiter:
                await self._answer_check_now(addr, msg, header)
        finally:
            self._checks_pending -= 1

    async def _answer_check_now(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """The listener's answer (UNKNOW when it raises) as END_TRANSACTION to ``addr``."""
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        try:
            assert self.listener is not None
            state = local_state(await _call(self.listener.check, msg))
        except Exception as exc:
            log.warning("transaction check of %s: the listener raised", header.msgId, exc_info=True)
            error = exc
        end = EndTransactionRequestHeader(
            producerGroup=self.group, tranStateTableOffset=header.tranStateTableOffset,
            commitLogOffset=header.commitLogOffset, commitOrRollback=_END_TYPE[state], fromTransactionCheck=True,
            msgId=msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
            transactionId=header.transactionId, bname=header.bname,
        )
        remark = f"checkLocalTransactionState Exception: {_exception_text(error)}" if error is not None else None
        if self.tracer is not None:
            self._trace_end(msg, end.msgId, addr, state, msg.transaction_id, True)  # the UNIQ_KEY (the instance set it)
        try:
            await self._api.end_transaction_oneway(addr, end, remark, CHECK_ANSWER_TIMEOUT)
        except ClientError as exc:
            log.error("answering the transaction check of %s to %s failed: %s", header.msgId, addr, exc)
            return
        self.checks_answered += 1
