"""RocketMQ ACL on the broker (issue 24): Java 4.9.8's PlainAccessValidator /
PlainPermissionManager rules, the plain_acl.yml file, the signature, and a real broker
with ``aclEnable`` refusing what Java's refuses, with Java's code and remark."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest
import trio

from trocket.broker.acl import AclConfigError, AclError, AclValidator, load_acl
from trocket.broker.acl.validator import NAMESRV_WRITE_CODES
from trocket.broker.acl.address import address_matcher, loopback_only
from trocket.broker.acl.permission import ANY, DENY, PUB, SUB, check_permission, parse_perm
from trocket.client.acl import AclSigningHook
from trocket.codecs.acl import request_signature, sign_request, verifying_signature
from trocket.codecs.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.remoting import ClientConfig, HookSet, RemotingClient

from ..waiting import wait_until

ACL_YML = (Path(__file__).parent / "plain_acl.yml").read_text()

EXC = "org.apache.rocketmq.acl.common.AclException"
MGR = "org.apache.rocketmq.acl.plain.PlainPermissionManager"


@pytest.fixture
def acl_file(tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_YML)
    return path


def signed(req: RemotingCommand, ak: str = "RocketMQ", sk: str = "12345678") -> RemotingCommand:
    sign_request(req, ak, sk)
    # as the broker sees it: decoded ext fields (the header merged in)
    from trocket.codecs.serialize import decode_command, encode_command

    return decode_command(encode_command(req)[4:])


def send_req(topic: str, group: str = "PG", code: int = 310) -> RemotingCommand:
    from .conftest import Wire

    return Wire.send_v2(topic, b"body", group=group, code=code) if code != 10 else Wire.send_v1(topic, b"body", group=group)


def pull_req(topic: str, group: str) -> RemotingCommand:
    from .conftest import Wire

    return Wire.pull(topic, group=group)


# -- the rules, unit by unit -------------------------------------------------------------------


def test_permission_bits_as_java():
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm(None) == parse_perm("nonsense") == parse_perm("DENY") == DENY
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, DENY | SUB)
    assert check_permission(ANY, PUB) and not check_permission(ANY, DENY)


@pytest.mark.parametrize(
    "pattern, yes, no",
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["127.0.0.1"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
        ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1"]),
        ("192.168.*.*", ["192.168.7.1"], ["192.169.0.1"]),
        ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
        ("127.0.0.{1,2}", ["127.0.0.1", "127.0.0.2"], ["127.0.0.3"]),
        ("127.0.0.1,127.0.0.3", ["127.0.0.3"], ["127.0.0.2"]),
        ("1050:0000:0000:0000:0005:0600:300c:326b", ["1050::5:600:300c:326b"], ["1050::5:600:300c:326c"]),
        ("1050::0005:0600:300c:*", ["1050::5:600:300c:1"], ["1050::5:601:300c:1"]),
    ],
)
def test_remote_address_patterns(pattern, yes, no):
    match = address_matcher(pattern)
    assert all(match(h) for h in yes) and not any(match(h) for h in no)


@pytest.mark.parametrize("bad", ["256.0.0.1", "127.0.0.1-", "1.2.3.{1,300}", "1.2.3.a"])
def test_bad_address_patterns_refused(bad):
    with pytest.raises(AclConfigError):
        address_matcher(bad)


def test_plain_acl_yml_loads_as_java_reads_it(acl_file):
    table = load_acl(str(acl_file))
    rmq = table.accounts["RocketMQ"]
    assert rmq.secret_key == b"12345678"  # a YAML int, a Java String
    assert rmq.perms["topicA"] == DENY and rmq.perms["%RETRY%groupB"] == PUB | SUB
    assert rmq.default_topic_perm == DENY and rmq.default_group_perm == SUB and not rmq.admin
    assert table.accounts["rocketmq2"].admin and table.accounts["rocketmq2"].white("192.168.1.7")
    assert table.global_white_addrs == ("10.10.103.*", "192.168.0.*")


def test_short_keys_refused_at_load(tmp_path):
    path = tmp_path / "acl.yml"
    path.write_text("accounts:\n  - accessKey: short\n    secretKey: 12345678\n")
    with pytest.raises(AclConfigError, match="cannot be null and length should longer than 6"):
        load_acl(str(path))


def test_signature_covers_sorted_values_and_body():
    req = RemotingCommand.request(1, body=b"B", ext_fields={"z": "1", "a": "2"})
    sign_request(req, "ak", "sk")
    expected = base64.b64encode(hmac.new(b"sk", b"ak21" + b"B", hashlib.sha1).digest()).decode()
    # sorted keys: AccessKey, a, z -> values "ak", "2", "1"
    assert req.ext_fields["Signature"] == expected == request_signature(req, "sk")
    assert verifying_signature(req.ext_fields, req.body, b"sk") == expected
    # the broker leaves _UNIQUE_KEY_QUERY out, as Java's does
    assert verifying_signature({**req.ext_fields, "_UNIQUE_KEY_QUERY": "true"}, b"B", b"sk") == expected


class TestValidator:
    """PlainPermissionManager.validate's order and refusals."""

    @pytest.fixture
    def acl(self, acl_file):
        return AclValidator(acl_file)

    def refused(self, acl, req, addr="127.0.0.1:5000") -> str:
        with pytest.raises(AclError) as info:
            acl.do_before_request(addr, req)
        assert info.value.code == 1
        return info.value.remark

    def test_publish_and_subscribe_rights(self, acl):
        acl.do_before_request("127.0.0.1:1", signed(send_req("topicB")))
        assert self.refused(acl, signed(send_req("topicA"))) == (
            f"{EXC}: No default permission for topic:topicA, {MGR}.checkPerm(PlainPermissionManager.java:611)")
        assert "No default permission for topic:topicC" in self.refused(acl, signed(send_req("topicC", code=10)))
        # a topic the account does not name: defaultTopicPerm DENY
        assert self.refused(acl, signed(send_req("other"))).endswith("checkPerm(PlainPermissionManager.java:606)")
        acl.do_before_request("127.0.0.1:1", signed(pull_req("topicC", "groupC")))
        assert "No default permission for group:groupA" in self.refused(acl, signed(pull_req("topicB", "groupA")))
        acl.do_before_request("127.0.0.1:1", signed(pull_req("topicB", "anyGroup")))  # defaultGroupPerm SUB
        # a batch is checked as a send (Java 4.9.8 checks none: docs/security.md)
        assert "topic:topicA" in self.refused(acl, signed(send_req("topicA", code=320)))

    def test_keys_and_signatures(self, acl):
        unsigned = send_req("topicB")
        assert self.refused(acl, unsigned) == f"{EXC}: No accessKey is configured, {MGR}.validate(PlainPermissionManager.java:664)"
        assert "No acl config for nobody12" in self.refused(acl, signed(send_req("topicB"), ak="nobody12"))
        assert self.refused(acl, signed(send_req("topicB"), sk="wrong-secret")) == (
            f"{EXC}: Check signature failed for accessKey=RocketMQ, {MGR}.validate(PlainPermissionManager.java:684)")
        req = signed(send_req("topicB"))
        req.body = b"tampered"
        assert "Check signature failed" in self.refused(acl, req)

    def test_white_lists_skip_the_signature(self, acl):
        acl.do_before_request("10.10.103.7:1234", send_req("topicA"))  # global white list: anything
        acl.do_before_request("192.168.1.3:1", signed(send_req("x"), ak="rocketmq2", sk="wrong-secret"))
        assert "Check signature failed" in self.refused(acl, signed(send_req("x"), ak="rocketmq2", sk="nope1234"),
                                                        addr="192.168.2.3:1")

    def test_admin_codes(self, acl):
        from .test_admin import create_topic

        assert self.refused(acl, signed(create_topic("T1"))) == (
            f"{EXC}: Need admin permission for request code=17, but accessKey=RocketMQ is not, "
            f"{MGR}.checkPerm(PlainPermissionManager.java:581)")
        acl.do_before_request("127.0.0.1:1", signed(create_topic("T1"), ak="rocketmq2"))
        acl.do_before_request("127.0.0.1:1", signed(send_req("anything"), ak="rocketmq2"))  # admin: no perms listed
        # an ACL write needs admin too (4.9.8 lets any valid account: docs/security.md)
        req = RemotingCommand.request(51, ext_fields={"accessKey": "RocketMQ"})
        assert "Need admin permission for request code=51" in self.refused(acl, signed(req))

    def test_heartbeat_needs_every_group_and_topic(self, acl):
        def heartbeat(group, topic):
            body = HeartbeatData(client_id="c", consumers=[ConsumerData(
                group_name=group, subscriptions=[SubscriptionData(topic=topic, sub_string="*")])]).encode()
            return RemotingCommand.request(34, body=body, ext_fields={})

        acl.do_before_request("127.0.0.1:1", signed(heartbeat("groupC", "topicB")))
        assert "topic:topicA" in self.refused(acl, signed(heartbeat("groupC", "topicA")))
        assert "group:groupA" in self.refused(acl, signed(heartbeat("groupA", "topicB")))

    def test_trace_topic_pub_always_allowed(self, acl):
        acl.do_before_request("127.0.0.1:1", signed(send_req("RMQ_SYS_TRACE_TOPIC")))

    def test_reload_keeps_the_last_good_table(self, acl, acl_file):
        acl_file.write_text(ACL_YML.replace("topicA=DENY", "topicA=PUB"))
        assert acl.reload_if_changed()
        acl.do_before_request("127.0.0.1:1", signed(send_req("topicA")))
        acl_file.write_text("accounts:\n  - accessKey: short\n")
        assert not acl.reload_if_changed() and acl.reload_failures == 1
        acl.do_before_request("127.0.0.1:1", signed(send_req("topicA")))


