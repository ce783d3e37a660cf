"""TLS through the broker, the name server, the client, the HA link and the capture proxy,
and ACL's white list on the HA port (issue 24): real sockets, trustme certificates."""

from __future__ import annotations

import ssl

import pytest
import trio
import trustme

from trocket.broker.ha.protocol import OFFSET
from trocket.codecs.codes import ResponseCode
from trocket.remoting import ClientConfig, RemotingClient, RemotingError, TlsSettings
from trocket.remoting.tls import TlsMode

from ..waiting import wait_until
from .conftest import Wire, client, running_broker


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 (PEM files) and the CA's PEM."""
    ca = trustme.CA()
    d = tmp_path_factory.mktemp("pki")
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(d / "server.pem"))
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    return {"cert": str(d / "server.pem"), "key": str(d / "server.key"), "ca": str(d / "ca.pem")}


def server_tls(pki, mode: str, **kw) -> TlsSettings:
    return TlsSettings(server_mode=mode, server_cert=pki["cert"], server_key=pki["key"], **kw)


def tls_client(pki) -> RemotingClient:
    tls = TlsSettings(enable=True, client_auth_server=True, client_trust_cert=pki["ca"])
    return RemotingClient(ClientConfig(default_timeout=5), ssl_context=tls.client_context())


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_broker_and_name_server_over_tls(tmp_path, pki, mode):
    from trocket.client import ClientConfig as MQClientConfig
    from trocket.client.instance import ClientInstance
    from trocket.client.message import new_message
    from trocket.client.producer import Producer

    async with running_broker(tmp_path, tls=server_tls(pki, mode)) as broker:
        assert broker.server.config.tls_mode is TlsMode(mode)
        # the trocket client, TLS to the name server and the broker, the server's certificate checked
        tls = TlsSettings(enable=True, client_auth_server=True, client_trust_cert=pki["ca"])
        cfg = MQClientConfig(namesrv=broker.namesrv_addrs[0], tls=tls)
        async with ClientInstance(cfg) as inst, Producer("PG", instance=inst) as producer:
            result = await producer.send(new_message("TlsTopic", b"secret payload"))
            assert result.status.name == "SEND_OK"
        async with tls_client(pki) as c:
            r = await c.invoke_sync(broker.broker_addr, Wire.send_v2("TlsTopic", b"x", properties=Wire.props()))
            assert r.code == ResponseCode.SUCCESS
            (conn,) = [k for k in broker.server.connections if k.tls]
        async with client() as plain:
            if mode == "permissive":  # TLS and plain on one port, as Java's
                r = await plain.invoke_sync(broker.broker_addr, Wire.send_v2("TlsTopic", b"y", properties=Wire.props()))
                assert r.code == ResponseCode.SUCCESS
            else:
                with pytest.raises(RemotingError):
                    await plain.invoke_sync(broker.broker_addr, Wire.send_v2("TlsTopic", b"y"), timeout=3)
                with pytest.raises(RemotingError):
                    await plain.invoke_sync(broker.namesrv_addrs[0], Wire.send_v2("TlsTopic", b"y"), timeout=3)


async def test_a_client_that_checks_refuses_an_unknown_certificate(tmp_path, pki):
    other = trustme.CA()
    path = tmp_path / "other-ca.pem"
    other.cert_pem.write_to_path(str(path))
    async with running_broker(tmp_path, tls=server_tls(pki, "enforcing")) as broker:
        tls = TlsSettings(enable=True, client_auth_server=True, client_trust_cert=str(path))
        async with RemotingClient(ClientConfig(default_timeout=3), ssl_context=tls.client_context()) as c:
            with pytest.raises(RemotingError, match="TLS handshake"):
                await c.invoke_sync(broker.broker_addr, Wire.send_v2("T", b"x"))
        # Java's client default (tls.client.authServer=false) trusts any certificate
        async with RemotingClient(ClientConfig(default_timeout=3),
                                  ssl_context=TlsSettings(enable=True).client_context()) as c:
            r = await c.invoke_sync(broker.broker_addr, Wire.send_v2("T", b"x", properties=Wire.props()))
            assert r.code == ResponseCode.SUCCESS


def test_missing_certificate_is_a_config_error(tmp_path):
    from trocket.broker.config import BrokerConfigError, load_properties_file

    conf = tmp_path / "broker.conf"
    conf.write_text("tls.server.mode=enforcing\ntls.server.certPath=/nonexistent/cert.pem\n")
    cfg = load_properties_file(conf)
    assert cfg.tls.server_mode is TlsMode.ENFORCING
    with pytest.raises((OSError, ValueError)):
        cfg.tls.server_context()
    conf.write_text("tls.server.mod=enforcing\n")
    with pytest.raises(BrokerConfigError, match="unknown TLS setting 'tls.server.mod'"):
        load_properties_file(conf)


async def test_ha_link_over_tls(tmp_path, pki):
    """``haTlsEnable`` (trocket's): the master's HA port speaks TLS only, the slave connects
    with TLS; a plain connection (a Java slave, an impostor) is refused."""
    tls = server_tls(pki, "disabled", client_auth_server=True, client_trust_cert=pki["ca"])
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0),
                              tls=tls, ha_tls=True) as master:
        port = master.ha.server.port
        plain = await trio.open_tcp_stream("127.0.0.1", port)
        await plain.send_all(OFFSET.pack(0))
        with trio.fail_after(15):
            assert await plain.receive_some(100) == b""  # the handshake failed: closed
        assert master.ha.transfer.connections == 0
        async with running_broker(tmp_path / "s", broker_role="SLAVE", ha_master_address=("127.0.0.1", port),
                                  namesrv_addrs=[master.namesrv.address], tls=tls, ha_tls=True) as slave:
            await wait_until(lambda: master.ha.transfer.connections == 1, 10)
            async with client() as c:
                for i in range(20):
                    r = await c.invoke_sync(master.broker_addr, Wire.send_v2("HaTls", b"m%d" % i, properties=Wire.props()))
                    assert r.code == ResponseCode.SUCCESS, r  # SYNC_MASTER: the slave has it
            assert slave.store.max_phy_offset == master.store.max_phy_offset
            end = master.store.max_phy_offset
            assert bytes(master.store.commit_log.get_message(0, end)) == bytes(slave.store.commit_log.get_message(0, end))


