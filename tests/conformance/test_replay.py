"""Replay of the committed corpus into a broker started here: zero unexpected
differences; and replay's bad-input paths (differences, a target down or garbage)."""

from __future__ import annotations

import functools

import attrs
import pytest
import trio

from trocket.conformance.replay import load_session, parse_speed, replay
from trocket.conformance.rules import Rewriter
from trocket.conformance.sources import read_frames

from .conftest import CAPTURES, running_broker, target_map

NATIVE = sorted(CAPTURES.glob("*.trkcap"))
ALL = NATIVE + sorted(CAPTURES.glob("*.pcap"))


def test_the_corpus_is_there():
    names = {p.stem for p in NATIVE}
    assert {"cpp-produce-pull", "js-produce-consume"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
async def test_committed_capture_replays_with_no_unexpected_difference(tmp_path, path):
    session = load_session(read_frames(str(path)).frames)
    async with running_broker(tmp_path) as controller:
        with trio.fail_after(30):
            report = await replay(session, target_map(session, controller), timeout=3)
    assert report.ok, report.table() + "\n" + report.details() + "\n" + "\n".join(report.errors)
    total = sum(s.matched for s in report.by_code.values())
    assert total >= 20
    assert report.by_code[11].matched >= 1  # pulls that returned messages compared message by message


async def test_rewritten_topic_and_group_replay_clean_and_land_under_the_new_names(tmp_path):
    session = load_session(read_frames(str(CAPTURES / "cpp-produce-pull.trkcap")).frames)
    rw = Rewriter.parse(["topic=CapCpp:CapCppRenamed", "group=CG_cap_cpp:CG_renamed"])
    async with running_broker(tmp_path) as controller:
        with trio.fail_after(30):
            report = await replay(session, target_map(session, controller), timeout=3, rewriter=rw)
        assert report.ok, report.details()
        assert controller.topics.select("CapCppRenamed") is not None
        assert controller.topics.select("CapCpp") is None


async def test_a_changed_answer_is_reported_field_by_field(tmp_path):
    session = load_session(read_frames(str(CAPTURES / "cpp-produce-pull.trkcap")).frames)
    sends = [e for ex in session.connections.values() for e in ex if e.request.code == 10]
    victim = sends[2]
    ext = dict(victim.response.ext_fields)
    ext["queueId"] = "99"
    victim.response = attrs.evolve(victim.response, ext_fields=ext, remark="tampered")
    async with running_broker(tmp_path) as controller:
        with trio.fail_after(30):
            report = await replay(session, target_map(session, controller), timeout=3)
    assert not report.ok
    assert report.by_code[10].differing == 1 and report.by_code[10].matched == 4
    (ex,) = report.differences
    fields = {d.field for d in ex.diffs}
    assert fields == {"ext.queueId", "remark"}
    assert "ext.queueId: expected '99'" in report.details()


async def test_a_target_that_is_down_leaves_partial_results_and_clear_errors(tmp_path):
    session = load_session(read_frames(str(CAPTURES / "cpp-produce-pull.trkcap")).frames)
    with trio.fail_after(30):
        report = await replay(session, lambda server: ("127.0.0.1", 1), timeout=1)
    assert not report.ok
    assert report.errors and all("cannot connect to 127.0.0.1:1" in e for e in report.errors)
    assert sum(s.unanswered for s in report.by_code.values()) == sum(
        1 for ex in session.connections.values() for e in ex if e.expects_answer)


async def test_a_target_answering_garbage_is_reported_not_raised(tmp_path):
    session = load_session(read_frames(str(CAPTURES / "cpp-produce-pull.trkcap")).frames)

    async def garbage(stream):
        await stream.receive_some(100)
        await stream.send_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, garbage, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(30):
            report = await replay(session, lambda server: ("127.0.0.1", port), timeout=1)
        nursery.cancel_scope.cancel()
    assert not report.ok
    assert any("no RocketMQ frame" in e for e in report.errors), report.errors


def test_speed_parsing():
    assert parse_speed("max") is None and parse_speed("1") == 1.0 and parse_speed("10") == 10.0
    for bad in ("0", "-2", "fast", "nan"):
        with pytest.raises(ValueError):
            parse_speed(bad)


def test_rewrite_parsing():
    rw = Rewriter.parse(["topic=A:B", "group=G:H"])
    assert rw.names == {"A": "B", "G": "H", "%RETRY%G": "%RETRY%H", "%DLQ%G": "%DLQ%H"}
    for bad in ("topic=A", "queue=A:B", "topic=:B"):
        with pytest.raises(ValueError):
            Rewriter.parse([bad])


def _paced_session(gap: float):
    """One connection, three requests ``gap`` seconds apart in the capture, each answered."""
    from trocket.codecs.command import RemotingCommand
    from trocket.codecs.serialize import encode_command
    from trocket.conformance.sources import SessionFrame

    frames = []
    for n in range(3):
        t = 1000.0 + n * gap
        req = encode_command(RemotingCommand.request(28, opaque=n))
        resp = encode_command(RemotingCommand.response(0, opaque=n, ext_fields={}))
        frames.append(SessionFrame(1, t, True, "c:1", "s:1", req))
        frames.append(SessionFrame(1, t + 0.001, False, "c:1", "s:1", resp))
    return load_session(frames)


async def test_speed_keeps_the_clients_pacing_or_a_multiple_of_it(tmp_path):
    """Three requests 0.5 s apart: speed 1 takes the captured second, speed 10 a tenth of
    it, max no pacing at all (compared with each other, so a loaded machine's extra
    latency cannot fail the test)."""
    elapsed = {}
    async with running_broker(tmp_path) as controller:
        for speed in (1.0, 10.0, None):
            session = _paced_session(0.5)
            t0 = trio.current_time()
            with trio.fail_after(20):
                report = await replay(session, lambda s: ("127.0.0.1", controller.server.port), speed=speed)
            elapsed[speed] = trio.current_time() - t0
            assert report.ok and report.by_code[28].matched == 3, report.details()
    assert elapsed[1.0] >= 0.99
    assert elapsed[10.0] >= 0.099 and elapsed[10.0] < elapsed[1.0] / 2
    assert elapsed[None] < elapsed[10.0]