def test_one_signed_field_and_many(acl_file):
    """The signed values come in key order whatever their number: a request with no
    header (only ``AccessKey`` signed) and a send (12 fields and the key) verify, a
    wrong secret does not, for both."""
    acl = AclValidator(acl_file)
    for req in (RemotingCommand.request(28), send_req("topicB")):
        good = signed(req, "rocketmq2", "12345678")
        acl.do_before_request("127.0.0.1:1", good)
        bad = signed(RemotingCommand.request(req.code, ext_fields=dict(req.ext_fields or {}), body=req.body),
                     "rocketmq2", "wrong-secret")
        with pytest.raises(AclError, match="Check signature failed"):
            acl.do_before_request("127.0.0.1:1", bad)
    assert {len(shape) for shape in acl._orders} == {2, 14}  # AccessKey + Signature; a send's 12 more


def test_a_connections_session_skips_no_check(acl_file):
    """What the validator keeps per connection (account, signed names, topics checked)
    only saves lookups: every send's signature is still checked, another account on the
    connection gets its own permissions, a reloaded file starts every session anew, and
    the topics kept per session are bounded."""
    from trocket.broker.acl import validator

    acl = AclValidator(acl_file)
    peer = "127.0.0.1:1"
    for _ in range(2):  # the second: the session's way
        acl.do_before_request(peer, signed(send_req("topicB")))
    session = acl._sessions[peer]
    assert session.published == {"topicB"} and session.account.access_key == "RocketMQ"
    tampered = signed(send_req("topicB"))
    tampered.body = b"not what was signed"
    with pytest.raises(AclError, match="Check signature failed for accessKey=RocketMQ"):
        acl.do_before_request(peer, tampered)
    with pytest.raises(AclError, match="Check signature failed for accessKey=RocketMQ"):
        acl.do_before_request(peer, signed(send_req("topicB"), sk="wrong-secret"))
    with pytest.raises(AclError, match="No default permission for topic:topicA"):
        acl.do_before_request(peer, signed(send_req("topicA")))
    with pytest.raises(AclError, match="No acl config for stranger"):
        acl.do_before_request(peer, signed(send_req("topicB"), "stranger", "12345678"))
    acl.do_before_request(peer, signed(send_req("topicB")))
    acl_file.write_text(ACL_YML.replace("topicB=PUB|SUB", "topicB=SUB"))
    assert acl.reload()
    with pytest.raises(AclError, match="No default permission for topic:topicB"):
        acl.do_before_request(peer, signed(send_req("topicB")))
    acl_file.write_text(ACL_YML.replace("defaultTopicPerm: DENY", "defaultTopicPerm: PUB"))
    assert acl.reload()
    for i in range(validator._PUBLISHED_MAX + 5):
        acl.do_before_request(peer, signed(send_req(f"T{i}")))
    assert 0 < len(acl._sessions[peer].published) <= validator._PUBLISHED_MAX


