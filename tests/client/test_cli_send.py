"""``trocket send`` as a user runs it (a subprocess) against a ``trocket broker`` subprocess;
what it sent is checked with ``trocket admin`` and a pull through the client core."""

from __future__ import annotations

import json
import subprocess

import pytest
import trio

from trocket.client import ClientConfig, ClientInstance

from ..waiting import wait_until
from .conftest import acceptance_tools, pull_all


def trocket(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [*acceptance_tools().trocket_command(), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


async def run(*args: str) -> subprocess.CompletedProcess:
    return await trio.to_thread.run_sync(lambda: trocket(*args))


@pytest.mark.slow
async def test_send_2000_then_check_with_admin_and_pull(broker_process):
    broker = broker_process(name="cli")
    ns = broker.namesrv
    one = await run("send", "-n", ns, "-t", "CliTopic", "--body", "first", "--tag", "A", "--keys", "k1",
                    "-p", "color=red", "--json")
    assert one.returncode == 0, one.stderr
    first = json.loads(one.stdout)
    assert first["status"] == "SEND_OK" and first["queueOffset"] == 0
    many = await run("send", "-n", ns, "-t", "CliTopic", "--count", "2000", "--size", "64", "--mode", "async", "--json")
    assert many.returncode == 0, many.stderr
    summary = json.loads(many.stdout)
    assert summary["sent"] == 2000 and summary["failed"] == 0 and summary["tps"] > 0
    assert summary["send_latency_ms_p99"] >= summary["send_latency_ms_p50"] > 0
    batch = await run("send", "-n", ns, "-t", "CliTopic", "--count", "100", "--batch", "32", "--size", "16",
                      "--json")
    assert json.loads(batch.stdout)["sent"] == 100, batch.stderr

    # a group nobody made: said plainly (exit 1), not shown as a lag of every message
    lag = await run("admin", "group", "lag", "-n", ns, "-g", "NobodyYet", "-t", "CliTopic", "--json")
    assert lag.returncode == 1, lag.stdout + lag.stderr
    doc = json.loads(lag.stdout)
    assert doc["exists"] is False and doc["lag"] is None and "does not exist" in doc["problems"][0]
    offsets = await run("admin", "group", "offsets", "-n", ns, "-g", "NobodyYet", "-t", "CliTopic")
    assert offsets.returncode == 1 and "consumer group NobodyYet does not exist" in offsets.stderr

    async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
        stored = await pull_all(inst, "CliTopic")
        for mq in await inst.subscribe_queues("CliTopic"):  # the group consumed all but 10 per queue
            addr = inst.master_addr(mq.broker_name)
            await inst.api.update_consumer_offset(addr, "Half", mq, await inst.api.get_max_offset(addr, mq) - 10)
    assert len(stored) == 2101
    half = await run("admin", "group", "offsets", "-n", ns, "-g", "Half", "-t", "CliTopic", "--json")
    rows = json.loads(half.stdout)
    assert len(rows) == 4 and all(r["lag"] == 10 and r["consumerOffset"] == r["brokerOffset"] - 10 for r in rows)
    head = next(m for m in stored if m.client_msg_id == first["msgId"])
    assert head.body == b"first" and head.tags == "A" and head.keys == ["k1"] and head.properties["color"] == "red"
    assert sum(len(m.body) == 64 for m in stored) == 2000


@pytest.mark.slow
async def test_send_errors_are_one_line_and_exit_1(broker_process):
    broker = broker_process(name="cli-bad")
    bad = await run("send", "-n", broker.namesrv, "-t", "bad topic", "--body", "x")
    assert bad.returncode == 1 and bad.stderr.startswith("trocket: error: MessageRefusedError")
    assert "illegal characters" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    empty = await run("send", "-n", broker.namesrv, "-t", "T", "--body", "")
    assert empty.returncode == 1 and "body length is zero" in empty.stderr
    nowhere = await run("send", "-n", "127.0.0.1:1", "-t", "T", "--body", "x")
    assert nowhere.returncode == 1 and "ClientConnectError: no name server reachable" in nowhere.stderr


@pytest.mark.slow
async def test_send_in_transactions_and_the_half_messages_admin_shows(broker_process, tmp_path):
    """``send --transaction``: commit delivered, rollback not, check answered when the
    broker checks back; ``admin cluster`` counts the half messages still pending."""
    conf = tmp_path / "txn.conf"
    conf.write_text("transactionCheckInterval=300\ntransactionTimeOut=60000\n")
    broker = broker_process(name="cli-txn", extra=["-c", str(conf)])
    ns = broker.namesrv
    committed = await run("send", "-n", ns, "-t", "CliTx", "--body", "yes", "--transaction", "commit", "--json")
    assert committed.returncode == 0, committed.stderr
    line = json.loads(committed.stdout)
    assert (line["status"], line["localTransactionState"]) == ("SEND_OK", "COMMIT_MESSAGE")
    rolled = await run("send", "-n", ns, "-t", "CliTx", "--body", "no", "--transaction", "rollback")
    assert rolled.returncode == 0 and rolled.stdout.startswith("SEND_OK ROLLBACK_MESSAGE msgId="), rolled.stdout
    # a transaction that waits for its check: the broker's timeout is a minute, so it stays pending
    waiting = await run("send", "-n", ns, "-t", "CliTx", "--body", "later", "--transaction", "check",
                        "--check-wait", "1")
    assert waiting.returncode == 1 and "1 transaction(s) not checked by the broker within 1 s" in waiting.stderr
    assert waiting.stdout.startswith("SEND_OK UNKNOW msgId="), waiting.stdout
    cluster = await run("admin", "cluster", "-n", ns, "--json")
    [row] = json.loads(cluster.stdout)
    assert row["halfPending"] == "1" and row["halfOldest"].endswith(" s"), row
    table = await run("admin", "cluster", "-n", ns)
    assert "half msgs" in table.stdout and "oldest half" in table.stdout

    async with ClientInstance(ClientConfig(namesrv=ns)) as inst:
        assert sorted(m.body for m in await pull_all(inst, "CliTx")) == [b"yes"]


@pytest.mark.slow
async def test_send_transaction_check_is_answered(broker_process, tmp_path):
    conf = tmp_path / "txn.conf"
    conf.write_text("transactionCheckInterval=300\ntransactionTimeOut=0\n")
    broker = broker_process(name="cli-check", extra=["-c", str(conf)])
    out = await run("send", "-n", broker.namesrv, "-t", "CliTxCheck", "--body", "asked", "--transaction", "check",
                    "--json", "--check-wait", "30")
    assert out.returncode == 0, out.stderr
    sent, checked = (json.loads(line) for line in out.stdout.splitlines())
    assert sent["localTransactionState"] == "UNKNOW"
    assert checked == {"checked": sent["msgId"], "topic": "CliTxCheck", "checkTimes": "1", "answer": "COMMIT_MESSAGE"}
    async with ClientInstance(ClientConfig(namesrv=broker.namesrv)) as inst:

        async def committed() -> bool:  # the check's END_TRANSACTION is oneway: it lands a moment later
            return [m.body for m in await pull_all(inst, "CliTxCheck")] == [b"asked"]

        await wait_until(committed, 10, interval=0.05, what="the checked transaction's message committed")
