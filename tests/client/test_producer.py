"""The producer against a real trocket broker (in-process, real sockets and store) and
against fakes that misbehave in one precise way."""

from __future__ import annotations

import contextlib
import zlib

import pytest
import trio

from trocket.client import (
    BrokerBusyError,
    BrokerResponseError,
    ClientConfig,
    ClientConnectError,
    ConnectionLostError,
    MessageRefusedError,
    NoRouteError,
    SendStatus,
    SendTimeoutError,
    new_message,
)
from trocket.client.message import MessageQueue
from trocket.client.producer import Producer, select_by_hash
from trocket.codecs.headers import SendMessageRequestHeaderV2
from trocket.codecs.message.sysflag import COMPRESSED_FLAG

from ..waiting import wait_until
from .conftest import closed_port, fake_namesrv, fake_server, pull_all, tcp_sink


async def test_send_result_and_stored_message(namesrv):
    async with Producer("PG", namesrv) as producer:
        msg = new_message("T1", b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "red"})
        result = await producer.send(msg)
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id == msg.unique_key and len(result.msg_id) == 32
        assert result.queue.topic == "T1" and result.queue.broker_name == "broker-a"
        assert result.queue_offset == 0
        assert result.region_id == "DefaultRegion" and result.trace_on
        assert len(result.offset_msg_id) == 32
        stored = await pull_all(producer.instance, "T1")
    assert len(stored) == 1
    got = stored[0]
    assert got.body == b"hello" and got.tags == "TagA" and got.keys == ["k1", "k2"]
    assert got.properties["color"] == "red"
    assert got.client_msg_id == result.msg_id and got.msg_id == result.offset_msg_id


async def test_new_topic_goes_through_tbw102_and_gets_its_own_route(namesrv):
    async with Producer("PG", namesrv) as producer:
        assert "Fresh" not in producer.instance.routes
        await producer.send(new_message("Fresh", b"x"))
        assert producer.instance.publish["Fresh"].from_default
        # the broker registers the new topic soon after
        route = await wait_until(lambda: producer.instance.update_route("Fresh"), 10, interval=0.02)
        assert route.queue_datas[0].write_queue_nums == 4
        assert not producer.instance.publish["Fresh"].from_default  # the real route replaced it


async def test_body_at_4k_is_compressed_and_comes_back_whole(namesrv, broker):
    body = bytes(range(256)) * 20  # 5120 bytes
    async with Producer("PG", namesrv) as producer:
        await producer.send(new_message("Big", body))
        await producer.send(new_message("Big", b"small"))
        stored = await pull_all(producer.instance, "Big")
    by_body = {m.body: m for m in stored}
    assert by_body[body].sys_flag & COMPRESSED_FLAG
    assert by_body[body].store_size < len(body)  # stored compressed
    assert not by_body[b"small"].sys_flag & COMPRESSED_FLAG
    assert zlib.compress(body, 5)  # the level Java uses


@pytest.mark.parametrize(
    "topic, body, why",
    [
        ("bad topic!", b"x", "illegal characters"),
        ("", b"x", "blank"),
        ("t" * 128, b"x", "longer than topic max length"),
        ("SCHEDULE_TOPIC_XXXX", b"x", "forbidden"),
        ("T", b"", "length is zero"),
    ],
)
async def test_bad_messages_are_refused_before_sending(topic, body, why):
    # no broker, no name server: the checks come first and cost nothing remote
    async with Producer("PG", closed_port()) as producer:
        with pytest.raises(MessageRefusedError, match=why) as info:
            await producer.send(new_message(topic, body))
        assert info.value.code == 13 and not info.value.attempts


async def test_oversize_message_is_refused():
    async with Producer("PG", closed_port(), max_message_size=1000) as producer:
        with pytest.raises(MessageRefusedError, match="over max value, MAX: 1000"):
            await producer.send(new_message("T", b"x" * 1001))


async def test_name_server_that_does_not_answer_times_out_within_the_budget():
    async with tcp_sink("hang") as silent:
        async with Producer("PG", silent, send_timeout=0.5) as producer:
            begin = trio.current_time()
            with pytest.raises(SendTimeoutError) as info:
                await producer.send(new_message("T", b"x"))
            took = trio.current_time() - begin
    assert 0.45 <= took < 1.5
    assert "route lookup" in str(info.value) and f"namesrv {silent}" in str(info.value)


