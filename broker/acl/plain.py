"""``plain_acl.yml``: RocketMQ's ACL file (Java 4.9.8's ``PlainPermissionManager``'s
loading and writing, ``PlainAccessConfig``), read and written with PyYAML.

::

    globalWhiteRemoteAddresses:        # hosts served without a signature
      - 10.10.103.*
    accounts:
      - accessKey: RocketMQ            # longer than 6 characters, as the secretKey
        secretKey: 12345678
        whiteRemoteAddress:            # this account's hosts served without a signature
        admin: false
        defaultTopicPerm: DENY         # PUB, SUB, PUB|SUB or DENY (anything else: DENY)
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY]      # checked as the group's %RETRY% topic
    dataVersion:                       # written by the broker on each update
      - counter: 1
        timestamp: 1700000000000

:func:`load_acl` reads a file into an :class:`AclTable` (what the validator checks
against); :func:`update_account`, :func:`delete_account` and
:func:`update_global_white_addrs` rewrite the file as Java does (the account's map
updated in place, ``dataVersion`` counted up) -- the broker's file watcher then loads it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import attrs
import yaml

from trocket.broker.store.atomic_file import write_atomic
from trocket.codecs.acl import SigningKey

from .address import AddressMatcher, address_matcher
from .permission import AclConfigError, check_resource_perms, parse_perm, parse_resource_perms

__all__ = [
    "Account",
    "AclTable",
    "PlainAccessConfig",
    "delete_account",
    "load_acl",
    "read_acl_document",
    "update_account",
    "update_global_white_addrs",
]

#: ``AclConstants.ACCESS_KEY_MIN_LENGTH`` / ``SECRET_KEY_MIN_LENGTH``: keys must be longer
MIN_KEY_LENGTH = 6


def _text(value: object) -> str | None:
    """fastjson's view of a YAML scalar as a Java ``String`` (``12345678`` -> "12345678")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


