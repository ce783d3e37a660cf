"""The broker's configuration at runtime: GET_BROKER_CONFIG (26) shows it, UPDATE_BROKER_CONFIG
(25) changes the keys that can change while the broker runs (RocketMQ 4.9.8's
``Configuration`` with ``AdminBrokerProcessor.updateBrokerConfig``).

What Java does: 26 answers every property of its config objects as ``key=value`` lines
with the configuration's data version; 25 sets any known key by reflection (refusing
only its ``configBlackList``, ``configBlackList;brokerConfigPath``), whether the running
broker reads it again or not, and writes every property to the broker's config file.

What trocket does: 26 answers every ``broker.conf`` key trocket knows
(:data:`~.config.PROPERTY_KEYS`) with its current value, Java's names and formats.
25 takes only the keys of :data:`LIVE_KEYS`, each applied to the parts of the running
broker that hold it (the store's limits, the send and pull processors, the topic and
subscription-group tables, the client managers, replication), so a change takes effect
at once; every other key (``listenPort``, ``storePathRootDir``, ``brokerRole``, ...) is
refused with a message naming the live keys (NO_PERMISSION, as Java's black list), an
unknown key or a value of the wrong type with SYSTEM_ERROR naming it: all or nothing,
nothing is changed when one entry is refused. A change is written to the config file
(the ``-c`` file the broker started with, else ``<store>/config/broker.properties``,
which ``trocket broker`` reads at start): the lines of the changed keys are rewritten,
the rest of the file (comments, other keys) kept.

``brokerPermission`` makes the broker register with the name servers again at once (a
new data version), as Java's: the routes then show the new permission (draining a
broker: ``brokerPermission=4`` stops new sends, pulls go on).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .config import (
    PROPERTY_KEYS,
    BrokerConfig,
    BrokerConfigError,
    config_changes_from_properties,
    parse_properties,
    update_properties_file,
)

if TYPE_CHECKING:
    from .context import BrokerContext
    from .processors.pull import PullProcessor
    from .processors.send import SendProcessor

__all__ = ["RuntimeConfig", "ConfigRefusedError", "LIVE_KEYS", "BLACK_LIST", "format_properties", "properties_text"]

log = logging.getLogger(__name__)

#: Java's ``configBlackList`` default: never updated at runtime
BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})


class ConfigRefusedError(BrokerConfigError):
    """A key UPDATE_BROKER_CONFIG does not change (NO_PERMISSION, as Java's black list)."""


def _live(field: str, *, store: str | None = None, extra: Callable[[RuntimeConfig, Any], None] | None = None):
    return (field, store, extra)


def _topics(rc: RuntimeConfig, value: bool) -> None:
    rc.ctx.topics.auto_create_topic_enable = value


def _groups(rc: RuntimeConfig, value: bool) -> None:
    rc.ctx.subscriptions.auto_create = value


def _max_message_size(rc: RuntimeConfig, value: int) -> None:
    if rc.send is not None:
        rc.send.max_message_size = value


def _long_polling(rc: RuntimeConfig, value: bool) -> None:
    if rc.pull is not None:
        rc.pull.long_polling = value


def _short_polling(rc: RuntimeConfig, value: int) -> None:
    if rc.pull is not None:
        rc.pull.short_polling_ms = value


def _slave_read(rc: RuntimeConfig, value: bool) -> None:
    if rc.pull is not None:
        rc.pull.slave_read = value and not rc.config.is_slave


def _channel_expiry(rc: RuntimeConfig, value: int) -> None:
    rc.ctx.consumers.channel_expired_timeout = value / 1000.0
    rc.ctx.producers.channel_expired_timeout = value / 1000.0


def _sync_flush_timeout(rc: RuntimeConfig, value: int) -> None:
    if rc.ctx.ha is not None:
        rc.ctx.ha.transfer.timeout = value / 1000.0


def _fallbehind(rc: RuntimeConfig, value: int) -> None:
    if rc.ctx.ha is not None:
        rc.ctx.ha.transfer.fallbehind_max = value


def _permission(rc: RuntimeConfig, value: int) -> None:
    if not 0 <= value <= 7:
        raise BrokerConfigError(f"brokerPermission={value}: a permission is 0-7 (4 read, 2 write, 1 inherit)")
    rc.reregister = True


#: The keys UPDATE_BROKER_CONFIG changes at runtime: Java key -> (BrokerConfig field,
#: the store config's field it mirrors, a function applying it to the running parts)
LIVE_KEYS: dict[str, tuple[str, str | None, Callable[[RuntimeConfig, Any], None] | None]] = {
    "brokerPermission": _live("broker_permission", extra=_permission),
    "maxMessageSize": _live("max_message_size", store="max_message_size", extra=_max_message_size),
    "autoCreateTopicEnable": _live("auto_create_topic", extra=_topics),
    "autoCreateSubscriptionGroup": _live("auto_create_subscription_group", extra=_groups),
    "longPollingEnable": _live("long_polling", extra=_long_polling),
    "shortPollingTimeMills": _live("short_polling_time_ms", extra=_short_polling),
    "notifyConsumerIdsChangedEnable": _live("notify_consumer_ids_changed"),
    "channelExpiredTimeout": _live("channel_expired_timeout_ms", extra=_channel_expiry),
    "fileReservedTime": _live("file_reserved_time_hours", store="file_reserved_time_hours"),
    "deleteWhen": _live("delete_when", store="delete_when"),
    "diskMaxUsedSpaceRatio": _live("disk_max_used_space_ratio", store="disk_max_used_space_ratio"),
    "maxTransferCountOnMessageInMemory": _live("max_transfer_count", store="max_transfer_count"),
    "maxTransferBytesOnMessageInMemory": _live("max_transfer_bytes", store="max_transfer_bytes"),
    "accessMessageInMemoryMaxRatio": _live(
        "access_message_in_memory_max_ratio", store="access_message_in_memory_max_ratio"),
    "slaveReadEnable": _live("slave_read_enable", extra=_slave_read),
    "syncFlushTimeout": _live("sync_flush_timeout_ms", store="sync_flush_timeout_ms", extra=_sync_flush_timeout),
    "haSlaveFallbehindMax": _live("ha_slave_fallbehind_max", extra=_fallbehind),
    "maxMsgsNumBatch": _live("max_msgs_num_batch", store="max_msgs_num_batch"),
    "defaultQueryMaxNum": _live("default_query_max_num", store="default_query_max_num"),
}


def _text(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return ""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int):
        return f"{value[0]}:{value[1]}"
    if isinstance(value, (list, tuple)):  # namesrvAddr; haAllowedSlaves (a tuple of hosts: () was "()")
        return ";".join(map(str, value))
    return str(getattr(value, "value", value))


def format_properties(config: BrokerConfig) -> dict[str, str]:
    """Every ``broker.conf`` key trocket knows, with ``config``'s value, as Java writes
    it (``true``/``false``, whole numbers, ``host:port``, ``ASYNC_FLUSH``)."""
    host, port = config.listen
    out: dict[str, str] = {}
    for key, (name, _parse) in PROPERTY_KEYS.items():
        if name == "@listen_port":
            value: Any = port
        elif name == "@listen_host":
            value = host
        elif name == "@advertise_host":
            value = config.advertised_addr().rpartition(":")[0]
        elif name == "@ha_listen_port":
            ha = config.ha_listen_addr()
            value = ha[1] if ha is not None else ""
        elif name == "@cq_file_size":
            value = config.consume_queue_entries_per_file * 20
        else:
            value = getattr(config, name)
        out[key] = _text(value)
    return out


def properties_text(props: dict[str, str]) -> str:
    """``MixAll.properties2String``: ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in props.items())


@attrs.define(slots=True, eq=False)
class RuntimeConfig:
    """The running broker's configuration, for 25/26 (see the module docstring).
    ``path``: the file changes are written to; ``register`` is called (soon) after a
    change of ``brokerPermission``."""

    ctx: BrokerContext
    path: str
    send: SendProcessor | None = None
    pull: PullProcessor | None = None
    register: Callable[[], None] | None = None
    counter: int = 0
    timestamp: int = attrs.field(factory=lambda: time.time_ns() // 1_000_000)
    reregister: bool = False

    @property
    def config(self) -> BrokerConfig:
        return self.ctx.config

    def properties(self) -> dict[str, str]:
        return format_properties(self.config)

    def version_json(self) -> str:
        """``DataVersion.toJson()``."""
        return f'{{"counter":{self.counter},"timestamp":{self.timestamp}}}'

    def parse(self, text: str) -> dict[str, tuple[str, Any]]:
        """The body's entries as ``{java key: (field, value)}``, each checked: a key that
        cannot change live raises :class:`ConfigRefusedError`, an unknown key or a bad
        value :class:`BrokerConfigError`."""
        entries = parse_properties(text)
        if not entries:
            raise BrokerConfigError("no key=value in the request")
        out: dict[str, tuple[str, Any]] = {}
        for lineno, key, value in entries:
            if key in BLACK_LIST:
                raise ConfigRefusedError("Can not update config in black list.")
            if key not in LIVE_KEYS:
                if key in PROPERTY_KEYS:
                    raise ConfigRefusedError(
                        f"{key} cannot change while the broker runs (set it in the config file and restart); "
                        f"the keys that can: {', '.join(sorted(LIVE_KEYS))}"
                    )
                raise BrokerConfigError(f"{key}: unknown key")
            changes = config_changes_from_properties([(lineno, key, value)], source="UPDATE_BROKER_CONFIG")
            ((field, parsed),) = changes.items()
            out[key] = (field, parsed)
        return out

    def update(self, text: str) -> dict[str, str]:
        """Apply the body of an UPDATE_BROKER_CONFIG (all or nothing); the keys changed
        with their new values (as 26 shows them). Persist with :meth:`persist`."""
        entries = self.parse(text)
        config = self.config
        try:  # every value through BrokerConfig's validators before anything changes
            checked = config.evolve(**{field: value for field, value in entries.values()})
        except (BrokerConfigError, TypeError, ValueError) as exc:
            raise BrokerConfigError(str(exc)) from None
        self.reregister = False
        for key, (field, _value) in entries.items():
            _f, _s, extra = LIVE_KEYS[key]
            if extra is not None:
                extra(self, getattr(checked, field))  # may refuse (brokerPermission's range)
        store_config = self.ctx.store.config
        for key, (field, _value) in entries.items():
            _f, store_field, extra = LIVE_KEYS[key]
            value = getattr(checked, field)
            setattr(config, field, value)
            if store_field is not None:
                setattr(store_config, store_field, value)
        self.counter += 1
        self.timestamp = time.time_ns() // 1_000_000
        shown = self.properties()
        changed = {key: shown[key] for key in entries}
        log.info("broker config updated: %s", ", ".join(f"{k}={v}" for k, v in changed.items()))
        if self.reregister and self.register is not None:
            self.register()
        return changed

    def persist(self, changed: dict[str, str]) -> None:
        """Write ``changed`` into the config file (the other lines kept; a worker
        thread's job: it fsyncs)."""
        update_properties_file(self.path, changed)
