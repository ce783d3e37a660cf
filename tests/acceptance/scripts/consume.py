"""Consume with the C++ client (PyPI ``rocketmq``): push, orderly push or pull.

Prints one JSON object: every message received (uid, topic, tags, keys, body digest and
length, user properties, queue id/offset, msg id, reconsume times, arrival order), the
wall-clock time consumption completed and the idle window that followed.

* ``--kind push|orderly``: a PushConsumer subscribed to ``--topics``; stops once
  ``--expect`` distinct uids arrived (or ``--timeout``), then stays subscribed and idle
  for ``--idle`` seconds (duplicates arriving then are still recorded) before shutdown.
* ``--kind pull``: a PullConsumer; ``pull(topic)`` over every topic in rounds until
  ``--expect`` distinct uids arrived (or ``--timeout``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from acc_spec import ORDERLY_PROPS, USER_PROPS, digest
from rocketmq.client import PullConsumer, PushConsumer


def _s(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def record(msg, n: int) -> dict:
    body = msg.body or b""
    props = {}
    for k in USER_PROPS + ORDERLY_PROPS:
        v = _s(msg.get_property(k))
        if v:  # the C API answers "" for a missing property
            props[k] = v
    return {
        "n": n,
        "uid": props.get("uid"),
        "topic": msg.topic,
        "tags": _s(msg.tags),
        "keys": _s(msg.keys),
        "sha1": digest(body),
        "len": len(body),
        "props": props,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "msg_id": msg.id,
        "reconsume_times": msg.reconsume_times,
        "thread": threading.get_ident(),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--kind", required=True, choices=("push", "orderly", "pull"))
    ap.add_argument("--group", required=True)
    ap.add_argument("--topics", required=True, help="comma-separated")
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--idle", type=float, default=1.0)
    ap.add_argument("--expression", default="*")
    ap.add_argument("--access-key", help="ACL credentials (the client signs every request)")
    ap.add_argument("--secret-key")
    ap.add_argument("--quiet", type=float, default=8.0,
                    help="give up early when nothing new arrived for this long (after a first message)")
    args = ap.parse_args()
    topics = [t for t in args.topics.split(",") if t]

    received: list[dict] = []
    uids: set[str] = set()
    lock = threading.Lock()
    complete = threading.Event()
    errors: list[str] = []
    t_start = time.time()

    last_new = [time.monotonic()]

    def on_message(msg) -> None:
        try:
            rec = record(msg, 0)
        except Exception as exc:  # noqa: BLE001
            with lock:
                errors.append(f"decode: {type(exc).__name__}: {exc}")
            return
        with lock:
            rec["n"] = len(received)
            received.append(rec)
            if rec["uid"] and rec["uid"] not in uids:
                uids.add(rec["uid"])
                last_new[0] = time.monotonic()
            if len(uids) >= args.expect:
                complete.set()

    out: dict = {"kind": args.kind, "group": args.group, "topics": topics, "expect": args.expect}
    if args.kind in ("push", "orderly"):
        consumer = PushConsumer(args.group, orderly=args.kind == "orderly")
        consumer.set_namesrv_addr(args.namesrv)
        if args.access_key:
            consumer.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")
        consumer.set_thread_count(4)
        for topic in topics:
            consumer.subscribe(topic, on_message, args.expression)
        t_started = time.time()
        consumer.start()
        deadline = time.monotonic() + args.timeout
        while not complete.wait(0.1) and time.monotonic() < deadline:
            if received and time.monotonic() - last_new[0] > args.quiet:
                break
        completed = complete.is_set()
        t_done = time.time()
        time.sleep(args.idle)  # the idle window is the measurement: what arrives during it
        t_idle_end = time.time()
        with lock:
            count_at_idle_end = len(received)
        consumer.shutdown()
        out.update(completed=completed, t_started=t_started, t_done=t_done, t_idle_end=t_idle_end,
                   received_during_idle=count_at_idle_end)
    else:
        consumer = PullConsumer(args.group)
        consumer.set_namesrv_addr(args.namesrv)
        if args.access_key:
            consumer.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")
        t_started = time.time()
        consumer.start()
        rounds = 0
        deadline = time.monotonic() + args.timeout
        while not complete.is_set() and time.monotonic() < deadline:
            rounds += 1
            for topic in topics:
                try:
                    for msg in consumer.pull(topic, args.expression):
                        on_message(msg)
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"pull({topic}): {type(exc).__name__}: {exc}")
            if not complete.is_set():
                if received and time.monotonic() - last_new[0] > args.quiet:
                    break
                time.sleep(0.2)  # between pull rounds: the C++ PullConsumer's pull does not wait
        t_done = time.time()
        # one more round: nothing may come twice
        for topic in topics:
            for msg in consumer.pull(topic, args.expression):
                on_message(msg)
        consumer.shutdown()
        out.update(completed=complete.is_set(), t_started=t_started, t_done=t_done, rounds=rounds,
                   offsets=dict(PullConsumer.offset_table))
    out.update(t_start=t_start, t_end=time.time(), errors=errors[:50], messages=received)
    print(json.dumps(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