def test_signing_and_verifying_are_request_hooks_that_keep_the_fast_path(acl_file):
    hooks = HookSet.of([AclSigningHook("ak", "sk"), AclValidator(acl_file)])
    assert len(hooks.before) == 2 and hooks.after == ()


# -- a real broker -------------------------------------------------------------------------------


def client_with(ak: str | None = None, sk: str | None = None, stype=SerializeType.ROCKETMQ) -> RemotingClient:
    hooks = [AclSigningHook(ak, sk)] if ak else []
    return RemotingClient(ClientConfig(default_timeout=5), hooks=hooks)


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_broker_with_acl_enable(tmp_path, wire, acl_file, stype):
    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file)) as broker:
        addr = broker.broker_addr
        async with client_with("RocketMQ", "12345678") as good, client_with("RocketMQ", "bad-secret") as bad, \
                client_with() as anon, client_with("rocketmq2", "12345678") as admin:
            def req(r):
                r.serialize_type = stype
                return r

            resp = await good.invoke_sync(addr, req(wire.send_v2("topicB", b"m1")))
            assert resp.code == 0, resp.remark
            resp = await good.invoke_sync(addr, req(wire.send_v2("topicA", b"m1")))
            assert (resp.code, resp.remark) == (1, f"{EXC}: No default permission for topic:topicA, "
                                                  f"{MGR}.checkPerm(PlainPermissionManager.java:611)")
            resp = await bad.invoke_sync(addr, req(wire.send_v2("topicB", b"m1")))
            assert resp.code == 1 and "Check signature failed for accessKey=RocketMQ" in resp.remark
            resp = await anon.invoke_sync(addr, req(wire.send_v2("topicB", b"m1")))
            assert resp.code == 1 and "No accessKey is configured" in resp.remark
            resp = await good.invoke_sync(addr, req(wire.pull("topicB", group="groupA", suspend_ms=0, sys_flag=2)))
            assert resp.code == 1 and "group:groupA" in resp.remark
            resp = await good.invoke_sync(addr, req(wire.pull("topicB", group="groupB", suspend_ms=0, sys_flag=4)))
            assert resp.code == 0  # FOUND: the message sent above
            from .test_admin import create_topic

            resp = await good.invoke_sync(addr, req(create_topic("NewTopic")))
            assert resp.code == 1 and "Need admin permission for request code=17" in resp.remark
            resp = await admin.invoke_sync(addr, req(create_topic("NewTopic")))
            assert resp.code == 0, resp.remark
        # the VIP channel (listen port - 2) checks the same way
        if broker.vip_server is not None:
            async with client_with() as anon:
                resp = await anon.invoke_sync(broker.vip_server.address, wire.send_v2("topicB", b"m"))
                assert resp.code == 1 and "No accessKey is configured" in resp.remark


