"""The console features of ``trocket send`` and ``trocket consume``, each a subprocess
against an in-process broker: bodies from a file or stdin (a message per line, or the
whole input), keys from the lines, no body source refused; consume showing born and
store times, properties, queue and offset (text and --json), and starting from a
timestamp or an offset."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import trio

from .conftest import running_broker

TROCKET = str(Path(sys.executable).with_name("trocket"))


async def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    with trio.fail_after(60):
        return await trio.run_process([TROCKET, *args], stdin=stdin, capture_stdout=True, capture_stderr=True,
                                      check=False, env={**os.environ, "NAMESRV_ADDR": ""})


async def consumed(ns: str, topic: str, group: str, n: int, *extra: str) -> list[dict]:
    r = await cli("consume", "-n", ns, "-t", topic, "-g", group, "--count", str(n), "--json", *extra)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


async def test_send_reads_a_file_stdin_or_the_whole_input(tmp_path):
    lines = tmp_path / "orders.txt"
    lines.write_bytes(b"first\r\nsecond\n\nthird")
    keyed = tmp_path / "kv.tsv"
    keyed.write_text("k1\tone\nk2\ttwo two\n")
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        r = await cli("send", "-n", ns, "-t", "Lines", "--file", str(lines), "--json", "-p", "src=file")
        assert r.returncode == 0, r.stderr.decode()
        assert json.loads(r.stdout)["sent"] == 3
        r = await cli("send", "-n", ns, "-t", "Stdin", "--body", "-", stdin=b"alpha\nbeta\n")
        assert r.returncode == 0 and r.stdout.startswith(b"sent 2, failed 0"), r
        r = await cli("send", "-n", ns, "-t", "Whole", "--file", str(lines), "--whole")
        assert r.returncode == 0 and r.stdout.startswith(b"SEND_OK msgId="), r  # one message: its result line
        r = await cli("send", "-n", ns, "-t", "Keyed", "--file", str(keyed), "--key-from-line")
        assert r.returncode == 0, r.stderr.decode()

        got = await consumed(ns, "Lines", "G1", 3, "--from", "first")
        assert sorted(m["body"] for m in got) == ["first", "second", "third"]
        assert all(m["properties"]["src"] == "file" for m in got)
        assert sorted(m["body"] for m in await consumed(ns, "Stdin", "G1", 2, "--from", "first")) == ["alpha", "beta"]
        (whole,) = await consumed(ns, "Whole", "G1", 1, "--from", "first")
        assert whole["body"] == "first\r\nsecond\n\nthird"
        got = await consumed(ns, "Keyed", "G1", 2, "--from", "first")
        assert sorted((m["keys"], m["body"]) for m in got) == [("k1", "one"), ("k2", "two two")]


async def test_send_refuses_what_does_not_fit(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("k1\tone\nno separator here\n")
    for args, stdin, words in (
        ((), b"", "nothing to send: give --body TEXT, --body - (stdin), --file F or --size N"),
        (("--file", str(bad), "--key-from-line"), b"", f"{bad}:2: not KEY'\\t'BODY (--key-from-line)"),
        (("--body", "-"), b"\n\n", "stdin has no non-empty line: nothing to send"),
        (("--file", str(bad), "--count", "3"), b"", "--count goes with --body TEXT or --size N"),
        (("--body", "x", "--whole"), b"", "--whole and --key-from-line go with --file F or --body - (stdin)"),
        (("--file", str(tmp_path / "missing")), b"", "cannot read"),
    ):
        r = await cli("send", "-n", "127.0.0.1:1", "-t", "T", *args, stdin=stdin)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.startswith("trocket: error: ") and words in err, (args, err)
        assert len(err.splitlines()) == 1, err


async def test_consume_shows_times_properties_queue_and_offset(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        before = int(time.time() * 1000)
        r = await cli("send", "-n", ns, "-t", "Shown", "--body", "hello", "--tag", "TA", "--keys", "k9",
                      "-p", "color=red", "--json")
        assert r.returncode == 0, r.stderr.decode()
        sent = json.loads(r.stdout)
        r = await cli("consume", "-n", ns, "-t", "Shown", "-g", "G", "--count", "1", "--from", "first")
        line = r.stdout.decode().strip()
        (m,) = await consumed(ns, "Shown", "G2", 1, "--from", "first")
    assert (m["queue"], m["offset"], m["msgId"]) == (sent["queueId"], sent["queueOffset"], sent["msgId"])
    assert m["offsetMsgId"] == sent["offsetMsgId"]
    assert before <= m["bornTimestamp"] <= m["storeTimestamp"] <= before + 60_000
    assert m["properties"]["color"] == "red" and m["properties"]["TAGS"] == "TA" and m["keys"] == "k9"
    born = dt.datetime.fromtimestamp(m["bornTimestamp"] / 1000, dt.timezone.utc)
    assert line.startswith(f"Shown queue={m['queue']} offset={m['offset']} msgId={m['msgId']} tags=TA keys=k9 "
                           f"born={born.strftime('%Y-%m-%dT%H:%M:%S')}"), line
    assert " props=color=red body='hello'" in line and "TAGS=" not in line, line


async def test_consume_from_a_timestamp_or_an_offset(tmp_path):
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        # one queue, so offsets and times line up with the order of the sends
        r = await cli("admin", "topic", "create", "-n", ns, "-t", "Timed", "--queues", "1")
        assert r.returncode == 0, r.stderr.decode()
        for i in range(3):
            assert (await cli("send", "-n", ns, "-t", "Timed", "--body", f"old-{i}")).returncode == 0
        # the search by time answers the nearer neighbour: the old ones far, the new ones near
        await trio.sleep(1.1)
        middle = dt.datetime.now(dt.timezone.utc)
        await trio.sleep(0.1)
        for i in range(2):
            assert (await cli("send", "-n", ns, "-t", "Timed", "--body", f"new-{i}")).returncode == 0
        got = await consumed(ns, "Timed", "GT", 2, "--from", f"timestamp:{middle.isoformat()}")
        assert [m["body"] for m in got] == ["new-0", "new-1"]
        got = await consumed(ns, "Timed", "GT", 3, "--from", "offset:2")  # the group had offsets: moved back
        assert [(m["offset"], m["body"]) for m in got] == [(2, "old-2"), (3, "new-0"), (4, "new-1")]
        got = await consumed(ns, "Timed", "GS", 2, "--from", f"timestamp:{int(middle.timestamp() * 1000)}")
        assert [m["body"] for m in got] == ["new-0", "new-1"]
        r = await cli("consume", "-n", ns, "-t", "Timed", "-g", "G", "--from", "offset:-1")
        assert r.returncode == 2 and b"offset:-1: N must be an offset, 0 or more" in r.stderr
        r = await cli("consume", "-n", ns, "-t", "Timed", "-g", "G", "--from", "yesterday")
        assert r.returncode == 2 and b"first, last, timestamp:T or offset:N" in r.stderr


async def test_namesrv_addr_is_read_where_namesrv_is(tmp_path, nursery):
    """$NAMESRV_ADDR, as RocketMQ's tools and broker read it: a broker started with it
    registers there (no embedded name server), and send, consume and admin find it."""
    from trocket.broker.namesrv.server import NamesrvConfig, NameServer

    ns = NameServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
    await nursery.start(ns.serve)
    env = {**os.environ, "NAMESRV_ADDR": ns.address}
    broker = await trio.lowlevel.open_process(
        [TROCKET, "broker", "--listen", "127.0.0.1:0", "--store", str(tmp_path / "store"), "--segment-size", "1m"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        log = b""
        with trio.fail_after(60):
            while b"boot success" not in log:
                chunk = await broker.stderr.receive_some()
                assert chunk, log.decode()
                log += chunk
        assert f"name server is {ns.address}".encode() in log, log.decode()

        async def with_env(*args: str) -> subprocess.CompletedProcess:
            with trio.fail_after(60):
                return await trio.run_process([TROCKET, *args], capture_stdout=True, capture_stderr=True, check=False,
                                              env=env)

        sent = await with_env("send", "-t", "EnvT", "--body", "via-env")
        assert sent.returncode == 0, sent.stderr.decode()
        got = await with_env("consume", "-t", "EnvT", "-g", "EnvG", "--count", "1", "--from", "first", "--json")
        assert got.returncode == 0 and json.loads(got.stdout)["body"] == "via-env", got.stderr.decode()
        cluster = await with_env("admin", "cluster", "--json")
        assert cluster.returncode == 0 and len(json.loads(cluster.stdout)) == 1, cluster.stderr.decode()
    finally:
        broker.send_signal(2)
        with trio.move_on_after(30):
            await broker.wait()
        if broker.returncode is None:
            broker.kill()
        await ns.shutdown()


async def test_send_and_consume_with_a_namespace_and_the_vip_channel(tmp_path):
    """``--namespace NS``: the topic and the group are ``NS%name`` on the broker, the
    results and lines name them without it, the offsets are the wrapped group's; a client
    without the namespace does not see the topic. ``--vip-channel``: the calls go to the
    broker's listen port - 2, which a client without it never opens."""
    async with running_broker(tmp_path) as broker:
        ns = ";".join(broker.namesrv_addrs)
        vip = broker.vip_server
        assert vip is not None
        r = await cli("send", "-n", ns, "-t", "Scoped", "--body", "one", "--namespace", "NSA", "--json")
        assert r.returncode == 0, r.stderr.decode()
        sent = json.loads(r.stdout)
        assert sent["topic"] == "Scoped"
        assert "NSA%Scoped" in broker.topics and "Scoped" not in broker.topics
        assert vip.stats.connections_opened == 0  # off by default
        r = await cli("send", "-n", ns, "-t", "Scoped", "--body", "two", "--namespace", "NSA", "--vip-channel",
                      "--json")
        assert r.returncode == 0, r.stderr.decode()
        over_vip = vip.stats.connections_opened
        assert over_vip >= 1
        got = await consumed(ns, "Scoped", "G", 2, "--from", "first", "--namespace", "NSA", "--vip-channel")
        assert sorted(m["body"] for m in got) == ["one", "two"] and {m["topic"] for m in got} == {"Scoped"}
        assert vip.stats.connections_opened > over_vip
        tc = broker.topics.select("NSA%Scoped")
        committed = [broker.offsets.query_offset("NSA%G", "NSA%Scoped", q) for q in range(tc.write_queue_nums)]
        assert sum(o for o in committed if o > 0) == 2
        assert all(broker.offsets.query_offset("G", "NSA%Scoped", q) < 0 for q in range(tc.write_queue_nums))
        r = await cli("consume", "-n", ns, "-t", "Scoped", "-g", "G", "--count", "1")
        assert r.returncode == 1 and b"Scoped" in r.stderr, r.stderr.decode()
