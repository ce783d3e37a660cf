"""Where a consumer keeps its consume offsets.

Java: ``OffsetStore`` with ``RemoteBrokerOffsetStore`` (clustering: the broker holds
the group's offsets; the client keeps the newest in memory and commits them with
UPDATE_CONSUMER_OFFSET every 5 s and on shutdown) and ``LocalFileOffsetStore``
(broadcasting: every client has its own offsets, in a file under
``~/.trocket_offsets/<clientId>/<group>/offsets.json``, written atomically).

The Java local file is fastjson with object keys, which is not JSON; ours is plain
JSON (``{"offsetTable": [{"topic", "brokerName", "queueId", "offset"}...]}``), so the
two do not share files.

Offsets are the *next* offset to consume. ``read`` answers -1 when nothing is known.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import trio

from trocket.codecs.bodies.client import MessageQueue

__all__ = [
    "OffsetStore",
    "BrokerOffsetCalls",
    "RemoteBrokerOffsetStore",
    "LocalFileOffsetStore",
    "default_local_offset_dir",
]

log = logging.getLogger(__name__)


class BrokerOffsetCalls(Protocol):
    """The broker calls a remote store needs (the consumer's broker-call helpers)."""

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The group's committed offset, None when the broker has none (QUERY_NOT_FOUND)."""

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...


class OffsetStore(Protocol):
    async def load(self) -> None: ...
    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None: ...
    def read_memory(self, mq: MessageQueue) -> int: ...
    async def read_store(self, mq: MessageQueue) -> int: ...
    async def persist(self, mq: MessageQueue) -> None: ...
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...
    def remove(self, mq: MessageQueue) -> None: ...
    def table(self) -> dict[MessageQueue, int]: ...


class _MemoryTable:
    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self._table.get(mq)
        if old is None or not increase_only or offset > old:
            self._table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self._table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        self._table.pop(mq, None)

    def table(self) -> dict[MessageQueue, int]:
        return dict(self._table)


class RemoteBrokerOffsetStore(_MemoryTable):
    """Clustering: offsets live on the broker of each queue."""

    def __init__(self, group: str, calls: BrokerOffsetCalls) -> None:
        super().__init__()
        self.group = group
        self.calls = calls
        self._committed: dict[MessageQueue, int] = {}

    async def load(self) -> None:  # nothing local
        return None

    async def read_store(self, mq: MessageQueue) -> int:
        """Ask the broker (READ_FROM_STORE); remembers the answer in memory."""
        offset = await self.calls.query_consumer_offset(self.group, mq)
        if offset is None:
            return -1
        self.update(mq, offset)
        self._committed[mq] = offset
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        offset = self._table.get(mq)
        if offset is None or offset < 0 or self._committed.get(mq) == offset:
            return
        await self.calls.update_consumer_offset(self.group, mq, offset)
        self._committed[mq] = offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Commit every queue in ``mqs`` whose offset moved since its last commit: the
        brokers concurrently, each broker's queues one after another (as Java's client
        sends them: the 4.9.8 broker's ``ConsumerOffsetManager.commitOffset`` loses one of
        two first commits of a group and topic that race, each thread making the
        topic's table anew). A failed commit is logged and retried at the next round.
        Offsets of queues no longer assigned are dropped from memory (as Java's
        ``persistAll``)."""
        wanted = set(mqs)
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in list(self._table):
            if mq in wanted:
                by_broker.setdefault(mq.broker_name, []).append(mq)

        async def commit(queues: list[MessageQueue]) -> None:
            for mq in queues:
                try:
                    await self.persist(mq)
                except Exception as exc:  # noqa: BLE001 - the next round retries
                    log.warning("committing the offset of %s failed: %s", mq, exc)

        async with trio.open_nursery() as nursery:
            for queues in by_broker.values():
                nursery.start_soon(commit, queues)
        for mq in [mq for mq in self._table if mq not in wanted]:
            self.remove(mq)

    def remove(self, mq: MessageQueue) -> None:
        super().remove(mq)
        self._committed.pop(mq, None)


def default_local_offset_dir() -> Path:
    """``rocketmq.client.localOffsetStoreDir``'s counterpart: ``$TROCKET_OFFSET_DIR`` or
    ``~/.trocket_offsets``."""
    env = os.environ.get("TROCKET_OFFSET_DIR")
    return Path(env) if env else Path.home() / ".trocket_offsets"


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting: every client keeps its own offsets in a local file."""

    def __init__(self, group: str, client_id: str, base_dir: str | os.PathLike | None = None) -> None:
        super().__init__()
        base = Path(base_dir) if base_dir is not None else default_local_offset_dir()
        # a client id holds '@' and ':' (ip@instance); both are fine in POSIX file names
        self.path = base / client_id.replace("/", "_") / group / "offsets.json"

    async def load(self) -> None:
        self._table.update(await trio.to_thread.run_sync(self._read_file))

    async def read_store(self, mq: MessageQueue) -> int:
        table = await trio.to_thread.run_sync(self._read_file)
        offset = table.get(mq)
        if offset is None:
            return -1
        self.update(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue) -> None:  # Java: a no-op, persist_all writes
        return None

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        snapshot = {mq: off for mq, off in self._table.items() if mq in wanted}
        if snapshot:
            await trio.to_thread.run_sync(self._write_file, snapshot)

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path.with_suffix(".json.bak")):
            try:
                doc = json.loads(path.read_text("utf-8"))
                return {
                    MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"])
                    for e in doc.get("offsetTable", [])
                }
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("offset file %s is unreadable (%s); trying its backup", path, exc)
        return {}

    def _write_file(self, snapshot: dict[MessageQueue, int]) -> None:
        merged = self._read_file()
        merged.update(snapshot)
        doc = {
            "offsetTable": [
                {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
                for mq, off in sorted(merged.items())
            ]
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1), "utf-8")
        if self.path.exists():
            os.replace(self.path, self.path.with_suffix(".json.bak"))
        os.replace(tmp, self.path)
