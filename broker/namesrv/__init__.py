"""The name server: broker registration and topic routes (RocketMQ 4.9.8's namesrv).

- :class:`NameServer` / :class:`NamesrvConfig` (:mod:`.server`);
- :class:`RouteInfoManager` (:mod:`.route_info`): the tables, no I/O;
- :class:`NamesrvProcessor` (:mod:`.processor`): codes 103, 104, 105, 106, 206, 322;
  the administration codes (:mod:`.admin_processor`); their answers (:mod:`.replies`).
"""

from .processor import NamesrvProcessor, topic_not_exist_remark
from .route_info import BROKER_CHANNEL_EXPIRED_TIME, BrokerLiveInfo, RouteInfoManager
from .server import BrokerHousekeeping, NamesrvConfig, NameServer

__all__ = [
    "NameServer",
    "NamesrvConfig",
    "RouteInfoManager",
    "BrokerLiveInfo",
    "BROKER_CHANNEL_EXPIRED_TIME",
    "NamesrvProcessor",
    "BrokerHousekeeping",
    "topic_not_exist_remark",
]
