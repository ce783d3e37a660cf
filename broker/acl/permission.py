"""Permissions of RocketMQ ACL (Java 4.9.8's ``Permission`` and ``AclConstants``).

A permission is a bit set: ``DENY`` 1, ``ANY`` 2, ``PUB`` 4, ``SUB`` 8. An account owns
one per resource (a topic, or a group as its ``%RETRY%`` topic) and a default for
topics and one for groups; a request needs one per resource it touches
(:mod:`.resource`). :func:`check_permission` is Java's ``checkPermission``: an owned
``DENY`` refuses everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from trocket.codecs.codes import RequestCode

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "AclConfigError",
    "RETRY_PREFIX",
    "check_permission",
    "check_resource_perms",
    "parse_perm",
    "parse_resource_perms",
    "perm_name",
    "retry_topic",
]

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX``: a group is checked as its retry topic
RETRY_PREFIX = "%RETRY%"

#: The request codes only an ``admin`` account may send. Java 4.9.8's
#: ``Permission.ADMIN_CODE`` (17, 25, 215, 200, 207) plus the ACL writes (50, 51, 53),
#: which 4.9.8 lets any account with a valid signature send (an account could make
#: itself admin): a deliberate difference, see docs/security.md.
ADMIN_CODES: frozenset[int] = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    RequestCode.DELETE_ACL_CONFIG,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
})

_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


class AclConfigError(ValueError):
    """A bad ``plain_acl.yml`` entry or ACL update (Java's ``AclException`` at load)."""


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def parse_perm(text: object) -> int:
    """``parsePermFromString``: ``PUB``, ``SUB``, ``PUB|SUB``/``SUB|PUB``, ``DENY``; anything
    else (``None`` included) is ``DENY``."""
    if text is None:
        return DENY
    return _NAMES.get(str(text).strip(), DENY)


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def check_permission(needed: int, owned: int) -> bool:
    """``checkPermission``: an owned DENY refuses; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def _split_eq(entry: str) -> list[str]:
    return [part for part in str(entry).split("=") if part]  # StringUtils.split drops empty tokens


def parse_resource_perms(entries: Iterable[object] | None, *, topics: bool) -> dict[str, int]:
    """``parseResourcePerms``: ``["topicA=DENY", ...]`` -> ``{resource: perm}``; a group is
    keyed by its retry topic."""
    out: dict[str, int] = {}
    for entry in entries or ():
        items = _split_eq(str(entry))
        if len(items) != 2:
            raise AclConfigError(f"Parse resource permission failed for {'topic' if topics else 'group'}:{entry}")
        name = items[0].strip()
        out[name if topics else retry_topic(name)] = parse_perm(items[1].strip())
    return out


def check_resource_perms(entries: Iterable[object] | None) -> None:
    """``checkResourcePerms``: what an update may carry (``Res=PERM``, a known PERM)."""
    for entry in entries or ():
        items = _split_eq(str(entry))
        if len(items) != 2:
            raise AclConfigError(
                f"Parse Resource format error for {entry}.\n"
                "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if items[1].strip() != "DENY" and parse_perm(items[1].strip()) == DENY:
            raise AclConfigError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )
