from __future__ import annotations

import pytest

from trocket.broker.store import MessageInner, MessageStore, StoreConfig


def small_config(path, **kw) -> StoreConfig:
    opts = dict(
        store_dir=str(path),
        commit_log_segment_size=64 * 1024,
        consume_queue_entries_per_file=50,
        max_message_size=16 * 1024,
    )
    opts.update(kw)
    return StoreConfig(**opts)


def msg(topic: str = "T", body: bytes = b"hello", queue_id: int = 0, tags: str | None = None, **kw):
    props = dict(kw.pop("properties", {}))
    if tags is not None:
        props["TAGS"] = tags
    return MessageInner(
        topic=topic,
        body=body,
        queue_id=queue_id,
        properties=props,
        born_timestamp=1_700_000_000_000,
        born_host=("10.1.2.3", 40000),
        **kw,
    )


@pytest.fixture
def config(tmp_path):
    return small_config(tmp_path / "store")


@pytest.fixture
def store(config):
    s = MessageStore.open(config)
    yield s
    s.shutdown()
