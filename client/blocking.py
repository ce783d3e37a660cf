"""Blocking facade for plain scripts: the trio client in a background thread.

``BlockingProducer`` / ``BlockingPushConsumer`` / ``BlockingPullConsumer`` take exactly
the arguments of :class:`~trocket.client.producer.Producer`,
:class:`~trocket.client.consumer.PushConsumer` and
:class:`~trocket.client.consumer_lite.PullConsumer`, and raise the same errors: each owns
one thread running ``trio.run``, starts the trio object in it, and forwards every call
with ``trio.from_thread.run`` (the caller blocks until the answer). Use them as context
managers (or call ``close()``): closing runs the trio object's graceful shutdown
(offsets committed, queues unlocked, the client unregistered) and ends the thread.

A push consumer's plain-function listener runs in the trio thread's worker threads, as
with the trio API; an async listener runs in the trio thread.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import trio

from .consumer import PushConsumer
from .consumer_lite import PullConsumer
from .errors import ClientStateError
from .message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from .producer import Producer
from .request_reply import send_reply
from .transaction import LocalTransactionState, TransactionProducer, TransactionSendResult, local_state
from .subscription import MessageSelector

__all__ = ["BlockingProducer", "BlockingPushConsumer", "BlockingPullConsumer", "BlockingTransactionProducer"]

T = TypeVar("T")


class _TrioThread:
    """One daemon thread running a trio loop that hosts one service until closed."""

    def __init__(self, name: str) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as exc:  # noqa: BLE001 - reported to the creator
            self._error = exc
            self._ready.set()

    async def _run(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def call(self, afn: Callable[..., Any], *args: Any) -> Any:
        if not self._thread.is_alive():
            raise ClientStateError("the client's trio thread is not running (closed?)")
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def call_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def start(self, service: Any) -> None:
        """``await nursery.start(service.run)`` in the loop."""
        assert self._nursery is not None
        self.call(self._nursery.start, service.run)

    def stop(self, timeout: float | None = None) -> None:
        if self._thread.is_alive() and self._stop is not None:
            try:
                self.call_sync(self._stop.set)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)


class _Blocking:
    _service: Any

    def __init__(self, service: Any, name: str) -> None:
        self._loop = _TrioThread(name)
        self._closed = False
        try:
            self._loop.start(service)
        except BaseException:
            self._loop.stop()
            raise
        self._service = service

    def close(self) -> None:
        """Graceful shutdown, then the thread ends."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.call(self._service.aclose)
        finally:
            self._loop.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _call(self, afn: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise ClientStateError("closed")
        return self._loop.call(afn, *args)


class BlockingProducer(_Blocking):
    """:class:`~trocket.client.producer.Producer` for plain code (same arguments)."""

    def __init__(self, group: str, namesrv: str | Sequence[str] | None = None, **kw: Any) -> None:
        self.producer = Producer(group, namesrv, **kw)
        super().__init__(self.producer, f"trocket-producer-{group}")

    def send(self, msg: Message, *, timeout: float | None = None) -> SendResult:
        return self._call(lambda: self.producer.send(msg, timeout=timeout))

    def send_oneway(self, msg: Message, *, timeout: float | None = None) -> None:
        self._call(lambda: self.producer.send_oneway(msg, timeout=timeout))

    def send_orderly(self, msg: Message, selector: Any = None, arg: Any = None, *, key: str | None = None,
                     timeout: float | None = None) -> SendResult:
        return self._call(lambda: self.producer.send_orderly(msg, selector, arg, key=key, timeout=timeout))

    def send_batch(self, msgs: Sequence[Message], *, timeout: float | None = None) -> list[SendResult]:
        return self._call(lambda: self.producer.send_batch(msgs, timeout=timeout))

    def request(self, msg: Message, *, timeout: float | None = None) -> MessageExt:
        """:meth:`~trocket.client.producer.Producer.request`: the reply to ``msg``."""
        return self._call(lambda: self.producer.request(msg, timeout=timeout))

    def send_reply(self, request: Message, body: bytes | str, *, timeout: float | None = None) -> SendResult:
        """Answer a request a consumer got (:func:`~trocket.client.request_reply.send_reply`)."""
        return self._call(lambda: send_reply(self.producer, request, body, timeout=timeout))

    def send_async(self, msg: Message, *, timeout: float | None = None) -> concurrent.futures.Future:
        """Returns at once; the future holds the SendResult or the send's error."""
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def done(result: SendResult | None, error: BaseException | None) -> None:
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)

        self._call(lambda: self.producer.send_async(msg, callback=done, timeout=timeout))
        return fut


