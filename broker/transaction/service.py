"""TransactionalMessageService: half messages, their end, and the check service.

RocketMQ 4.9.8's ``TransactionalMessageServiceImpl`` (the check algorithm),
``TransactionalMessageCheckService`` (its loop), ``AbstractTransactionalMessageCheckListener``
/ ``Broker2Client.checkProducerTransactionState`` (the check request) and the decisions of
``EndTransactionProcessor``, over one store:

* **prepare** -- the send path's pre-put step (:func:`~trocket.broker.pre_put.half_step`)
  stores a prepared send as a half message (:func:`.records.half_message`), invisible to
  consumers, and answers with the half record's msgId and queue offset (the
  ``tranStateTableOffset`` the producer ends it with) and the queue it addressed.
* **end** (:meth:`TransactionalMessageService.end`, END_TRANSACTION 37, from the
  producer or from its answer to a check): the half message at ``commitLogOffset`` is
  looked up and checked as Java checks it (producer group, queue offset, commit-log
  offset) -- kept since its prepared send stored it
  (:meth:`TransactionalMessageService.prepared`: a prompt END reads nothing back;
  bounded, the oldest dropped), else read back; a commit stores the real message
  (:func:`.records.committed_message`, delayed when it carries ``DELAY``, as Java's
  store delays it), then an op record; a rollback only the op record; "unknown" (0)
  leaves it to the checks.
* **check** (:meth:`TransactionalMessageService.run`): every ``transactionCheckInterval``
  (60 s) a pass over the half queue from the check offset: a half message with an op
  record is skipped; one younger than ``transactionTimeOut`` (6 s; or its own
  ``CHECK_IMMUNITY_TIME_IN_SECONDS``) ends the pass; one stored during the pass ends it
  (the pass's own copies); one checked ``transactionCheckMax`` (15) times, or older than
  the commit log's ``fileReservedTime``, is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC``;
  any other is stored again with its ``TRANSACTION_CHECK_TIMES`` counted up
  (:func:`.records.check_copy`) and a CHECK_TRANSACTION_STATE (39) goes, oneway, to one
  live connection of a producer of its group (``PGROUP``), round robin (Java's
  ``getAvailableChannel``). No producer connected: no check this time; the copy counts
  it all the same, as Java's.
* **restart** -- the half and op topics are ordinary consume queues of the commit log
  (replicated like any other); the check's progress is the consumer offsets of group
  ``CID_RMQ_SYS_TRANS`` on them (``consumerOffset.json``, persisted with every other
  group's, copied by a slave's sync), as Java's. :meth:`load` rebuilds the rest from
  the store: the op records from the op offset on, the check copies from the half
  offset on. A slave neither checks nor ends (SLAVE_NOT_AVAILABLE).

One transaction, once. Java's algorithm lets a transaction end twice: a commit naming
the first half message after a check copied it, and the answer to that check, both
commit (two deliveries); a second END_TRANSACTION for the same half message commits
again; an answer to a check arriving after the message was discarded commits it. Here a
check copy names the transaction's first half message (``TRAN_PREPARED_QUEUE_OFFSET``),
the service knows each transaction's live copy, and an END_TRANSACTION ends that copy
-- once: one for a half message already ended, or passed by the checks (ended,
discarded), is refused with SYSTEM_ERROR and nothing is stored.

State, all on the trio thread: ``half_offset`` (every half message before it is
resolved), ``op_offset`` (every op record before it ends a half message before
``half_offset``), ``ended`` (half queue offsets with an op record, from ``half_offset``
on), ``latest`` (a transaction's first half queue offset -> its live check copy).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, NoReturn

import attrs
import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from trocket.codecs.message.properties import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from trocket.codecs.message.record import encode_record
from trocket.codecs.message.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from trocket.remoting import Connection, RemotingError

from ..errors import BrokerError, HeaderError, SlaveNotAvailableError
from ..schedule import wall_clock_ms
from ..store import MessageInner, MessageStore, PutMessageError, PutResult, PutStatus, StoreClosedError
from ..store.topic_config import PERM_READ, PERM_WRITE
from .records import (
    CHECK_MAX_TIME_TOPIC,
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TOPIC,
    TRANS_GROUP,
    PreparedHalf,
    StoredMessage,
    check_copy,
    committed_fields,
    committed_message,
    discarded_message,
    op_fields,
    origin_offset,
    read_stored,
)

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["TransactionalMessageService"]

log = logging.getLogger(__name__)
_new = object.__new__

#: ``MAX_PROCESS_TIME_LIMIT``: one pass gives up after this long (ms)
MAX_PASS_MS = 60_000
#: half messages one pass step reads before it lets other tasks run
PASS_STEP = 256
#: Ended transactions held past the check offset before an END moves the offset over
#: those at its head itself, as the next pass would (without it, at 25k transactions a
#: second, the 60 s between passes held 1.5M entries in ``ended`` and ``ops``).
FOLD_AT = 10_000
#: half messages the runtime figures read at most to count the pending ones
PENDING_LIMIT = 10_000
#: half messages kept for their END (:meth:`TransactionalMessageService.prepared`), at
#: most this many and this many bytes of bodies and properties: a prompt END needs
#: only the few a producer has in flight; the oldest go first. One larger than
#: PREPARED_KEPT_MAX_SIZE is not kept (it would push out many others)
PREPARED_KEPT = 1024
PREPARED_KEPT_BYTES = 4 << 20
PREPARED_KEPT_MAX_SIZE = 256 << 10
#: ``Broker2Client.checkProducerTransactionState``'s oneway budget (10 ms)
CHECK_SEND_TIMEOUT = 0.01

_ENDS = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
_FIND_FAILED = "Find prepared transaction message failed"
#: what Java answers a commit whose real message the store refused (``sendFinalMessage``)
_PUT_REMARKS = {
    PutStatus.CREATE_MAPEDFILE_FAILED: (int(ResponseCode.SYSTEM_ERROR), "Create mapped file failed."),
    PutStatus.SERVICE_NOT_AVAILABLE: (int(ResponseCode.SERVICE_NOT_AVAILABLE), "Service not available now."),
}


@attrs.define(slots=True)
class _Check:
    """A check to send: the group's producer is asked about ``half``, as its check copy
    (``copy``, stored at ``where``) says it."""

    group: str | None
    half: StoredMessage
    copy: MessageInner
    where: PutResult


class TransactionalMessageService:
    """Half messages of one broker (see the module docstring). ``clock`` gives epoch
    ms (born and store times are epoch ms); the loop sleeps on trio's clock."""

    def __init__(self, ctx: BrokerContext, *, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.ctx = ctx
        self.store: MessageStore = ctx.store
        self.config = ctx.config
        self.clock = clock
        self.half_offset = 0
        self.op_offset = 0
        #: op queue offset -> the half queue offset it ends, for op records from op_offset on
        self.ops: dict[int, int] = {}
        #: half queue offsets (from half_offset on) with an op record
        self.ended: set[int] = set()
        #: a transaction's first half queue offset -> its live check copy's
        self.latest: dict[int, int] = {}
        #: commit-log offset -> a half message just prepared, in the order stored (its
        #: END reads it from here, not from the commit log; an END pops it)
        self.kept: dict[int, PreparedHalf] = {}
        self.kept_bytes = 0
        self._round_robin = 0
        # counters (runtime info)
        self.commits = 0
        self.rollbacks = 0
        self.unknowns = 0
        self.refused = 0
        self.checks_sent = 0
        self.checks_unrouted = 0
        self.discarded = 0
        self.passes = 0

    # -- state ----------------------------------------------------------------------------

    def load(self) -> None:
        """The check offsets from the consumer offsets (the queue's minimum when none),
        then the op records and check copies after them. Before the broker serves."""
        store = self.store
        offsets = self.ctx.offsets
        # fetchConsumeOffset: none committed (-1) -> the queue's minimum; never below it
        self.half_offset = max(
            offsets.query_offset(TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID), store.get_min_offset(HALF_TOPIC, HALF_QUEUE_ID)
        )
        self.op_offset = max(
            offsets.query_offset(TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID), store.get_min_offset(OP_TOPIC, HALF_QUEUE_ID)
        )
        self.ops.clear()
        self.ended.clear()
        self.latest.clear()
        self.forget_prepared()
        for j in range(self.op_offset, store.get_max_offset(OP_TOPIC, HALF_QUEUE_ID)):
            entry = store.get_queue_entry(OP_TOPIC, HALF_QUEUE_ID, j)
            record = read_stored(store, entry[0]) if entry is not None else None
            if record is None:
                continue
            try:
                ended = int(record.body.decode())
            except (UnicodeDecodeError, ValueError):
                log.error("op record %d of %s has a bad body %r: skipped", j, OP_TOPIC, record.body[:32])
                continue
            self.ops[j] = ended
            if ended >= self.half_offset:
                self.ended.add(ended)
        for i in range(self.half_offset, store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID)):
            half = self._half_at(i)  # (ended copies too: an end naming their first one is refused)
            if half is None:
                continue
            origin = origin_offset(half, i)
            if origin != i and self.latest.get(origin, -1) < i:
                self.latest[origin] = i
        log.info(
            "transactions: check offset %d, op offset %d, %d ended and %d checked transactions after it",
            self.half_offset, self.op_offset, len(self.ended), len(self.latest),
        )

    def half_queue_cleaned(self) -> None:
        """The half topic's queue was removed (``cleanUnusedTopic`` after a topic was
        deleted: until the first check pass makes its topic config, the half topic has
        none, as in Java): its offsets start again at 0. What was kept about the old ones
        goes -- the ended and checked transactions, and the op records written so far,
        which name old offsets -- so the new half messages are ended and checked as
        new (otherwise each END would be refused as "not pending any more" until the new
        queue passed the old check offset). Committed with the check's offsets."""
        self.half_offset = self.store.get_min_offset(HALF_TOPIC, HALF_QUEUE_ID)
        self.op_offset = self.store.get_max_offset(OP_TOPIC, HALF_QUEUE_ID)
        self.ended.clear()
        self.latest.clear()
        self.ops.clear()
        self.forget_prepared()
        self._commit_offsets()
        log.info("transactions: the half queue was removed; checks start again at offset %d", self.half_offset)

    def queues_removed(self, topics: Collection[str]) -> None:
        """Consume queues of ``topics`` were removed (``cleanUnusedTopic``,
        ``cleanExpiredConsumerQueue``): the half queue's, see :meth:`half_queue_cleaned`;
        the op queue's alone (every op record expired), its offsets start again at 0."""
        if HALF_TOPIC in topics:
            self.half_queue_cleaned()
        elif OP_TOPIC in topics:
            self.op_offset = self.store.get_max_offset(OP_TOPIC, HALF_QUEUE_ID)
            self.ops.clear()
            self._commit_offsets()

    def resume_check(self, commit_log_offset: int) -> PutResult:
        """RESUME_CHECK_HALF_MESSAGE (Java's ``resumeCheckHalfMessage``): the message
        stored at ``commit_log_offset`` (a half message, or one the checks discarded to
        ``TRANS_CHECK_MAX_TIME_TOPIC``) put on the half queue again with
        ``TRANSACTION_CHECK_TIMES`` 0, so the checks ask its producer again up to
        ``transactionCheckMax`` times. It becomes its transaction's live copy (it names
        the transaction's first half message), so an END_TRANSACTION ends it and the
        copy it replaces is not checked too. Raises ``LookupError`` when no message
        starts there, :class:`PutMessageError` when the store refuses the put (a
        slave's)."""
        stored = read_stored(self.store, commit_log_offset)
        if stored is None:
            raise LookupError(f"no message at commit-log offset {commit_log_offset}")
        origin: int | None = None
        if stored.topic == HALF_TOPIC or PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET in stored.properties:
            origin = origin_offset(stored, stored.queue_offset)
        result = self.store.put_message(check_copy(stored, origin, 0))
        if origin is not None:
            self.latest[origin] = result.queue_offset
        log.info("half message at %d resumed: checked again from half queue offset %d (real topic %s)",
                 commit_log_offset, result.queue_offset, stored.real_topic)
        return result

    def prepared(self, sent: MessageInner, half: MessageInner, result: PutResult) -> None:
        """The send path stored ``half`` (:func:`.records.half_message` of the prepared
        send ``sent``; the half step's ``after_put``, told of every pre-put step's
        records) where ``result`` says: kept for its END, which then reads nothing back
        (the same checks and records as when read: :class:`.records.PreparedHalf`). Not
        kept: a body that is not ``bytes`` (it could be a view of a buffer reused), a
        message of more than :data:`PREPARED_KEPT_MAX_SIZE` bytes."""
        body = half.body
        if half.topic != HALF_TOPIC or type(body) is not bytes:
            return
        size = len(body) + len(half.properties_bytes or b"")
        if size > PREPARED_KEPT_MAX_SIZE:
            return
        entry = _new(PreparedHalf)  # (slot stores: the prepared send's path)
        entry.half = half
        entry.properties = half.properties
        entry.real_topic = sent.topic
        entry.real_queue_id = sent.queue_id
        entry.queue_offset = result.queue_offset
        entry.size = size
        kept = self.kept
        kept[result.physical_offset] = entry
        self.kept_bytes += size
        while len(kept) > PREPARED_KEPT or self.kept_bytes > PREPARED_KEPT_BYTES:
            self.kept_bytes -= kept.pop(next(iter(kept))).size

    def forget_prepared(self) -> None:
        """Drop the kept half messages (their ENDs read them back)."""
        self.kept.clear()
        self.kept_bytes = 0

    def _half_at(self, queue_offset: int) -> StoredMessage | None:
        entry = self.store.get_queue_entry(HALF_TOPIC, HALF_QUEUE_ID, queue_offset)
        return read_stored(self.store, entry[0]) if entry is not None else None

    def _commit_offsets(self) -> None:
        """The check's progress into the consumer offsets (persisted with them)."""
        offsets = self.ctx.offsets
        if offsets.query_offset(TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID) != self.half_offset:
            offsets.commit_offset(TRANS_GROUP, HALF_TOPIC, HALF_QUEUE_ID, self.half_offset)
        if offsets.query_offset(TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID) != self.op_offset:
            offsets.commit_offset(TRANS_GROUP, OP_TOPIC, HALF_QUEUE_ID, self.op_offset)

    def _fold(self) -> None:
        """Forget what lies before the check offset: ended and live-copy entries, and the
        op records (a contiguous run from the op offset) that end half messages there."""
        half_offset = self.half_offset
        if self.ended:
            self.ended = {h for h in self.ended if h >= half_offset}
        if self.latest:
            self.latest = {o: k for o, k in self.latest.items() if k >= half_offset}
        ops = self.ops
        op_offset = self.op_offset
        end = self.store.get_max_offset(OP_TOPIC, HALF_QUEUE_ID)
        while op_offset < end and ops.get(op_offset, -1) < half_offset:
            ops.pop(op_offset, None)
            op_offset += 1
        self.op_offset = op_offset

    def _fold_head(self) -> None:
        """Move the check offset over the ended half messages at its head, forgetting
        them and their op records: what a pass does first, done by an END once
        :data:`FOLD_AT` are held (a check copy's origin, not ended itself, stops it)."""
        ended = self.ended
        i = self.half_offset
        while i in ended:
            ended.discard(i)
            i += 1
        self.half_offset = i
        ops = self.ops
        j = self.op_offset
        while ops.get(j, i) < i:  # the op records this END's process knows of
            del ops[j]
            j += 1
        self.op_offset = j

    # -- end (END_TRANSACTION) ------------------------------------------------------------

    def end(self, header: EndTransactionRequestHeader) -> None:
        """End the transaction ``header`` names (see the module docstring); returns when
        it is ended (or left to the checks: "unknown"), raises the typed refusal else."""
        try:
            self._end(header)
        finally:
            self.store.dispatch()

    def end_all(self, headers: list[EndTransactionRequestHeader]) -> None:
        """End each transaction, in order, as :meth:`end` but with one dispatch of
        their records for all (the oneway ENDs of one read: nobody to answer, so a
        refusal is counted and logged at debug, as Java logs it)."""
        try:
            for header in headers:
                try:
                    self._end(header)
                except BrokerError as exc:
                    log.debug("END_TRANSACTION of %s at %d refused: %s", header.msgId, header.commitLogOffset, exc)
        finally:
            self.store.dispatch()

    def _end(self, header: EndTransactionRequestHeader) -> None:
        """:meth:`end`, its records stored but not dispatched."""
        kind = header.commitOrRollback
        if kind not in _ENDS:  # EndTransactionRequestHeader.checkFields
            self.refused += 1
            raise HeaderError("RemotingCommandException: commitOrRollback field wrong")
        if self.config.is_slave:
            self.refused += 1
            raise SlaveNotAvailableError("Message store is slave mode, so end transaction is forbidden.")
        if kind == TRANSACTION_NOT_TYPE:
            self.unknowns += 1
            return
        commit_log_offset = header.commitLogOffset
        queue_offset = header.tranStateTableOffset
        # the half message kept when it was prepared (its record starts at the offset, on
        # the half topic), or else read back
        half: StoredMessage | PreparedHalf | None = None
        if self.kept:
            half = self.kept.pop(commit_log_offset, None)
            if half is not None:
                self.kept_bytes -= half.size
                if commit_log_offset < self.store.min_phy_offset:  # the retention took it since
                    half = None
        if half is None:
            half = read_stored(self.store, commit_log_offset)
            if half is None or half.topic != HALF_TOPIC:
                self._refuse(_FIND_FAILED)
        # checkPrepareMessage
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != header.producerGroup:
            self._refuse("The producer group wrong")
        if half.queue_offset != queue_offset:
            self._refuse("The transaction state table offset wrong")
        if type(half) is StoredMessage and half.commit_log_offset != commit_log_offset:
            self._refuse("The commit log offset wrong")
        latest = self.latest
        if latest:  # a check copied some transaction: the live copy of this one, if any
            target = latest.get(origin_offset(half, queue_offset), queue_offset)
        else:
            target = queue_offset
        if target in self.ended:
            self._refuse("The transaction of this prepared message has already been committed or rolled back")
        if target < self.half_offset:
            self._refuse(
                "The prepared message is not pending any more: it was committed or rolled back, or discarded "
                f"after {self.config.transaction_check_max} checks"
            )
        if kind == TRANSACTION_COMMIT_TYPE:
            self._put_committed(half, commit_log_offset)
            self.commits += 1
        else:
            self.rollbacks += 1
        self._put_op(target)

    def _refuse(self, remark: str) -> NoReturn:
        self.refused += 1
        raise BrokerError(remark)

    def _put_committed(self, half: StoredMessage | PreparedHalf, commit_log_offset: int) -> None:
        """``sendFinalMessage``: the real message, with Java's answers to a refused put."""
        schedule = self.ctx.schedule
        try:
            if schedule is not None and PROPERTY_DELAY_TIME_LEVEL in half.properties:
                self.store.append_message(schedule.rewrite(committed_message(half, commit_log_offset)))
            else:  # (no message object: stored from its fields)
                self.store.append_fields(*committed_fields(half, commit_log_offset))
        except PutMessageError as exc:
            status = exc.status
            if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
                raise BrokerError(
                    "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                    f"{self.config.max_message_size}B, msg properties length limit 32KB.",
                    code=int(ResponseCode.MESSAGE_ILLEGAL),
                ) from None
            code, remark = _PUT_REMARKS.get(status, (int(ResponseCode.SYSTEM_ERROR), "UNKNOWN_ERROR"))
            raise BrokerError(remark, code=code) from None

    def _put_op(self, half_queue_offset: int) -> None:
        """``deletePrepareMessage``: the op record; the half message counts as ended even
        when the store refuses it (logged), so it is not ended twice while running."""
        ended = self.ended
        ended.add(half_queue_offset)
        try:
            result = self.store.append_fields(*op_fields(half_queue_offset, self.store.config.store_host, self.clock()))
        except PutMessageError as exc:
            log.error("the op record of half message %d was not stored: %s", half_queue_offset, exc)
            return
        self.ops[result.queue_offset] = half_queue_offset
        if len(ended) > FOLD_AT and self.half_offset in ended:
            self._fold_head()

    # -- the check ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A check pass every ``transactionCheckInterval`` until cancelled (Java's
        ``waitForRunning(checkInterval)`` then ``onWaitEnd``)."""
        task_status.started()
        interval = self.config.transaction_check_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            try:
                await self.check()
            except StoreClosedError:
                return
            except Exception:
                log.exception("transaction check failed")

    async def check(self) -> int:
        """One pass (``TransactionalMessageServiceImpl.check``); returns the checks sent."""
        self.passes += 1
        store = self.store
        if store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID) > 0 and self.ctx.topics.select(HALF_TOPIC) is None:
            # fetchMessageQueues -> selectTopicConfig: made (1 queue, perm 6) on first use
            self.ctx.topics.create_in_send_back(HALF_TOPIC, 1, PERM_READ | PERM_WRITE, 0)
            self.ctx.topic_created(HALF_TOPIC)
        start = self.clock()
        # the pass ends where the half queue ended when it began: its own put-back copies,
        # and halves stored meanwhile, wait for the next pass (Java compares store times to
        # the pass's start, which in the same millisecond stops before halves stored earlier)
        end = store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID)
        sent = 0
        while True:
            checks, more = self._pass_step(start, end)
            for check in checks:
                sent += await self._send_check(check)
            if not more:
                break
            await trio.lowlevel.checkpoint()
        self._fold()
        self._commit_offsets()
        return sent

    def _pass_step(self, start: int, end: int) -> tuple[list[_Check], bool]:
        """Up to :data:`PASS_STEP` half messages from the check offset on, below ``end``:
        the checks to send, and whether the pass goes on."""
        store = self.store
        if store.closed:
            raise StoreClosedError("message store is shut down")
        cfg = self.config
        timeout = cfg.transaction_timeout_ms
        check_max = cfg.transaction_check_max
        reserved_ms = cfg.file_reserved_time_hours * 3600 * 1000
        hi = min(end, store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID))
        lo = store.get_min_offset(HALF_TOPIC, HALF_QUEUE_ID)
        if self.half_offset < lo:  # retention took the head of the queue
            self.half_offset = lo
        checks: list[_Check] = []
        for _ in range(PASS_STEP):
            i = self.half_offset
            if i >= hi:
                return checks, False
            now = self.clock()
            if now - start > MAX_PASS_MS:
                log.info("transaction check: the pass reached its %d ms limit at %d", MAX_PASS_MS, i)
                return checks, False
            if i in self.ended:
                self.half_offset = i + 1
                continue
            half = self._half_at(i)
            if half is None:
                self.half_offset = i + 1
                continue
            head = half.head
            origin = origin_offset(half, i)
            live = self.latest.get(origin)
            if live is not None and live != i:  # a copy the checks superseded
                self.half_offset = i + 1
                continue
            times = half.check_times
            if (times is not None and times >= check_max) or now - head.born_timestamp > reserved_ms:
                self._discard(half, i)
                self.latest.pop(origin, None)
                self.half_offset = i + 1
                continue
            age = now - head.born_timestamp
            immunity_text = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_text is not None:
                immunity = _immunity_ms(immunity_text, timeout)
                if age < immunity:  # Java's checkPrepareQueueOffset: put back, look later
                    copy = check_copy(half, origin, None)
                    where = self._put_copy(half, copy)
                    if where is None:
                        return checks, False
                    self.latest[origin] = where.queue_offset
                    self.half_offset = i + 1
                    continue
            elif 0 <= age < timeout:  # not yet: neither is anything after it
                return checks, False
            copy = check_copy(half, origin, 1 if times is None else times + 1)
            where = self._put_copy(half, copy)
            if where is None:
                return checks, False  # the store refused: again next pass
            self.latest[origin] = where.queue_offset
            checks.append(_Check(half.producer_group, half, copy, where))
            self.half_offset = i + 1
        return checks, True

    def _put_copy(self, half: StoredMessage, copy: MessageInner) -> PutResult | None:
        try:
            return self.store.put_message(copy)
        except StoreClosedError:
            raise
        except PutMessageError as exc:
            log.error("transaction check: putting back half message %s failed: %s", half.msg.msg_id, exc)
            return None

    def _discard(self, half: StoredMessage, queue_offset: int) -> None:
        """``resolveDiscardMsg``: to ``TRANS_CHECK_MAX_TIME_TOPIC`` (made on first use)."""
        log.error(
            "half message %s (queue offset %d, real topic %s) checked %s times: discarded to %s",
            half.msg.msg_id, queue_offset, half.real_topic, half.check_times, CHECK_MAX_TIME_TOPIC,
        )
        topics = self.ctx.topics
        if topics.select(CHECK_MAX_TIME_TOPIC) is None:
            topics.create_in_send_back(CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE, 0)
            self.ctx.topic_created(CHECK_MAX_TIME_TOPIC)
        try:
            self.store.put_message(discarded_message(half))
        except StoreClosedError:
            raise
        except PutMessageError as exc:
            log.error("putting half message %s to %s failed: %s", half.msg.msg_id, CHECK_MAX_TIME_TOPIC, exc)
        self.discarded += 1

    async def _send_check(self, check: _Check) -> int:
        """``sendCheckMessage``: CHECK_TRANSACTION_STATE, oneway, to one live producer
        connection of the group; 1 if sent."""
        conn = self._producer_channel(check.group)
        if conn is None:
            self.checks_unrouted += 1
            log.warning("transaction check: no producer of group %s is connected", check.group)
            return 0
        half, where = check.half, check.where
        uniq = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tranStateTableOffset=where.queue_offset,
            commitLogOffset=where.physical_offset,
            msgId=uniq,
            transactionId=uniq,
            offsetMsgId=where.msg_id,
        )
        # the check copy as the producer's listener sees it: on its real topic and queue
        body = attrs.evolve(
            half.msg,
            topic=half.real_topic or HALF_TOPIC,
            queue_id=half.real_queue_id or 0,
            properties=dict(check.copy.properties),
            queue_offset=where.queue_offset,
            commit_log_offset=where.physical_offset,
            store_size=0,
            msg_id=where.msg_id,
        )
        request = RemotingCommand.request(int(RequestCode.CHECK_TRANSACTION_STATE), header, body=encode_record(body))
        try:
            await self.ctx.server.invoke_oneway(conn, request, CHECK_SEND_TIMEOUT)
        except RemotingError as exc:
            log.error("transaction check to %s (group %s) failed: %s", conn.remote_address, check.group, exc)
            return 0
        self.checks_sent += 1
        return 1

    def _producer_channel(self, group: str | None) -> Connection | None:
        """``ProducerManager.getAvailableChannel``: round robin over the group's
        connections, the first active one from there."""
        if group is None:
            return None
        channels = self.ctx.producers.channels(group)
        n = len(channels)
        for k in range(n):
            self._round_robin += 1
            conn = channels[self._round_robin % n]
            if conn.is_active:
                return conn
        return None

    # -- figures -------------------------------------------------------------------------------

    def pending(self, limit: int = PENDING_LIMIT) -> tuple[int, int | None]:
        """Half messages not ended yet (counted up to ``limit``: each is read) and the
        born time (epoch ms) of the oldest one: what ``trocket admin`` shows."""
        store = self.store
        count = 0
        oldest: int | None = None
        for i in range(self.half_offset, store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID)):
            if count >= limit:
                break
            if i in self.ended:
                continue
            half = self._half_at(i)
            if half is None:
                continue
            live = self.latest.get(origin_offset(half, i))
            if live is not None and live != i:
                continue
            count += 1
            born = half.head.born_timestamp
            if oldest is None or born < oldest:
                oldest = born
        return count, oldest

    def running_stats(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's transaction entries (trocket's own keys)."""
        count, oldest = self.pending() if not self.store.closed else (0, None)
        return {
            "transactionHalfPending": f"{count}+" if count >= PENDING_LIMIT else str(count),
            "transactionHalfOldestAgeMs": str(max(0, self.clock() - oldest)) if oldest is not None else "-1",
            "transactionCommits": str(self.commits),
            "transactionRollbacks": str(self.rollbacks),
            "transactionChecksSent": str(self.checks_sent),
            "transactionDiscarded": str(self.discarded),
            "transactionCheckOffset": f"{self.half_offset},{store_max(self.store)}",
        }


def store_max(store: MessageStore) -> int:
    return store.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID) if not store.closed else 0


def _immunity_ms(text: str, timeout: int) -> int:
    """``getImmunityTime``: seconds -> ms; -1 (or unreadable, Java's ``getLong``) -> the timeout."""
    try:
        seconds = int(text)
    except ValueError:
        return timeout
    return timeout if seconds == -1 else seconds * 1000
