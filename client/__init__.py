"""RocketMQ 4.9 client on trocket.remoting (issue 7).

The core (Java's ``MQClientInstance`` / ``MQClientAPIImpl`` / ``ClientConfig``):
:mod:`.config`, :mod:`.errors`, :mod:`.message`, :mod:`.route`, :mod:`.fault`,
:mod:`.api`, :mod:`.instance`. The producers: :mod:`.producer`, :mod:`.transaction`
(``TransactionProducer``), :mod:`.request_reply` (``Producer.request`` and the
responder's ``send_reply``). The consumers:
:mod:`.consumer` (``PushConsumer``), :mod:`.consumer_lite` (``PullConsumer``) and their
parts (:mod:`.rebalance`, :mod:`.process_queue`, :mod:`.offset_store`,
:mod:`.subscription`, :mod:`.consumer_pull`, :mod:`.consumer_base`); the blocking facade:
:mod:`.blocking`.
"""

from .config import ClientConfig
from .errors import (
    Attempt,
    BrokerBusyError,
    BrokerResponseError,
    ClientConnectError,
    ClientError,
    ClientStateError,
    ClientTimeoutError,
    ConnectionLostError,
    MessageRefusedError,
    NoRouteError,
    RequestTimeoutError,
    SendTimeoutError,
)
from .instance import ClientInstance, ConsumerHandle
from .producer import Producer, ProducerConfig, SendFuture
from .request_reply import RequestFuture, create_reply_message, send_reply
from .transaction import LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult
from .message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    new_message,
)

__all__ = [
    "ClientConfig",
    "ClientInstance",
    "Producer",
    "ProducerConfig",
    "SendFuture",
    "RequestFuture",
    "create_reply_message",
    "send_reply",
    "TransactionProducer",
    "TransactionListener",
    "TransactionSendResult",
    "LocalTransactionState",
    "ConsumerHandle",
    "Message",
    "MessageExt",
    "MessageQueue",
    "new_message",
    "SendResult",
    "SendStatus",
    "PullResult",
    "PullStatus",
    "Attempt",
    "ClientError",
    "ClientTimeoutError",
    "SendTimeoutError",
    "BrokerResponseError",
    "BrokerBusyError",
    "NoRouteError",
    "RequestTimeoutError",
    "MessageRefusedError",
    "ClientConnectError",
    "ConnectionLostError",
    "ClientStateError",
]

# the consumers and the blocking facade
from .blocking import (  # noqa: E402
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
)
from .consumer import ConsumeContext, ConsumeFrom, ConsumeResult, MessageModel, PushConsumer, PushConsumerOptions  # noqa: E402
from .consumer_lite import PullConsumer, PullConsumerOptions  # noqa: E402
from .rebalance_strategy import (  # noqa: E402
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
    AllocateMachineRoomNearby,
    AllocateStrategy,
)
from .subscription import MessageSelector  # noqa: E402

__all__ += [
    "AllocateStrategy",
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateConsistentHash",
    "AllocateByConfig",
    "AllocateByMachineRoom",
    "AllocateMachineRoomNearby",
    "MessageSelector",
    "PushConsumer",
    "PushConsumerOptions",
    "PullConsumer",
    "PullConsumerOptions",
    "ConsumeResult",
    "ConsumeContext",
    "ConsumeFrom",
    "MessageModel",
    "BlockingProducer",
    "BlockingTransactionProducer",
    "BlockingPushConsumer",
    "BlockingPullConsumer",
]
