"""All consume queues of a store, by (topic, queue id) (Java's ``consumeQueueTable``)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator

import attrs

from .consume_queue import ConsumeQueue

__all__ = ["ConsumeQueueTable"]


@attrs.define(slots=True, eq=False)
class ConsumeQueueTable:
    root: str
    entries_per_file: int
    preallocate: bool = False
    _queues: dict[tuple[str, int], ConsumeQueue] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def load(self) -> None:
        """Map every ``<topic>/<queueId>/`` directory found under the root."""
        if not os.path.isdir(self.root):
            return
        for topic in sorted(os.listdir(self.root)):
            topic_dir = os.path.join(self.root, topic)
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

    def remove_topic(self, topic: str) -> None:
        """Delete a topic's queues and files (``deleteTopics``)."""
        with self._lock:
            gone = [cq for key, cq in self._queues.items() if key[0] == topic]
            self._queues = {k: v for k, v in self._queues.items() if k[0] != topic}
        for cq in gone:
            cq.delete()
        shutil.rmtree(os.path.join(self.root, topic), ignore_errors=True)

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
