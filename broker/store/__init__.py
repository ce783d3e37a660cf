"""The message store: commit log, consume queues, flush, recovery, offsets, topics, and
the next commit-log segment made ahead (``allocate``).

See :class:`MessageStore` for the facade the broker uses.
"""

from .config import FlushMode, StoreConfig
from .errors import (
    ConfigLoadError,
    MessageIllegalError,
    MessageTooLargeError,
    PropertiesTooLargeError,
    PutMessageError,
    StoreError,
    StoreLoadError,
)
from .messages import BatchInner, MessageInner, tags_hash
from .offsets import ConsumerOffsetManager
from .results import GetResult, GetStatus, PutResult, PutStatus
from .commit_log import ReplicaDataError
from .store import MessageStore, SlaveModeError, StoreClosedError
from .subscription_group import SubscriptionGroupManager
from .topic_config import TopicConfig, TopicConfigManager

__all__ = [
    "SubscriptionGroupManager",
    "BatchInner",
    "ConfigLoadError",
    "ConsumerOffsetManager",
    "FlushMode",
    "GetResult",
    "GetStatus",
    "MessageIllegalError",
    "MessageInner",
    "MessageStore",
    "MessageTooLargeError",
    "PropertiesTooLargeError",
    "PutMessageError",
    "PutResult",
    "PutStatus",
    "ReplicaDataError",
    "SlaveModeError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLoadError",
    "TopicConfig",
    "TopicConfigManager",
    "tags_hash",
]
