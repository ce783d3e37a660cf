"""The ACL admin codes 4.9.8 registers (Java's ``AdminBrokerProcessor``):
UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO
(52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

50, 51 and 53 rewrite ``plain_acl.yml`` as Java's ``PlainPermissionManager`` does
(:mod:`trocket.broker.acl.plain`; the account's entry updated in place, ``dataVersion``
counted up) and load it at once; a refusal is Java's code (209, 210, 211) with the
``AclException``'s text as remark. 52 answers the file's data version, the broker's
name, address and cluster. ACL's own check (:class:`~trocket.broker.acl.AclValidator`)
runs before these, and trocket makes 50, 51 and 53 admin-only (4.9.8 lets any account
with a valid signature send them: docs/security.md).

With ACL on, a code no processor serves is answered by :func:`unknown_code`, the
broker's default processor, after ACL's check, as Java's broker answers it from its
default processor (``AdminBrokerProcessor``) after its RPC hooks: a request without a
valid key gets ACL's refusal, not "request type N not supported" (with ACL off
remoting answers those codes itself, as before).

With ACL off, Java answers 50, 51, 53 with their failure code and a ``null`` remark and
52 not at all (its handler fails on the missing validator); trocket answers the failure
codes, SYSTEM_ERROR for 52, with "ACL is not enabled on this broker (aclEnable=false)".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from trocket.remoting import Connection, SysResponseCode

from ..acl import AclConfigError, AclValidator, PlainAccessConfig
from ..acl import plain
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["AclAdminProcessor", "register"]

_OFF = "ACL is not enabled on this broker (aclEnable=false)"


def _split(text: str | None) -> list[str] | None:
    """``UtilAll.split(text, ",")``: None for None, [] for blank, no trimming."""
    if text is None:
        return None
    if not text.strip():
        return []
    return text.split(",")


def _data_version(version: tuple[int, int]) -> dict[str, int]:
    counter, timestamp = version
    return {"counter": counter, "timestamp": timestamp}


class AclAdminProcessor:
    codes = (
        int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG),
        int(RequestCode.DELETE_ACL_CONFIG),
        int(RequestCode.GET_BROKER_CLUSTER_ACL_INFO),
        int(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG),
    )

    def __init__(self, ctx: BrokerContext, acl: AclValidator | None, broker_addr: Callable[[], str]) -> None:
        self.ctx = ctx
        self.acl = acl
        self.broker_addr = broker_addr
        #: one file rewrite at a time (Java's handlers are ``synchronized``)
        self._lock = trio.Lock()

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
            return self.acl_info()
        failed = {
            int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG): ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            int(RequestCode.DELETE_ACL_CONFIG): ResponseCode.DELETE_ACL_CONFIG_FAILED,
            int(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG): ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        }[code]
        acl = self.acl
        if acl is None:
            return reply(failed, _OFF)
        if code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
            h = decode_request_header(CreateAccessConfigRequestHeader, request)
            config = PlainAccessConfig(
                access_key=h.accessKey, secret_key=h.secretKey, white_remote_address=h.whiteRemoteAddress,
                admin=bool(h.admin), default_topic_perm=h.defaultTopicPerm, default_group_perm=h.defaultGroupPerm,
                topic_perms=_split(h.topicPerms), group_perms=_split(h.groupPerms),
            )
            return await self._rewrite(failed, lambda: plain.update_account(acl.path, config) or True, "")
        if code == RequestCode.DELETE_ACL_CONFIG:
            h = decode_request_header(DeleteAccessConfigRequestHeader, request)
            return await self._rewrite(
                failed, lambda: plain.delete_account(acl.path, h.accessKey),
                f"The accesskey[{h.accessKey}] corresponding to accessConfig has been deleted failed.",
            )
        h = decode_request_header(UpdateGlobalWhiteAddrsConfigRequestHeader, request)
        addrs = _split(h.globalWhiteAddrs) or []
        same_file = not h.aclFileFullPath or h.aclFileFullPath == acl.path
        return await self._rewrite(
            failed, lambda: same_file and (plain.update_global_white_addrs(acl.path, addrs) or True),
            f"The globalWhiteAddresses[{h.globalWhiteAddrs}] has been updated failed.",
        )

    async def _rewrite(self, failed: int, write: Callable[[], bool], remark: str) -> RemotingCommand:
        """Run ``write`` (a file rewrite, in a worker thread), then load the file at once."""
        assert self.acl is not None
        async with self._lock:
            try:
                done = await trio.to_thread.run_sync(write)
            except (AclConfigError, OSError) as exc:
                return reply(failed, str(exc))
            if not done:
                return reply(failed, remark)
            self.acl.reload()
        return reply(ResponseCode.SUCCESS)

    def acl_info(self) -> RemotingCommand:
        acl = self.acl
        if acl is None:
            return reply(ResponseCode.SYSTEM_ERROR, _OFF)
        version = _data_version(acl.table.data_version)
        cfg = self.ctx.config
        return reply(ResponseCode.SUCCESS, header=GetBrokerAclConfigResponseHeader(
            version=json.dumps(version, separators=(",", ":")),
            allAclFileVersion=json.dumps({acl.path: version}, separators=(",", ":")),
            brokerName=cfg.broker_name, brokerAddr=self.broker_addr(), clusterName=cfg.cluster,
        ))


def unknown_code(conn: Connection, request: RemotingCommand) -> RemotingCommand:
    """``AdminBrokerProcessor.getUnknownCmdResponse``: REQUEST_CODE_NOT_SUPPORTED with
    Java's remark (what remoting answers without a default processor), counted as
    remoting counts its own."""
    conn.endpoint.stats.not_supported_replies += 1
    return reply(SysResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")


def register(ctx: BrokerContext, acl: AclValidator | None, broker_addr: Callable[[], str]) -> AclAdminProcessor:
    """Register 50-53 on ``ctx.server`` (tasks: they write a file); with ACL on, also
    :func:`unknown_code` as the default processor."""
    proc = AclAdminProcessor(ctx, acl, broker_addr)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, limit=1, queue=64)
    if acl is not None:
        ctx.server.register_default_processor(unknown_code, inline=True)
    return proc
