"""``docs/broker.conf.sample``: every ``broker.conf`` key trocket reads, its default and
one line on it, generated from the config table (:data:`~trocket.broker.config.PROPERTY_KEYS`,
the defaults of :class:`~trocket.broker.config.BrokerConfig`, and the ``#:`` comment
above each field), so it cannot drift: tests/broker/test_config_sample.py compares the
file with :func:`sample_text` and loads every line of it.

    python -m trocket.broker.config_sample > docs/broker.conf.sample
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from trocket.broker import config as _config
from trocket.broker.config import _IGNORED_KEYS, PROPERTY_KEYS, BrokerConfig

__all__ = ["default_values", "describe_fields", "sample_text"]

#: the field a special key (``@...``, handled apart in the config) is documented by
_SPECIAL_FIELDS = {
    "@listen_port": "listen",
    "@listen_host": "listen",
    "@advertise_host": "advertise",
    "@ha_listen_port": "ha_listen",
    "@cq_file_size": "consume_queue_entries_per_file",
}
#: keys whose default depends on another (derived when the broker starts)
_DERIVED = {
    "brokerIP1": "the listen host",
    "advertiseAddr": "the listen address",
    "haListenPort": "listenPort + 1",
}


#: one line for the keys whose field comment only gives the default (the sample shows that)
_LINES = {
    "brokerName": "The broker group's name: a master and its slaves share it.",
    "brokerClusterName": "The cluster the broker registers in.",
    "brokerId": "0 for the master, 1 or more for a slave.",
    "brokerPermission": "6 = read + write, 4 = read only, 2 = write only (topics' permissions are masked by it).",
    "listenPort": "The port clients connect to.",
    "listenHost": "The address the broker listens on (Java binds every interface).",
    "brokerIP1": "The host routes give out and stored records carry (STOREHOST).",
    "advertiseAddr": "host:port given out in routes instead of the listen address.",
    "namesrvAddr": "External name servers, ';'-separated; empty: run an embedded one on namesrvListen.",
    "storePathRootDir": "The store's directory: commit log, consume queues, config, checkpoint.",
    "mappedFileSizeCommitLog": "Bytes per commit-log segment (two are made at once: the current and the next).",
    "mappedFileSizeConsumeQueue": "Bytes per consume-queue file (20 bytes an entry).",
    "flushIntervalCommitLog": "ASYNC_FLUSH: milliseconds between flushes.",
    "syncFlushTimeout": "SYNC_FLUSH: milliseconds a send waits for its flush before FLUSH_DISK_TIMEOUT.",
    "fileReservedTime": "Hours a commit-log segment is kept before it may be deleted.",
    "diskMaxUsedSpaceRatio": "Percent of the disk the store may fill before old segments go early.",
    "cleanResourceInterval": "Milliseconds between retention checks.",
    "flushDelayOffsetInterval": "Milliseconds between writes of delayOffset.json (the delay service's progress).",
    "channelExpiredTimeout": "Milliseconds of silence before a client's connection is dropped.",
    "registerNameServerPeriod": "Milliseconds between registrations with the name servers.",
    "registerBrokerTimeoutMills": "Milliseconds one registration call may take.",
    "flushConsumerOffsetInterval": "Milliseconds between writes of the consumer offsets.",
    "sendMessageThreadPoolNums": "Sends processed at once (with SYNC_FLUSH they share one group commit).",
    "haListenPort": "The port a master serves its slaves on.",
    "haSendHeartbeatInterval": "Milliseconds between a slave's offset reports (and a master's heartbeats when idle).",
    "haHousekeepingInterval": "Milliseconds of silence before an HA connection is closed.",
    "accessMessageInMemoryMaxRatio": "Percent of the RAM a consumer may read behind before it is sent to a slave.",
}


def default_values(config: BrokerConfig | None = None) -> dict[str, str]:
    """Every key of the table with ``config``'s (the defaults') value, as broker.conf
    writes it (GET_BROKER_CONFIG's formatting); "" for a default derived from another key."""
    from trocket.broker.runtime_config import format_properties

    values = format_properties(config or BrokerConfig())
    return {key: "" if key in _DERIVED else value for key, value in values.items()}


def describe_fields() -> dict[str, str]:
    """Each BrokerConfig field's ``#:`` comment, one line (a field without one shares the
    comment of the field above it, as ``maxHashSlotNum`` / ``maxIndexNum`` do)."""
    source = textwrap.dedent(inspect.getsource(BrokerConfig))
    lines = source.splitlines()
    cls = ast.parse(source).body[0]
    out: dict[str, str] = {}
    last = ""
    for node in cls.body:  # type: ignore[attr-defined]
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        comment: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            comment.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        if comment:
            last = " ".join(comment)
        out[node.target.id] = last
    return out


_KEY_PREFIX = re.compile(r"^(``[A-Za-z0-9.]+``(\s*(/|\+|and|,)\s*``[A-Za-z0-9.]+``)*( \+ port)?\s*[:,]?\s*)")


def _line(key: str, doc: str) -> str:
    """One sentence on ``key``: from :data:`_LINES`, else the field's comment without
    the ``key``: it opens with, its first sentence, RST quotes dropped."""
    if key in _LINES:
        return _LINES[key]
    doc = _KEY_PREFIX.sub("", doc)
    doc = re.sub(r":\w+:`~?([^`]*)`", r"\1", doc).replace("``", "").replace("`", "")
    doc = re.sub(r"^trocket's \w+:\s*", "", doc)
    doc = re.sub(r"^\(([^)]*)\):\s*", r"in \1: ", doc)  # "(ms): how often ..." -> "In ms: how often ..."
    first = re.split(r"(?<=[a-z0-9)])\.\s", doc, maxsplit=1)[0].rstrip(".")
    return first[:1].upper() + first[1:] + "."


def sample_text() -> str:
    docs = describe_fields()
    values = default_values()
    out = [
        "# broker.conf for trocket: every key it reads, commented out at its default, and one",
        "# line on it. Uncomment and change what you need; flags of `trocket broker` override",
        "# the file. Keys are RocketMQ 4.9.8's (BrokerConfig, MessageStoreConfig) unless a line",
        "# says \"trocket's own\"; an unknown key is an error naming the nearest known one.",
        "#",
        "# Generated from broker/config.py by `python -m trocket.broker.config_sample`",
        "# (tests/broker/test_config_sample.py fails when this file and the table differ).",
    ]
    own = _own_keys()
    for key, (name, _parse) in PROPERTY_KEYS.items():
        field = _SPECIAL_FIELDS.get(name, name)
        line = _line(key, docs.get(field, ""))
        if key in own:
            line += " (trocket's own)"
        if key in _DERIVED:
            line += f" Default: {_DERIVED[key]}."
        out.append("")
        out.extend(textwrap.wrap(line, 88, initial_indent="# ", subsequent_indent="# ") or ["#"])
        out.append(f"#{key}={values[key]}")
    out.append("")
    out.append("# Java's tls.* keys (tls.server.mode, tls.server.certPath, tls.config.file, ...) set up TLS:")
    out.append("# docs/security.md.")
    out.append("")
    out.append("# Accepted for stock broker.conf files and ignored (logged):")
    out.extend(textwrap.wrap(", ".join(sorted(_IGNORED_KEYS)), 88, initial_indent="# ", subsequent_indent="# "))
    return "\n".join(out) + "\n"


def _own_keys() -> set[str]:
    """Keys the table marks ``# trocket's own``."""
    source = inspect.getsource(_config)
    return set(re.findall(r'^\s*"(\w+)": \(.*\),\s*# trocket\'s own', source, re.M))


if __name__ == "__main__":
    sys.stdout.write(sample_text())
