"""KVConfigManager: the name server's key-value configuration by namespace (RocketMQ
4.9.8's ``KVConfigManager``), persisted as Java's ``kvConfig.json``
(``{"configTable": {namespace: {key: value}}}``) when the name server has a path for it.

Namespace ``ORDER_TOPIC_CONFIG`` is the one Java reads itself: a broker registering gets
it (its order topics), and with ``orderMessageEnable`` a route carries its topic's entry.
"""

from __future__ import annotations

import json
import logging
import os
import threading

from trocket.broker.store.atomic_file import write_json_atomic

__all__ = ["KVConfigManager", "NAMESPACE_ORDER_TOPIC_CONFIG"]

log = logging.getLogger(__name__)

#: ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read ``kvConfig.json`` (nothing when there is no path or no file)."""
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            text = f.read()
        if not text.strip():
            return
        data = json.loads(text)
        table = data.get("configTable") or {}
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ValueError(f"{self.path}: configTable is not a table of namespaces")
        self._table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
        log.info("loaded %d KV namespaces from %s", len(self._table), self.path)

    def put(self, namespace: str, key: str, value: str) -> None:
        """``putKVConfig`` (then persisted)."""
        with self._lock:
            table = self._table.setdefault(namespace, {})
            prev = table.get(key)
            table[key] = value
        log.info("putKVConfig %s config item, Namespace: %s Key: %s Value: %s",
                 "update" if prev is not None else "create new", namespace, key, value)
        self.persist()

    @property
    def size(self) -> int:
        """Entries in every namespace (the metrics endpoint's)."""
        return sum(len(table) for table in self._table.values())

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """``deleteKVConfig``: the key goes (a namespace left empty stays, as Java's)."""
        with self._lock:
            table = self._table.get(namespace)
            if table is None or table.pop(key, None) is None:
                return
        log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s", namespace, key)
        self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """``getKVListByNamespace``: the namespace's table, None when it does not exist."""
        table = self._table.get(namespace)
        return dict(table) if table is not None else None

    def persist(self) -> None:
        if self.path is None:
            return
        with self._lock:
            data = {"configTable": {ns: dict(kv) for ns, kv in self._table.items()}}
        write_json_atomic(self.path, data)
