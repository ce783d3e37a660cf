"""The client's side of RocketMQ ACL: a request hook that signs every request it sends
(Java's ``AclClientRPCHook``; the scheme and the hook are :mod:`trocket.codecs.acl`'s, which
the broker's own calls use too). It sees requests only, so it keeps the connection's
fast path (:class:`~trocket.remoting.hooks.RequestHook`). :class:`ClientInstance
<trocket.client.instance.ClientInstance>` installs it when its config has credentials.

    RemotingClient(config, hooks=[AclSigningHook("access-key", "secret-key")])
"""

from __future__ import annotations

from trocket.codecs.acl import AclSigningHook

__all__ = ["AclSigningHook"]
