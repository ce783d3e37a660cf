"""Access control: the broker's side of RocketMQ ACL (Java's ``PlainAccessValidator``,
signature check only; the scheme is :mod:`trocket.codecs.acl`).

:class:`AclVerifyingHook` is a request hook for the processing side (it sees requests
only, so it keeps the connection's fast path: :class:`~trocket.remoting.hooks.RequestHook`):
a request whose signature is missing, names an unknown access key or does not verify
raises :class:`SignatureError`, which remoting answers with SYSTEM_ERROR and the error's
text as remark (as the Java broker's ACL hook does). Permissions per resource are not
built yet; they go here.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from trocket.codecs.acl import ACCESS_KEY, SIGNATURE, request_signature
from trocket.codecs.command import RemotingCommand

__all__ = ["AclVerifyingHook", "SignatureError"]


class SignatureError(Exception):
    """A request's signature is missing, unknown or wrong."""


class AclVerifyingHook:
    """Processing-side request hook: rejects requests whose signature does not verify.

    ``credentials`` maps access keys to secret keys. With ``codes`` given, only
    those request codes are checked.
    """

    __slots__ = ("_credentials", "_codes")

    def __init__(self, credentials: Mapping[str, str | bytes], codes: set[int] | None = None) -> None:
        self._credentials = dict(credentials)
        self._codes = codes

    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        if self._codes is not None and request.code not in self._codes:
            return
        ext = request.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        signature = ext.get(SIGNATURE)
        if not access_key or not signature:
            raise SignatureError(f"request from {remote_addr} is not signed")
        secret = self._credentials.get(access_key)
        if secret is None:
            raise SignatureError(f"unknown access key {access_key!r}")
        expected = request_signature(request, secret)
        if not hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace")):
            raise SignatureError(f"signature mismatch for access key {access_key!r}")
