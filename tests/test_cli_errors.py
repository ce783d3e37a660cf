"""Errors that say what to do, each from the real command in a subprocess: the port in
"address in use", a topic no broker serves vs one that does not exist, options by their
own names, the subcommand's usage and the nearest option or key on a typo, an empty
cluster as a failure. (replay's check of its targets: tests/conformance/test_cli_replay.py.)"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import trio

TROCKET = str(Path(sys.executable).with_name("trocket"))


async def run(*argv: str) -> tuple[int, str, str]:
    with trio.fail_after(60):
        done = await trio.run_process([TROCKET, *argv], capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.fixture
async def lone_namesrv(nursery):
    """A name server no broker registered with."""
    from trocket.broker.namesrv.server import NamesrvConfig, NameServer

    ns = NameServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0))
    await nursery.start(ns.serve)
    yield ns.address
    await ns.shutdown()


async def test_address_in_use_names_the_port_and_the_flag():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = await run("namesrv", "--listen", f"127.0.0.1:{port}")
    assert code == 1, err
    (line,) = err.strip().splitlines()
    assert line == (f"trocket namesrv: error: cannot listen on 127.0.0.1:{port}: address already in use "
                    "(another broker or name server? stop it, or choose another port: --listen)")


async def test_no_broker_serves_the_topic(lone_namesrv):
    want = f"no broker serves topic T: the name servers {lone_namesrv} list no live broker"
    for argv in (["send", "-t", "T", "--body", "x"], ["consume", "-t", "T", "-g", "G"], ["admin", "topic", "route", "-t", "T"]):
        code, _, err = await run(*argv, "-n", lone_namesrv)
        assert code == 1 and want in err and "does not exist" not in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err


async def test_an_empty_cluster_is_a_failure(lone_namesrv):
    code, out, err = await run("admin", "cluster", "-n", lone_namesrv)
    assert code == 1 and out == "", out
    assert err.strip() == (f"trocket: error: no broker is registered with the name servers {lone_namesrv} "
                           f"(is a broker running with -n {lone_namesrv}?)")


@pytest.mark.parametrize(("argv", "message"), [
    (["--timeout", "-1", "--body", "x"], "argument --timeout: -1 is not a positive number"),
    (["--size", "-1"], "argument --size: -1 is not a positive integer (1 or more)"),
    (["--count", "0"], "argument --count/-c: 0 is not a positive integer (1 or more)"),
    (["--bdoy", "x"], "unrecognized arguments: --bdoy x (did you mean --body or --delay?)"),
    (["--mode", "syn"], "argument --mode: invalid choice: 'syn' (choose from 'sync', 'async', 'oneway') "
                        "(did you mean sync?)"),
])
async def test_send_options_by_their_own_names_with_the_subcommands_usage(argv, message):
    code, _, err = await run("send", "-t", "T", *argv)
    assert code == 2, err
    assert err.startswith("usage: trocket send ") and err.strip().endswith(f"trocket send: error: {message}"), err
    assert "send_timeout" not in err and "body length" not in err


async def test_a_mistyped_subcommand_gets_the_nearest():
    code, _, err = await run("admin", "clustr")
    assert code == 2 and err.startswith("usage: trocket admin ")
    assert err.strip().endswith("(did you mean cluster?)"), err


async def test_a_mistyped_broker_conf_key_gets_the_nearest(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=C\nflushDiskTyp=SYNC_FLUSH\n")
    code, _, err = await run("broker", "-c", str(conf), "--store", str(tmp_path / "store"))
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        f"trocket broker: error: {conf}:2: flushDiskTyp: unknown key (did you mean flushDiskType?)")
