import json
from pathlib import Path

import pytest

from trocket.codecs.java_hashmap import (
    JavaHashMap,
    hashmap_capacity,
    hashmap_order,
    hashmap_properties,
    java_string_hash,
)

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


# Key orders a real java.util.HashMap<String, String> (Java 17) gave for these puts
# ("k=v") and removes ("-k"), in order: a removed key put again goes to its bucket's
# tail; the capacity a map reached stays when it shrinks.
JAVA_ORDERS = [
    (["mode=1", "zeta=1", "uni=1", "KEYS=1", "idx=1", "UNIQ_KEY=1", "WAIT=1", "TAGS=1", "CLUSTER=1", "-WAIT", "WAIT=2",
      "REAL_TOPIC=1", "REAL_QID=1"],
     "mode,zeta,uni,REAL_TOPIC,KEYS,idx,UNIQ_KEY,CLUSTER,WAIT,TAGS,REAL_QID"),
    (["BB=1", "Aa=1", "C=1", "-BB", "BB=2"], "Aa,BB,C"),
    ([f"k{i}=1" for i in range(13)] + ["-k12", "-k11"], "k0,k1,k2,k3,k4,k5,k6,k10,k7,k8,k9"),
    (["TAGS=1", "KEYS=1", "UNIQ_KEY=1", "WAIT=1", "DELAY=3", "RETRY_TOPIC=1", "ORIGIN_MESSAGE_ID=1", "CLUSTER=1"],
     "ORIGIN_MESSAGE_ID,RETRY_TOPIC,KEYS,UNIQ_KEY,CLUSTER,WAIT,DELAY,TAGS"),
]


@pytest.mark.parametrize(("ops", "order"), JAVA_ORDERS)
def test_java_hashmap_iterates_as_java(ops, order):
    m = JavaHashMap()
    for op in ops:
        if op.startswith("-"):
            del m[op[1:]]
        else:
            key, _, value = op.partition("=")
            m[key] = value
    assert ",".join(m) == order
    assert m.to_properties() == "\x02".join(f"{k}\x01{m[k]}" for k in order.split(","))


def test_java_hashmap_parses_as_string2message_properties():
    m = JavaHashMap.from_properties("a\x011\x02\x02b\x01\x02\x01x\x02c\x012\x013\x02a\x019\x02nosep\x02")
    assert dict(m) == {"a": "9", "c": "2\x013"}  # empty key/value and separator-less items skipped
    assert list(JavaHashMap.from_properties("")) == []
    copy = m.copy()
    copy["z"] = "1"
    assert "z" not in m and m.to_properties(without={"a"}) == "c\x012\x013"


def test_a_put_past_three_quarters_doubles_the_table():
    """Past 3/4 of the table a put doubles its capacity, and the order follows it."""
    full = JavaHashMap((f"p{i}", "1") for i in range(12))
    grown = full.copy()
    grown["p12"] = "1"
    items = {f"p{i}": "1" for i in range(13)}
    assert grown.to_properties() == hashmap_properties(items, 32)
    assert hashmap_properties(items, 32) != hashmap_properties(items, 16)
