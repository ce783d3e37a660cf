"""RocketMQ ACL's signature: the client's signing hook against the broker's verifying
hook, over real sockets, in both header serializations."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from trocket.broker.acl import AclVerifyingHook, SignatureError
from trocket.client.acl import AclSigningHook
from trocket.codecs.acl import request_signature, sign_request
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.remoting import ClientConfig, HookSet, RemotingClient, RemotingServer, ServerConfig, SysResponseCode

ECHO = 100


def echo(conn, request: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(0, body=request.body, ext_fields=request.ext_fields)


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_signed_requests_verify(stype):
    server = RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0), hooks=[AclVerifyingHook({"ak": "secret"})])
    server.register_processor(ECHO, echo)
    async with server:
        async with RemotingClient(ClientConfig(), hooks=[AclSigningHook("ak", "secret")]) as good:
            req = RemotingCommand.request(ECHO, body=b"payload", ext_fields={"b": "2", "a": "1"}, serialize_type=stype)
            resp = await good.invoke_sync(server.address, req)
            assert resp.code == 0 and resp.body == b"payload"
            assert set(resp.ext_fields) == {"a", "b", "AccessKey", "Signature"}
        async with RemotingClient(ClientConfig(), hooks=[AclSigningHook("ak", "wrong")]) as bad, RemotingClient() as unsigned:
            resp = await bad.invoke_sync(server.address, RemotingCommand.request(ECHO, body=b"payload"))
            assert resp.code == SysResponseCode.SYSTEM_ERROR and "signature mismatch" in resp.remark
            resp = await unsigned.invoke_sync(server.address, RemotingCommand.request(ECHO))
            assert resp.code == SysResponseCode.SYSTEM_ERROR and "not signed" in resp.remark


def test_signature_covers_sorted_values_and_body():
    req = RemotingCommand.request(1, body=b"B", ext_fields={"z": "1", "a": "2"})
    sign_request(req, "ak", "sk")
    expected = base64.b64encode(hmac.new(b"sk", b"ak21" + b"B", hashlib.sha1).digest()).decode()
    # sorted keys: AccessKey, a, z -> values "ak", "2", "1"
    assert req.ext_fields["Signature"] == expected == request_signature(req, "sk")
    AclVerifyingHook({"ak": "sk"}).do_before_request("x", req)  # verifies
    req.body = b"tampered"
    with pytest.raises(SignatureError, match="signature mismatch"):
        AclVerifyingHook({"ak": "sk"}).do_before_request("x", req)
    with pytest.raises(SignatureError, match="unknown access key"):
        AclVerifyingHook({"other": "sk"}).do_before_request("x", req)
    AclVerifyingHook({"other": "sk"}, codes={2}).do_before_request("x", req)  # code 1 is not checked


def test_both_are_request_hooks_that_keep_the_fast_path():
    hooks = HookSet.of([AclSigningHook("ak", "sk"), AclVerifyingHook({"ak": "sk"})])
    assert len(hooks.before) == 2 and hooks.after == ()
