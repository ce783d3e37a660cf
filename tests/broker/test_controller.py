"""BrokerController life, configuration (broker.conf + flags), main entry points."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest
import trio

from trocket.broker.config import BrokerConfig, BrokerConfigError, load_properties_file, parse_properties
from trocket.cli_broker import add_broker_arguments, config_from_args
from trocket.broker.store import FlushMode
from trocket.codecs.codes import RequestCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.message.record import decode_records

# -- configuration -------------------------------------------------------------------------


def test_defaults_match_the_issue():
    c = BrokerConfig()
    assert (c.broker_name, c.cluster, c.broker_id) == ("broker-a", "DefaultCluster", 0)
    assert c.listen == ("127.0.0.1", 10911) and c.advertised_addr() == "127.0.0.1:10911"
    assert c.namesrv_addrs == [] and c.embedded_namesrv and c.namesrv_addr_list() == ["127.0.0.1:9876"]
    assert c.store_dir == "./trocket-store" and c.commit_log_segment_size == 1 << 30
    assert c.flush is FlushMode.ASYNC and c.auto_create_topic and c.default_topic_queue_nums == 4
    assert c.max_message_size == 4 << 20 and c.long_polling and c.short_polling_time_ms == 1000
    assert c.register_interval_ms == 30_000


def test_broker_conf_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(
        "# stock RocketMQ broker.conf\n"
        "brokerClusterName = MyCluster\n"
        "brokerName = broker-b\n"
        "brokerId = 0\n"
        "deleteWhen = 04\n"
        "fileReservedTime = 48\n"
        "brokerRole = ASYNC_MASTER\n"
        "flushDiskType = SYNC_FLUSH\n"
        "listenPort=10921\n"
        "brokerIP1=10.0.0.5\n"
        "namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\n"
        "storePathRootDir=/data/rmq\n"
        "mappedFileSizeCommitLog=67108864\n"
        "autoCreateTopicEnable=false\n"
        "defaultTopicQueueNums: 8\n"
        "maxMessageSize 1048576\n"
        "longPollingEnable=false\n"
    )
    c = load_properties_file(path)
    assert (c.cluster, c.broker_name) == ("MyCluster", "broker-b")
    assert c.listen == ("127.0.0.1", 10921) and c.advertise == ("10.0.0.5", 10921)
    assert c.namesrv_addrs == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert c.store_dir == "/data/rmq" and c.commit_log_segment_size == 64 << 20
    assert c.flush is FlushMode.SYNC and not c.auto_create_topic and c.default_topic_queue_nums == 8
    assert c.max_message_size == 1 << 20 and not c.long_polling and c.file_reserved_time_hours == 48
    # flags override the file
    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    args = parser.parse_args(["-c", str(path), "--listen", "0.0.0.0:0", "--flush", "async", "--store", "s",
                              "--namesrv", "h:1", "--auto-create-topic", "--max-message-size", "2m"])
    c2 = config_from_args(args)
    assert c2.listen == ("0.0.0.0", 0) and c2.flush is FlushMode.ASYNC and c2.store_dir == "s"
    assert c2.namesrv_addrs == ["h:1"] and c2.auto_create_topic and c2.max_message_size == 2 << 20
    assert c2.cluster == "MyCluster"


@pytest.mark.parametrize(
    "line, needle",
    [
        ("brokername=x", "unknown key (did you mean brokerName?)"),
        ("noSuchKey=1", "noSuchKey: unknown key"),
        ("flushDiskType=FAST", "bad flush mode"),
        ("brokerId=abc", "brokerId: expected an integer"),
        ("autoCreateTopicEnable=maybe", "expected true or false"),
        ("listenPort=70000", "out of range"),
        ("brokerRole=BACKUP", "bad broker role"),
        ("maxMessageSize=-1", "max_message_size must be positive"),
    ],
)
def test_broker_conf_errors(tmp_path, line, needle):
    path = tmp_path / "b.conf"
    path.write_text(f"brokerName=a\n{line}\n")
    with pytest.raises(BrokerConfigError) as info:
        load_properties_file(path)
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_properties_syntax():
    text = "a=1\n! comment\n  b : two words \\\n    continued\nc\\=d=e\\u0041\nempty=\n"
    assert parse_properties(text) == [(1, "a", "1"), (3, "b", "two words continued"), (5, "c=d", "eA"), (6, "empty", "")]


def test_cli_bad_values():
    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--listen", "host:notaport"])
    with pytest.raises(BrokerConfigError):
        config_from_args(parser.parse_args(["--broker-name", "bad name!"]))


# -- life ------------------------------------------------------------------------------------


async def test_clean_shutdown_persists_and_restart_recovers(tmp_path, wire):
    store_dir = tmp_path / "store"
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        for i in range(5):
            r = await c.invoke_sync(addr, wire.send_v1("Persist", f"m{i}".encode(), queue_id=2, properties=wire.props()))
            assert r.code == 0
        r = await c.invoke_sync(addr, wire.pull("Persist", 2, offset=3, sys_flag=5, commit_offset=3, group="PG1"))
        assert r.code == 0
        assert os.path.exists(store_dir / "abort")
    # clean: abort file gone, offsets and topics on disk
    assert not os.path.exists(store_dir / "abort")
    offsets = json.loads((store_dir / "config" / "consumerOffset.json").read_text())
    assert offsets["offsetTable"]["Persist@PG1"] == {"2": 3}
    topics = json.loads((store_dir / "config" / "topics.json").read_text())
    assert topics["topicConfigTable"]["Persist"]["writeQueueNums"] == 4

    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        addr = broker.broker_addr
        assert broker.store.recovery.abnormal is False
        assert broker.offsets.query_offset("PG1", "Persist", 2) == 3
        r = await c.invoke_sync(addr, wire.pull("Persist", 2, sys_flag=4))
        assert [m.body for m in decode_records(r.body)] == [f"m{i}".encode() for i in range(5)]
        r = await c.invoke_sync(addr, wire.send_v1("Persist", b"m5", queue_id=2, properties=wire.props()))
        assert r.ext_fields["queueOffset"] == "5"


async def test_the_vip_channel_serves_all_but_pull_on_the_listen_port_minus_2(tmp_path, wire):
    """Java's fastRemotingServer: a send on the listen port - 2 is stored as any other (a
    Java client with vipChannelEnabled sends there, a Java slave copies its master's
    topics from there); PULL_MESSAGE is not served there (REQUEST_CODE_NOT_SUPPORTED)."""
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        assert broker.vip_server is not None and broker.vip_server.port == broker.server.port - 2
        vip = f"127.0.0.1:{broker.vip_server.port}"
        r = await c.invoke_sync(vip, wire.send_v1("Vip", b"over vip", queue_id=0, properties=wire.props()))
        assert r.code == 0, r.remark
        r = await c.invoke_sync(vip, wire.pull("Vip", 0, sys_flag=4))
        assert r.code == 3 and "not supported" in r.remark
        r = await c.invoke_sync(broker.broker_addr, wire.pull("Vip", 0, sys_flag=4))
        assert [m.body for m in decode_records(r.body)] == [b"over vip"]
        r = await c.invoke_sync(vip, RemotingCommand.request(21))  # GET_ALL_TOPIC_CONFIG: what a Java slave asks
        assert r.code == 0 and b"Vip" in r.body


async def test_crash_recovery(tmp_path, wire):
    from trocket.broker.controller import BrokerController

    cfg = wire.broker_config(tmp_path)
    controller = BrokerController(cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        async with wire.client() as c:
            for i in range(3):
                await c.invoke_sync(controller.broker_addr, wire.send_v1("Crash", f"{i}".encode(), properties=wire.props()))
        # simulate a crash: the store lets go of its files without the clean end
        controller.store.abandon()
        nursery.cancel_scope.cancel()
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        assert broker.store.recovery.abnormal
        r = await c.invoke_sync(broker.broker_addr, wire.pull("Crash", sys_flag=4))
        assert [m.body for m in decode_records(r.body)] == [b"0", b"1", b"2"]


async def test_external_namesrv_registration_and_reregistration(tmp_path, wire, logical_clock):
    from trocket.broker.namesrv.server import NamesrvConfig, NameServer

    async with NameServer(NamesrvConfig(listen_port=0)) as ns:
        async with wire.running_broker(tmp_path, namesrv_addrs=[ns.address], register_interval_ms=150) as broker:
            assert broker.namesrv is None and broker.namesrv_addrs == [ns.address]
            first = broker.registrations
            assert first >= 1
            await trio.sleep(0.5)  # logical time: the period is what this checks
            assert broker.registrations == first + 3  # re-registered every 150 (logical) ms
            async with wire.client() as c:
                r = await c.invoke_sync(ns.address, RemotingCommand.request(105, ext_fields={"topic": "TBW102"}))
                assert r.code == 0 and broker.broker_addr.encode() in r.body
        # unregistered at shutdown
        async with wire.client() as c:
            r = await c.invoke_sync(ns.address, RemotingCommand.request(105, ext_fields={"topic": "TBW102"}))
            assert r.code == 17


async def test_request_shutdown_and_store_lock(tmp_path, wire):
    from trocket.broker.controller import BrokerController
    from trocket.broker.store import StoreLoadError

    async with wire.running_broker(tmp_path) as broker:
        # a second broker on the same store refuses to start
        other = BrokerController(wire.broker_config(tmp_path))
        with pytest.raises(BaseException) as info:
            async with trio.open_nursery() as n:
                await n.start(other.run)
        exc = info.value
        while isinstance(exc, BaseExceptionGroup):
            exc = exc.exceptions[0]
        assert isinstance(exc, StoreLoadError)
        broker.request_shutdown()
        with trio.fail_after(10):
            await broker.stopped.wait()


async def test_a_shutdown_requested_while_starting_is_not_lost(tmp_path, wire):
    """SIGINT/SIGTERM while the broker boots (its port already accepts, registration
    still under way): the broker finishes starting, then shuts down cleanly, instead
    of forgetting the request and serving on."""
    from trocket.broker.controller import BrokerController

    controller = BrokerController(wire.broker_config(tmp_path))
    controller.request_shutdown()  # before run(): as a signal in the middle of _start
    with trio.fail_after(20):
        await controller.run()
    assert controller.stopped.is_set() and controller.fatal is None
    assert not os.path.exists(tmp_path / "store" / "abort")  # a clean shutdown


async def test_async_with_shuts_down_cleanly_however_the_body_ends(tmp_path, wire):
    """``async with BrokerController(config)``: started on entry; a clean shutdown on a
    normal exit and on an exit by exception too (which comes back unwrapped);
    ``aclose()`` asks for it and waits, also of a broker run in the caller's nursery."""
    from trocket.broker.controller import BrokerController

    abort_file = tmp_path / "store" / "abort"
    async with BrokerController(wire.broker_config(tmp_path)) as broker:
        assert broker.server.port and abort_file.exists()
    assert broker.stopped.is_set() and not abort_file.exists()

    with pytest.raises(KeyError):
        async with BrokerController(wire.broker_config(tmp_path)) as broker:
            assert abort_file.exists()
            raise KeyError("mine")
    assert broker.stopped.is_set() and not abort_file.exists()

    with trio.fail_after(5):
        await BrokerController(wire.broker_config(tmp_path)).aclose()  # never run: nothing to wait for
    broker = BrokerController(wire.broker_config(tmp_path))
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        assert abort_file.exists() and not broker.stopped.is_set()
        with trio.fail_after(20):
            await broker.aclose()
        assert broker.stopped.is_set() and not abort_file.exists()


