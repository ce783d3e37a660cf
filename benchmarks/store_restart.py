"""Message store restart time: opening a store whose last commit-log segment is 1 GiB.

    .venv/bin/python benchmarks/store_restart.py              # 1 GiB segment, ~4 MB stored
    .venv/bin/python benchmarks/store_restart.py --mb 16      # more data

Fills a fresh store (in a temporary directory on the same file system as ``--dir``)
with 200-byte messages over 4 queues, then times ``MessageStore.open`` twice:

* clean: after ``shutdown()`` (checkpoint holds the clean end, no ``abort`` file);
* crashed: after ``abandon()`` (the ``abort`` file stays: the tail is scanned and
  re-dispatched, as after kill -9).

Each open is timed after the page cache has the written data (the usual restart of
a broker process); the run is repeated ``--runs`` times and the best and worst shown.
Run it with another checkout's interpreter from outside the repository (``cd /tmp &&
/path/to/other/.venv/bin/python /path/to/benchmarks/store_restart.py``) to compare
with that version: the script imports whichever ``trocket`` that interpreter has.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import trocket
from trocket.broker.store import MessageInner, MessageStore, StoreConfig

GiB = 1 << 30
BODY = b"r" * 200


def fill(config: StoreConfig, megabytes: float) -> int:
    store = MessageStore.open(config)
    count = 0
    try:
        while store.max_phy_offset < megabytes * 1e6:
            store.put_message(
                MessageInner(topic="RestartTopic", body=BODY, queue_id=count % 4, properties={"TAGS": "t"})
            )
            count += 1
    finally:
        store.shutdown()
    return count


def timed_open(config: StoreConfig) -> tuple[float, str]:
    """Seconds ``MessageStore.open`` took, and how it recovered; closes cleanly after."""
    t0 = time.perf_counter()
    store = MessageStore.open(config)
    elapsed = time.perf_counter() - t0
    method = store.recovery.method
    store.shutdown()
    return elapsed, method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=4.0, help="megabytes of messages to store (default 4)")
    parser.add_argument("--segment", type=int, default=GiB, help="commit-log segment size (default 1 GiB)")
    parser.add_argument("--runs", type=int, default=3, help="opens per case (default 3)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary store goes")
    args = parser.parse_args()
    print(
        f"store restart: {args.segment / GiB:g} GiB segment, {args.mb:g} MB of {len(BODY)}-byte messages, "
        f"trocket from {os.path.dirname(trocket.__file__)} (python {sys.version.split()[0]})"
    )
    with tempfile.TemporaryDirectory(prefix="trocket-restart-", dir=args.dir) as tmp:
        config = StoreConfig(store_dir=os.path.join(tmp, "store"), commit_log_segment_size=args.segment)
        count = fill(config, args.mb)
        for crash in (False, True):
            times = []
            for _ in range(args.runs):
                if crash:  # leave the store as a kill -9 would: abort file present
                    MessageStore.open(config).abandon()
                elapsed, method = timed_open(config)
                times.append(elapsed)
            label = "crashed (abort file)" if crash else "clean shutdown"
            print(
                f"open after {label:21s} {count} messages  best {min(times):6.3f} s  "
                f"worst {max(times):6.3f} s  (recovery: {method})",
                flush=True,
            )


if __name__ == "__main__":
    main()
