"""``trocket broker --acl FILE`` and the client commands' ``--access-key/--secret-key``
(and ``$ROCKETMQ_ACCESS_KEY``/``$ROCKETMQ_SECRET_KEY``), ``trocket admin acl ...``, as a
user runs them: subprocesses against a broker subprocess (issue 24)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import trio

from trocket.client import ClientConfig, ClientInstance

from ..waiting import wait_until
from .conftest import acceptance_tools

ACL = """\
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB]
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
"""


def trocket(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [*acceptance_tools().trocket_command(), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                           env={**os.environ, **(env or {})})


async def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return await trio.to_thread.run_sync(lambda: trocket(*args, env=env))


@pytest.mark.slow
async def test_acl_from_the_command_line(broker_process, tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    broker = broker_process(name="acl", extra=["--acl", str(acl)])
    ns = broker.namesrv
    op = ["--access-key", "operator1", "--secret-key", "operator-secret"]

    r = await run("admin", "topic", "create", "-n", ns, "-t", "Orders", "--queues", "2")
    assert r.returncode == 1 and "No accessKey is configured" in r.stderr, r.stderr
    r = await run("admin", "topic", "create", "-n", ns, "-t", "Orders", "--queues", "2", *op)
    assert r.returncode == 0, r.stderr
    r = await run("admin", "topic", "create", "-n", ns, "-t", "Audit", "--queues", "2", *op)
    assert r.returncode == 0, r.stderr
    async with ClientInstance(ClientConfig(namesrv=ns)) as probe:  # the broker registers its new topics

        async def routed() -> bool:
            return bool(await probe.update_route("Orders") and await probe.update_route("Audit"))

        await wait_until(routed, 10, interval=0.05, what="the name server routes Orders and Audit")

    r = await run("send", "-n", ns, "-t", "Orders", "--body", "x", "--access-key", "producer1",
                  "--secret-key", "producer-secret", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SEND_OK", r.stderr
    env = {"ROCKETMQ_ACCESS_KEY": "producer1", "ROCKETMQ_SECRET_KEY": "producer-secret"}
    r = await run("send", "-n", ns, "-t", "Orders", "--body", "x", "--json", env=env)
    assert r.returncode == 0, r.stderr
    r = await run("send", "-n", ns, "-t", "Audit", "--body", "x", "--timeout", "2", env=env)
    assert r.returncode == 1 and "No default permission for topic:Audit" in r.stderr, r.stderr
    r = await run("send", "-n", ns, "-t", "Orders", "--body", "x", "--timeout", "2", "--access-key", "producer1",
                  "--secret-key", "not-the-secret")
    assert r.returncode == 1 and "Check signature failed for accessKey=producer1" in r.stderr, r.stderr
    # a consumer the broker refuses says so and stops, as a send does (not a silent wait)
    r = await run("consume", "-n", ns, "-t", "Orders", "-g", "Readers", "--count", "1", env=env)
    assert r.returncode == 1 and "No default permission for" in r.stderr and "SYSTEM_ERROR (1)" in r.stderr, r.stderr
    r = await run("consume", "-n", ns, "-t", "Orders", "-g", "Readers", "--count", "1", "--access-key", "producer1",
                  "--secret-key", "not-the-secret")
    assert r.returncode == 1 and "Check signature failed for accessKey=producer1" in r.stderr, r.stderr
    r = await run("consume", "-n", ns, "-t", "Orders", "-g", "Readers", "--count", "1", "--from", "first", *op)
    assert r.returncode == 0 and "Orders queue=" in r.stdout, r.stderr

    # an operator gives producer1 the Audit topic; the file is rewritten and used at once
    r = await run("admin", "acl", "update", "-n", ns, "--account", "producer1", "--secret", "producer-secret",
                  "--topic-perms", "Orders=PUB,Audit=PUB", *op)
    assert r.returncode == 0, r.stderr
    assert "Audit=PUB" in acl.read_text()
    r = await run("send", "-n", ns, "-t", "Audit", "--body", "x", env=env)
    assert r.returncode == 0, r.stderr
    # a non-admin account cannot touch the ACL
    r = await run("admin", "acl", "delete", "-n", ns, "--account", "operator1", env=env)
    assert r.returncode == 1 and "Need admin permission for request code=51" in r.stderr, r.stderr
    r = await run("admin", "acl", "info", "-n", ns, "--json", *op)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["version"]["counter"] == 1 and list(row["files"]) == [str(acl)]
    r = await run("admin", "acl", "delete", "-n", ns, "--account", "producer1", *op)
    assert r.returncode == 0, r.stderr
    r = await run("send", "-n", ns, "-t", "Orders", "--body", "x", "--timeout", "2", env=env)
    assert r.returncode == 1 and "No acl config for producer1" in r.stderr, r.stderr
    assert "Traceback" not in broker.log_text()
