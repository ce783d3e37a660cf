"""Route bodies: ``TopicRouteData`` (the GET_ROUTEINFO_BY_TOPIC answer) and its parts.

Written exactly as RocketMQ 4.9.8's name server writes them (``topicRouteData.encode()``,
fastjson): bean properties in alphabetical order, nulls left out, ``brokerAddrs`` a
``HashMap<Long, String>`` with its keys **unquoted**::

    {"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],
     "filterServerTable":{},
     "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}

(one line on the wire). Lists are written in the order they hold; the name server
builds them in Java's iteration order (see :func:`java_map_order`).

:meth:`TopicRouteData.from_body` reads that form and plain JSON (quoted keys), and
raises :class:`~.fastjson.BodyDecodeError` naming the field that is wrong.

This module also holds the small helpers the other body modules share: Java
``HashMap``/``HashSet`` iteration order for a given table capacity, and typed field
readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..java_hashmap import java_string_hash
from .fastjson import Bean, BodyDecodeError, dumps, loads

__all__ = [
    "QueueData",
    "BrokerData",
    "TopicRouteData",
    "MASTER_ID",
    "java_map_order",
    "BodyDecodeError",
]

#: ``MixAll.MASTER_ID``: the broker id of a master.
MASTER_ID = 0


# -- Java HashMap order ----------------------------------------------------------------


def _java_hash(key: Any) -> int:
    """``hashCode()`` of a ``String`` or ``Long`` key, unsigned 32-bit."""
    if isinstance(key, int) and not isinstance(key, bool):
        v = key & 0xFFFFFFFFFFFFFFFF
        return (v ^ (v >> 32)) & 0xFFFFFFFF  # Long.hashCode
    return java_string_hash(str(key))


def _capacity(size: int, initial: int) -> int:
    capacity = initial
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def java_map_order(keys: Iterable[Any], initial_capacity: int = 16) -> list[Any]:
    """``keys`` (in insertion order) in the iteration order of a ``java.util.HashMap``
    (or ``HashSet``, or a ``ConcurrentHashMap``'s table) whose table started at
    ``initial_capacity`` (a power of two) and doubled while ``size > 0.75 * capacity``.

    Keys sharing a bucket keep their insertion order, as Java's bucket lists do; the
    table never shrinks in Java, which a set of current keys cannot show, so after
    many removals the order may differ (the content never does).
    """
    keys = list(keys)
    mask = _capacity(len(keys), initial_capacity) - 1

    def bucket(k: Any) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & mask

    return sorted(keys, key=bucket)


def write_java_map(items: Mapping[Any, Any], initial_capacity: int = 16) -> str:
    """A map as fastjson writes a ``HashMap`` of ``initial_capacity``: Java iteration
    order, null values left out, numeric keys unquoted."""
    parts = []
    for key in java_map_order([k for k, v in items.items() if v is not None], initial_capacity):
        # dumps of a one-entry dict writes the key as fastjson does (quoted or not)
        parts.append(dumps({key: items[key]})[1:-1])
    return "{" + ",".join(parts) + "}"


# -- typed readers -------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def parse_body(data: bytes | str, what: str) -> Any:
    try:
        return loads(data)
    except BodyDecodeError as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None


def read_object(value: Any, where: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise BodyDecodeError(f"{where}: expected an object, got {_type_name(value)}")
    return value


def read_list(value: Any, where: str, *, null_ok: bool = True) -> list[Any]:
    if value is None and null_ok:
        return []
    if not isinstance(value, list):
        raise BodyDecodeError(f"{where}: expected an array, got {_type_name(value)}")
    return value


def read_int(obj: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    """An integer field; fastjson also takes a numeric string for an ``int``/``long``."""
    value = obj.get(key)
    if value is None:
        if default is None:
            raise BodyDecodeError(f"{where}.{key}: missing")
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BodyDecodeError(f"{where}.{key}: expected an integer, got {_type_name(value)} {value!r}")


def read_str(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise BodyDecodeError(f"{where}.{key}: missing")
        return None
    if not isinstance(value, str):
        raise BodyDecodeError(f"{where}.{key}: expected a string, got {_type_name(value)} {value!r}")
    return value


def read_bool(obj: Mapping[str, Any], key: str, where: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if isinstance(value, int):
        return value != 0
    raise BodyDecodeError(f"{where}.{key}: expected a boolean, got {_type_name(value)} {value!r}")


def read_str_list(value: Any, where: str) -> list[str]:
    items = read_list(value, where)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise BodyDecodeError(f"{where}[{i}]: expected a string, got {_type_name(item)} {item!r}")
    return list(items)


def _long_key(key: Any, where: str) -> int:
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if isinstance(key, str):
        try:
            return int(key.strip())
        except ValueError:
            pass
    raise BodyDecodeError(f"{where}: key {key!r} is not a broker id (an integer)")


# -- beans -------------------------------------------------------------------------------


@attrs.define(slots=True)
class QueueData:
    """``QueueData``: a topic's queues on one broker group (``brokerName``)."""

    broker_name: str
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = 0

    def to_bean(self) -> Bean:
        return Bean(
            brokerName=self.broker_name,
            perm=self.perm,
            readQueueNums=self.read_queue_nums,
            topicSysFlag=self.topic_sys_flag,
            writeQueueNums=self.write_queue_nums,
        )

    @classmethod
    def from_json(cls, value: Any, where: str = "QueueData") -> QueueData:
        obj = read_object(value, where)
        # name servers before 4.9.3 wrote the flag as ``topicSynFlag``
        flag_key = "topicSysFlag" if "topicSysFlag" in obj else "topicSynFlag"
        return cls(
            broker_name=read_str(obj, "brokerName", where),  # type: ignore[arg-type]
            read_queue_nums=read_int(obj, "readQueueNums", where, 0),
            write_queue_nums=read_int(obj, "writeQueueNums", where, 0),
            perm=read_int(obj, "perm", where, 0),
            topic_sys_flag=read_int(obj, flag_key, where, 0),
        )


@attrs.define(slots=True)
class BrokerData:
    """``BrokerData``: a broker group; ``broker_addrs`` maps broker id (0 = master) to
    ``host:port``."""

    cluster: str | None
    broker_name: str
    broker_addrs: dict[int, str] = attrs.field(factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def to_bean(self) -> Bean:
        # a HashMap<Long, String>: dumps writes int keys unquoted, in HashMap order
        return Bean(brokerAddrs=dict(self.broker_addrs), brokerName=self.broker_name, cluster=self.cluster)

    @classmethod
    def from_json(cls, value: Any, where: str = "BrokerData") -> BrokerData:
        obj = read_object(value, where)
        raw = obj.get("brokerAddrs")
        addrs: dict[int, str] = {}
        if raw is not None:
            raw = read_object(raw, f"{where}.brokerAddrs")
            for key, addr in raw.items():
                broker_id = _long_key(key, f"{where}.brokerAddrs")
                if addr is None:
                    continue
                if not isinstance(addr, str):
                    raise BodyDecodeError(
                        f"{where}.brokerAddrs[{key!r}]: expected a string, got {_type_name(addr)} {addr!r}"
                    )
                addrs[broker_id] = addr
        return cls(
            cluster=read_str(obj, "cluster", where, required=False),
            broker_name=read_str(obj, "brokerName", where),  # type: ignore[arg-type]
            broker_addrs=addrs,
        )


@attrs.define(slots=True)
class TopicRouteData:
    """``TopicRouteData``: where a topic's queues are and how to reach their brokers."""

    queue_datas: list[QueueData] = attrs.field(factory=list)
    broker_datas: list[BrokerData] = attrs.field(factory=list)
    #: broker address -> filter server addresses (a ``HashMap``; ``{}`` when none)
    filter_server_table: dict[str, list[str]] = attrs.field(factory=dict)
    #: the order-topic config from the name server's KV store (null, so absent, by default)
    order_topic_conf: str | None = None

    def to_bean(self) -> Bean:
        return Bean(
            brokerDatas=[bd.to_bean() for bd in self.broker_datas],
            filterServerTable={k: list(v) for k, v in self.filter_server_table.items()},
            orderTopicConf=self.order_topic_conf,
            queueDatas=[qd.to_bean() for qd in self.queue_datas],
        )

    def to_body(self) -> bytes:
        """The body exactly as the Java name server's ``topicRouteData.encode()``."""
        return dumps(self.to_bean()).encode("utf-8")

    @classmethod
    def from_json(cls, value: Any, where: str = "TopicRouteData") -> TopicRouteData:
        obj = read_object(value, where)
        queue_datas = [
            QueueData.from_json(item, f"{where}.queueDatas[{i}]")
            for i, item in enumerate(read_list(obj.get("queueDatas"), f"{where}.queueDatas"))
        ]
        broker_datas = [
            BrokerData.from_json(item, f"{where}.brokerDatas[{i}]")
            for i, item in enumerate(read_list(obj.get("brokerDatas"), f"{where}.brokerDatas"))
        ]
        filters: dict[str, list[str]] = {}
        raw = obj.get("filterServerTable")
        if raw is not None:
            for addr, servers in read_object(raw, f"{where}.filterServerTable").items():
                filters[str(addr)] = read_str_list(servers, f"{where}.filterServerTable[{addr!r}]")
        return cls(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table=filters,
            order_topic_conf=read_str(obj, "orderTopicConf", where, required=False),
        )

    @classmethod
    def from_body(cls, data: bytes | str) -> TopicRouteData:
        """Parse a route body: fastjson's form (unquoted broker ids) or plain JSON."""
        return cls.from_json(parse_body(data, "TopicRouteData"))
