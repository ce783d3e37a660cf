"""Name server bodies (RocketMQ 4.9.8), written as its fastjson writes them.

- :class:`TopicConfigSerializeWrapper`: a broker's topic configs and their
  :class:`DataVersion` (``topics.json`` has the same shape);
- :class:`RegisterBrokerBody`: the REGISTER_BROKER (103) body, plain JSON or, with the
  header's ``compressed`` flag, 4.9's deflated binary form (``RegisterBrokerBody.encode(true)``);
- :class:`ClusterInfo`: the GET_BROKER_CLUSTER_INFO (106) answer;
- :class:`TopicList`: the GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) answer;
- :class:`KVTable` and :class:`RegisterBrokerResult`: what REGISTER_BROKER answers.

Java maps are written in the iteration order of the map the Java side holds (its
initial capacity matters: the name server's broker table is a ``HashMap(128)``, its
cluster table a ``HashMap(32)``, a broker's topic table a ``ConcurrentHashMap(1024)``,
whose table has 2048 slots). Parsing accepts fastjson's unquoted numeric keys and plain
JSON, and raises :class:`~.fastjson.BodyDecodeError` naming what is wrong.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .fastjson import Bean, BodyDecodeError, dumps
from .route import (
    BrokerData,
    java_map_order,
    parse_body,
    read_bool,
    read_int,
    read_object,
    read_str,
    read_str_list,
    write_java_map,
)

__all__ = [
    "DataVersion",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "RegisterBrokerBody",
    "ClusterInfo",
    "TopicList",
    "KVTable",
    "RegisterBrokerResult",
    "BodyDecodeError",
    "TOPIC_CONFIG_TABLE_CAPACITY",
    "BROKER_ADDR_TABLE_CAPACITY",
    "CLUSTER_ADDR_TABLE_CAPACITY",
]

#: ``TopicConfigManager``'s ``new ConcurrentHashMap<>(1024)`` has a 2048-slot table.
TOPIC_CONFIG_TABLE_CAPACITY = 2048
#: ``RouteInfoManager``'s ``brokerAddrTable = new HashMap<>(128)``.
BROKER_ADDR_TABLE_CAPACITY = 128
#: ``RouteInfoManager``'s ``clusterAddrTable = new HashMap<>(32)``.
CLUSTER_ADDR_TABLE_CAPACITY = 32

#: A compressed register body never inflates past this (the frame limit is 16 MiB).
MAX_INFLATED = 64 * 1024 * 1024

_INT = struct.Struct(">i")


@attrs.define(slots=True)
class DataVersion:
    """``DataVersion``: ``timestamp`` (ms) and ``counter``; equal when both are."""

    timestamp: int = 0
    counter: int = 0

    def to_bean(self) -> Bean:
        return Bean(counter=self.counter, timestamp=self.timestamp)

    def to_body(self) -> bytes:
        return dumps(self.to_bean()).encode("utf-8")

    @classmethod
    def from_json(cls, value: Any, where: str = "DataVersion") -> DataVersion:
        obj = read_object(value, where)
        return cls(timestamp=read_int(obj, "timestamp", where, 0), counter=read_int(obj, "counter", where, 0))

    @classmethod
    def from_body(cls, data: bytes | str) -> DataVersion:
        return cls.from_json(parse_body(data, "DataVersion"))


@attrs.define(slots=True)
class TopicConfig:
    """``TopicConfig`` as it travels (the attribute names match the store's
    :class:`trocket.broker.store.topic_config.TopicConfig`, so either can be given)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    @classmethod
    def of(cls, config: Any) -> TopicConfig:
        """A copy of any object with TopicConfig's attributes."""
        if isinstance(config, TopicConfig):
            return config
        return cls(
            config.topic_name,
            int(config.read_queue_nums),
            int(config.write_queue_nums),
            int(config.perm),
            str(getattr(config, "topic_filter_type", "SINGLE_TAG")),
            int(getattr(config, "topic_sys_flag", 0)),
            bool(getattr(config, "order", False)),
        )

    def to_bean(self) -> Bean:
        return Bean(
            order=self.order,
            perm=self.perm,
            readQueueNums=self.read_queue_nums,
            topicFilterType=self.topic_filter_type,
            topicName=self.topic_name,
            topicSysFlag=self.topic_sys_flag,
            writeQueueNums=self.write_queue_nums,
        )

    @classmethod
    def from_json(cls, value: Any, where: str = "TopicConfig") -> TopicConfig:
        obj = read_object(value, where)
        filter_type = read_str(obj, "topicFilterType", where, required=False) or "SINGLE_TAG"
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise BodyDecodeError(f"{where}.topicFilterType: {filter_type!r} is not SINGLE_TAG or MULTI_TAG")
        return cls(
            topic_name=read_str(obj, "topicName", where),  # type: ignore[arg-type]
            read_queue_nums=read_int(obj, "readQueueNums", where, 16),
            write_queue_nums=read_int(obj, "writeQueueNums", where, 16),
            perm=read_int(obj, "perm", where, 6),
            topic_filter_type=filter_type,
            topic_sys_flag=read_int(obj, "topicSysFlag", where, 0),
            order=read_bool(obj, "order", where, False),
        )

    # ``TopicConfig.encode()``/``decode()``: the compressed register body's text form.
    # It carries name, queue counts, perm and filter type only (no sys flag, no order).

    def encode_text(self) -> str:
        return f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type}"

    @classmethod
    def decode_text(cls, text: str, where: str = "TopicConfig") -> TopicConfig:
        parts = text.split(" ")
        # 4.9.8 writes exactly 5 fields; 5.x appends a 6th (attributes JSON)
        if len(parts) < 5:
            raise BodyDecodeError(f"{where}: {text!r} is not 'name read write perm filterType'")
        name, read, write, perm, filter_type = parts[:5]
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise BodyDecodeError(f"{where}: filter type {filter_type!r} is not SINGLE_TAG or MULTI_TAG")
        try:
            return cls(name, int(read), int(write), int(perm), filter_type)
        except ValueError:
            raise BodyDecodeError(f"{where}: {text!r} has a queue count or perm that is not an integer") from None