async def test_name_server_that_refuses_is_a_connect_error():
    addr = closed_port()
    async with Producer("PG", addr) as producer:
        with pytest.raises(ClientConnectError, match="no name server reachable") as info:
            await producer.send(new_message("T", b"x"))
    assert addr in str(info.value)


async def test_second_name_server_answers_when_the_first_is_down(namesrv):
    dead = closed_port()
    async with Producer("PG", f"{dead};{namesrv}") as producer:
        result = await producer.send(new_message("T", b"x"))
        assert result.ok
        assert producer.instance.api.namesrv[producer.instance.api._ns_index] == namesrv


async def test_broker_that_closes_the_connection_is_retried_then_reported():
    async with tcp_sink("close") as closer, fake_namesrv({"broker-x": closer}) as ns:
        async with Producer("PG", ns, send_timeout=2) as producer:
            with pytest.raises(ConnectionLostError) as info:
                await producer.send(new_message("T", b"x"))
    err = info.value
    assert len(err.attempts) == 3  # one try and two retries
    assert all(closer in a.target for a in err.attempts)
    assert "failed after 3 attempt(s)" in str(err) and "RemotingConnectionClosedError" in str(err)


async def test_broker_that_never_answers_uses_up_one_budget():
    async with tcp_sink("hang") as hang, fake_namesrv({"broker-x": hang}) as ns:
        # call_timeout bounds the goodbye (UNREGISTER_CLIENT) to the hung broker at exit
        async with Producer("PG", client_config=ClientConfig(namesrv=ns, call_timeout=0.3), send_timeout=0.6) as producer:
            begin = trio.current_time()
            with pytest.raises(SendTimeoutError) as info:
                await producer.send(new_message("T", b"x"))
            took = trio.current_time() - begin
    assert 0.55 <= took < 1.5  # the whole send, not per attempt
    assert info.value.attempts and "RemotingTimeoutError" in str(info.value)


async def test_dead_broker_is_skipped_for_the_live_one(broker, namesrv):
    dead = closed_port()
    async with fake_namesrv({"broker-a": broker.broker_addr, "broker-dead": dead}) as ns:
        async with Producer("PG", ns) as producer:
            results = [await producer.send(new_message("Two", b"m%d" % i)) for i in range(20)]
            assert all(r.ok and r.queue.broker_name == "broker-a" for r in results)
            # latency fault tolerance: the dead broker was tried once, then avoided
            assert not producer.faults.is_available("broker-dead")


async def test_system_busy_is_broker_busy_and_not_retried():
    calls = []

    async def busy(conn, request):
        calls.append(request.code)
        return request.make_response(2, "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while")

    async with fake_server({310: busy}) as b, fake_namesrv({"broker-b": b}) as ns:
        async with Producer("PG", ns) as producer:
            with pytest.raises(BrokerBusyError, match="flow control") as info:
                await producer.send(new_message("T", b"x"))
    assert calls == [310] and info.value.code == 2 and len(info.value.attempts) == 1


async def test_system_error_is_retried_on_another_broker():
    seen = []

    def answer(name, code):
        async def proc(conn, request):
            seen.append(name)
            if code:
                return request.make_response(code, "store error")
            return request.make_response(
                0, ext_fields={"msgId": "7F000001000027110000000000000000", "queueId": "1", "queueOffset": "7"}
            )

        return proc

    async with fake_server({310: answer("bad", 1)}) as bad, fake_server({310: answer("good", 0)}) as good:
        async with fake_namesrv({"broker-1": bad, "broker-2": good}) as ns:
            async with Producer("PG", ns) as producer:
                await producer.send(new_message("T", b"warm"))  # the route is cached now
                seen.clear()
                producer.faults.remove("broker-1")
                producer.instance.publish["T"].index = -1  # the next pick is broker-1's queue 0
                for _ in range(8):
                    result = await producer.send(new_message("T", b"x"))
                    assert result.queue.broker_name == "broker-2" and result.queue_offset == 7
    assert seen[:2] == ["bad", "good"]  # retried on the other broker
    assert seen.count("bad") == 1  # then in fault, avoided


async def test_no_route_anywhere():
    async def not_exist(conn, request):
        return request.make_response(17, "No topic route info in name server for the topic", ext_fields={})

    async with fake_server({105: not_exist}) as ns:
        async with Producer("PG", ns) as producer:
            with pytest.raises(NoRouteError, match="topic T does not exist .* they know no TBW102 with a writable queue"):
                await producer.send(new_message("T", b"x"))


