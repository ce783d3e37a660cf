"""Namespaces of topics and groups: ``<namespace>%<name>`` on the wire.

Java: ``NamespaceUtil``. A client with a namespace wraps every topic and group it names
(``ns%TopicA``; a retry or DLQ topic keeps its prefix in front: ``%RETRY%ns%G``) and
unwraps what it hands back to its user. System topics (``TopicValidator``'s set and
``rmq_sys_*``) and system groups (``CID_RMQ_SYS_*``) are never wrapped.
"""

from __future__ import annotations

from .names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic

__all__ = [
    "NAMESPACE_SEPARATOR",
    "SYS_CONSUMER_GROUP_PREFIX",
    "wrap_namespace",
    "without_namespace",
    "is_already_with_namespace",
    "wrap_namespace_and_retry",
]

NAMESPACE_SEPARATOR = "%"
#: ``MixAll.CID_RMQ_SYS_PREFIX``
SYS_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"


def _is_system_resource(resource: str) -> bool:
    return bool(resource) and (is_system_topic(resource) or resource.startswith(SYS_CONSUMER_GROUP_PREFIX))


def _split_prefix(resource: str) -> tuple[str, str]:
    """(the retry or DLQ prefix or "", the rest): ``withOutRetryAndDLQ``."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix):]
    return "", resource


def is_already_with_namespace(resource: str, namespace: str | None) -> bool:
    if not namespace or not resource or _is_system_resource(resource):
        return False
    return _split_prefix(resource)[1].startswith(namespace + NAMESPACE_SEPARATOR)


def wrap_namespace(namespace: str | None, resource: str) -> str:
    """``wrapNamespace``: ``ns%name`` (``%RETRY%ns%name`` for a retry topic, likewise
    DLQ); unchanged without a namespace, for a system resource, or when already wrapped."""
    if not namespace or not resource:
        return resource
    if _is_system_resource(resource) or is_already_with_namespace(resource, namespace):
        return resource
    prefix, rest = _split_prefix(resource)
    return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}"


def without_namespace(resource: str, namespace: str | None = None) -> str:
    """``withoutNamespace``: the name with its namespace taken off (keeping a retry or
    DLQ prefix). With ``namespace`` given, only that namespace is taken off; without,
    whatever precedes the first ``%`` after the prefix."""
    if not resource or _is_system_resource(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    if namespace is not None:
        if not namespace or not rest.startswith(namespace + NAMESPACE_SEPARATOR):
            return resource
        return prefix + rest[len(namespace) + 1:]
    index = rest.find(NAMESPACE_SEPARATOR)
    return prefix + rest[index + 1:] if index > 0 else resource


def wrap_namespace_and_retry(namespace: str | None, group: str) -> str:
    """``wrapNamespaceAndRetry``: the group's retry topic, ``%RETRY%ns%group``."""
    return RETRY_GROUP_TOPIC_PREFIX + wrap_namespace(namespace, group)