def _topic_table(configs: Mapping[str, Any] | Iterable[Any]) -> dict[str, TopicConfig]:
    if isinstance(configs, Mapping):
        return {name: TopicConfig.of(tc) for name, tc in configs.items()}
    table: dict[str, TopicConfig] = {}
    for tc in configs:
        tc = TopicConfig.of(tc)
        table[tc.topic_name] = tc
    return table


@attrs.define(slots=True)
class TopicConfigSerializeWrapper:
    """``TopicConfigSerializeWrapper``: topic name -> :class:`TopicConfig`, plus the
    :class:`DataVersion` the name server compares to decide whether to re-read them."""

    topic_config_table: dict[str, TopicConfig] = attrs.field(factory=dict, converter=_topic_table)
    data_version: DataVersion = attrs.field(factory=DataVersion)

    @classmethod
    def of(cls, configs: Mapping[str, Any] | Iterable[Any], counter: int = 0, timestamp: int = 0) -> TopicConfigSerializeWrapper:
        """From any topic configs (store or codec ``TopicConfig`` objects)."""
        return cls(_topic_table(configs), DataVersion(timestamp, counter))

    def to_json_text(self, capacity: int = TOPIC_CONFIG_TABLE_CAPACITY) -> str:
        table = {name: tc.to_bean() for name, tc in self.topic_config_table.items()}
        return (
            '{"dataVersion":' + dumps(self.data_version.to_bean())
            + ',"topicConfigTable":' + write_java_map(table, capacity) + "}"
        )

    def to_body(self) -> bytes:
        return self.to_json_text().encode("utf-8")

    @classmethod
    def from_json(cls, value: Any, where: str = "TopicConfigSerializeWrapper") -> TopicConfigSerializeWrapper:
        obj = read_object(value, where)
        table: dict[str, TopicConfig] = {}
        raw = obj.get("topicConfigTable")
        if raw is not None:
            for name, tc in read_object(raw, f"{where}.topicConfigTable").items():
                if tc is None:
                    continue
                table[str(name)] = TopicConfig.from_json(tc, f"{where}.topicConfigTable[{name!r}]")
        version = obj.get("dataVersion")
        return cls(
            table,
            DataVersion() if version is None else DataVersion.from_json(version, f"{where}.dataVersion"),
        )

    @classmethod
    def from_body(cls, data: bytes | str) -> TopicConfigSerializeWrapper:
        return cls.from_json(parse_body(data, "TopicConfigSerializeWrapper"))