async def test_async_oneway_and_callback(namesrv):
    got = []
    async with Producer("PG", namesrv) as producer:
        futs = [
            await producer.send_async(new_message("A", b"%d" % i), lambda r, e: got.append((r, e)))
            for i in range(100)
        ]
        results = [await f for f in futs]
        for i in range(10):
            await producer.send_oneway(new_message("A", b"oneway%d" % i))
        async def all_stored() -> bool:
            return len(await pull_all(producer.instance, "A")) >= 110

        await wait_until(all_stored, 5, interval=0.05)
    assert len(got) == 100 and all(e is None for _, e in got)
    assert sorted(r.msg_id for r in results) == sorted(r.msg_id for r, _ in got)


async def test_async_error_goes_to_the_future():
    async with tcp_sink("close") as closer, fake_namesrv({"broker-x": closer}) as ns:
        async with Producer("PG", ns) as producer:
            errors = []
            fut = await producer.send_async(new_message("T", b"x"), lambda r, e: errors.append(e))
            with pytest.raises(ConnectionLostError):
                await fut
    assert isinstance(errors[0], ConnectionLostError)


async def test_send_orderly_keeps_a_key_on_one_queue(namesrv):
    async with Producer("PG", namesrv) as producer:
        await producer.send(new_message("O", b"warm"))  # the route exists afterwards
        await producer.instance.update_route("O")
        queues = {}
        for i in range(40):
            key = f"order-{i % 4}"
            r = await producer.send_orderly(new_message("O", f"{key}:{i}".encode()), key=key)
            queues.setdefault(key, set()).add(r.queue.queue_id)
        assert all(len(q) == 1 for q in queues.values())
        picked = await producer.send_orderly(new_message("O", b"sel"), lambda mqs, m, a: mqs[a], 3)
        assert picked.queue.queue_id == 3
        stored = await pull_all(producer.instance, "O")
    for key in queues:
        bodies = [m.body for m in sorted(stored, key=lambda m: m.queue_offset) if m.body.startswith(key.encode() + b":")]
        assert [int(b.split(b":")[1]) for b in bodies] == sorted(int(b.split(b":")[1]) for b in bodies)


def test_select_by_hash_matches_java():
    from trocket.client import MessageQueue

    qs = [MessageQueue("T", "b", i) for i in range(4)]
    # "order-1".hashCode() == 1234113386 in Java -> % 4 == 2
    assert select_by_hash(qs, None, "order-1").queue_id == 1234113386 % 4


async def test_batch_is_split_under_the_limit_and_stored_whole(namesrv):
    async with Producer("PG", namesrv, max_message_size=2000) as producer:
        msgs = [new_message("B", b"%03d" % i + b"x" * 197, tags="T") for i in range(32)]
        chunks = producer.split_batch(msgs)
        assert len(chunks) > 1 and sorted(i for c in chunks for i in c) == list(range(32))
        results = await producer.send_batch(msgs)
        assert len(results) == len(chunks)
        assert [len(r.msg_id.split(",")) for r in results] == [len(c) for c in chunks]
        stored = await pull_all(producer.instance, "B")
    assert sorted(m.body for m in stored) == sorted(m.body for m in msgs)
    assert {m.client_msg_id for m in stored} == {m.unique_key for m in msgs}


async def test_batch_refuses_what_java_refuses(namesrv):
    async with Producer("PG", namesrv, max_message_size=500) as producer:
        with pytest.raises(MessageRefusedError, match="message 1 alone is"):
            await producer.send_batch([new_message("B", b"x"), new_message("B", b"y" * 490)])
        with pytest.raises(MessageRefusedError, match="one topic"):
            await producer.send_batch([new_message("B", b"x"), new_message("C", b"y")])
        with pytest.raises(MessageRefusedError, match="TimeDelayLevel"):
            await producer.send_batch([new_message("B", b"x", delay_level=2)])


async def test_delay_level_is_sent(namesrv):
    async with Producer("PG", namesrv) as producer:
        await producer.send(new_message("D", b"later", delay_level=1))
        stored = await wait_until(lambda: pull_all(producer.instance, "D"), 10, interval=0.1)
    # level 1 is 1 s: stored again in D by the schedule service a second after its birth
    assert stored[0].body == b"later" and stored[0].store_timestamp - stored[0].born_timestamp >= 900


