"""The client's side of RocketMQ ACL: a request hook that signs every request it sends
(Java's ``AclClientRPCHook``; the scheme is :mod:`trocket.codecs.acl`). It sees
requests only, so it keeps the connection's fast path
(:class:`~trocket.remoting.hooks.RequestHook`).

    RemotingClient(config, hooks=[AclSigningHook("access-key", "secret-key")])
"""

from __future__ import annotations

from trocket.codecs.acl import sign_request
from trocket.codecs.command import RemotingCommand

__all__ = ["AclSigningHook"]


class AclSigningHook:
    """Caller-side request hook: adds ``AccessKey`` and ``Signature`` to every outgoing request."""

    __slots__ = ("access_key", "_secret")

    def __init__(self, access_key: str, secret_key: str | bytes) -> None:
        self.access_key = access_key
        self._secret = secret_key

    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        sign_request(request, self.access_key, self._secret)
