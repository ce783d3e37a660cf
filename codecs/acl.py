"""RocketMQ ACL's request signature (``AclClientRPCHook`` / ``AclUtils``, 4.9.8): pure.

A signed request carries ``AccessKey`` and ``Signature`` ext fields; the signature is
HMAC-SHA1, base64, over the values of the ext fields (the custom header merged in, as
they go on the wire) in key order, ``Signature`` excluded, followed by the body. The
client signs (:class:`trocket.client.acl.AclSigningHook`), the broker verifies
(:class:`trocket.broker.acl.AclVerifyingHook`); both compute it here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from .command import RemotingCommand
from .serialize import wire_ext_fields

__all__ = ["ACCESS_KEY", "SIGNATURE", "request_signature", "sign_request"]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"


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