async def test_not_running_and_bad_options():
    producer = Producer("PG", "127.0.0.1:1")
    with pytest.raises(Exception, match="not running"):
        await producer.send(new_message("T", b"x"))
    with pytest.raises(ValueError, match="illegal characters"):
        Producer("bad group!", "127.0.0.1:1")
    with pytest.raises(ValueError, match="host:port"):
        Producer("PG", "nowhere")


async def test_a_loop_of_oneway_and_async_sends_lets_other_tasks_run(namesrv):
    """send_oneway / send_async are trio checkpoints: a loop of them that the socket
    always accepts must not starve the rest of the program (a timer here)."""
    async with Producer("PG", namesrv) as producer:
        await producer.send(new_message("Loop", b"warm"))
        for send in (producer.send_oneway, producer.send_async):
            ticked = trio.Event()

            async def timer():
                await trio.sleep(0.05)  # the point: a timer must fire while the loop sends
                ticked.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(timer)
                with trio.fail_after(10):
                    while not ticked.is_set():
                        await send(new_message("Loop", b"x"))


async def test_close_waits_for_async_sends_in_flight(namesrv):
    async with Producer("PG", namesrv) as producer:
        futs = [await producer.send_async(new_message("Drain", b"%d" % i)) for i in range(200)]
    assert all(f.done() and f.exception() is None for f in futs)


def answering(name: str, seen: list, codes: list[int]):
    """A SEND_MESSAGE_V2 processor answering ``codes`` in turn (then 0, success)."""

    async def proc(conn, request):
        seen.append(name)
        code = codes.pop(0) if codes else 0
        if code == -1:  # never answer
            await trio.sleep_forever()
        ext = {"msgId": "7F000001000027110000000000000000", "queueId": "0", "queueOffset": "1"}
        if code in (0, 10, 11, 12):  # stored (FLUSH_DISK_TIMEOUT & co. carry the header too)
            return request.make_response(code, ext_fields=ext)
        return request.make_response(code, "store error")

    return proc


async def test_async_hot_path_retries_on_another_broker():
    seen = []
    bad_codes: list[int] = []
    async with fake_server({310: answering("bad", seen, bad_codes)}) as bad, \
            fake_server({310: answering("good", seen, [])}) as good, \
            fake_namesrv({"broker-1": bad, "broker-2": good}) as ns:
        async with Producer("PG", ns) as producer:
            with trio.fail_after(5):  # a connection to each broker: async sends take the hot path
                while {"bad", "good"} - set(seen):
                    await producer.send(new_message("T", b"warm"))
            seen.clear()
            bad_codes.append(1)  # broker-1's next answer: SYSTEM_ERROR
            producer.instance.publish["T"].index = -1  # the next pick is broker-1's queue 0
            got = []
            result = await (await producer.send_async(new_message("T", b"x"), lambda r, e: got.append((r, e))))
    assert seen == ["bad", "good"]  # retried on broker-2
    assert result.queue.broker_name == "broker-2" and got == [(result, None)]


async def test_async_hot_path_times_out_within_its_budget():
    seen = []
    async with fake_server({310: answering("hang", seen, [0, -1])}) as hang, fake_namesrv({"broker-h": hang}) as ns:
        async with Producer("PG", client_config=ClientConfig(namesrv=ns, call_timeout=0.3), send_timeout=0.5) as producer:
            await producer.send(new_message("T", b"warm"))  # route and connection at hand
            begin = trio.current_time()
            fut = await producer.send_async(new_message("T", b"x"))
            with pytest.raises(SendTimeoutError) as info:
                await fut
            took = trio.current_time() - begin
    assert 0.45 <= took < 1.0  # the deadline wheel expired it, not the 1 s response scan
    assert "RemotingTimeoutError" in str(info.value)


async def test_json_headers_as_javas_default(namesrv):
    from trocket.codecs.command import SerializeType

    cfg = ClientConfig(namesrv=namesrv, serialize_type=SerializeType.JSON)
    async with Producer("PG", client_config=cfg) as producer:
        result = await producer.send(new_message("Json", b"j", tags="T"))
        batch = await producer.send_batch([new_message("Json", b"b%d" % i) for i in range(3)])
        stored = await pull_all(producer.instance, "Json")
    assert result.ok and batch[0].ok and sorted(m.body for m in stored) == [b"b0", b"b1", b"b2", b"j"]


