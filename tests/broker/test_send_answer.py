"""A stored message's SUCCESS answer, a prepared response whose frame comes from the
template's bytes (``send._SendOk``, ``codecs.send_response.encode_send_ok``) when no
response hook has to see it, and the usual way (a command through
``Connection.answer``) when one does: the same answer either way, both serializations."""

from __future__ import annotations

import trio

from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.message.msgid import decode_offset_msg_id

OK_EXT = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


async def _send_each(c, addr, wire, stype, n, topic="SA"):
    answers = []
    for i in range(n):
        req = wire.send_v2(topic, b"m%d" % i, queue_id=i % 2, properties=wire.props(tags="t"))
        req.serialize_type = stype
        answers.append(await c.invoke_sync(addr, req))
    return answers


def _check(answers, stype):
    offsets = {0: 0, 1: 0}
    for i, r in enumerate(answers):
        q = i % 2
        assert (r.code, r.remark, r.serialize_type, r.body) == (0, None, stype, b""), r.remark
        assert list(r.ext_fields) == ["msgId", "queueId", "queueOffset", *OK_EXT]
        assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == (str(q), str(offsets[q]))
        assert {k: r.ext_fields[k] for k in OK_EXT} == OK_EXT
        decode_offset_msg_id(r.ext_fields["msgId"])
        offsets[q] += 1


async def test_answers_written_by_the_processor(tmp_path, wire, monkeypatch):
    """No hook: JSON and ROCKETMQ sends get the SUCCESS answer (ids, queue offsets in
    order, the constant ext fields) the processor wrote itself, and the messages are stored."""
    from trocket.broker.processors import send

    written = []
    encode = send.encode_send_ok

    def spy(*args):
        frame = encode(*args)
        written.append(frame)
        return frame

    monkeypatch.setattr(send, "encode_send_ok", spy)
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
            topic = f"SA{int(stype)}"
            answers = await _send_each(c, addr, wire, stype, 6, topic)
            _check(answers, stype)
            assert broker.store.get_max_offset(topic, 0) == 3
        # every answer, each topic's first send too (answered once the name server knows
        # the topic, from a handler task, the same way)
        assert len(written) == 12 and None not in written
        assert broker.send_processor.put_messages >= 12


async def test_a_hook_sees_every_send_answer(tmp_path, wire):
    """With an RPC hook on the broker's server, each answer goes through
    ``Connection.answer``: the hook sees the command (and may change it)."""
    seen: list[RemotingCommand] = []

    class Hook:
        def do_before_request(self, remote_addr, request):
            pass

        def do_after_response(self, remote_addr, request, response):
            if request.code == 310:
                seen.append(response)
                response.ext_fields["MSG_REGION"] = "Hooked"

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        broker.server.register_rpc_hook(Hook())
        for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
            seen.clear()
            answers = await _send_each(c, addr, wire, stype, 4, f"SH{int(stype)}")
            assert len(seen) == 4
            assert [r.ext_fields["msgId"] for r in answers] == [r.ext_fields["msgId"] for r in seen]
            assert all(r.ext_fields["MSG_REGION"] == "Hooked" for r in answers)


async def test_many_senders_on_one_connection_in_order(tmp_path, wire):
    """Sends of several tasks on one connection, answered by the processor: every
    caller gets its own answer, queue offsets dense and in arrival order."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        await _send_each(c, addr, wire, SerializeType.JSON, 1, "SM")
        got: list[int] = []

        async def sender(k: int) -> None:
            for i in range(25):
                r = await c.invoke_sync(addr, wire.send_v2("SM", b"%d-%d" % (k, i), properties=wire.props()))
                assert r.code == 0, r.remark
                got.append(int(r.ext_fields["queueOffset"]))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for k in range(8):
                    nursery.start_soon(sender, k)
        assert sorted(got) == list(range(1, 201))
        assert broker.store.get_max_offset("SM", 0) == 201
