"""The C++ client (PyPI ``rocketmq``, ``set_session_credentials``) and the JS client
(ali-ons, ``accessKey``/``secretKey``) against ``trocket broker --acl`` (issue 24): with
their account's keys they produce and consume as without ACL; with a wrong secret or no
key every send is refused and nothing is stored. (The Java client's cases, against the
Java broker too: java/test_java_acl.py.)"""

from __future__ import annotations

import subprocess

import pytest

from acc_tools import finish_js_script, run_client_script, start_js_script, trocket_command

ACL = """\
accounts:
  - accessKey: orders-app
    secretKey: orders-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclCpp=PUB|SUB, AclJs=PUB|SUB]
    groupPerms: [acl-cpp=SUB, acl-js=SUB]
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
"""
KEYS = ["--access-key", "orders-app", "--secret-key", "orders-secret"]
WRONG = ["--access-key", "orders-app", "--secret-key", "not-the-secret"]
COUNT = 20
QUEUES = 2


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    broker = broker_factory(extra=["--acl", str(acl)])
    for topic in ("AclCpp", "AclJs"):  # creating topics is the admin's
        subprocess.run([*trocket_command(), "admin", "topic", "create", "-n", broker.namesrv, "-t", topic,
                        "--queues", str(QUEUES), "--access-key", "operator1", "--secret-key", "operator-secret"],
                       check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    return broker



def test_cpp_client_signs_with_session_credentials(rocketmq_wheel, acl_broker, tmp_path):
    ns = acl_broker.namesrv
    produce = ["--namesrv", ns, "--mode", "sync", "--topic", "AclCpp"]
    for refused in (WRONG, []):
        r = run_client_script("produce.py", [*produce, "--count", "3", *refused], tmp_path / "refused", timeout=120,
                              broker=acl_broker)
        assert not r["acked"] and r["error_count"] == 3, r["errors"][:3]
    r = run_client_script("produce.py", [*produce, "--count", str(COUNT), *KEYS], tmp_path / "producer", broker=acl_broker)
    assert len(r["acked"]) == COUNT and r["error_count"] == 0, r["errors"][:3]
    c = run_client_script("consume.py", ["--namesrv", ns, "--kind", "push", "--group", "acl-cpp", "--topics", "AclCpp",
                                         "--expect", str(COUNT), "--quiet", "3", *KEYS], tmp_path / "consumer",
                          timeout=120, broker=acl_broker)
    # exactly the signed sends: the refused ones stored nothing
    assert sorted(m["uid"] for m in c["messages"]) == sorted(r["acked"]), c["errors"][:3]


def test_js_client_signs_with_its_access_key(js_client, acl_broker, tmp_path):
    ns = acl_broker.namesrv
    produce = ["--namesrv", ns, "--mode", "sync", "--topic", "AclJs", "--deadline", "40"]
    for refused in (WRONG, []):
        r = finish_js_script(start_js_script("produce.js", [*produce, "--count", "3", *refused], tmp_path / "refused"),
                             "produce.js", 90, acl_broker)
        # each send refused (and, on close, the producer's unregistering: an error event)
        assert not r["acked"] and sum(e.startswith("sync-") for e in r["errors"]) == 3, r["errors"][:4]
    r = finish_js_script(start_js_script("produce.js", [*produce, "--count", str(COUNT), *KEYS], tmp_path / "producer"),
                         "produce.js", 90, acl_broker)
    assert len(r["acked"]) == COUNT and r["error_count"] == 0, r["errors"][:3]
    c = finish_js_script(start_js_script("consume.js", ["--namesrv", ns, "--group", "acl-js", "--topics", "AclJs",
                                                        "--expect", str(COUNT), "--quiet", "3", *KEYS],
                                         tmp_path / "consumer"), "consume.js", 120, acl_broker)
    assert sorted(m["uid"] for m in c["messages"]) == sorted(r["acked"]), c["errors"][:3]
