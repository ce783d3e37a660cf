"""Sync sends with the C++ client from several threads until the broker goes away.

Prints ``ACK {"uid", "msg_id", "offset"}`` for every acknowledged send, flushed at once
(the test kills the broker mid-load and then checks each of these), ``ERR ...`` for
failures, and stops after ``--max-failures`` consecutive failures in a thread (or
``--count`` messages in all).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time

from acc_spec import TOPICS, message_of
from rocketmq.client import Message, Producer

out_lock = threading.Lock()


def emit(line: str) -> None:
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--max-failures", type=int, default=3)
    args = ap.parse_args()
    producer = Producer("PG_crash", timeout=3000)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    counter = itertools.count()
    topic = TOPICS["crash"]

    def worker(limit: int | None = None) -> None:
        failures = 0
        sent = 0
        while failures < args.max_failures and (limit is None or sent < limit):
            sent += 1
            i = next(counter)
            if i >= args.count:
                return
            spec = message_of("crash", i)
            msg = Message(topic)
            msg.set_keys(spec["keys"])
            msg.set_tags(spec["tags"])
            for k, v in spec["props"].items():
                msg.set_property(k, v)
            msg.set_body(spec["body"])
            try:
                r = producer.send_sync(msg)
            except Exception as exc:  # noqa: BLE001
                failures += 1
                emit("ERR " + json.dumps({"uid": spec["uid"], "error": f"{type(exc).__name__}: {exc}"[:300]}))
                time.sleep(0.2)  # a sender's pause after a failure (pacing, not waiting for anything)
                continue
            failures = 0
            emit("ACK " + json.dumps({"uid": spec["uid"], "msg_id": r.msg_id, "offset": r.offset,
                                      "status": int(r.status)}))

    # The C++ client fails concurrent first sends to a topic it has no route for yet
    # ("could not find property mq", client-side): one thread goes first, alone.
    first = threading.Thread(target=worker, kwargs={"limit": 1})
    first.start()
    first.join()
    threads = [threading.Thread(target=worker) for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emit("DONE")
    producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