class BlockingTransactionProducer(BlockingProducer):
    """:class:`~trocket.client.transaction.TransactionProducer` for plain code (same
    arguments). :meth:`send_in_transaction` runs the listener's ``execute`` in the
    caller's thread, as Java's does, between the prepared send and END_TRANSACTION (both
    in the client's trio thread); the broker's checks run ``check`` in the trio thread's
    worker threads (plain functions) or in it (coroutine functions)."""

    producer: TransactionProducer

    def __init__(self, group: str, namesrv: str | Sequence[str] | None = None, listener: Any = None, **kw: Any) -> None:
        self.producer = TransactionProducer(group, namesrv, listener, **kw)
        _Blocking.__init__(self, self.producer, f"trocket-txn-producer-{group}")

    def send_in_transaction(self, msg: Message, arg: Any = None, *, timeout: float | None = None) -> TransactionSendResult:
        producer = self.producer
        listener = producer._listener()
        result = self._call(lambda: producer.send_prepared(msg, timeout=timeout))
        state = LocalTransactionState.ROLLBACK_MESSAGE  # stored, not as safely as asked
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            state = LocalTransactionState.UNKNOW
            try:
                value = listener.execute(msg, arg)
                if inspect.isawaitable(value):
                    raise TypeError("a blocking transaction producer's execute() must be a plain function")
                state = local_state(value)
            except Exception as exc:  # the local transaction failed: UNKNOW, the broker checks
                error = exc
        return self._call(lambda: producer.finish_transaction(result, state, error, msg))


class BlockingPushConsumer(_Blocking):
    """:class:`~trocket.client.consumer.PushConsumer` for plain code (same arguments);
    consuming starts in the constructor and stops at :meth:`close`."""

    def __init__(self, group: str, namesrv: str | list[str] | None = None, subscriptions: Any = None,
                 listener: Any = None, **kw: Any) -> None:
        self.consumer = PushConsumer(group, namesrv, subscriptions, listener, **kw)
        super().__init__(self.consumer, f"trocket-push-{group}")

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._loop.call_sync(self.consumer.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are given up at the next rebalance, started now)."""
        self._loop.call_sync(self.consumer.unsubscribe, topic)

    def suspend(self) -> None:
        """Stop pulling until :meth:`resume` (what is cached is still consumed)."""
        self._loop.call_sync(self.consumer.suspend)

    def resume(self) -> None:
        self._loop.call_sync(self.consumer.resume)

    @property
    def suspended(self) -> bool:
        return self._loop.call_sync(lambda: self.consumer.suspended)

    def assignment(self) -> list[MessageQueue]:
        return self._loop.call_sync(self.consumer.assignment)

    def commit(self) -> None:
        self._call(self.consumer.commit)

    @property
    def stats(self):
        return self.consumer.stats

    @property
    def client_id(self) -> str:
        return self.consumer.client_id


class BlockingPullConsumer(_Blocking):
    """:class:`~trocket.client.consumer_lite.PullConsumer` for plain code (same arguments)."""

    def __init__(self, group: str, namesrv: str | list[str] | None = None, **kw: Any) -> None:
        self.consumer = PullConsumer(group, namesrv, **kw)
        super().__init__(self.consumer, f"trocket-pull-{group}")

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._loop.call_sync(self.consumer.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues are dropped now (with what is cached)."""
        self._loop.call_sync(self.consumer.unsubscribe, topic)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._call(self.consumer.assign, list(queues))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling ``queues`` until :meth:`resume` (what is cached is still polled)."""
        self._loop.call_sync(self.consumer.pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._loop.call_sync(self.consumer.resume, list(queues))

    def is_paused(self, mq: MessageQueue) -> bool:
        return self._loop.call_sync(self.consumer.is_paused, mq)

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The broker's offset of ``mq`` for a store time (ms); :meth:`seek` to it."""
        return self._call(self.consumer.offset_for_timestamp, mq, timestamp_ms)

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self.consumer.fetch_queues, topic)

    def assignment(self) -> list[MessageQueue]:
        return self._loop.call_sync(self.consumer.assignment)

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        return self._call(self.consumer.poll, timeout)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._call(self.consumer.seek, mq, offset)

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_begin, mq)

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_end, mq)

    def commit(self) -> None:
        self._call(self.consumer.commit)

    def committed(self, mq: MessageQueue) -> int:
        return self._call(self.consumer.committed, mq)

    def register_topic_message_queue_change_listener(self, topic: str, listener: Any) -> None:
        """``listener(topic, queues)`` on a change of the topic's queues; it runs in the
        client's trio thread, so it must return quickly."""
        self._loop.call_sync(self.consumer.register_topic_message_queue_change_listener, topic, listener)
