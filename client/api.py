"""Typed remote calls to name servers and brokers (Java: ``MQClientAPIImpl``).

One method per RocketMQ call: it builds the request from the codecs' header class, invokes
it through the instance's :class:`~trocket.remoting.RemotingClient`, and turns the answer
into a typed value or a typed :mod:`~trocket.client.errors` error. Every request the client
makes goes through here, the producer's sends too (:meth:`ClientAPI.invoke`,
:meth:`ClientAPI.invoke_async`, :meth:`ClientAPI.invoke_oneway` with requests made by
:meth:`ClientAPI.request`: the producer judges the answers itself, as retries are its
policy). Remoting failures become client errors here, once, so callers see one error
family:

- ``RemotingConnectError`` -> :class:`ClientConnectError`;
- the connection closed under the call -> :class:`ConnectionLostError`;
- ``RemotingTimeoutError`` / too many requests in flight -> :class:`ClientTimeoutError`.

A non-success answer raises :func:`response_error` (SYSTEM_BUSY -> :class:`BrokerBusyError`,
MESSAGE_ILLEGAL & co. -> :class:`MessageRefusedError`, else :class:`BrokerResponseError`);
a success answer that does not decode, a :class:`BrokerResponseError` (:func:`decoded`).

Name-server calls rotate: the current name server first, on a connection failure or a
timeout the next one (while the budget lasts), and the one that answered becomes current
(Java's ``getAndCreateNameserverChannel``).

The pattern for a new broker call: build ``self.request(code, HeaderClass(...), body)``,
``await self.invoke(addr, request, timeout)``, check the code, decode the response header
with :func:`~trocket.codecs.headers.decode_header` / the body with its codecs class, both
inside :func:`decoded`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import trio

from trocket.codecs.bodies.client import (
    CheckClientRequestBody,
    ConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.bodies.fastjson import loads as fastjson_loads
from trocket.codecs.bodies.groups import (
    ConsumerConnection,
    GetConsumerStatusBody,
    GroupList,
    ProducerConnection,
    ProducerTableInfo,
    QueryCorrectionOffsetBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from trocket.codecs.bodies.namesrv import ClusterInfo, KVTable, TopicList
from trocket.codecs.bodies.route import TopicRouteData
from trocket.codecs.bodies.stats import (
    BrokerStatsData,
    ConsumeStats,
    ConsumeStatsList,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    TopicStatsTable,
)
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand, build_command
from trocket.codecs.custom_header import decode_header
from trocket.codecs.errors import CodecError
from trocket.codecs.headers.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from trocket.codecs.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    ResumeCheckHalfMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from trocket.codecs.java_properties import parse_properties
from trocket.codecs.headers.config import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from trocket.codecs.headers.groups import (
    CloneGroupOffsetRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerStatusRequestHeader,
    QueryCorrectionOffsetHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
from trocket.codecs.bodies.query import QueryConsumeQueueResponseBody
from trocket.codecs.headers.query import (
    UNIQUE_MSG_QUERY_FLAG,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
)
from trocket.codecs.headers import ViewMessageRequestHeader
from trocket.codecs.headers.stats import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from trocket.codecs.message import iter_records
from trocket.remoting import (
    RemotingClient,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    ResponseFuture,
)

from .config import MQ_VERSION, ClientConfig
from .errors import (
    Attempt,
    BrokerBusyError,
    BrokerResponseError,
    ClientConnectError,
    ClientError,
    ClientTimeoutError,
    ConnectionLostError,
    MessageRefusedError,
)
from .message import MessageExt, PullResult, PullStatus

__all__ = ["vip_channel_addr", "ClientAPI", "response_error", "remoting_error", "decoded", "target_name", "REFUSED_CODES"]

T = TypeVar("T")


def vip_channel_addr(addr: str) -> str:
    """``MixAll.brokerVIPChannel``: ``host:port`` -> ``host:(port - 2)``, the broker's
    VIP channel."""
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) - 2}"
#: what a call's outcome is given to: ``(response, None)`` or ``(None, client error)``
AnswerCallback = Callable[[RemotingCommand | None, ClientError | None], object]

_REMOTING_FAILURES = (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError, RemotingTooManyRequestsError)

#: answers that say the message itself is wrong (retrying elsewhere will not help)
REFUSED_CODES = frozenset(
    {
        int(ResponseCode.MESSAGE_ILLEGAL),
        int(ResponseCode.NO_PERMISSION),
        int(ResponseCode.VERSION_NOT_SUPPORTED),
    }
)

_PULL_STATUS = {
    int(ResponseCode.SUCCESS): PullStatus.FOUND,
    int(ResponseCode.PULL_NOT_FOUND): PullStatus.NO_NEW_MSG,
    int(ResponseCode.PULL_RETRY_IMMEDIATELY): PullStatus.NO_MATCHED_MSG,
    int(ResponseCode.PULL_OFFSET_MOVED): PullStatus.OFFSET_ILLEGAL,
}


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def response_error(what: str, response: RemotingCommand, *, attempts=(), elapsed=None) -> BrokerResponseError:
    """The typed error for a non-success ``response`` to ``what``."""
    code = response.code
    message = f"{what}: {_code_name(code)} ({code}) {response.remark or ''}".rstrip()
    if code == ResponseCode.SYSTEM_BUSY:
        cls: type[BrokerResponseError] = BrokerBusyError
    elif code in REFUSED_CODES:
        cls = MessageRefusedError
    else:
        cls = BrokerResponseError
    return cls(message, code=code, remark=response.remark, attempts=attempts, elapsed=elapsed)


def decoded(what: str, response: RemotingCommand, decode: Callable[[], T]) -> T:
    """``decode()`` of a success answer's header or body; a CodecError becomes a
    :class:`BrokerResponseError` naming ``what``."""
    try:
        return decode()
    except CodecError as exc:
        raise BrokerResponseError(
            f"{what}: the answer does not decode: {exc}", code=response.code, remark=response.remark
        ) from exc


def target_name(addr: str | None, queue: MessageQueue | None = None) -> str:
    """How errors and attempts name a call: ``addr``, or for a call about a queue
    ``"<broker name> <addr> queue <id>"``."""
    if queue is None:
        return str(addr)
    return f"{queue.broker_name} {addr} queue {queue.queue_id}"


def _client_error(exc: BaseException, target: str, elapsed: float) -> ClientError:
    """The client error for how a call ended, when not with a response."""
    if isinstance(exc, Exception):
        return remoting_error(exc, target, elapsed)
    return ClientError(str(exc))


def remoting_error(exc: Exception, target: str, elapsed: float) -> ClientError:
    """The client error for a remoting failure of a call to ``target``."""
    attempt = (Attempt(target, f"{type(exc).__name__}: {exc}", elapsed),)
    if isinstance(exc, RemotingConnectError):
        return ClientConnectError(f"cannot connect to {target}", attempts=attempt, elapsed=elapsed)
    if isinstance(exc, RemotingSendRequestError):
        return ConnectionLostError(f"connection to {target} lost", attempts=attempt, elapsed=elapsed)
    if isinstance(exc, (RemotingTimeoutError, RemotingTooManyRequestsError)):
        return ClientTimeoutError(f"call to {target} timed out", attempts=attempt, elapsed=elapsed)
    return ClientError(f"call to {target} failed", attempts=attempt, elapsed=elapsed)


class ClientAPI:
    """The remote calls of one client instance over its remoting client."""

    def __init__(self, remoting: RemotingClient, config: ClientConfig) -> None:
        self.remoting = remoting
        self.config = config
        self.namesrv: tuple[str, ...] = config.namesrv
        self._ns_index = 0

    # -- plumbing -----------------------------------------------------------------------

    def request(self, code: int, header=None, body: bytes = b"", ext_fields: dict[str, str] | None = None) -> RemotingCommand:
        """A request as this client sends them: its language and header serialization,
        MQ_VERSION."""
        config = self.config  # (build_command straight: RemotingCommand.request's keywords, a call more per send)
        return build_command(
            RemotingCommand, int(code), config.language, MQ_VERSION, 0, 0, None, ext_fields, body, header,
            config.serialize_type,
        )

    def vip(self, addr: str) -> str:
        """``MixAll.brokerVIPChannel``: the broker's VIP channel address (port - 2) when
        ``vip_channel_enabled``, else ``addr``; the calls Java sends there use it."""
        return vip_channel_addr(addr) if self.config.vip_channel_enabled else addr

    def _timeout(self, timeout: float | None) -> float:
        return self.config.call_timeout if timeout is None else timeout

    def is_connected(self, addr: str) -> bool:
        """A live connection to ``addr`` is there: a call to it will not wait to connect."""
        conn = self.remoting.connection_for(addr)
        return conn is not None and conn.is_active

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = None, *,
        queue: MessageQueue | None = None, begin: float | None = None,
    ) -> RemotingCommand:
        """``invoke_sync`` with remoting errors turned into client errors: named after
        ``addr`` and the ``queue`` the call is about (:func:`target_name`); the call's
        ``timeout`` and the errors' elapsed time run from ``begin`` (trio time; default
        now: a caller that has just read the clock passes what it read)."""
        if timeout is None:
            timeout = self.config.call_timeout
        if begin is None:
            begin = trio.current_time()
        try:
            return await self.remoting.invoke_sync(addr, request, timeout, begin=begin)
        except _REMOTING_FAILURES as exc:
            raise remoting_error(exc, target_name(addr, queue), trio.current_time() - begin) from exc

    async def invoke_async(
        self, addr: str, request: RemotingCommand, timeout: float, on_answer: AnswerCallback, *,
        queue: MessageQueue | None = None, begin: float | None = None,
    ) -> None:
        """``invoke_async``: returns once the request is sent; its outcome goes to
        ``on_answer(response, error)`` once (on the connection's reader, or where the
        call timed out: keep it short), the error a client error as :meth:`invoke`'s.
        Its deadline is kept though nobody awaits the call
        (:meth:`~trocket.remoting.ResponseFuture.enforce_deadline`). A request that
        cannot be sent raises its client error here instead (``on_answer`` not called)."""
        if begin is None:
            begin = trio.current_time()

        def answered(rf: ResponseFuture) -> None:
            exc = rf.exception
            if exc is None:
                on_answer(rf.response, None)
            else:
                on_answer(None, _client_error(exc, target_name(addr, queue), trio.current_time() - begin))

        try:
            rf = await self.remoting.invoke_async(addr, request, timeout, callback=answered)
        except _REMOTING_FAILURES as exc:
            raise remoting_error(exc, target_name(addr, queue), trio.current_time() - begin) from exc
        rf.enforce_deadline()

    async def invoke_oneway(
        self, addr: str, request: RemotingCommand, timeout: float | None = None, *,
        queue: MessageQueue | None = None, begin: float | None = None,
    ) -> None:
        """``invoke_oneway`` with remoting errors turned into client errors (``queue``
        and ``begin`` as :meth:`invoke`'s)."""
        if timeout is None:
            timeout = self.config.call_timeout
        if begin is None:
            begin = trio.current_time()
        try:
            await self.remoting.invoke_oneway(addr, request, timeout)
        except _REMOTING_FAILURES as exc:
            raise remoting_error(exc, target_name(addr, queue), trio.current_time() - begin) from exc

    async def invoke_namesrv(self, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Invoke on the current name server; on a connection failure or timeout, the next
        ones in turn, while the budget lasts. Raises the last error with every attempt."""
        timeout = self._timeout(timeout)
        begin = trio.current_time()
        deadline = begin + timeout
        attempts: list[Attempt] = []
        last: ClientError | None = None
        n = len(self.namesrv)
        for k in range(n):
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                break
            i = (self._ns_index + k) % n
            addr = self.namesrv[i]
            # leave the other name servers a share of the budget when this one hangs
            share = remaining if k == n - 1 else max(remaining / (n - k), min(remaining, 1.0))
            t0 = trio.current_time()
            try:
                response = await self.invoke(addr, _copy(request), share)
            except ClientError as exc:
                last = exc
                outcome = exc.attempts[0].outcome if exc.attempts else exc.summary
                attempts.append(Attempt(f"namesrv {addr}", outcome, trio.current_time() - t0))
                continue
            self._ns_index = i
            return response
        elapsed = trio.current_time() - begin
        if isinstance(last, ClientConnectError):
            raise ClientConnectError("no name server reachable", attempts=attempts, elapsed=elapsed) from last
        raise ClientTimeoutError("no name server answered", attempts=attempts, elapsed=elapsed) from last

    # -- name server --------------------------------------------------------------------

    async def get_route(self, topic: str, timeout: float | None = None) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC: the route, or ``None`` when the topic does not exist."""
        req = self.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))
        resp = await self.invoke_namesrv(req, timeout)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"route of {topic}", resp)
        return decoded(f"route of {topic}", resp, lambda: TopicRouteData.from_body(resp.body))

    async def get_cluster_info(self, timeout: float | None = None) -> ClusterInfo:
        resp = await self.invoke_namesrv(self.request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error("cluster info", resp)
        return decoded("cluster info", resp, lambda: ClusterInfo.from_body(resp.body))

    async def get_topic_list(self, timeout: float | None = None) -> list[str]:
        resp = await self.invoke_namesrv(self.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error("topic list", resp)
        return decoded("topic list", resp, lambda: TopicList.from_body(resp.body).topic_list)

    async def delete_topic_in_namesrv(self, addr: str, topic: str, timeout: float | None = None) -> None:
        # DeleteTopicFromNamesrvRequestHeader has the one field ``topic``
        resp = await self.invoke(addr, self.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": topic}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"delete topic {topic} in name server {addr}", resp)

    # -- broker: client management ------------------------------------------------------

    async def heartbeat(self, addr: str, data: HeartbeatData, timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's version (Java keeps it per broker)."""
        resp = await self.invoke(addr, self.request(RequestCode.HEART_BEAT, body=data.encode()), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"heartbeat to {addr}", resp)
        return resp.version

    async def unregister_client(
        self, addr: str, client_id: str, *, producer_group: str | None = None, consumer_group: str | None = None,
        timeout: float | None = None,
    ) -> None:
        header = UnregisterClientRequestHeader(
            clientID=client_id, producerGroup=producer_group, consumerGroup=consumer_group
        )
        resp = await self.invoke(addr, self.request(RequestCode.UNREGISTER_CLIENT, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"unregister {client_id} at {addr}", resp)

    async def check_client_config(
        self, addr: str, group: str, client_id: str, subscription: SubscriptionData, timeout: float | None = None
    ) -> None:
        """CHECK_CLIENT_CONFIG: whether the broker serves ``subscription`` (a SQL92
        expression: the broker compiles it); its refusal is raised with the broker's code
        and remark (SUBSCRIPTION_PARSE_FAILED and Java's parser message for a bad
        expression, SYSTEM_ERROR without ``enablePropertyFilter``)."""
        body = CheckClientRequestBody(client_id, group, subscription).encode()
        resp = await self.invoke(addr, self.request(RequestCode.CHECK_CLIENT_CONFIG, body=body), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"{subscription.expression_type} subscription of {group} to {subscription.topic} "
                                 f"refused by {addr}", resp)

    async def get_consumer_list(self, addr: str, group: str, timeout: float | None = None) -> list[str]:
        addr = self.vip(addr)
        req = self.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(consumerGroup=group))
        resp = await self.invoke(addr, req, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"consumer list of {group} at {addr}", resp)
        return decoded(f"consumer list of {group}", resp, lambda: ConsumerListByGroupResponseBody.decode(resp.body).consumer_id_list)

    # -- broker: consumers --------------------------------------------------------------

    async def pull_message(self, addr: str, header: PullMessageRequestHeader, timeout: float | None = None) -> PullResult:
        """PULL_MESSAGE (the timeout must exceed the header's ``suspendTimeoutMillis``)."""
        resp = await self.invoke(addr, self.request(RequestCode.PULL_MESSAGE, header), timeout)
        status = _PULL_STATUS.get(resp.code)
        if status is None:
            raise response_error(f"pull {header.topic}:{header.queueId} at {addr}", resp)
        what = f"pull {header.topic}:{header.queueId} at {addr}"
        h = decoded(what, resp, lambda: decode_header(PullMessageResponseHeader, resp.ext_fields))
        messages: list[MessageExt] = (
            decoded(what, resp, lambda: list(iter_records(resp.body))) if status is PullStatus.FOUND and resp.body else []
        )
        return PullResult(status, h.nextBeginOffset, h.minOffset, h.maxOffset, messages, h.suggestWhichBrokerId)

    async def query_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, timeout: float | None = None
    ) -> int | None:
        """QUERY_CONSUMER_OFFSET; ``None`` when the broker has none (QUERY_NOT_FOUND)."""
        addr = self.vip(addr)
        req = self.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name),
        )
        resp = await self.invoke(addr, req, timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"consumer offset of {group} on {mq}", resp)
        return decoded(f"consumer offset of {group} on {mq}", resp, lambda: decode_header(QueryConsumerOffsetResponseHeader, resp.ext_fields).offset)

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False, timeout: float | None = None
    ) -> None:
        addr = self.vip(addr)
        req = self.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(
                consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, commitOffset=offset, bname=mq.broker_name
            ),
        )
        if oneway:
            await self.invoke_oneway(addr, req, timeout)
            return
        resp = await self.invoke(addr, req, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"update offset of {group} on {mq}", resp)

    async def lock_batch(self, addr: str, body: LockBatchRequestBody, timeout: float | None = None) -> list[MessageQueue]:
        addr = self.vip(addr)
        resp = await self.invoke(addr, self.request(RequestCode.LOCK_BATCH_MQ, body=body.encode()), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"lock queues at {addr}", resp)
        return decoded(f"lock queues at {addr}", resp, lambda: LockBatchResponseBody.decode(resp.body).lock_ok_mq_set)

    async def unlock_batch(
        self, addr: str, body: UnlockBatchRequestBody, *, oneway: bool = False, timeout: float | None = None
    ) -> None:
        addr = self.vip(addr)
        req = self.request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode())
        if oneway:
            await self.invoke_oneway(addr, req, timeout)
            return
        resp = await self.invoke(addr, req, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"unlock queues at {addr}", resp)

    async def send_back(self, addr: str, header: ConsumerSendMsgBackRequestHeader, timeout: float | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK (RECONSUME_LATER)."""
        addr = self.vip(addr)
        resp = await self.invoke(addr, self.request(RequestCode.CONSUMER_SEND_MSG_BACK, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"send back {header.originMsgId} at {addr}", resp)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float | None = None) -> int:
        addr = self.vip(addr)
        req = self.request(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(topic=mq.topic, queueId=mq.queue_id, timestamp=timestamp_ms, bname=mq.broker_name),
        )
        return await self._offset_query(addr, req, SearchOffsetResponseHeader, f"search offset of {mq}", timeout,
                                        refused=f"search offset of {mq} at {timestamp_ms}")

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        addr = self.vip(addr)
        req = self.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name)
        )
        return await self._offset_query(addr, req, GetMaxOffsetResponseHeader, f"max offset of {mq}", timeout)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        addr = self.vip(addr)
        req = self.request(
            RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name)
        )
        return await self._offset_query(addr, req, GetMinOffsetResponseHeader, f"min offset of {mq}", timeout)

    async def _offset_query(self, addr: str, req: RemotingCommand, header_cls: type, what: str,
                            timeout: float | None, *, refused: str | None = None) -> int:
        """Codes 29/30/31: the ``offset`` of the answer's header, or the typed error of a
        refusal (named ``refused``, else ``what``) or of an answer that does not decode."""
        resp = await self.invoke(addr, req, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(refused or what, resp)
        return decoded(what, resp, lambda: decode_header(header_cls, resp.ext_fields).offset)

    # -- broker: transactions -----------------------------------------------------------

    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None, timeout: float | None = None
    ) -> None:
        """END_TRANSACTION (37), oneway as Java's ``endTransactionOneway``; ``remark``
        says why a local transaction is unknown (its exception)."""
        request = self.request(RequestCode.END_TRANSACTION, header)
        request.remark = remark
        await self.invoke_oneway(addr, request, timeout)

    # -- broker: admin ------------------------------------------------------------------

    async def create_topic(self, addr: str, header: CreateTopicRequestHeader, timeout: float | None = None) -> None:
        addr = self.vip(addr)
        resp = await self.invoke(addr, self.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"create topic {header.topic} at {addr}", resp)

    async def delete_topic_in_broker(self, addr: str, topic: str, timeout: float | None = None) -> None:
        # DeleteTopicRequestHeader has the one field ``topic``
        resp = await self.invoke(addr, self.request(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": topic}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"delete topic {topic} at {addr}", resp)

    async def get_broker_runtime_info(self, addr: str, timeout: float | None = None) -> dict[str, str]:
        resp = await self.invoke(addr, self.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"runtime info of {addr}", resp)
        return decoded(f"runtime info of {addr}", resp, lambda: KVTable.from_body(resp.body).table)

    # -- ACL administration (50-53; issue 24) ------------------------------------------

    async def update_acl_config(self, addr: str, header: CreateAccessConfigRequestHeader,
                                timeout: float | None = None) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create or update an account."""
        addr = self.vip(addr)
        resp = await self.invoke(addr, self.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"update ACL account {header.accessKey} at {addr}", resp)

    async def delete_acl_config(self, addr: str, access_key: str, timeout: float | None = None) -> None:
        """DELETE_ACL_CONFIG: remove an account."""
        addr = self.vip(addr)
        header = DeleteAccessConfigRequestHeader(accessKey=access_key)
        resp = await self.invoke(addr, self.request(RequestCode.DELETE_ACL_CONFIG, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"delete ACL account {access_key} at {addr}", resp)

    async def update_global_white_addrs(self, addr: str, addresses: list[str], acl_file: str = "",
                                        timeout: float | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace ``globalWhiteRemoteAddresses``."""
        addr = self.vip(addr)
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(globalWhiteAddrs=",".join(addresses), aclFileFullPath=acl_file)
        resp = await self.invoke(addr, self.request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"update the global white list at {addr}", resp)

    async def get_broker_acl_info(self, addr: str, timeout: float | None = None) -> GetBrokerAclConfigResponseHeader:
        """GET_BROKER_CLUSTER_ACL_INFO: the ACL file's version, the broker's names."""
        addr = self.vip(addr)
        resp = await self.invoke(addr, self.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(f"ACL info of {addr}", resp)
        return decoded(f"ACL info of {addr}", resp,
                       lambda: decode_header(GetBrokerAclConfigResponseHeader, resp.ext_fields or {}))


    # -- broker: operations (statistics, groups, config, queries) --------------------------

    async def call(
        self, addr: str, code: int, header=None, what: str = "", decode: Callable[[RemotingCommand], T] | None = None,
        *, body: bytes = b"", timeout: float | None = None,
    ) -> T | None:
        """One admin call: ``code`` with ``header`` and ``body`` to ``addr``; a non-success
        answer raises :func:`response_error` (naming ``what``), a success answer is
        ``decode(response)`` (its codec errors turned into :class:`BrokerResponseError`)
        or ``None`` without ``decode``."""
        resp = await self.invoke(addr, self.request(code, header, body), timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise response_error(what or f"request {code} to {addr}", resp)
        return decoded(what, resp, lambda: decode(resp)) if decode is not None else None

    async def view_broker_stats_data(
        self, addr: str, stats_name: str, stats_key: str, timeout: float | None = None
    ) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA: a stats item's last minute, hour and day."""
        header = ViewBrokerStatsDataRequestHeader(statsName=stats_name, statsKey=stats_key)
        return await self.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header, f"stats {stats_name} {stats_key} at {addr}",
                               lambda r: BrokerStatsData.from_body(r.body), timeout=timeout)

    async def get_broker_consume_stats(self, addr: str, *, order: bool = False, timeout: float | None = None) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS: every group's consume stats on the broker."""
        return await self.call(addr, RequestCode.GET_BROKER_CONSUME_STATS, GetConsumeStatsInBrokerHeader(isOrder=order),
                               f"consume stats of {addr}", lambda r: ConsumeStatsList.from_body(r.body), timeout=timeout)

    async def get_consume_stats(
        self, addr: str, group: str, topic: str | None = None, timeout: float | None = None
    ) -> ConsumeStats:
        """GET_CONSUME_STATS: ``group``'s offsets per queue (on ``topic``, or every topic it consumed)."""
        return await self.call(addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(consumerGroup=group, topic=topic),
                               f"consume stats of {group} at {addr}", lambda r: ConsumeStats.from_body(r.body), timeout=timeout)

    async def get_topic_stats(self, addr: str, topic: str, timeout: float | None = None) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO: ``topic``'s min and max offsets per queue on the broker."""
        return await self.call(addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=topic),
                               f"topic stats of {topic} at {addr}", lambda r: TopicStatsTable.from_body(r.body), timeout=timeout)

    async def query_consume_time_span(
        self, addr: str, topic: str, group: str, timeout: float | None = None
    ) -> list[QueueTimeSpan]:
        """QUERY_CONSUME_TIME_SPAN: per queue, first/last store times and the group's consume time."""
        return await self.call(
            addr, RequestCode.QUERY_CONSUME_TIME_SPAN, QueryConsumeTimeSpanRequestHeader(topic=topic, group=group),
            f"consume time span of {group} on {topic} at {addr}",
            lambda r: QueryConsumeTimeSpanBody.from_body(r.body).consume_time_span_set, timeout=timeout,
        )


    # -- broker: consumer groups ----------------------------------------------------------

    async def update_subscription_group(self, addr: str, config: SubscriptionGroupConfig, timeout: float | None = None) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or replace a group's config."""
        addr = self.vip(addr)
        await self.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                        f"update subscription group {config.group_name} at {addr}", body=config.to_body(), timeout=timeout)

    async def get_subscription_groups(self, addr: str, timeout: float | None = None) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every group's config and the table's data version."""
        return await self.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None, f"subscription groups of {addr}",
                               lambda r: SubscriptionGroupWrapper.from_body(r.body), timeout=timeout)

    async def delete_subscription_group(
        self, addr: str, group: str, *, remove_offset: bool = False, timeout: float | None = None
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP (with its offsets when ``remove_offset``)."""
        await self.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                        DeleteSubscriptionGroupRequestHeader(groupName=group, removeOffset=remove_offset),
                        f"delete subscription group {group} at {addr}", timeout=timeout)

    async def get_consumer_connections(self, addr: str, group: str, timeout: float | None = None) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (CONSUMER_NOT_ONLINE raises its BrokerResponseError)."""
        return await self.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                               GetConsumerConnectionListRequestHeader(consumerGroup=group),
                               f"connections of consumer group {group} at {addr}",
                               lambda r: ConsumerConnection.from_body(r.body), timeout=timeout)

    async def get_producer_connections(self, addr: str, group: str, timeout: float | None = None) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST."""
        return await self.call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                               GetProducerConnectionListRequestHeader(producerGroup=group),
                               f"connections of producer group {group} at {addr}",
                               lambda r: ProducerConnection.from_body(r.body), timeout=timeout)

    async def query_topic_consume_by_who(self, addr: str, topic: str, timeout: float | None = None) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups consuming ``topic`` on the broker."""
        return await self.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, QueryTopicConsumeByWhoRequestHeader(topic=topic),
                               f"groups consuming {topic} at {addr}", lambda r: GroupList.from_body(r.body).groups,
                               timeout=timeout)

    async def clone_group_offset(
        self, addr: str, src_group: str, dest_group: str, topic: str | None = None, *, offline: bool = False,
        timeout: float | None = None,
    ) -> None:
        """CLONE_GROUP_OFFSET: ``dest_group`` gets ``src_group``'s offsets (on ``topic``, or every topic)."""
        header = CloneGroupOffsetRequestHeader(srcGroup=src_group, destGroup=dest_group, topic=topic, offline=offline)
        await self.call(addr, RequestCode.CLONE_GROUP_OFFSET, header, f"clone offsets {src_group} -> {dest_group} at {addr}",
                        timeout=timeout)

    async def get_all_consumer_offsets(self, addr: str, timeout: float | None = None) -> dict[str, dict[int, int]]:
        """GET_ALL_CONSUMER_OFFSET: the broker's whole committed-offset table,
        ``"<topic>@<group>" -> {queue id: offset}`` (exact: no offset is no entry, where
        QUERY_CONSUMER_OFFSET answers 0)."""

        def table(resp: RemotingCommand) -> dict[str, dict[int, int]]:
            try:
                raw = fastjson_loads(resp.body or b"{}").get("offsetTable") or {}
                return {str(key): {int(q): int(o) for q, o in queues.items()} for key, queues in raw.items()}
            except (AttributeError, TypeError, ValueError) as exc:
                raise BodyDecodeError(f"offsetTable is not a table of offsets: {exc}") from None

        return await self.call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, None, f"consumer offsets of {addr}", table,
                               timeout=timeout)

    async def reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, *, force: bool = True, timeout: float | None = None
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: ``group``'s offsets on ``topic`` set to where
        ``timestamp`` (ms; -1: the end) falls; the new offset per queue."""
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, isForce=force)
        return await self.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header,
                               f"reset offsets of {group} on {topic} at {addr}",
                               lambda r: ResetOffsetBody.from_body(r.body).offset_table, timeout=timeout)

    async def get_all_producer_info(self, addr: str, timeout: float | None = None) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO: every producer connection of the broker, by group."""
        return await self.call(addr, RequestCode.GET_ALL_PRODUCER_INFO, GetAllProducerInfoRequestHeader(),
                               f"producers of {addr}", lambda r: ProducerTableInfo.from_body(r.body), timeout=timeout)

    async def get_consumer_status(
        self, addr: str, topic: str, group: str, client_id: str | None = None, timeout: float | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: the offsets ``group``'s online clients
        (only ``client_id`` when given) hold for ``topic``, by client id."""
        header = GetConsumerStatusRequestHeader(topic=topic, group=group, clientAddr=client_id)
        return await self.call(addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header,
                               f"consumer status of {group} on {topic} at {addr}",
                               lambda r: GetConsumerStatusBody.from_body(r.body).consumer_table, timeout=timeout)

    async def query_correction_offset(
        self, addr: str, topic: str, compare_group: str, filter_groups: Iterable[str] = (), timeout: float | None = None
    ) -> dict[int, int]:
        """QUERY_CORRECTION_OFFSET: per queue of ``topic``, the least offset of the groups
        (``filter_groups`` left out), or ``Long.MAX_VALUE`` where it is above
        ``compare_group``'s."""
        header = QueryCorrectionOffsetHeader(filterGroups=",".join(filter_groups) or None, compareGroup=compare_group,
                                             topic=topic)
        return await self.call(addr, RequestCode.QUERY_CORRECTION_OFFSET, header,
                               f"correction offsets of {topic} at {addr}",
                               lambda r: QueryCorrectionOffsetBody.from_body(r.body).correction_offsets, timeout=timeout)


    # -- broker: maintenance (305, 306, 316, 329, 323) ------------------------------------

    async def get_system_topics_from_broker(self, addr: str, timeout: float | None = None) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's system topics."""
        return await self.call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, None, f"system topics of {addr}",
                               lambda r: TopicList.from_body(r.body).topic_list, timeout=timeout)

    async def clean_expired_consume_queue(self, addr: str, timeout: float | None = None) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE: the broker drops queues whose messages are all gone."""
        await self.call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, None, f"clean expired consume queues at {addr}",
                        timeout=timeout)

    async def clean_unused_topic(self, addr: str, timeout: float | None = None) -> None:
        """CLEAN_UNUSED_TOPIC: the broker drops the queues of topics it has no config for."""
        await self.call(addr, RequestCode.CLEAN_UNUSED_TOPIC, None, f"clean unused topics at {addr}", timeout=timeout)

    async def delete_expired_commit_log(self, addr: str, timeout: float | None = None) -> None:
        """DELETE_EXPIRED_COMMITLOG: the broker's next retention passes delete expired
        commit-log segments whatever the hour (the answer comes before they run)."""
        await self.call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG, None, f"delete expired commit log at {addr}",
                        timeout=timeout)

    async def resume_check_half_message(self, addr: str, offset_msg_id: str, timeout: float | None = None) -> None:
        """RESUME_CHECK_HALF_MESSAGE: the half message (offset message id) is checked again."""
        await self.call(addr, RequestCode.RESUME_CHECK_HALF_MESSAGE, ResumeCheckHalfMessageRequestHeader(msgId=offset_msg_id),
                        f"resume check of half message {offset_msg_id} at {addr}", timeout=timeout)


    # -- broker: queries (12, 33, 321, 32) ------------------------------------------------

    async def query_message(
        self, addr: str, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *,
        unique: bool = False, timeout: float | None = None,
    ) -> tuple[list[MessageExt], int, int]:
        """QUERY_MESSAGE: the messages the broker's index names for ``key`` (a KEYS entry,
        or with ``unique`` a unique key) on ``topic`` stored within ``[begin_ms, end_ms]``;
        hash collisions included (the caller filters), none found is an empty list. Also
        the index's last update time and commit-log offset."""
        addr = self.vip(addr)
        header = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num, beginTimestamp=begin_ms,
                                           endTimestamp=end_ms)
        req = self.request(RequestCode.QUERY_MESSAGE, header,
                           ext_fields={UNIQUE_MSG_QUERY_FLAG: "true"} if unique else None)
        resp = await self.invoke(addr, req, timeout)
        what = f"query {key!r} on {topic} at {addr}"
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
            raise response_error(what, resp)
        h = decoded(what, resp, lambda: decode_header(QueryMessageResponseHeader, resp.ext_fields))
        found = decoded(what, resp, lambda: list(iter_records(resp.body))) if resp.code == ResponseCode.SUCCESS else []
        return found, h.indexLastUpdateTimestamp, h.indexLastUpdatePhyoffset

    async def view_message(self, addr: str, commit_log_offset: int, timeout: float | None = None) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the message stored at ``commit_log_offset`` (the offset an
        offset message id names)."""
        addr = self.vip(addr)

        def decode(resp: RemotingCommand) -> MessageExt:
            found = list(iter_records(resp.body))
            if len(found) != 1:
                raise BodyDecodeError(f"{len(found)} records in the answer, not 1")
            return found[0]

        return await self.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=commit_log_offset),
                               f"message at offset {commit_log_offset} of {addr}", decode, timeout=timeout)

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int = 1, group: str | None = None,
        timeout: float | None = None,
    ) -> QueryConsumeQueueResponseBody:
        """QUERY_CONSUME_QUEUE: ``count`` consume-queue entries from ``index`` (commit-log
        offset, size, tags code each) and the queue's min/max offsets; ``queue_data`` is
        None when ``index`` is not in the queue."""
        header = QueryConsumeQueueRequestHeader(topic=topic, queueId=queue_id, index=index, count=count,
                                                consumerGroup=group)

        def decode(resp: RemotingCommand) -> QueryConsumeQueueResponseBody:
            return QueryConsumeQueueResponseBody.from_body(resp.body) if resp.body else QueryConsumeQueueResponseBody()

        return await self.call(addr, RequestCode.QUERY_CONSUME_QUEUE, header,
                               f"consume queue {topic}:{queue_id} at {addr}", decode, timeout=timeout)

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """GET_EARLIEST_MSG_STORETIME: the store time of the oldest message in the queue (-1: none)."""
        addr = self.vip(addr)
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queueId=mq.queue_id)
        return await self.call(
            addr, RequestCode.GET_EARLIEST_MSG_STORETIME, header, f"earliest store time of {mq}",
            lambda r: decode_header(GetEarliestMsgStoretimeResponseHeader, r.ext_fields).timestamp, timeout=timeout)

    # -- broker and name server: configuration ---------------------------------------------

    async def get_broker_config(self, addr: str, timeout: float | None = None) -> tuple[dict[str, str], str]:
        """GET_BROKER_CONFIG: every key with its value, and the data version (JSON)."""

        def decode(resp: RemotingCommand) -> tuple[dict[str, str], str]:
            props = {k: v for _, k, v in parse_properties((resp.body or b"").decode("utf-8", "replace"))}
            return props, (resp.ext_fields or {}).get("version", "")

        return await self.call(addr, RequestCode.GET_BROKER_CONFIG, None, f"config of {addr}", decode, timeout=timeout)

    async def update_broker_config(self, addr: str, changes: dict[str, str], timeout: float | None = None) -> None:
        """UPDATE_BROKER_CONFIG with ``key=value`` lines (the broker refuses keys that
        cannot change while it runs)."""
        await self.call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, f"update config of {addr}",
                        body=_properties_body(changes), timeout=timeout)

    async def _namesrv_call(self, addr: str | None, code: int, header, what: str, decode=None, *, body: bytes = b"",
                            ok: tuple[int, ...] = (0,), timeout: float | None = None):
        req = self.request(code, header, body)
        resp = await (self.invoke(addr, req, timeout) if addr else self.invoke_namesrv(req, timeout))
        if resp.code not in ok:
            raise response_error(what, resp)
        if resp.code != ResponseCode.SUCCESS or decode is None:
            return None
        return decoded(what, resp, lambda: decode(resp))

    async def put_kv_config(self, namespace: str, key: str, value: str, *, addr: str | None = None,
                            timeout: float | None = None) -> None:
        """PUT_KV_CONFIG on a name server (``addr``, else the current one)."""
        await self._namesrv_call(addr, RequestCode.PUT_KV_CONFIG,
                                 PutKVConfigRequestHeader(namespace=namespace, key=key, value=value),
                                 f"put KV {namespace}/{key}", timeout=timeout)

    async def get_kv_config(self, namespace: str, key: str, *, addr: str | None = None,
                            timeout: float | None = None) -> str | None:
        """GET_KV_CONFIG: the value, None when there is none (QUERY_NOT_FOUND)."""
        return await self._namesrv_call(
            addr, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace=namespace, key=key),
            f"KV {namespace}/{key}", lambda r: decode_header(GetKVConfigResponseHeader, r.ext_fields).value,
            ok=(0, int(ResponseCode.QUERY_NOT_FOUND)), timeout=timeout)

    async def delete_kv_config(self, namespace: str, key: str, *, addr: str | None = None,
                               timeout: float | None = None) -> None:
        await self._namesrv_call(addr, RequestCode.DELETE_KV_CONFIG,
                                 DeleteKVConfigRequestHeader(namespace=namespace, key=key),
                                 f"delete KV {namespace}/{key}", timeout=timeout)

    async def get_kv_list(self, namespace: str, *, addr: str | None = None,
                          timeout: float | None = None) -> dict[str, str] | None:
        """GET_KVLIST_BY_NAMESPACE: the namespace's table, None when it does not exist."""
        return await self._namesrv_call(
            addr, RequestCode.GET_KVLIST_BY_NAMESPACE, GetKVListByNamespaceRequestHeader(namespace=namespace),
            f"KV namespace {namespace}", lambda r: KVTable.from_body(r.body).table,
            ok=(0, int(ResponseCode.QUERY_NOT_FOUND)), timeout=timeout)

    async def get_topics_by_cluster(self, cluster: str, timeout: float | None = None) -> list[str]:
        return await self._namesrv_call(None, RequestCode.GET_TOPICS_BY_CLUSTER,
                                        GetTopicsByClusterRequestHeader(cluster=cluster), f"topics of {cluster}",
                                        lambda r: TopicList.from_body(r.body).topic_list, timeout=timeout)

    async def get_system_topic_list(self, timeout: float | None = None) -> TopicList:
        return await self._namesrv_call(None, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, None, "system topics",
                                        lambda r: TopicList.from_body(r.body), timeout=timeout)

    async def set_write_perm_of_broker(self, addr: str, broker_name: str, writable: bool,
                                       timeout: float | None = None) -> int:
        """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER on the name server at
        ``addr``: the broker's topics made read-only / read-write; how many."""
        if writable:
            return await self._namesrv_call(
                addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, AddWritePermOfBrokerRequestHeader(brokerName=broker_name),
                f"add write perm of {broker_name}",
                lambda r: decode_header(AddWritePermOfBrokerResponseHeader, r.ext_fields).addTopicCount, timeout=timeout)
        return await self._namesrv_call(
            addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, WipeWritePermOfBrokerRequestHeader(brokerName=broker_name),
            f"wipe write perm of {broker_name}",
            lambda r: decode_header(WipeWritePermOfBrokerResponseHeader, r.ext_fields).wipeTopicCount, timeout=timeout)

    async def get_namesrv_config(self, addr: str, timeout: float | None = None) -> dict[str, str]:
        return await self._namesrv_call(
            addr, RequestCode.GET_NAMESRV_CONFIG, None, f"config of name server {addr}",
            lambda r: {k: v for _, k, v in parse_properties((r.body or b"").decode("utf-8", "replace"))},
            timeout=timeout)

    async def update_namesrv_config(self, addr: str, changes: dict[str, str], timeout: float | None = None) -> None:
        await self._namesrv_call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, f"update config of name server {addr}",
                                 body=_properties_body(changes), timeout=timeout)


def _properties_body(changes: dict[str, str]) -> bytes:
    """``key=value`` lines (``MixAll.properties2String``); a key or value with a line
    break or a separator cannot be one."""
    for key, value in changes.items():
        if not key or any(c in key for c in "=:\n\r \t") or any(c in value for c in "\n\r"):
            raise ValueError(f"{key!r}={value!r} cannot be sent as a property")
    return "".join(f"{k}={v}\n" for k, v in changes.items()).encode("utf-8")


def _copy(request: RemotingCommand) -> RemotingCommand:
    """A fresh command for another try (remoting stamps the opaque and flag on send)."""
    return RemotingCommand.request(
        request.code, request.custom_header, body=request.body,
        ext_fields=None if request.ext_fields is None else dict(request.ext_fields),
        version=request.version, language=request.language, serialize_type=request.serialize_type,
    )


