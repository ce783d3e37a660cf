"""ACL and TLS against the real Java 4.9.8 client and broker (issue 24).

ACL: a ``trocket broker --acl plain_acl.yml`` and a Java broker with ``aclEnable=true``
and the same file (its ``$ROCKETMQ_HOME/conf/plain_acl.yml``); the Java client
(``AclClientRPCHook``) with the right key, a wrong secret, no key, and an admin key tries
sends to topics the file allows, denies or does not name, pulls as an allowed and a
denied group, and an admin topic creation. Every outcome -- code and remark -- must be
the same on both brokers.

TLS: the Java client with ``-Dtls.enable=true`` against ``trocket broker`` in enforcing and
permissive modes; the trocket client with TLS against the Java broker in enforcing mode.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
from pathlib import Path

import pytest
import trustme

from acc_tools import BrokerProcess, trocket_command
from java_tools import SERVER_JVM, JavaBroker, JavaNameServer, finish_step, in_thread, start_step

#: the TLS test's Java servers boot from the module's start, while the ACL tests go
pytestmark = pytest.mark.usefixtures("java_bundle", "tls_java_servers")

#: 4.9.8's sample file, as the broker tests use it
ACL_YML = (Path(__file__).resolve().parents[2] / "broker" / "plain_acl.yml").read_text()

CREDENTIALS = {
    "right": ("RocketMQ", "12345678"),
    "wrong": ("RocketMQ", "87654321"),
    "missing": ("", ""),
    "admin": ("rocketmq2", "12345678"),
}


class HomeBroker(JavaBroker):
    """A Java broker whose ``rocketmq.home.dir`` is ``home`` (its conf/plain_acl.yml ours),
    with extra JVM properties (``-Dtls.*``)."""

    def __init__(self, bundle, store: Path, namesrv: str, home: Path, extra_conf=None, props=()) -> None:
        super().__init__(bundle, store, namesrv, extra_conf)
        self.home = home
        self.props = list(props)

    def command(self) -> list[str]:
        b = self.bundle
        return [b.java, "-server", *SERVER_JVM, *b.jdk17_opts, *self.props, f"-Duser.home={self.store}",
                f"-Drocketmq.home.dir={self.home}", "-cp", b.classpath,
                "org.apache.rocketmq.broker.BrokerStartup", "-c", str(self.store / "broker.conf")]


def java_home(bundle, home: Path, acl_text: str | None) -> Path:
    """A ROCKETMQ_HOME with the bundle's conf files and our plain_acl.yml."""
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for f in (bundle.home / "conf").iterdir():
        if f.is_file() and f.name != "plain_acl.yml":
            (conf / f.name).symlink_to(f)
    if acl_text is not None:
        (conf / "plain_acl.yml").write_text(acl_text)
    return home


@pytest.fixture(scope="module")
def acl_brokers(java_bundle, tmp_path_factory):
    """A Java name server + broker with aclEnable, and a trocket broker with --acl: the same file."""
    tmp = tmp_path_factory.mktemp("acl")
    home = java_home(java_bundle, tmp / "home", ACL_YML)
    ns = JavaNameServer(java_bundle, tmp / "namesrv")
    ns.start()
    jb = HomeBroker(java_bundle, tmp / "jbroker", ns.addr, home, {"aclEnable": "true"})
    tb = BrokerProcess(tmp / "tstore", tmp / "tbroker.log", extra=["--acl", str(home / "conf" / "plain_acl.yml")])
    try:
        ns.wait_ready()
        jb.start()
        tb.start()
        jb.wait_ready()
        jb.wait_registered()
        yield {"java": (ns.addr, jb.addr), "trocket": (tb.namesrv, f"127.0.0.1:{tb.port}")}
    finally:
        tb.stop()
        jb.kill()  # stores thrown away: no clean shutdown to wait for
        ns.kill()


@pytest.fixture(scope="module")
def acl_outcomes(acl_brokers, java_bundle, java_classes, tmp_path_factory):
    """Every credential's outcomes on both brokers (the right key first: it creates topicB):
    {credential: {broker kind: outcomes}}."""
    tmp = tmp_path_factory.mktemp("acl-runs")
    creds = {f"{k}.{name}": v for name, (ak, sk) in CREDENTIALS.items() for k, v in (("ak", ak), ("sk", sk))}
    # one JVM per broker, the two at once; in each the credentials one after another
    runs = {kind: start_step(java_bundle, java_classes, tmp / kind, "acl_probe", namesrv=ns, broker=addr,
                             timeout=120, tags=",".join(CREDENTIALS), **creds)
            for kind, (ns, addr) in acl_brokers.items()}
    try:
        by_kind = {kind: finish_step(run, 120) for kind, run in runs.items()}
    finally:
        for run in runs.values():
            run.stop()
    return {name: {kind: by_kind[kind][name] for kind in by_kind} for name in CREDENTIALS}


