"""RocketMQ 4.9 client on trocket.remoting (issue 7).

The core (Java's ``MQClientInstance`` / ``MQClientAPIImpl`` / ``ClientConfig``):
:mod:`.config`, :mod:`.errors`, :mod:`.message`, :mod:`.route`, :mod:`.fault`,
:mod:`.api`, :mod:`.instance`. The producer: :mod:`.producer`.
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
    SendTimeoutError,
)
from .instance import ClientInstance, ConsumerHandle
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
    "MessageRefusedError",
    "ClientConnectError",
    "ConnectionLostError",
    "ClientStateError",
]
