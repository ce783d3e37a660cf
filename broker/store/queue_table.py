"""All consume queues of a store, by (topic, queue id) (Java's ``consumeQueueTable``),
and the detaching of deleted topics' queues (``DefaultMessageStore.cleanUnusedTopic``)
and of expired queues (``cleanExpiredConsumerQueue``)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Collection, Iterator

import attrs

from .consume_queue import ConsumeQueue

__all__ = ["ConsumeQueueTable", "DetachedTopic", "TRASH_PREFIX"]

#: Directory prefix of a deleted topic's queues awaiting removal ('.' is not a topic
#: character, so no topic directory can start with it).
TRASH_PREFIX = ".deleted."


@attrs.define(slots=True, eq=False)
class DetachedTopic:
    """A deleted topic's queues, out of the table, their directory moved to ``trash``."""

    topic: str
    queues: list[ConsumeQueue]
    trash: str | None

    def unmap(self) -> None:
        """Unmap the queues (views readers still hold keep their pages)."""
        for cq in self.queues:
            cq.close()

    def remove_files(self) -> None:
        if self.trash is not None:
            shutil.rmtree(self.trash, ignore_errors=True)


@attrs.define(slots=True, eq=False)
class ConsumeQueueTable:
    root: str
    entries_per_file: int
    preallocate: bool = False
    _queues: dict[tuple[str, int], ConsumeQueue] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)
    _trash_seq: int = 0

    def load(self) -> None:
        """Map every ``<topic>/<queueId>/`` directory found under the root."""
        if not os.path.isdir(self.root):
            return
        for topic in sorted(os.listdir(self.root)):
            topic_dir = os.path.join(self.root, topic)
            if topic.startswith(TRASH_PREFIX):  # a deletion a crash interrupted
                shutil.rmtree(topic_dir, ignore_errors=True)
                continue
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                if not qid.lstrip("-").isdigit():
                    continue
                cq = ConsumeQueue.open(
                    self.root, topic, int(qid), self.entries_per_file, preallocate=self.preallocate
                )
                self._queues[topic, int(qid)] = cq

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """``findConsumeQueue``: the queue, created (without files yet) when new."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            with self._lock:
                cq = self._queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue.open(
                        self.root, topic, queue_id, self.entries_per_file, preallocate=self.preallocate
                    )
                    self._queues = {**self._queues, (topic, queue_id): cq}
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self._queues.values()))

    def __len__(self) -> int:
        return len(self._queues)

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._queues}

    def detach_topics(self, topics: Collection[str]) -> list[DetachedTopic]:
        """Take ``topics``' queues out of the table and move each topic's directory
        aside (a rename, so a queue created for the same topic right after starts in a
        fresh directory). Call with the dispatch lock held; the queues are still mapped
        (readers may hold views): :meth:`DetachedTopic.destroy` them afterwards."""
        wanted = set(topics)
        gone = self._take(lambda key: key[0] in wanted)
        return [
            DetachedTopic(
                topic, [cq for (t, _), cq in gone.items() if t == topic],
                self._move_aside(os.path.join(self.root, topic), topic),
            )
            for topic in sorted(wanted)
        ]

    def detach_queues(self, keys: Collection[tuple[str, int]]) -> list[DetachedTopic]:
        """:meth:`detach_topics` for single queues (``(topic, queue id)``): each one's
        directory moved aside, one :class:`DetachedTopic` per queue; a topic directory
        left empty is removed."""
        wanted = set(keys)
        gone = self._take(wanted.__contains__)
        detached = []
        for (topic, queue_id), cq in sorted(gone.items(), key=lambda item: item[0]):
            trash = self._move_aside(os.path.join(self.root, topic, str(queue_id)), f"{topic}.{queue_id}")
            detached.append(DetachedTopic(topic, [cq], trash))
        for topic in {topic for topic, _ in gone}:
            try:
                os.rmdir(os.path.join(self.root, topic))
            except OSError:  # queues left in it (or already gone)
                pass
        return detached

    def _take(self, wanted: Callable[[tuple[str, int]], bool]) -> dict[tuple[str, int], ConsumeQueue]:
        """Take the queues whose ``(topic, queue id)`` is ``wanted`` out of the table."""
        with self._lock:
            gone = {key: cq for key, cq in self._queues.items() if wanted(key)}
            self._queues = {key: cq for key, cq in self._queues.items() if key not in gone}
        return gone

    def _move_aside(self, path: str, name: str) -> str | None:
        """Rename ``path`` to a trash directory under the root (None: no such directory)."""
        if not os.path.isdir(path):
            return None
        self._trash_seq += 1
        trash = os.path.join(self.root, f"{TRASH_PREFIX}{name}.{os.getpid()}.{self._trash_seq}")
        os.rename(path, trash)
        return trash

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