@pytest.mark.parametrize("credential", list(CREDENTIALS))
def test_java_client_with_acl_same_outcomes_on_both_brokers(acl_outcomes, credential):
    got = acl_outcomes[credential]
    assert got["trocket"] == got["java"], json.dumps(got, indent=1)


def test_what_the_acl_file_allows_and_refuses(acl_outcomes):
    right = acl_outcomes["right"]["java"]
    assert right["send topicB"] == "OK SEND_OK"
    assert right["send topicA"].startswith("ERR 1 org.apache.rocketmq.acl.common.AclException: "
                                           "No default permission for topic:topicA")
    assert "No default permission for topic:topicZ" in right["send topicZ"]
    assert right["pull topicB as groupB"] == "OK"
    assert "No default permission for group:groupA" in right["pull topicB as groupA"]
    assert "Need admin permission for request code=17" in right["create topic"]
    assert all("Check signature failed for accessKey=RocketMQ" in v for v in acl_outcomes["wrong"]["java"].values())
    assert all("No accessKey is configured" in v for v in acl_outcomes["missing"]["java"].values())
    admin = acl_outcomes["admin"]["java"]
    assert admin["create topic"] == "OK" and admin["send topicA"] == "OK SEND_OK"


# -- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(d / "server.pem"))
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    return d


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
def test_java_client_over_tls_to_trocket(java_bundle, java_classes, tmp_path, pki, mode):
    tb = BrokerProcess(tmp_path / "store", tmp_path / "broker.log", extra=[
        "--tls-mode", mode, "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")])
    tb.start()
    runs = []
    try:
        where = dict(namesrv=tb.namesrv, broker=f"127.0.0.1:{tb.port}", timeout=60)
        runs.append(start_step(java_bundle, java_classes, tmp_path / "run", "tls_probe", jvm_opts=["-Dtls.enable=true"],
                               **where))
        if mode == "enforcing":  # a Java client without TLS gets nowhere (at the same time: its own topic)
            runs.append(start_step(java_bundle, java_classes, tmp_path / "plain", "tls_probe",
                                   topic="TlsPlainTopic", **where))
        data, *plain = [finish_step(run, 60) for run in runs]
        assert data == {"send": "OK SEND_OK", "pull": "OK over tls"}
        for p in plain:
            assert not p["send"].startswith("OK") and not p["pull"].startswith("OK"), p
    finally:
        for run in runs:
            run.stop()
        tb.stop()
    assert "Traceback" not in tb.log_text()


@pytest.fixture(scope="module")
def tls_java_servers(java_bundle, tmp_path_factory):
    """The Java name server and broker with tls.server.mode=enforcing (Java's test mode: a
    self-signed certificate), booting in a thread from the module's first test on: a
    Future of the name server's address."""
    tmp = tmp_path_factory.mktemp("tls-java")
    home = java_home(java_bundle, tmp / "home", None)
    props = ["-Dtls.server.mode=enforcing", "-Dtls.enable=true"]
    ns = JavaNameServer(java_bundle, tmp / "namesrv")
    ns.command = (lambda orig: (lambda: orig()[:3] + props + orig()[3:]))(ns.command)  # type: ignore[method-assign]
    jb = HomeBroker(java_bundle, tmp / "jbroker", ns.addr, home, props=props)

    def boot() -> str:
        ns.start()
        ns.wait_ready()
        jb.start()
        jb.wait_ready()  # (registered by then: Java's broker registers before its "boot success")
        return ns.addr

    booting = in_thread(boot)
    try:
        yield booting
    finally:  # (stores thrown away: no clean shutdown to wait for)
        concurrent.futures.wait([booting])
        jb.kill()
        ns.kill()


def test_trocket_client_over_tls_to_the_java_broker(tls_java_servers):
    """The Java name server and broker with tls.server.mode=enforcing; trocket send /
    consume with --tls (trusting any certificate, as Java's client does by default)."""
    ns_addr = tls_java_servers.result(timeout=120)
    run = lambda *a: subprocess.run([*trocket_command(), *a], capture_output=True, text=True, timeout=60)  # noqa: E731
    r = run("send", "-n", ns_addr, "-t", "TlsJ", "--body", "to java over tls", "--tls", "--json", "--timeout", "10")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SEND_OK", r.stderr
    r = run("send", "-n", ns_addr, "-t", "TlsJ", "--body", "plain", "--timeout", "3")
    assert r.returncode == 1, "a plain client must not get through an enforcing Java name server"
    r = run("consume", "-n", ns_addr, "-t", "TlsJ", "-g", "TlsG", "--from", "first", "--count", "1", "--tls", "--json")
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["body"] == "to java over tls", r.stderr
