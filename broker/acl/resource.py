"""What a request touches: Java 4.9.8's ``PlainAccessValidator.parse`` mapping from a
request code to the resources (topics; groups as their ``%RETRY%`` topic) and the
permission each needs.

=============================  =================================================
SEND_MESSAGE (10)              the topic PUB; a send to a retry topic: the group SUB
SEND_MESSAGE_V2 (310)          the same, from the short field names ``b`` / ``a``
SEND_BATCH_MESSAGE (320)       the same (Java 4.9.8 checks no resource for a batch:
                               a deliberate difference, see docs/security.md)
CONSUMER_SEND_MSG_BACK (36)    the group SUB
PULL_MESSAGE (11)              the topic SUB and the group SUB
QUERY_MESSAGE (12)             the topic SUB
HEART_BEAT (34)                each consumer group SUB and each topic it subscribes SUB
UNREGISTER_CLIENT (35)         the consumer group SUB
GET_CONSUMER_LIST_BY_GROUP(38) the consumer group SUB
UPDATE_CONSUMER_OFFSET (15)    the consumer group SUB and the topic SUB
=============================  =================================================

Every other code needs no resource: a valid signature is enough, unless the code is
one of :data:`~.permission.ADMIN_CODES`.
"""

from __future__ import annotations

from trocket.codecs.bodies.client import HeartbeatData

from .permission import PUB, RETRY_PREFIX, SUB

__all__ = ["needed_resources"]


def _send(topic: str | None, group: str | None) -> dict[str, int] | None:
    if topic is None:
        return None
    if topic.startswith(RETRY_PREFIX):
        return None if group is None else {RETRY_PREFIX + group: SUB}
    return {topic: PUB}


def _groups(ext: dict[str, str], group_key: str, topic_key: str | None = None) -> dict[str, int] | None:
    out: dict[str, int] = {}
    group = ext.get(group_key)
    if group is not None:
        out[RETRY_PREFIX + group] = SUB
    if topic_key is not None:
        topic = ext.get(topic_key)
        if topic is not None:
            out[topic] = SUB
    return out or None


def _heartbeat(body: bytes | None) -> dict[str, int] | None:
    data = HeartbeatData.decode(body)
    out: dict[str, int] = {}
    for consumer in data.consumers:
        out[RETRY_PREFIX + consumer.group_name] = SUB
        for sub in consumer.subscriptions:
            out[sub.topic] = SUB
    return out or None


def needed_resources(code: int, ext: dict[str, str], body: bytes | None) -> dict[str, int] | None:
    """``{resource: permission}`` the request needs, None for none. Raises what decoding
    a heartbeat body raises (Java wraps it in an ``AclException``)."""
    if code == 310 or code == 320:
        return _send(ext.get("b"), ext.get("a"))
    if code == 11:
        return _groups(ext, "consumerGroup", "topic")
    if code == 10:
        return _send(ext.get("topic"), ext.get("group"))
    if code == 34:
        return _heartbeat(body)
    if code == 15:
        return _groups(ext, "consumerGroup", "topic")
    if code == 36:
        return _groups(ext, "group")
    if code == 12:
        topic = ext.get("topic")
        return None if topic is None else {topic: SUB}
    if code == 35 or code == 38:
        return _groups(ext, "consumerGroup")
    return None
