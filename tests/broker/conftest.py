"""Real brokers on 127.0.0.1 port 0 over real store files, and a client that speaks
to them like RocketMQ clients do (remoting's RemotingClient; raw JSON frames when a
test needs what the C++/JS clients put on the wire).

Time: a test that takes the ``logical_clock`` fixture runs its broker on trio's
MockClock (long polling and flushing sleep on trio's clock; the schedule service is
given a :class:`~trocket.broker.schedule.TrioEpochClock`), so it asserts logical times
exactly and waits for nothing real.
"""

from __future__ import annotations

import json
import struct
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from trocket.broker.config import BrokerConfig
from trocket.broker.controller import BrokerController
from trocket.broker.schedule import TrioEpochClock
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from trocket.codecs.message.properties import encode_properties
from trocket.codecs.serialize import decode_command
from trocket.remoting import ClientConfig, RemotingClient

from ..waiting import wait_until


def broker_config(tmp_path, **kw) -> BrokerConfig:
    opts = dict(
        listen=("127.0.0.1", 0),
        namesrv_listen=("127.0.0.1", 0),
        store_dir=str(tmp_path / "store"),
        commit_log_segment_size=1 << 20,
        consume_queue_entries_per_file=1000,
    )
    opts.update(kw)
    return BrokerConfig(**opts)


@asynccontextmanager
async def running_broker(tmp_path, **kw):
    """A started BrokerController (embedded name server unless ``namesrv_addrs``);
    shut down cleanly on exit."""
    async with BrokerController(broker_config(tmp_path, **kw)) as controller:
        if on_mock_clock():
            controller.schedule.clock = TrioEpochClock()
        yield controller


async def held_count_reaches(broker, n: int) -> None:
    """Until the broker's long-polling service holds ``n`` pulls."""
    await wait_until(lambda: broker.pull_hold.held_count >= n, 5, interval=0.001, what=f"{n} pulls held")


@pytest.fixture
def logical_clock() -> trio.testing.MockClock:
    """pytest-trio's ``autojump_clock``, but jumping after 10 ms of real idleness
    instead of at once. A broker waits on worker threads (the store opening, a topic
    persisted, an fsync) and trio counts a task waiting on a thread as idle: at
    threshold 0 the clock races through every periodic deadline while the thread runs
    (measured: 191 logical seconds while a store opened, a 60 s call timeout expired
    while a retry topic was created). 10 ms bounds that to a few jumps."""
    return trio.testing.MockClock(autojump_threshold=0.01)


def on_mock_clock() -> bool:
    return isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)


@asynccontextmanager
async def client():
    """Calls time out after 5 s, or 60 logical seconds under a MockClock (which may
    jump while the broker waits on a worker thread)."""
    timeout = 60.0 if on_mock_clock() else 5.0
    async with RemotingClient(ClientConfig(default_timeout=timeout)) as c:
        yield c


class Wire:
    """Request builders and calls, as the real clients send them."""

    running_broker = staticmethod(running_broker)
    client = staticmethod(client)
    broker_config = staticmethod(broker_config)

    @staticmethod
    def props(tags: str | None = None, keys: str | None = None, **extra: str) -> str:
        p: dict[str, str] = {}
        if keys:
            p["KEYS"] = keys
        if tags:
            p["TAGS"] = tags
        p.update(extra)
        p.setdefault("WAIT", "true")
        return encode_properties(p) + "\x02"  # with the trailing separator, as CPP sends

    @staticmethod
    def send_v1(topic: str, body: bytes, *, queue_id: int = 0, properties: str | None = "", batch: bool = False,
                sys_flag: int = 0, group: str = "PG", default_topic: str = "TBW102", flag: int = 0, **kw) -> RemotingCommand:
        h = SendMessageRequestHeader(
            producerGroup=group, topic=topic, defaultTopic=default_topic, defaultTopicQueueNums=4,
            queueId=queue_id, sysFlag=sys_flag, bornTimestamp=1_700_000_000_123, flag=flag,
            properties=properties, reconsumeTimes=0, unitMode=False, batch=batch, **kw,
        )
        return RemotingCommand.request(10, h, body=body)

    @staticmethod
    def send_v2(topic: str, body: bytes, *, queue_id: int = 0, properties: str | None = "", code: int = 310,
                group: str = "PG", batch: bool = False) -> RemotingCommand:
        h = SendMessageRequestHeaderV2(
            a=group, b=topic, c="TBW102", d=4, e=queue_id, f=0, g=1_700_000_000_456, h=0,
            i=properties, j=0, k=False, m=batch,
        )
        return RemotingCommand.request(code, h, body=body)

    @staticmethod
    def pull(topic: str, queue_id: int = 0, offset: int = 0, *, group: str = "CG", sys_flag: int = 6,
             suspend_ms: int = 15000, subscription: str | None = "*", max_msgs: int = 32,
             commit_offset: int = 0, expression_type: str | None = None, sub_version: int = 0) -> RemotingCommand:
        h = PullMessageRequestHeader(
            consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset, maxMsgNums=max_msgs,
            sysFlag=sys_flag, commitOffset=commit_offset, suspendTimeoutMillis=suspend_ms,
            subscription=subscription, subVersion=sub_version, expressionType=expression_type,
        )
        return RemotingCommand.request(11, h)


@pytest.fixture
def wire() -> type[Wire]:
    return Wire


# -- raw frames, as the C++ client writes them -------------------------------------------


def cpp_frame(code: int, ext: dict, opaque: int, body: bytes = b"") -> bytes:
    """jsoncpp FastWriter output: sorted keys, trailing newline, ints where CPP sends ints,
    remark "", flag 0 (even for "oneway"), version 63, language CPP."""
    ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x=", **ext}
    header = json.dumps(
        {"code": code, "extFields": dict(sorted(ext.items())), "flag": 0, "language": "CPP",
         "opaque": opaque, "remark": "", "version": 63},
        separators=(",", ":"), sort_keys=True,
    ).encode() + b"\n"
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


async def read_frame(stream: trio.SocketStream, buf: bytearray) -> tuple[RemotingCommand, bytes]:
    """One response frame; also returns the raw header JSON bytes."""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        data = await stream.receive_some(65536)
        if not data:
            raise EOFError("closed")
        buf += data
    (length,) = struct.unpack_from(">i", buf)
    payload = bytes(buf[4 : 4 + length])
    del buf[: 4 + length]
    (word,) = struct.unpack_from(">i", payload)
    header = payload[4 : 4 + (word & 0xFFFFFF)]
    assert word >> 24 == 0, "responses must be JSON (serialize byte 0)"
    return decode_command(payload), header


@pytest.fixture
def raw():
    class Raw:
        frame = staticmethod(cpp_frame)
        read = staticmethod(read_frame)

    return Raw