# The probes of issue 24: what an unsigned client could do to a broker. With ACL on,
# every one is refused before its processor runs.
PROBES = {
    "read every topic under a made-up group (pull)": (11, {
        "consumerGroup": "madeUp", "topic": "topicB", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
        "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}),
    "dump the topic config": (21, {}),
    "dump the consumer offsets": (43, {}),
    "dump the delay offsets": (45, {}),
    "read a group's offset": (14, {"consumerGroup": "g", "topic": "topicB", "queueId": "0"}),
    "reset a group's offset": (15, {"consumerGroup": "g", "topic": "topicB", "queueId": "0", "commitOffset": "99"}),
    "make a topic write-only": (17, {"topic": "topicB", "defaultTopic": "TBW102", "readQueueNums": "4",
                                     "writeQueueNums": "4", "perm": "2", "topicFilterType": "SINGLE_TAG",
                                     "order": "false"}),
    "delete a topic": (215, {"topic": "topicB"}),
    "lock a group's queues": (41, {}),
    "join a consumer group": (38, {"consumerGroup": "g"}),
}


@pytest.mark.parametrize("probe", list(PROBES))
async def test_access_probes_refused(tmp_path, wire, acl_file, probe):
    code, ext = PROBES[probe]
    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file)) as broker:
        async with client_with() as anon:
            resp = await anon.invoke_sync(broker.broker_addr, RemotingCommand.request(code, ext_fields=dict(ext)))
            assert resp.code == 1 and resp.remark.startswith(EXC), (probe, resp.code, resp.remark)


