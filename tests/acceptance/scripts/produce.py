"""Produce ``--count`` messages of one mode with the C++ client (PyPI ``rocketmq``).

Modes: sync, async (callbacks), oneway, oneway_orderly, batch (``Producer.send_batch``), large (5 KiB
bodies, sync; the client compresses them), orderly (``send_orderly`` by sharding key).
Prints one JSON object: what was acknowledged (uid -> msg id, offset, status), errors,
timings.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from acc_spec import BATCH_SIZE, TOPICS, message_of
from rocketmq.client import Message, Producer


def build(spec: dict, topic: str) -> Message:
    msg = Message(topic)
    msg.set_keys(spec["keys"])
    msg.set_tags(spec["tags"])
    for k, v in spec["props"].items():
        msg.set_property(k, v)
    msg.set_body(spec["body"])
    return msg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--mode", required=True, choices=sorted(TOPICS))
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--group", default=None)
    ap.add_argument("--topic", default=None)
    ap.add_argument("--inflight", type=int, default=64, help="async sends outstanding at most")
    ap.add_argument("--access-key", help="ACL credentials (the client signs every request)")
    ap.add_argument("--secret-key")
    args = ap.parse_args()
    mode = args.mode
    topic = args.topic or TOPICS[mode]
    producer = Producer(args.group or f"PG_{mode}", timeout=10000)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")
    producer.start()

    acked: dict[str, dict] = {}
    errors: list[str] = []
    lock = threading.Lock()
    t0 = time.monotonic()

    specs = [message_of(mode, i) for i in range(args.count)]
    if mode in ("sync", "large"):
        for spec in specs:
            try:
                r = producer.send_sync(build(spec, topic))
                acked[spec["uid"]] = {"msg_id": r.msg_id, "offset": r.offset, "status": int(r.status)}
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{spec['uid']}: {type(exc).__name__}: {exc}")
    elif mode == "orderly":
        for spec in specs:
            shard = int(spec["props"]["shard"])
            try:
                r = producer.send_orderly(build(spec, topic), shard)
                acked[spec["uid"]] = {"msg_id": r.msg_id, "offset": r.offset, "status": int(r.status),
                                      "shard": shard}
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{spec['uid']}: {type(exc).__name__}: {exc}")
    elif mode == "oneway_orderly":
        for spec in specs:
            try:
                producer.send_oneway_orderly(build(spec, topic), int(spec["props"]["shard"]))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{spec['uid']}: {type(exc).__name__}: {exc}")
    elif mode == "oneway":
        for spec in specs:
            try:
                producer.send_oneway(build(spec, topic))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{spec['uid']}: {type(exc).__name__}: {exc}")
    elif mode == "batch":
        for start in range(0, len(specs), BATCH_SIZE):
            chunk = specs[start : start + BATCH_SIZE]
            try:
                r = producer.send_batch([build(s, topic) for s in chunk])
                for n, s in enumerate(chunk):
                    acked[s["uid"]] = {"msg_id": r.msg_id, "offset": r.offset, "status": int(r.status),
                                       "batch_pos": n}
            except Exception as exc:  # noqa: BLE001
                errors.append(f"batch {start}: {type(exc).__name__}: {exc}")
    elif mode == "async":
        slots = threading.BoundedSemaphore(args.inflight)
        done = threading.Event()
        pending = [len(specs)]
        keep = []  # messages must outlive their async send

        def finished() -> None:
            slots.release()
            with lock:
                pending[0] -= 1
                if pending[0] == 0:
                    done.set()

        for spec in specs:
            uid = spec["uid"]

            def ok(r, uid=uid):
                with lock:
                    acked[uid] = {"msg_id": r.msg_id, "offset": r.offset, "status": int(r.status)}
                finished()

            def fail(exc, uid=uid):
                with lock:
                    errors.append(f"{uid}: {type(exc).__name__}: {exc}")
                finished()

            slots.acquire()
            msg = build(spec, topic)
            keep.append(msg)
            try:
                producer.send_async(msg, ok, fail)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{uid}: send_async raised {type(exc).__name__}: {exc}")
                finished()
        if not done.wait(60):
            errors.append(f"async: {pending[0]} callbacks never came")
    elapsed = time.monotonic() - t0
    # oneway sends are fire-and-forget: give the client a moment to write them out (the C++
    # client has no flush and says nothing when they are written: nothing to wait on)
    if mode in ("oneway", "oneway_orderly"):
        time.sleep(0.5)
    t1 = time.monotonic()
    producer.shutdown()
    print(json.dumps({
        "mode": mode, "topic": topic, "count": args.count, "acked": acked, "errors": errors[:50],
        "error_count": len(errors), "seconds": elapsed, "shutdown_seconds": time.monotonic() - t1,
    }))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
