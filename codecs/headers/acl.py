"""ACL admin headers (Java 4.9.8): UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG
(51), GET_BROKER_CLUSTER_ACL_INFO (52, its response), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

``topicPerms`` / ``groupPerms`` are comma-separated ``resource=PERM`` lists
(``topicA=DENY,topicD=SUB``); ``globalWhiteAddrs`` a comma-separated address list.
"""

from __future__ import annotations

from ..custom_header import field, header

__all__ = [
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
]


@header
class CreateAccessConfigRequestHeader:
    accessKey: str = field("str", required=True)
    secretKey: str | None = field("str")
    whiteRemoteAddress: str | None = field("str")
    admin: bool = field("bool", default=False)
    defaultTopicPerm: str | None = field("str")
    defaultGroupPerm: str | None = field("str")
    topicPerms: str | None = field("str")
    groupPerms: str | None = field("str")


@header
class DeleteAccessConfigRequestHeader:
    accessKey: str = field("str", required=True)


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader:
    globalWhiteAddrs: str = field("str", required=True)
    aclFileFullPath: str = field("str", required=True)


@header
class GetBrokerAclConfigResponseHeader:
    version: str = field("str", required=True)
    allAclFileVersion: str | None = field("str")
    brokerName: str = field("str", required=True)
    brokerAddr: str = field("str", required=True)
    clusterName: str = field("str", required=True)