async def test_orderly_send_is_not_retried_elsewhere():
    seen = []
    async with fake_server({310: answering("a", seen, [1])}) as a, \
            fake_server({310: answering("b", seen, [])}) as b, \
            fake_namesrv({"broker-1": a, "broker-2": b}) as ns:
        async with Producer("PG", ns) as producer:
            with pytest.raises(BrokerResponseError, match="SYSTEM_ERROR") as info:
                await producer.send_orderly(new_message("T", b"x"), lambda mqs, m, arg: mqs[0], None)
    assert seen == ["a"] and len(info.value.attempts) == 1  # the queue is the point: no other broker


async def test_flush_disk_timeout_is_a_result_unless_asked_to_retry():
    seen = []
    async with fake_server({310: answering("a", seen, [10, 10])}) as a, fake_namesrv({"broker-1": a}) as ns:
        async with Producer("PG", ns) as producer:
            result = await producer.send(new_message("T", b"x"))
            assert result.status is SendStatus.FLUSH_DISK_TIMEOUT and not result.ok
        async with Producer("PG2", ns, retry_another_broker_when_not_store_ok=True) as producer:
            result = await producer.send(new_message("T", b"x"))
    # retried (here on the same, only broker): the second answer, 0, is SEND_OK
    assert result.ok and seen == ["a", "a", "a"]


async def test_a_success_answer_without_its_header_is_a_typed_error():
    async def headless(conn, request):
        return request.make_response(0, ext_fields={})

    async with fake_server({310: headless}) as b, fake_namesrv({"broker-1": b}) as ns:
        async with Producer("PG", ns) as producer:
            with pytest.raises(BrokerResponseError, match="does not decode"):
                await producer.send(new_message("T", b"x"))


async def test_send_to_an_explicit_queue(namesrv):
    async with Producer("PG", namesrv) as producer:
        warm = await producer.send(new_message("TQ", b"warm"))  # to a queue of the producer's choice
        mq = next(q for q in producer.instance.publish["TQ"].queues if q.queue_id != warm.queue.queue_id)
        results = [await producer.send(new_message("TQ", f"q{i}".encode()), queue=mq) for i in range(3)]
        assert {r.queue for r in results} == {mq}
        with pytest.raises(ValueError, match="not the message's"):
            await producer.send(new_message("OTHER", b"x"), queue=mq)
        stored = await pull_all(producer.instance, "TQ")
    assert sorted(m.body for m in stored if m.queue_id == mq.queue_id) == [b"q0", b"q1", b"q2"]


async def test_retry_response_codes_adds_a_code_to_retry():
    seen = []

    def answer(name, code):
        async def proc(conn, request):
            seen.append(name)
            if code:
                return request.make_response(code, "[TIMEOUT_CLEAN_QUEUE]broker busy")
            return request.make_response(
                0, ext_fields={"msgId": "7F000001000027110000000000000000", "queueId": "1", "queueOffset": "7"}
            )

        return proc

    async with fake_server({310: answer("busy", 2)}) as busy, fake_server({310: answer("good", 0)}) as good:
        async with fake_namesrv({"broker-1": busy, "broker-2": good}) as ns:
            for codes, retried in ((None, False), ({2, 1}, True)):
                extra = {} if codes is None else {"retry_response_codes": codes}
                async with Producer("PG", ns, latency_fault=False, **extra) as producer:
                    with contextlib.suppress(BrokerBusyError):  # the route is cached now
                        await producer.send(new_message("T", b"warm"))
                    seen.clear()
                    producer.instance.publish["T"].index = -1  # the next pick is broker-1's queue 0
                    if retried:
                        result = await producer.send(new_message("T", b"x"))
                        assert result.queue.broker_name == "broker-2"
                        assert seen[:2] == ["busy", "good"]
                    else:
                        with pytest.raises(BrokerBusyError):
                            await producer.send(new_message("T", b"x"))
                        assert seen == ["busy"]


def test_the_send_header_is_the_one_its_constructor_makes():
    """The send's V2 header is written slot by slot (its constructor's keywords cost ~4x):
    every field set, as the constructor would set it."""
    producer = Producer("HeaderGroup", "127.0.0.1:1", retries=0)
    p = producer._prepare(new_message("HeaderTopic", b"body", tags="t", keys="k1"))
    header = producer._request(p, MessageQueue("HeaderTopic", "broker-a", 3), batch=True).custom_header
    assert header == SendMessageRequestHeaderV2(
        a="HeaderGroup", b="HeaderTopic", c="TBW102", d=4, e=3, f=0, g=header.g, h=0, i=p.properties, j=0,
        k=False, l=None, m=True, n="broker-a",
    )
    assert "TAGS\x01t\x02" in header.i and isinstance(header.g, int)
