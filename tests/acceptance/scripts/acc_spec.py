"""What the acceptance scenarios send, derived from (mode, index) alone.

Shared by the client scripts (run with the venv's python, librocketmq loaded) and by the
tests (which check what the consumers report against it). No trocket or rocketmq import
here: the scripts must not depend on the project under test.
"""

from __future__ import annotations

import hashlib
import random

#: mode -> topic. Every mode writes its own topic, so each consumer check is per topic.
TOPICS = {
    "sync": "AccSync",
    "async": "AccAsync",
    "oneway": "AccOneway",
    "batch": "AccBatch",
    "large": "AccLarge",
    "orderly": "AccOrderly",
    "oneway_orderly": "AccOnewayOrderly",
    "crash": "AccCrash",
}
TAGS = ("TagA", "TagB", "TagC", "TagD")
#: user properties every message carries (the consumers read these back)
USER_PROPS = ("uid", "mode", "idx", "note")
ORDERLY_PROPS = ("shard", "seq")
SHARDS = 16
#: the C++ client compresses bodies of 4 KiB and more (zlib level 5)
LARGE_BODY = 5 * 1024
BATCH_SIZE = 10

_ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.;:-"


def uid_of(mode: str, i: int) -> str:
    return f"{mode}-{i:05d}"


def parse_uid(uid: str) -> tuple[str, int]:
    mode, _, idx = uid.rpartition("-")
    return mode, int(idx)


def body_of(mode: str, i: int) -> bytes:
    """Distinct per message, never a NUL (the wrapper passes bodies as C strings), some
    UTF-8; 5 KiB of low-redundancy text for ``large`` so the client really compresses."""
    uid = uid_of(mode, i)
    head = f"{uid}|{mode} body #{i} \u00e9\u00e8\u2713|"
    rnd = random.Random(uid)
    if mode == "large" or (mode == "crash" and i % 10 == 0):
        fill = "".join(rnd.choice(_ALPHABET) for _ in range(LARGE_BODY - len(head.encode())))
    else:
        fill = "".join(rnd.choice(_ALPHABET) for _ in range(rnd.randrange(10, 400)))
    return (head + fill).encode("utf-8")


def message_of(mode: str, i: int) -> dict:
    uid = uid_of(mode, i)
    props = {"uid": uid, "mode": mode, "idx": str(i), "note": f"h\u00e9llo \u2713 {i} k=v;x"}
    if mode in ("orderly", "oneway_orderly"):
        props["shard"] = str(i % SHARDS)
        props["seq"] = str(i // SHARDS)
    return {
        "uid": uid,
        "topic": TOPICS.get(mode, mode),
        "tags": TAGS[i % len(TAGS)],
        "keys": f"key-{uid} alt-{i % 7}",
        "body": body_of(mode, i),
        "props": props,
    }


def digest(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


# -- the JS client's messages (tests/acceptance/js/spec.js computes the same) ---------------

JS_LARGE_EVERY = 10  # every 10th JS message is 5 KiB: ali-ons deflates it (zlib default level)


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h or 1


def _xorshift32(seed: int):
    x = seed
    while True:
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        yield x


def js_body_of(mode: str, i: int) -> bytes:
    uid = uid_of(mode, i)
    head = f"{uid}|{mode} js body #{i} \u00e9\u00e8\u2713|"
    rnd = _xorshift32(_fnv1a32(uid.encode()))
    if i % JS_LARGE_EVERY == 0:
        fill_len = LARGE_BODY - len(head.encode())
    else:
        fill_len = 10 + next(rnd) % 390
    fill = "".join(_ALPHABET[next(rnd) % len(_ALPHABET)] for _ in range(fill_len))
    return (head + fill).encode("utf-8")


def js_message_of(mode: str, i: int, topic: str | None = None) -> dict:
    """What ``node produce.js --mode <mode>`` sends as message ``i`` (spec.js messageOf)."""
    uid = uid_of(mode, i)
    return {
        "uid": uid,
        "topic": topic,
        "tags": TAGS[i % len(TAGS)],
        "keys": f"key-{uid} alt-{i % 7}",
        "body": js_body_of(mode, i),
        "props": {"uid": uid, "mode": mode, "idx": str(i), "note": f"h\u00e9llo \u2713 {i} k=v;x"},
    }
