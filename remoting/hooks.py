"""RPC hooks: code that sees every request before it is sent or processed, and
every response after it arrives or is produced (RocketMQ's ``RPCHook``).

Hooks are plain synchronous calls on the hot path: keep them cheap. A hook that
raises stops the exchange: on the calling side the call fails with that
exception; on the processing side the peer gets SYSTEM_ERROR with the
exception's description as remark (as RocketMQ's ACL hook does).

:class:`HmacSigningHook` and :class:`HmacVerifyingHook` are examples of RocketMQ's
ACL scheme (``AclClientRPCHook``): the signature is HMAC-SHA1, base64, over the
values of the ext fields in key order (``AccessKey`` included, ``Signature``
excluded) followed by the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Mapping, Protocol, runtime_checkable

from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import wire_ext_fields

__all__ = [
    "RPCHook",
    "HmacSigningHook",
    "HmacVerifyingHook",
    "SignatureError",
    "sign_request",
    "request_signature",
    "ACCESS_KEY",
    "SIGNATURE",
]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"


@runtime_checkable
class RPCHook(Protocol):
    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        """Called before a request is sent (caller side) or processed (server side)."""

    def do_after_response(
        self, remote_addr: str | None, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Called after a response arrived (caller side) or when it is answered
        (processing side, in :meth:`Connection.answer
        <trocket.remoting.connection.Connection.answer>`: at once, or later for a
        processor that returned ``None`` and answers afterwards; for a oneway request,
        with what the processor returned, ``None`` as a rule)."""


class SignatureError(Exception):
    """A request's signature is missing, unknown or wrong."""


def request_signature(request: RemotingCommand, secret_key: str | bytes) -> str:
    """HMAC-SHA1 (base64) over the sorted ext-field values, minus ``Signature``, and the body."""
    fields = wire_ext_fields(request) or {}
    content = "".join(fields[k] for k in sorted(fields) if k != SIGNATURE).encode("utf-8")
    key = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
    mac = hmac.new(key, content, hashlib.sha1)
    mac.update(request.body or b"")
    return base64.b64encode(mac.digest()).decode("ascii")


def sign_request(request: RemotingCommand, access_key: str, secret_key: str | bytes) -> None:
    """Add ``AccessKey`` and ``Signature`` ext fields to ``request``."""
    request.add_ext_field(ACCESS_KEY, access_key)
    request.add_ext_field(SIGNATURE, request_signature(request, secret_key))


class HmacSigningHook:
    """Caller-side hook: signs every outgoing request."""

    __slots__ = ("access_key", "_secret")

    def __init__(self, access_key: str, secret_key: str | bytes) -> None:
        self.access_key = access_key
        self._secret = secret_key

    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        sign_request(request, self.access_key, self._secret)

    def do_after_response(self, remote_addr, request, response) -> None:
        pass


class HmacVerifyingHook:
    """Processing-side hook: rejects requests whose signature does not verify.

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

    def do_after_response(self, remote_addr, request, response) -> None:
        pass