class _Reader:
    """Reads the inflated compressed register body, with bounds checks."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0:
            raise BodyDecodeError(f"compressed RegisterBrokerBody: negative length {n} for {what}")
        end = self.pos + n
        if end > len(self.data):
            raise BodyDecodeError(
                f"compressed RegisterBrokerBody: {what} needs {n} bytes at offset {self.pos}, "
                f"only {len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def int(self, what: str) -> int:
        return _INT.unpack(self.take(4, what))[0]

    def text(self, what: str) -> str:
        raw = self.take(self.int(f"{what} length"), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyDecodeError(f"compressed RegisterBrokerBody: {what} is not UTF-8") from None


@attrs.define(slots=True)
class RegisterBrokerBody:
    """``RegisterBrokerBody``: the topic configs and filter server list a broker registers."""

    topic_config_wrapper: TopicConfigSerializeWrapper = attrs.field(factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = attrs.field(factory=list, converter=list)

    def to_body(self, compress: bool = False) -> bytes:
        """``RegisterBrokerBody.encode(compress)``: JSON, or 4.9's deflated form
        (``[len][DataVersion JSON][count]([len][TopicConfig text])*[len][filter list JSON]``,
        zlib at best compression)."""
        if not compress:
            return (
                '{"filterServerList":' + dumps(list(self.filter_server_list))
                + ',"topicConfigSerializeWrapper":' + self.topic_config_wrapper.to_json_text() + "}"
            ).encode("utf-8")
        out = bytearray()

        def put(blob: bytes) -> None:
            out.extend(_INT.pack(len(blob)))
            out.extend(blob)

        put(self.topic_config_wrapper.data_version.to_body())
        table = self.topic_config_wrapper.topic_config_table
        out += _INT.pack(len(table))
        # Java clones the table into a default-sized ConcurrentHashMap first
        for name in java_map_order(table):
            put(table[name].encode_text().encode("utf-8"))
        put(dumps(list(self.filter_server_list)).encode("utf-8"))
        return zlib.compress(bytes(out), 9)

    @classmethod
    def from_json(cls, value: Any, where: str = "RegisterBrokerBody") -> RegisterBrokerBody:
        obj = read_object(value, where)
        wrapper = obj.get("topicConfigSerializeWrapper")
        return cls(
            TopicConfigSerializeWrapper()
            if wrapper is None
            else TopicConfigSerializeWrapper.from_json(wrapper, f"{where}.topicConfigSerializeWrapper"),
            read_str_list(obj.get("filterServerList"), f"{where}.filterServerList"),
        )

    @classmethod
    def from_body(cls, data: bytes, compressed: bool = False) -> RegisterBrokerBody:
        """``RegisterBrokerBody.decode(data, compressed)``."""
        if not compressed:
            return cls.from_json(parse_body(data, "RegisterBrokerBody"))
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(bytes(data), MAX_INFLATED)
        except zlib.error as exc:
            raise BodyDecodeError(f"compressed RegisterBrokerBody does not inflate: {exc}") from None
        if inflater.unconsumed_tail:
            raise BodyDecodeError(f"compressed RegisterBrokerBody inflates past {MAX_INFLATED} bytes")
        reader = _Reader(raw)
        version = DataVersion.from_body(reader.text("dataVersion"))
        count = reader.int("topic config count")
        if count < 0:
            raise BodyDecodeError(f"compressed RegisterBrokerBody: negative topic config count {count}")
        table: dict[str, TopicConfig] = {}
        for i in range(count):
            tc = TopicConfig.decode_text(reader.text(f"topic config {i}"), f"topic config {i}")
            table[tc.topic_name] = tc
        filters_json = reader.text("filterServerList")
        filters = read_str_list(parse_body(filters_json, "filterServerList"), "filterServerList")
        return cls(TopicConfigSerializeWrapper(table, version), filters)


def _brokers(table: Mapping[str, Any]) -> dict[str, BrokerData]:
    return dict(table)


@attrs.define(slots=True)
class ClusterInfo:
    """``ClusterInfo``: broker name -> :class:`BrokerData`, cluster -> broker names."""

    broker_addr_table: dict[str, BrokerData] = attrs.field(factory=dict, converter=_brokers)
    #: cluster name -> broker names (a Java ``HashSet``; kept in insertion order here)
    cluster_addr_table: dict[str, list[str]] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        brokers = {name: bd.to_bean() for name, bd in self.broker_addr_table.items()}
        clusters = {name: java_map_order(names) for name, names in self.cluster_addr_table.items()}
        return (
            '{"brokerAddrTable":' + write_java_map(brokers, BROKER_ADDR_TABLE_CAPACITY)
            + ',"clusterAddrTable":' + write_java_map(clusters, CLUSTER_ADDR_TABLE_CAPACITY) + "}"
        ).encode("utf-8")

    @classmethod
    def from_body(cls, data: bytes | str) -> ClusterInfo:
        where = "ClusterInfo"
        obj = read_object(parse_body(data, where), where)
        brokers: dict[str, BrokerData] = {}
        raw = obj.get("brokerAddrTable")
        if raw is not None:
            for name, bd in read_object(raw, f"{where}.brokerAddrTable").items():
                if bd is not None:
                    brokers[str(name)] = BrokerData.from_json(bd, f"{where}.brokerAddrTable[{name!r}]")
        clusters: dict[str, list[str]] = {}
        raw = obj.get("clusterAddrTable")
        if raw is not None:
            for name, names in read_object(raw, f"{where}.clusterAddrTable").items():
                clusters[str(name)] = read_str_list(names, f"{where}.clusterAddrTable[{name!r}]")
        return cls(brokers, clusters)


@attrs.define(slots=True)
class TopicList:
    """``TopicList``: topic names (a Java ``HashSet``) and an optional broker address."""

    topic_list: list[str] = attrs.field(factory=list, converter=list)
    broker_addr: str | None = None

    def to_body(self) -> bytes:
        return dumps(Bean(brokerAddr=self.broker_addr, topicList=java_map_order(self.topic_list))).encode("utf-8")

    @classmethod
    def from_body(cls, data: bytes | str) -> TopicList:
        where = "TopicList"
        obj = read_object(parse_body(data, where), where)
        return cls(
            read_str_list(obj.get("topicList"), f"{where}.topicList"),
            read_str(obj, "brokerAddr", where, required=False),
        )


@attrs.define(slots=True)
class KVTable:
    """``KVTable``: ``{"table": {key: value}}`` (REGISTER_BROKER answers the name
    server's order-topic configs with one; an empty namespace sends no body)."""

    table: dict[str, str] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps(Bean(table=dict(self.table))).encode("utf-8")

    @classmethod
    def from_body(cls, data: bytes | str) -> KVTable:
        where = "KVTable"
        obj = read_object(parse_body(data, where), where)
        raw = obj.get("table")
        table: dict[str, str] = {}
        if raw is not None:
            for key, value in read_object(raw, f"{where}.table").items():
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise BodyDecodeError(f"{where}.table[{key!r}]: expected a string, got {value!r}")
                table[str(key)] = value
        return cls(table)


@attrs.define(slots=True)
class RegisterBrokerResult:
    """``RegisterBrokerResult``: what a name server tells a registering broker (its
    master and the master's HA address, for a slave; the order-topic KV table)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None
    kv_table: dict[str, str] = attrs.field(factory=dict)

    @classmethod
    def from_response(cls, ha_server_addr: str | None, master_addr: str | None, body: bytes | None) -> RegisterBrokerResult:
        """From the response header's two fields and its (optional) KVTable body."""
        kv = KVTable.from_body(body).table if body else {}
        return cls(ha_server_addr, master_addr, kv)