def read_lines_until(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    """``proc``'s stdout lines up to the first holding ``needle``; fails after
    ``timeout`` s even if the process writes nothing (a bare readline would block)."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    deadline = time.monotonic() + timeout
    buf = b""
    while needle.encode() not in buf:
        left = deadline - time.monotonic()
        assert left > 0 and proc.poll() is None, buf.decode(errors="replace")
        select.select([fd], [], [], min(left, 0.5))
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        assert chunk, f"stdout closed: {buf.decode(errors='replace')}"
        buf += chunk
    os.set_blocking(fd, True)
    return buf.decode().splitlines(keepends=True)


def test_main_broker_sigint_clean_exit(tmp_path):
    store = tmp_path / "st"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trocket", "broker", "--store", str(store),
         "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--segment-size", "32m"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    try:
        lines = read_lines_until(proc, "boot success", 20)
        assert any("The broker[broker-a, 127.0.0.1:" in x and "boot success. serializeType=JSON and name server is 127.0.0.1:" in x for x in lines), lines
        assert (store / "abort").exists()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        out = out.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out  # SIGINT: 130 after the clean shutdown
    assert "shut down cleanly" in out
    assert not (store / "abort").exists()


async def test_unknown_code_reply_has_ext_fields_for_the_cpp_client(tmp_path, wire):
    # The C++ client dereferences the reply's extFields; the broker's system replies
    # must carry the object even where Java's remoting leaves it out.
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        resp = await c.invoke_sync(broker.broker_addr, RemotingCommand.request(4242))
    assert resp.code == 3 and resp.remark == " request type 4242 not supported"
    assert resp.ext_fields == {}


async def test_start_warns_of_settings_without_effect_and_advertises_its_ha_server(tmp_path, wire, caplog):
    """``pullMessageThreadPoolNums``, ``pullThreadPoolQueueCapacity`` and
    ``notify_batch_ms`` are accepted (Java broker.conf files carry them) but change
    nothing: a broker given one says so at start. As Java's, an ASYNC_MASTER listens on
    its HA port (listen port + 1; any free port here) and registers that HA server, so a
    slave can follow it through the name server."""
    conf = tmp_path / "broker.conf"
    conf.write_text("pullMessageThreadPoolNums=8\npullThreadPoolQueueCapacity=50\n")
    config = load_properties_file(conf, wire.broker_config(tmp_path)).evolve(notify_batch_ms=5)
    assert config.ineffective_settings() == ["pullMessageThreadPoolNums", "pullThreadPoolQueueCapacity", "notify_batch_ms"]
    assert wire.broker_config(tmp_path).ineffective_settings() == []
    caplog.set_level("INFO", logger="trocket")
    from trocket.broker.controller import BrokerController

    controller = BrokerController(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        live = controller.namesrv.route_info.broker_live_table[controller.broker_addr]
        ha_addr = f"127.0.0.1:{controller.ha.server.port}"
        assert controller.ha.server.port and live.ha_server_addr == ha_addr
        nursery.cancel_scope.cancel()
    messages = [r.getMessage() for r in caplog.records]
    for key in ("pullMessageThreadPoolNums", "pullThreadPoolQueueCapacity", "notify_batch_ms"):
        assert f"{key} is accepted for compatibility and has no effect" in messages
    assert any(m.endswith(f"HAServer: {ha_addr}") for m in messages)


#: The request codes Apache RocketMQ 4.9.8's broker serves: the ones ``BrokerController``
#: registers a processor for and the cases of ``AdminBrokerProcessor``'s switch.
JAVA_BROKER_CODES = (
    "CHECK_CLIENT_CONFIG", "CLEAN_EXPIRED_CONSUMEQUEUE", "CLEAN_UNUSED_TOPIC", "CLONE_GROUP_OFFSET",
    "CONSUMER_SEND_MSG_BACK", "CONSUME_MESSAGE_DIRECTLY", "DELETE_ACL_CONFIG",
    "DELETE_EXPIRED_COMMITLOG", "DELETE_SUBSCRIPTIONGROUP", "DELETE_TOPIC_IN_BROKER",
    "END_TRANSACTION", "GET_ALL_CONSUMER_OFFSET", "GET_ALL_DELAY_OFFSET", "GET_ALL_PRODUCER_INFO",
    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "GET_ALL_TOPIC_CONFIG", "GET_BROKER_CLUSTER_ACL_INFO",
    "GET_BROKER_CONFIG", "GET_BROKER_CONSUME_STATS", "GET_BROKER_RUNTIME_INFO",
    "GET_CONSUMER_CONNECTION_LIST", "GET_CONSUMER_LIST_BY_GROUP", "GET_CONSUMER_RUNNING_INFO",
    "GET_CONSUME_STATS", "GET_EARLIEST_MSG_STORETIME", "GET_MAX_OFFSET", "GET_MIN_OFFSET",
    "GET_PRODUCER_CONNECTION_LIST", "GET_SYSTEM_TOPIC_LIST_FROM_BROKER", "GET_TOPIC_STATS_INFO",
    "HEART_BEAT", "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", "INVOKE_BROKER_TO_RESET_OFFSET",
    "LOCK_BATCH_MQ", "PULL_MESSAGE", "QUERY_CONSUMER_OFFSET", "QUERY_CONSUME_QUEUE",
    "QUERY_CONSUME_TIME_SPAN", "QUERY_CORRECTION_OFFSET", "QUERY_MESSAGE",
    "QUERY_TOPIC_CONSUME_BY_WHO", "RESUME_CHECK_HALF_MESSAGE", "SEARCH_OFFSET_BY_TIMESTAMP",
    "SEND_BATCH_MESSAGE", "SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_REPLY_MESSAGE",
    "SEND_REPLY_MESSAGE_V2", "UNLOCK_BATCH_MQ", "UNREGISTER_CLIENT", "UPDATE_AND_CREATE_ACL_CONFIG",
    "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", "UPDATE_AND_CREATE_TOPIC", "UPDATE_BROKER_CONFIG",
    "UPDATE_CONSUMER_OFFSET", "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", "VIEW_BROKER_STATS_DATA",
    "VIEW_MESSAGE_BY_ID"
)


async def test_serves_every_code_javas_broker_serves_and_answers_bad_input_without_a_traceback(tmp_path, wire, caplog):
    """Each of Java's 58 codes is served (no REQUEST_CODE_NOT_SUPPORTED), and each, sent
    with no header and with bodies that are no such body, is answered with a code and
    nothing logged with a traceback: the request fails alone, not the broker."""
    assert len(set(JAVA_BROKER_CODES)) == 58
    async with wire.running_broker(tmp_path) as broker, wire.client() as c:
        for name in JAVA_BROKER_CODES:
            code = int(getattr(RequestCode, name))
            for body in (b"", b"garbage", b"{}", b"[]", bytes(64)):
                resp = await c.invoke_sync(broker.broker_addr, RemotingCommand.request(code, body=body))
                assert not (resp.code == 3 and "not supported" in (resp.remark or "")), name
                assert resp.is_response, name
        # (the connection the bad requests came on still works)
        resp = await c.invoke_sync(broker.broker_addr, RemotingCommand.request(int(RequestCode.GET_BROKER_RUNTIME_INFO)))
        assert resp.code == 0
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [(r.getMessage(), r.exc_info[1]) for r in tracebacks]