async def test_every_broker_code_refused_unsigned(tmp_path, wire, acl_file):
    """What a client without credentials can do to a broker with ACL on: nothing. Every
    code the broker serves is refused with Java's AclException before any processor runs,
    with no key and with a wrong secret, on the client port and the VIP channel; the
    broker's topics are as they were. A code it does not serve too: Java's broker
    answers it from its default processor, after ACL's check (``test_unknown_code_...``)."""
    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file)) as broker:
        servers = [broker.server] + ([broker.vip_server] if broker.vip_server else [])
        assert {10, 11, 15, 17, 21, 34, 41, 43, 50, 215, 310, 320} <= set(broker.server.processors.by_code)
        topics = dict(broker.topics.all())
        ext = {"topic": "topicB", "consumerGroup": "groupB", "queueId": "0", "brokerName": "broker-a"}
        async with client_with() as anon, client_with("RocketMQ", "wrong-secret") as bad:
            for server in servers:
                addr = server.address
                for code in sorted(server.processors.by_code):  # the whole table, not a sample
                    resp = await anon.invoke_sync(addr, RemotingCommand.request(code))
                    assert (resp.code, resp.remark) == (1, f"{EXC}: No accessKey is configured, "
                                                           f"{MGR}.validate(PlainPermissionManager.java:664)"), code
                    resp = await anon.invoke_sync(addr, RemotingCommand.request(code, ext_fields=dict(ext)))
                    assert resp.code == 1 and resp.remark.startswith(EXC), (code, resp.remark)
                    resp = await bad.invoke_sync(addr, RemotingCommand.request(code, ext_fields=dict(ext)))
                    # the signature, or before it (as Java's parse) a heartbeat with no body
                    assert resp.code == 1 and resp.remark.startswith(EXC), code
                    assert ("Check signature failed for accessKey=RocketMQ" in resp.remark
                            or code == 34 and "heartbeat: the body is empty" in resp.remark), (code, resp.remark)
        assert broker.topics.all() == topics


async def test_unknown_code_is_checked_by_acl_first(tmp_path, wire, acl_file):
    """Java 4.9.8's broker serves every code no processor registered with its default
    processor (``AdminBrokerProcessor``), after the RPC hooks: with ACL on, a code nobody
    serves gets ACL's refusal without a valid key (``PlainAccessValidator.parse`` maps
    it to no resource), and REQUEST_CODE_NOT_SUPPORTED with Java's remark with one; so
    does PULL_MESSAGE on the VIP channel, which does not serve it. With ACL off the
    answer is remoting's own, as before."""
    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file)) as broker:
        servers = [(broker.server, 9999)] + ([(broker.vip_server, 11)] if broker.vip_server else [])
        async with client_with() as anon, client_with("RocketMQ", "wrong-secret") as bad, \
                client_with("RocketMQ", "12345678") as good:
            for server, code in servers:
                before = server.stats.not_supported_replies
                resp = await anon.invoke_sync(server.address, RemotingCommand.request(code))
                assert (resp.code, resp.remark) == (1, f"{EXC}: No accessKey is configured, "
                                                       f"{MGR}.validate(PlainPermissionManager.java:664)")
                resp = await bad.invoke_sync(server.address, RemotingCommand.request(code, ext_fields={"x": "1"}))
                assert resp.code == 1 and "Check signature failed for accessKey=RocketMQ" in resp.remark
                resp = await good.invoke_sync(server.address, RemotingCommand.request(code, ext_fields={"x": "1"}))
                assert (resp.code, resp.remark) == (3, f" request type {code} not supported")
                assert server.stats.not_supported_replies == before + 1
    async with wire.running_broker(tmp_path / "off") as broker, client_with() as anon:
        resp = await anon.invoke_sync(broker.broker_addr, RemotingCommand.request(9999))
        assert (resp.code, resp.remark) == (3, " request type 9999 not supported")
        assert broker.server.processors.default is None


