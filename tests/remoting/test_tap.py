"""The capture tap records every frame sent and received, on both sides."""

from __future__ import annotations


from trocket.codecs.capture import Direction, Role, iter_records
from trocket.codecs.serialize import decode_command
from trocket.remoting import FileTap, MemoryTap

from .conftest import client_of, request, serving


async def test_memory_tap_sees_both_directions_on_both_sides():
    stap, ctap = MemoryTap(), MemoryTap()
    async with serving(tap=stap) as server, client_of(tap=ctap) as client:
        for i in range(3):
            await client.invoke_sync(server.address, request(body=b"%d" % i))
        await client.invoke_oneway(server.address, request(4242))
        await client.invoke_sync(server.address, request(body=b"last"))
        conn = client.connection_for(server.address)
    assert [(r.direction, decode_command(r.payload).body) for r in ctap.records[:2]] == [
        (Direction.SENT, b"0"),
        (Direction.RECEIVED, b"0"),
    ]
    assert len(ctap.records) == len(stap.records) == 9  # 5 requests, 4 responses
    assert all(r.role is Role.CLIENT for r in ctap.records)
    assert all(r.role is Role.SERVER for r in stap.records)
    assert {r.connection_id for r in ctap.records} == {conn.id}
    assert all(r.local_address == conn.local_address and r.remote_address == server.address for r in ctap.records)
    # the server received exactly the bytes the client sent
    sent = [r.frame for r in ctap.records if r.direction is Direction.SENT]
    received = [r.frame for r in stap.records if r.direction is Direction.RECEIVED]
    assert sent == received
    ts = [r.timestamp_ns for r in ctap.records]
    assert ts == sorted(ts)


async def test_file_tap_appends_a_readable_capture(tmp_path):
    path = tmp_path / "cap.trkcap"
    with FileTap(path) as tap:
        async with serving(tap=tap) as server, client_of() as client:
            for i in range(10):
                await client.invoke_sync(server.address, request(body=b"x" * i))
    with FileTap(path) as tap:  # reopened: appends, no second header
        async with serving(tap=tap) as server, client_of() as client:
            await client.invoke_sync(server.address, request(body=b"again"))
    with open(path, "rb") as f:
        records = list(iter_records(f))
    assert len(records) == 22
    bodies = [decode_command(r.payload).body for r in records if r.direction is Direction.RECEIVED]
    assert bodies == [b"x" * i for i in range(10)] + [b"again"]
    assert len({r.connection_id for r in records}) == 2
