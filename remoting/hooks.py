"""RPC hooks: code that sees every request before it is sent or processed, and
every response after it arrives or is produced (RocketMQ's ``RPCHook``).

Hooks are plain synchronous calls on the hot path: keep them cheap. A hook that
raises stops the exchange: on the calling side the call fails with that
exception; on the processing side the peer gets SYSTEM_ERROR with the
exception's description as remark (as RocketMQ's ACL hook does), or the code and
remark of a :class:`~trocket.remoting.errors.ResponseCodeError` it raised.

Two kinds: a hook with both methods (:class:`RPCHook`) sees requests and responses; a
hook with only ``do_before_request`` (:class:`RequestHook`: access control, request
logging) sees requests only. Only the first kind takes a connection off its fast
path, where a processor's answer is a frame it encoded itself
(:class:`~trocket.remoting.connection.PreparedResponse`) and no command is made: a
response hook has to be shown one. :class:`HookSet` sorts the hooks an endpoint has
by what they implement.

:class:`HmacSigningHook` and :class:`HmacVerifyingHook` are examples of RocketMQ's
ACL scheme (``AclClientRPCHook``): the signature is HMAC-SHA1, base64, over the
values of the ext fields in key order (``AccessKey`` included, ``Signature``
excluded) followed by the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from typing import Mapping, Protocol, runtime_checkable

import attrs

from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import wire_ext_fields

__all__ = [
    "RPCHook",
    "RequestHook",
    "HookSet",
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
class RequestHook(Protocol):
    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        """Called before a request is sent (caller side) or processed (server side)."""


@runtime_checkable
class RPCHook(RequestHook, Protocol):
    def do_after_response(
        self, remote_addr: str | None, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Called after a response arrived (caller side) or when it is answered
        (processing side, in :meth:`Connection.answer
        <trocket.remoting.connection.Connection.answer>`: at once, or later for a
        processor that returned ``None`` and answers afterwards; for a oneway request,
        with what the processor returned, ``None`` as a rule)."""


@attrs.define(slots=True, eq=False)
class HookSet:
    """An endpoint's hooks, by kind, in registration order: ``before`` every hook with
    ``do_before_request``, ``after`` every hook with ``do_after_response``. Shared by
    reference with the endpoint's connections and invoker (each reads the tuple it
    needs; :meth:`add` replaces the tuples, never mutates them)."""

    before: tuple[RequestHook, ...] = ()
    after: tuple[RPCHook, ...] = ()

    @classmethod
    def of(cls, hooks: Iterable[RequestHook]) -> HookSet:
        hook_set = cls()
        for hook in hooks:
            hook_set.add(hook)
        return hook_set

    def add(self, hook: RequestHook) -> None:
        before = callable(getattr(hook, "do_before_request", None))
        after = callable(getattr(hook, "do_after_response", None))
        if not (before or after):
            raise TypeError(f"{hook!r} is no RPC hook: it has neither do_before_request nor do_after_response")
        if before:
            self.before = (*self.before, hook)
        if after:
            self.after = (*self.after, hook)  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        return bool(self.before or self.after)


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