def test_loopback_only():
    assert all(loopback_only(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(loopback_only(h) for h in ("", "0.0.0.0", "::", "10.0.0.5", "192.168.1.1", "broker.example"))


HA_WARNING = "ACL is on but the HA port"


async def test_ha_port_warning_only_when_reachable_from_elsewhere(tmp_path, wire, caplog):
    """An ACL broker whose HA port is bound to loopback serves only this machine: no
    warning; bound to every interface, with no white list nor haAllowedSlaves: warned."""
    caplog.set_level("WARNING", logger="trocket")
    acl_file = tmp_path / "no_white_list.yml"
    acl_file.write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: '12345678'\n")
    async with wire.running_broker(tmp_path / "lo", acl_enable=True, acl_file=str(acl_file)):
        pass
    assert HA_WARNING not in caplog.text
    async with wire.running_broker(tmp_path / "any", acl_enable=True, acl_file=str(acl_file), ha_listen=("0.0.0.0", 0)):
        pass
    assert HA_WARNING in caplog.text and "(0.0.0.0)" in caplog.text
    caplog.clear()
    async with wire.running_broker(tmp_path / "allowed", acl_enable=True, acl_file=str(acl_file),
                                   ha_listen=("0.0.0.0", 0), ha_allowed_slaves="10.0.0.2"):
        pass
    assert HA_WARNING not in caplog.text


async def test_acl_file_reloaded_when_it_changes(tmp_path, wire, acl_file):
    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file), acl_reload_interval_ms=50) as broker:
        async with client_with("newcomer1", "secret-of-newcomer") as newcomer:
            resp = await newcomer.invoke_sync(broker.broker_addr, wire.send_v2("topicB", b"m"))
            assert "No acl config for newcomer1" in resp.remark
            acl_file.write_text(ACL_YML + "\n  - accessKey: newcomer1\n    secretKey: secret-of-newcomer\n"
                                "    defaultTopicPerm: PUB\n")
            await wait_until(lambda: "newcomer1" in broker.acl.table.accounts, 5, what="the ACL file reloaded")
            resp = await newcomer.invoke_sync(broker.broker_addr, wire.send_v2("topicB", b"m"))
            assert resp.code == 0, resp.remark


async def test_trocket_producer_signs_with_its_credentials(tmp_path, wire, acl_file):
    from trocket.client import ClientConfig as MQClientConfig, ClientError
    from trocket.client.instance import ClientInstance
    from trocket.client.message import new_message
    from trocket.client.producer import Producer

    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file),
                                   auto_create_topic=True) as broker:
        ns = broker.namesrv_addrs[0]
        # the route: topicB must exist (creation is admin's)
        async with client_with("rocketmq2", "12345678") as admin:
            from .test_admin import create_topic

            assert (await admin.invoke_sync(broker.broker_addr, create_topic("topicB", 4))).code == 0
        cfg = MQClientConfig(namesrv=ns, access_key="RocketMQ", secret_key="12345678")
        async with ClientInstance(cfg) as inst, Producer("PG", instance=inst) as producer:
            await wait_until(lambda: inst.update_route("topicB"), 5, interval=0.02, what="the name server routes topicB")
            result = await producer.send(new_message("topicB", b"hello"))
            assert result.status.name == "SEND_OK"
        cfg = MQClientConfig(namesrv=ns, access_key="RocketMQ", secret_key="wrong-secret")
        async with ClientInstance(cfg) as inst, Producer("PG2", instance=inst, send_timeout=3) as producer:
            with pytest.raises(ClientError, match="Check signature failed"):
                await producer.send(new_message("topicB", b"hello"))


@pytest.mark.parametrize("secret", [b"k", b"12345678", b"s" * 64, b"long" * 40])
@pytest.mark.parametrize("body", [None, b"", b"body", b"x" * 100_000])
def test_signing_key_is_hmac_sha1(secret, body):
    from trocket.codecs.acl import SigningKey

    content = "values of the fields".encode()
    assert SigningKey(secret).digest(content, body) == hmac.new(secret, content + (body or b""), hashlib.sha1).digest()


