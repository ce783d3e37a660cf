"""ConsumerOffsetManager: the committed offset of every group on every queue.

Persisted as Java's ``consumerOffset.json``: ``{"offsetTable": {"<topic>@<group>":
{"<queueId>": offset}}}`` (Java writes the queue ids as unquoted numbers; we write
plain JSON and read both). Negative offsets are stored as given (clients send -1).
Writes are atomic; the broker calls :meth:`persist` periodically (Java: every 5 s) and
at shutdown, from a worker thread since it fsyncs.
"""

from __future__ import annotations

import json
import os
import re
import threading

import attrs

from .atomic_file import write_json_atomic
from .errors import ConfigLoadError

__all__ = ["ConsumerOffsetManager"]

TOPIC_GROUP_SEPARATOR = "@"
_UNQUOTED_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


@attrs.define(slots=True, eq=False)
class ConsumerOffsetManager:
    path: str
    _table: dict[str, dict[int, int]] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    _version: int = 0
    _persisted_version: int = 0

    @classmethod
    def open(cls, config_dir: str) -> ConsumerOffsetManager:
        mgr = cls(os.path.join(config_dir, "consumerOffset.json"))
        mgr.load()
        return mgr

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        if not text.strip():
            return
        try:
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))  # fastjson form
            table = {
                key: {int(q): int(o) for q, o in queues.items()}
                for key, queues in (data.get("offsetTable") or {}).items()
            }
        except (ValueError, AttributeError, TypeError) as exc:
            raise ConfigLoadError(f"{self.path}: {exc}") from None
        with self._lock:
            self._table = table

    # -- access -------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``commitOffset``: remember ``offset`` (any value, -1 included)."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            queues = self._table.get(key)
            if queues is None:
                queues = self._table[key] = {}
            queues[queue_id] = offset
            self._version += 1

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """``queryOffset``: the committed offset, or -1 if none."""
        queues = self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        return {key[len(prefix) :] for key in list(self._table) if key.startswith(prefix)}

    def topics_of_group(self, group: str) -> set[str]:
        suffix = f"{TOPIC_GROUP_SEPARATOR}{group}"
        return {key[: -len(suffix)] for key in list(self._table) if key.endswith(suffix)}

    def remove_group(self, group: str, topic: str | None = None) -> None:
        suffix = f"{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            for key in [k for k in self._table if k.endswith(suffix)]:
                if topic is None or key == f"{topic}{suffix}":
                    del self._table[key]
            self._version += 1

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """``cloneOffset``: ``dest_group`` gets ``src_group``'s offsets on ``topic``
        (replacing its own there); False when the source has none."""
        with self._lock:
            queues = self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{src_group}")
            if queues is None:
                return False
            self._table[f"{topic}{TOPIC_GROUP_SEPARATOR}{dest_group}"] = dict(queues)
            self._version += 1
            return True

    def replace_all(self, table: dict[str, dict[int, int]]) -> None:
        """Take a master's whole table (a slave's sync, ``SlaveSynchronize``)."""
        with self._lock:
            if table != self._table:
                self._table = {key: dict(queues) for key, queues in table.items()}
                self._version += 1

    def snapshot(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {key: dict(queues) for key, queues in self._table.items()}

    # -- persistence --------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return self._version != self._persisted_version

    def persist(self) -> None:
        """Write the table atomically (skipped when nothing changed)."""
        with self._lock:
            version = self._version
            data = {
                "offsetTable": {
                    key: {str(q): o for q, o in sorted(queues.items())}
                    for key, queues in self._table.items()
                }
            }
        write_json_atomic(self.path, data)
        self._persisted_version = version