async def test_acl_white_list_applies_to_the_ha_port(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("globalWhiteRemoteAddresses:\n  - 10.1.2.*\naccounts: []\n")
    async with running_broker(tmp_path / "m", broker_role="SYNC_MASTER", ha_listen=("127.0.0.1", 0),
                              acl_enable=True, acl_file=str(acl), acl_reload_interval_ms=50) as master:
        s = await trio.open_tcp_stream("127.0.0.1", master.ha.server.port)
        await s.send_all(OFFSET.pack(0))
        with trio.fail_after(5):
            assert await s.receive_some(100) == b""
        assert master.ha.server.rejected == 1 and master.ha.transfer.connections == 0
        acl.write_text("globalWhiteRemoteAddresses:\n  - 10.1.2.*\n  - 127.0.0.1\naccounts: []\n")
        await wait_until(lambda: master.acl.white_listed("127.0.0.1"), 5)
        async with running_broker(tmp_path / "s", broker_role="SLAVE", namesrv_addrs=[master.namesrv.address],
                                  ha_master_address=("127.0.0.1", master.ha.server.port)):
            await wait_until(lambda: master.ha.transfer.connections == 1, 10)


async def test_capture_proxy_ends_tls_on_both_sides(tmp_path, pki):
    from trocket.conformance.proxy import CaptureProxy
    from trocket.remoting.tap import FileTap

    async with running_broker(tmp_path, tls=server_tls(pki, "enforcing")) as broker:
        host, port = broker.broker_addr.rsplit(":", 1)
        tap = FileTap(str(tmp_path / "cap.trkcap"))
        tls = server_tls(pki, "enforcing", enable=True)
        proxy = CaptureProxy(("127.0.0.1", 0), (host, int(port)), tap,
                             listen_ssl=tls.server_context(), upstream_ssl=tls.client_context())
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.serve)
            async with tls_client(pki) as c:
                r = await c.invoke_sync(f"127.0.0.1:{proxy.port}", Wire.send_v2("ProxyT", b"via-proxy", properties=Wire.props()))
                assert r.code == ResponseCode.SUCCESS
            nursery.cancel_scope.cancel()
        tap.close()
        assert proxy.frames == 2 and proxy.raw_records == 0  # the request and its answer, in the clear


# -- bounds ----------------------------------------------------------------------------------------


async def test_queue_count_per_topic_is_bounded(tmp_path):
    from .test_admin import create_topic

    async with running_broker(tmp_path) as broker:
        async with client() as c:
            for n in (2**31 - 1, 1025):
                r = await c.invoke_sync(broker.broker_addr, create_topic("Huge", n))
                assert r.code == ResponseCode.SYSTEM_ERROR
                assert f"readQueueNums={n}" in r.remark and "at most 1024 per topic" in r.remark
            assert broker.topics.select("Huge") is None
            r = await c.invoke_sync(broker.broker_addr, create_topic("Huge", 1024))
            assert r.code == ResponseCode.SUCCESS


async def test_a_huge_route_fails_fast_within_the_send_budget(tmp_path):
    """A broker that allows 2^31-1 queues (Java 4.9.8 does): the trocket client refuses the
    route at once instead of building it in its event loop past the send's budget."""
    from trocket.client import NoRouteError
    from trocket.client.message import new_message
    from trocket.client.producer import Producer

    from .test_admin import create_topic

    async with running_broker(tmp_path, max_queue_nums_per_topic=2**31 - 1) as broker:
        async with client() as c:
            assert (await c.invoke_sync(broker.broker_addr, create_topic("Huge", 2**31 - 1))).code == 0
        await broker.register_broker_all()
        async with Producer("PG", broker.namesrv_addrs[0], send_timeout=10) as producer:
            t0 = trio.current_time()
            with pytest.raises(NoRouteError, match="lists 2147483647 queues"):
                await producer.send(new_message("Huge", b"x"))
            assert trio.current_time() - t0 < 2


async def test_max_connections_per_host_from_broker_conf(tmp_path):
    """broker.conf's ``maxConnectionsPerHost`` is the limit of the client port and the
    VIP channel: one more connection from the host is closed at once."""
    from trocket.broker.config import load_properties_file

    from .conftest import broker_config

    conf = tmp_path / "broker.conf"
    conf.write_text("maxConnectionsPerHost=1\n")
    config = load_properties_file(conf, broker_config(tmp_path))
    assert config.max_connections_per_host == 1
    async with running_broker(tmp_path, max_connections_per_host=1) as broker:
        servers = [broker.server] + ([broker.vip_server] if broker.vip_server else [])
        for server in servers:
            assert server.config.max_connections_per_host == 1
            host, port = server.address.rsplit(":", 1)
            first = await trio.open_tcp_stream(host, int(port))
            await wait_until(lambda: server.serving_per_host.get("127.0.0.1") == 1, what="the first connection")
            second = await trio.open_tcp_stream(host, int(port))
            with trio.fail_after(10):
                assert await second.receive_some(1) == b""  # closed at once
            assert server.refused_connections_per_host == 1
            await first.aclose()
            await second.aclose()
