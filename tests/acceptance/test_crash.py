"""kill -9 during a load of sync sends to a ``--flush sync`` broker, then restart on the
same store: every acknowledged message is consumable (C++ pull consumer), at the queue
offset its send result gave; the consume queues agree with the commit log; no torn
record is served; the restarted broker takes new sends after the recovered end.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter

from acc_spec import TOPICS, digest, message_of, parse_uid
from acc_tools import RawClient, inject_torn_record, run_client_script, scan_commit_log, start_client_script

TOPIC = TOPICS["crash"]
QUEUES = 4
KILL_AFTER_ACKS = 1500
KILL_AFTER_SECONDS = 10.0
AFTER_RESTART = 100
#: a message id as the clients write it: 32 upper-case hex digits
_HEX_ID = re.compile(r"[0-9A-F]{32}")


class LineReader:
    """Reads a process's stdout lines in a thread, each with its arrival time; ``enough``
    is set at the ``acks_wanted``-th ACK line, or when the output ends."""

    def __init__(self, proc: subprocess.Popen, acks_wanted: int) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self.acks = 0
        self.acks_wanted = acks_wanted
        self.enough = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append((time.monotonic(), line))
            if line.startswith("ACK "):
                self.acks += 1
                if self.acks >= self.acks_wanted:
                    self.enough.set()
        self.enough.set()


def test_sigkill_during_sync_sends(rocketmq_wheel, broker_factory, tmp_path, figures):
    broker = broker_factory(flush="sync", extra=["--segment-size", "1m"], name="crash")
    proc = start_client_script("crash_produce.py", ["--namesrv", broker.namesrv, "--threads", "4"],
                               tmp_path / "client-crash-produce")
    reader = LineReader(proc, KILL_AFTER_ACKS)
    t0 = time.monotonic()
    reader.enough.wait(KILL_AFTER_SECONDS)  # a load of at most that long
    assert proc.poll() is None, f"producer ended early: {proc.stderr.read()[-2000:]}"
    t_kill = time.monotonic()
    broker.kill()
    load_seconds = t_kill - t0
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.thread.join(5)
    stderr = proc.stderr.read()

    acked: dict[str, dict] = {}
    errors_before_kill = []
    for t, line in reader.lines:
        if line.startswith("ACK "):
            rec = json.loads(line[4:])
            assert rec["uid"] not in acked, f"acknowledged twice: {rec}"
            acked[rec["uid"]] = rec
        elif line.startswith("ERR ") and t < t_kill - 0.05:
            errors_before_kill.append(line)
    assert acked, f"no acknowledged send before the kill\n{stderr[-2000:]}\n{broker.log_tail()}"
    # The C++ client itself now and then fails a send at start-up without reaching the
    # broker ("GetTransport ... get timed_mutex timeout" then "No route info of this
    # topic" in its log); tolerate a few of those, nothing else.
    broker_side = [e for e in errors_before_kill if "No route info of this topic" not in e]
    assert not broker_side and len(errors_before_kill) <= 5, f"sends failed before the kill: {errors_before_kill[:5]}"
    assert all(a["status"] == 0 for a in acked.values())

    # a torn record past the last good one, as a kill in the middle of an append leaves it
    torn = inject_torn_record(broker.store)

    # -- restart on the same store -----------------------------------------------------------
    t_restart = time.monotonic()
    broker.start()
    restart_seconds = time.monotonic() - t_restart
    boot_log = broker.log_text().rsplit("===== start #2", 1)[-1]
    assert "abnormal=True" in boot_log, f"the restart did not see a crash:\n{broker.log_tail()}"
    recovery = re.search(r"RecoveryReport\((.*?)\)", boot_log)

    # every queue, 0 to max, strictly decoded (sizes, magic code, body CRC), no gaps
    with RawClient(broker.addr) as raw:
        served = {q: raw.pull_queue(TOPIC, q) for q in range(QUEUES)}
        max_phy = int(raw.runtime_info()["commitLogMaxOffset"])
    records = [r for q in served.values() for r in q]
    if torn is not None:
        assert max_phy == torn[0], f"recovered end {max_phy}, torn record written at {torn[0]}"
    by_uid = Counter(r["props"]["uid"] for r in records)
    dups = [u for u, n in by_uid.items() if n > 1]
    assert not dups, f"stored more than once: {dups[:5]}"
    index = {r["props"]["uid"]: r for r in records}
    lost = sorted(u for u in acked if u not in index)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost, e.g. {lost[:5]}"
    wrong = []
    malformed_ids: list[str] = []
    for uid, ack in acked.items():
        rec = index[uid]
        spec = message_of(*parse_uid(uid))
        if rec["queue_offset"] != ack["offset"]:
            wrong.append(f"{uid}: at queue offset {rec['queue_offset']}, acknowledged {ack['offset']}")
        if rec["plain"] != spec["body"]:
            wrong.append(f"{uid}: stored body differs from the one sent ({len(rec['plain'])} vs {len(spec['body'])} bytes)")
        if rec["props"].get("UNIQ_KEY") != ack["msg_id"]:
            if not _HEX_ID.fullmatch(ack["msg_id"]):
                # The C++ client's 4 threads now and then get a malformed id from it (seen
                # once: the message carried "0100007F0000ECBA0000E8  B7776600", the send
                # result said "0100007F0000ECBA0000E8 "): its own two values differ, and the
                # broker never writes UNIQ_KEY. Tolerate a few, nothing else.
                malformed_ids.append(uid)
                continue
            wrong.append(
                f"{uid}: stored UNIQ_KEY {rec['props'].get('UNIQ_KEY')} is not the msg id the client reported "
                f"for this send ({ack['msg_id']})"
            )
    assert not wrong, "\n".join(wrong[:20])
    assert len(malformed_ids) <= 5, f"the client reported malformed msg ids for {malformed_ids[:5]}"

    # the real client reads them too
    result = run_client_script(
        "consume.py",
        ["--namesrv", broker.namesrv, "--kind", "pull", "--group", "CG_crash", "--topics", TOPIC,
         "--expect", str(len(records)), "--timeout", "30", "--quiet", "3"],
        tmp_path / "client-crash-pull", timeout=60, broker=broker)
    got = Counter(m["uid"] for m in result["messages"])
    assert not result["errors"], result["errors"]
    assert set(got) == set(index), f"pull consumer: missing {sorted(set(index) - set(got))[:5]}"
    assert max(got.values()) == 1, "pull consumer: duplicates"
    for m in result["messages"]:
        spec = message_of(*parse_uid(m["uid"]))
        assert (m["tags"], m["keys"], m["sha1"], m["props"]) == (
            spec["tags"], spec["keys"], digest(spec["body"]), spec["props"]), m["uid"]

    # new sends go after the recovered end and are served
    after = run_client_script("produce.py", ["--namesrv", broker.namesrv, "--mode", "sync", "--topic", TOPIC,
                                             "--count", str(AFTER_RESTART), "--group", "PG_after"],
                              tmp_path / "client-after", timeout=60, broker=broker)
    assert after["error_count"] == 0 and len(after["acked"]) == AFTER_RESTART, after["errors"]
    with RawClient(broker.addr) as raw:
        served2 = {q: raw.pull_queue(TOPIC, q) for q in range(QUEUES)}
        max_phy2 = int(raw.runtime_info()["commitLogMaxOffset"])
    records2 = [r for q in served2.values() for r in q]
    assert len(records2) == len(records) + AFTER_RESTART
    new = [r for r in records2 if r["props"]["uid"].startswith("sync-")]
    assert len(new) == AFTER_RESTART and min(r["phy"] for r in new) >= max_phy

    # consume queues == commit log (up to the max offset; what lies past it is dead bytes)
    rc = broker.stop()
    assert rc == 130, broker.log_tail()  # SIGINT: 130 after the clean shutdown
    log_records = scan_commit_log(broker.store, end=max_phy2)
    assert sum(r["total"] for r in log_records) <= max_phy2
    in_log = {(r["phy"], r["queue_id"], r["queue_offset"]) for r in log_records if r["topic"] == TOPIC}
    in_queues = {(r["phy"], r["queue_id"], r["queue_offset"]) for r in records2}
    assert in_log == in_queues, (
        f"commit log has {len(in_log - in_queues)} records no consume queue serves "
        f"(e.g. {sorted(in_log - in_queues)[:3]}), queues serve {len(in_queues - in_log)} not in the log")

    figures.append(
        f"crash: {len(acked)} acked sync sends (flush sync, 4 threads) in {load_seconds:.2f} s "
        f"({len(acked) / load_seconds:.0f}/s) before SIGKILL; {len(records)} records after restart "
        f"({len(records) - len(acked)} stored but unacknowledged); restart {restart_seconds:.2f} s "
        f"(recovery: {recovery.group(1) if recovery else '?'}); "
        f"torn record injected: {f'{torn[1]} B at {torn[0]}' if torn else 'no (no room)'}; "
        f"{len(errors_before_kill)} client-side send failures before the kill; +{AFTER_RESTART} after restart; commit log {max_phy2} B, {len(log_records)} records")