@attrs.define(slots=True, kw_only=True)
class PlainAccessConfig:
    """One account as the file and UPDATE_AND_CREATE_ACL_CONFIG give it (Java's
    ``PlainAccessConfig``)."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    @classmethod
    def from_yaml(cls, obj: Mapping[str, Any]) -> PlainAccessConfig:
        def perms(name: str) -> list[str] | None:
            value = obj.get(name)
            if value is None:
                return None
            if not isinstance(value, list):
                raise AclConfigError(f"{name} of account {obj.get('accessKey')!r} must be a list of Res=PERM")
            return [str(v) for v in value]

        return cls(
            access_key=_text(obj.get("accessKey")),
            secret_key=_text(obj.get("secretKey")),
            white_remote_address=_text(obj.get("whiteRemoteAddress")),
            admin=_truthy(obj.get("admin", False)),
            default_topic_perm=_text(obj.get("defaultTopicPerm")),
            default_group_perm=_text(obj.get("defaultGroupPerm")),
            topic_perms=perms("topicPerms"),
            group_perms=perms("groupPerms"),
        )

    def to_json(self) -> dict[str, Any]:
        """``PlainAccessConfig`` as fastjson writes it (GET_BROKER_CLUSTER_ACL_CONFIG)."""
        return {
            "accessKey": self.access_key, "admin": self.admin,
            "defaultGroupPerm": self.default_group_perm, "defaultTopicPerm": self.default_topic_perm,
            "groupPerms": self.group_perms, "secretKey": self.secret_key,
            "topicPerms": self.topic_perms, "whiteRemoteAddress": self.white_remote_address,
        }

    def check_keys(self) -> None:
        """``checkPlainAccessConfig``: both keys given and longer than 6 characters."""
        ak, sk = self.access_key, self.secret_key
        if ak is None or sk is None or len(ak) <= MIN_KEY_LENGTH or len(sk) <= MIN_KEY_LENGTH:
            raise AclConfigError(
                f"The accessKey={_java(ak)} and secretKey={_java(sk)} cannot be null and length should longer than 6"
            )


def _java(value: object) -> str:
    return "null" if value is None else str(value)


@attrs.define(slots=True, frozen=True)
class Account:
    """An account as the validator uses it (Java's owned ``PlainAccessResource``)."""

    access_key: str
    secret_key: bytes
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    #: topic -> perm, and %RETRY%group -> perm; None when the file gives neither list
    perms: dict[str, int] | None
    white: AddressMatcher
    #: HMAC-SHA1 keyed with the secret once (:class:`~trocket.codecs.acl.SigningKey`)
    mac: SigningKey = attrs.field(eq=False, repr=False)

    @classmethod
    def build(cls, config: PlainAccessConfig) -> Account:
        config.check_keys()
        perms: dict[str, int] | None = None
        if config.group_perms or config.topic_perms:
            perms = parse_resource_perms(config.group_perms, topics=False)
            perms.update(parse_resource_perms(config.topic_perms, topics=True))
        assert config.access_key is not None and config.secret_key is not None
        return cls(
            access_key=config.access_key,
            secret_key=config.secret_key.encode("utf-8"),
            admin=config.admin,
            default_topic_perm=parse_perm(config.default_topic_perm),
            default_group_perm=parse_perm(config.default_group_perm),
            perms=perms,
            white=address_matcher(config.white_remote_address),
            mac=SigningKey(config.secret_key.encode("utf-8")),
        )


@attrs.define(slots=True, frozen=True)
class AclTable:
    """One load of the file: the global white list, the accounts, the data version."""

    path: str
    global_white: tuple[AddressMatcher, ...] = ()
    global_white_addrs: tuple[str, ...] = ()
    accounts: dict[str, Account] = attrs.Factory(dict)
    configs: tuple[PlainAccessConfig, ...] = ()
    #: ``dataVersion``'s first element: (counter, timestamp ms); (0, 0) when absent
    data_version: tuple[int, int] = (0, 0)


def read_acl_document(path: str) -> dict[str, Any]:
    """The file as a mapping ({} for a missing or empty file)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except FileNotFoundError:
        return {}
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not valid YAML: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise AclConfigError(f"{path}: expected a mapping (globalWhiteRemoteAddresses, accounts), got {type(doc).__name__}")
    return doc


def load_acl(path: str) -> AclTable:
    """Read ``path`` (``PlainPermissionManager.load``): raises :class:`AclConfigError`
    naming the file for a bad entry, as Java refuses to start with one."""
    doc = read_acl_document(path)
    try:
        whites_text = tuple(str(a) for a in (doc.get("globalWhiteRemoteAddresses") or ()))
        whites = tuple(address_matcher(a) for a in whites_text)
        accounts: dict[str, Account] = {}
        configs = []
        for obj in doc.get("accounts") or ():
            if not isinstance(obj, dict):
                raise AclConfigError(f"an account must be a mapping, got {obj!r}")
            config = PlainAccessConfig.from_yaml(obj)
            account = Account.build(config)
            if account.access_key in accounts:  # Java keeps the first of a repeated key
                continue
            accounts[account.access_key] = account
            configs.append(config)
    except AclConfigError as exc:
        raise AclConfigError(f"{path}: {exc}") from None
    version = (0, 0)
    versions = doc.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        try:
            version = (int(versions[0].get("counter", 0)), int(versions[0].get("timestamp", 0)))
        except (TypeError, ValueError):
            version = (0, 0)
    return AclTable(path, whites, whites_text, accounts, tuple(configs), version)


# -- writing (the ACL admin codes) --------------------------------------------------------------


def _write(path: str, doc: dict[str, Any]) -> None:
    """``updateAclConfigFileVersion`` + ``writeDataObject``: the version counted up, the
    file replaced atomically."""
    counter = 0
    versions = doc.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        try:
            counter = int(versions[0].get("counter", 0))
        except (TypeError, ValueError):
            counter = 0
    doc["dataVersion"] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]
    data = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, data.encode("utf-8"))


def update_account(path: str, config: PlainAccessConfig) -> None:
    """``updateAccessConfig``: the account's entry updated (or added), the file rewritten."""
    if config.access_key is None or len(config.access_key) <= MIN_KEY_LENGTH:
        raise AclConfigError(f"The accessKey={_java(config.access_key)} cannot be null and length should longer than 6")
    config.check_keys()
    check_resource_perms(config.topic_perms)
    check_resource_perms(config.group_perms)
    Account.build(config)  # the white address and perms must parse before anything is written
    doc = read_acl_document(path)
    accounts = doc.get("accounts")
    if not isinstance(accounts, list):
        accounts = []
    entry: dict[str, Any] = {}
    for i, existing in enumerate(accounts):
        if isinstance(existing, dict) and _text(existing.get("accessKey")) == config.access_key:
            entry = accounts.pop(i)
            break
    entry["accessKey"] = config.access_key
    if config.secret_key:
        entry["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        entry["whiteRemoteAddress"] = config.white_remote_address
    entry["admin"] = config.admin
    if config.default_topic_perm:
        entry["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        entry["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms is not None:
        entry["topicPerms"] = list(config.topic_perms)
    if config.group_perms is not None:
        entry["groupPerms"] = list(config.group_perms)
    accounts.append(entry)
    doc["accounts"] = accounts
    _write(path, doc)


def delete_account(path: str, access_key: str) -> bool:
    """``deleteAccessConfig``: False when no account has ``access_key``."""
    if not access_key:
        return False
    doc = read_acl_document(path)
    accounts = doc.get("accounts")
    if not isinstance(accounts, list):
        return False
    for i, existing in enumerate(accounts):
        if isinstance(existing, dict) and _text(existing.get("accessKey")) == access_key:
            del accounts[i]
            _write(path, doc)
            return True
    return False


def update_global_white_addrs(path: str, addresses: list[str]) -> None:
    """``updateGlobalWhiteAddrsConfig``: the list replaced, the file rewritten."""
    for address in addresses:
        address_matcher(address)  # refuse a pattern the validator could not use
    doc = read_acl_document(path)
    doc["globalWhiteRemoteAddresses"] = list(addresses)
    _write(path, doc)
