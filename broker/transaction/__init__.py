"""Transactional messages: half messages, their end, and the check service.

:mod:`.records` (what each step stores: half message, op record, committed message,
check copy, discarded message) and :mod:`.service` (:class:`TransactionalMessageService`:
the state, END_TRANSACTION's decisions, the check loop). The send path stores half
messages through the pre-put step (:func:`trocket.broker.pre_put.half_step`);
END_TRANSACTION is :mod:`trocket.broker.processors.end_transaction`.
"""

from .records import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC, TRANS_GROUP, half_message
from .service import TransactionalMessageService

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_TOPIC",
    "OP_TOPIC",
    "TRANS_GROUP",
    "TransactionalMessageService",
    "half_message",
]
