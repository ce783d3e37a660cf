"""Access control: the broker's side of RocketMQ ACL (Java 4.9.8's ``acl`` module).

- :mod:`.permission`: PUB / SUB / DENY, the admin request codes;
- :mod:`.address`: the remote-address patterns of the white lists;
- :mod:`.plain`: ``plain_acl.yml``, read and rewritten (PyYAML);
- :mod:`.resource`: which topics and groups a request touches, with what permission;
- :mod:`.validator`: :class:`AclValidator`, the request hook that checks every request
  (a request-only hook: the connection keeps its fast path) and reloads the file when
  it changes.

The signature scheme itself is :mod:`trocket.codecs.acl`; the client's signing hook is
:class:`trocket.client.acl.AclSigningHook`; the ACL admin codes (50-53) are
:mod:`trocket.broker.processors.acl`.
"""

from .permission import ADMIN_CODES, DENY, PUB, SUB, AclConfigError
from .plain import AclTable, PlainAccessConfig, load_acl
from .validator import AclError, AclValidator, NamesrvAclHook

__all__ = [
    "ADMIN_CODES",
    "AclConfigError",
    "AclError",
    "AclTable",
    "AclValidator",
    "DENY",
    "PUB",
    "PlainAccessConfig",
    "SUB",
    "NamesrvAclHook",
    "load_acl",
]