# -- the name server's writes (trocket's extension) ---------------------------------------------


NAMESRV_PROBES = {
    "point a route at yourself (REGISTER_BROKER)": (103, {
        "brokerName": "broker-a", "brokerAddr": "10.6.6.6:10911", "clusterName": "DefaultCluster",
        "haServerAddr": "", "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}),
    "unregister the broker": (104, {"brokerName": "broker-a", "brokerAddr": "x", "clusterName": "DefaultCluster",
                                    "brokerId": "0"}),
    "delete a route": (216, {"topic": "topicB"}),
    # an unchanged data version refreshes the broker's last-update time: a dead broker's
    # route kept alive by anyone who read its version once
    "keep a broker's route alive (QUERY_DATA_VERSION)": (322, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster", "brokerId": "0"}),
    "drain a broker (WIPE_WRITE_PERM_OF_BROKER)": (205, {"brokerName": "broker-a"}),
    "undo a drain (ADD_WRITE_PERM_OF_BROKER)": (327, {"brokerName": "broker-a"}),
    "write the KV config (PUT_KV_CONFIG)": (100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "x"}),
}


async def test_embedded_name_server_writes_need_an_admin(tmp_path, wire, acl_file):
    from trocket.codecs.codes import RequestCode

    async with wire.running_broker(tmp_path, acl_enable=True, acl_file=str(acl_file)) as broker:
        ns = broker.namesrv_addrs[0]
        assert broker.registrations >= 1 and broker.registration_failures == 0  # it signs its own
        async with client_with() as anon, client_with("RocketMQ", "12345678") as user, \
                client_with("rocketmq2", "12345678") as admin:
            for what, (code, ext) in NAMESRV_PROBES.items():
                resp = await anon.invoke_sync(ns, RemotingCommand.request(code, ext_fields=dict(ext)))
                assert resp.code == 1 and "No accessKey is configured" in resp.remark, what
                resp = await user.invoke_sync(ns, RemotingCommand.request(code, ext_fields=dict(ext)))
                assert resp.code == 1 and f"Need admin permission for request code={code}" in resp.remark, what
            resp = await admin.invoke_sync(ns, RemotingCommand.request(216, ext_fields={"topic": "nothing"}))
            assert resp.code == 0
            # reads stay open, as Java's name server
            resp = await anon.invoke_sync(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
            assert resp.code == 0 and b"broker-a" in resp.body
            resp = await anon.invoke_sync(ns, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"}))
            assert resp.code == 0 and b"broker-a" in resp.body
            resp = await anon.invoke_sync(ns, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert resp.code == 0 and b"TBW102" in resp.body
            # every other code the name server serves is a write
            reads = {RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                     RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_KV_CONFIG,
                     RequestCode.GET_KVLIST_BY_NAMESPACE, RequestCode.GET_TOPICS_BY_CLUSTER,
                     RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.GET_NAMESRV_CONFIG,
                     RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                     RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST}
            for code in (RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                         RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
                assert (await anon.invoke_sync(ns, RemotingCommand.request(code))).code == 0
            writes = set(broker.namesrv.remoting.processors.by_code) - {int(c) for c in reads}
            assert writes and writes <= NAMESRV_WRITE_CODES


async def test_standalone_name_server_with_acl(tmp_path, wire, acl_file):
    from trocket.broker.acl import NamesrvAclHook
    from trocket.broker.namesrv.server import NamesrvConfig, NameServer

    acl = AclValidator(acl_file)
    async with NameServer(NamesrvConfig(listen_port=0), hooks=[NamesrvAclHook(acl)]) as ns:
        async with wire.running_broker(tmp_path / "a", namesrv_addrs=[ns.address], access_key="rocketmq2",
                                       secret_key="12345678") as signed:
            assert signed.registrations >= 1 and signed.registration_failures == 0
        async with wire.running_broker(tmp_path / "b", namesrv_addrs=[ns.address], broker_name="broker-b") as unsigned:
            assert unsigned.registration_failures >= 1
            assert "broker-b" not in ns.route_info.broker_addr_table
