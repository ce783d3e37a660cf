import json
from pathlib import Path

from trocket.codecs.java_hashmap import hashmap_capacity, hashmap_order, java_string_hash

GOLDEN = Path(__file__).parents[2] / "conformance" / "golden" / "java-4.9.8" / "manifest.json"


def test_string_hash_matches_java():
    # Values of "...".hashCode() in Java, as unsigned 32-bit ints.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB")  # the classic collision
    assert java_string_hash("\u4e2d\u6587") == (0x4E2D * 31 + 0x6587)


def test_capacity_grows_like_hashmap():
    assert hashmap_capacity(0) == 16
    assert hashmap_capacity(12) == 16
    assert hashmap_capacity(13) == 32
    assert hashmap_capacity(25) == 64


def test_order_matches_java_golden_frames():
    # RocketMQ 4.9.8 writes JSON ext fields in HashMap order; the golden JSON frames
    # list them as written, the ROCKETMQ frames (FastCodes) in declaration order.
    frames = {f["file"]: f for f in json.loads(GOLDEN.read_text())["frames"]}
    for name in ("pull_message", "send_message_response", "req_ext4_body128", "send_message_v2"):
        java_order = list(frames[f"{name}__JSON.bin"]["extFields"])
        declared = list(frames[f"{name}__ROCKETMQ.bin"]["extFields"])
        assert hashmap_order(declared) == java_order, name


def test_collisions_keep_insertion_order():
    assert hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]
    assert hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
