"""The broker's ACL check: Java 4.9.8's ``PlainAccessValidator`` + ``PlainPermissionManager``
as a remoting request hook.

:class:`AclValidator` holds the loaded ``plain_acl.yml`` (:class:`~.plain.AclTable`) and
checks every request before its processor runs (``do_before_request``: a request-only
hook, so the connection keeps its fast path). The order is Java's ``validate``:

1. a host in ``globalWhiteRemoteAddresses``: served, no signature needed;
2. no ``AccessKey``: "No accessKey is configured"; an unknown one: "No acl config for ...";
3. a host in the account's ``whiteRemoteAddress``: served;
4. the signature (:func:`~trocket.codecs.acl.signature_matches`, compiled): "Check
   signature failed for accessKey=...";
5. a PUB to ``RMQ_SYS_TRACE_TOPIC``: served (message traces);
6. an admin code needs an ``admin`` account; each resource the request touches
   (:mod:`.resource`) needs its permission, else the account's default for topics or
   groups: "No default permission for topic:T" / "group:G".

A refusal is :class:`AclError`: SYSTEM_ERROR (1) with Java's remark -- the
``AclException``'s text and the frame Java's ``RemotingHelper.exceptionSimpleDesc``
names -- so a Java, C++ or JS client reports what it reports against a Java broker. Nothing
is logged per refusal (the client is told; a flood of refusals must not flood the log).

:meth:`AclValidator.watch` reloads the file when it changes (Java's
``AclFileWatchService``); a file that no longer parses is logged and the last good table
kept.
"""

from __future__ import annotations

import logging
import os

import trio

from trocket.codecs.acl import (
    ACCESS_KEY, SIGNATURE, UNIQUE_MSG_QUERY_FLAG, send_signature_matches, signature_matches,
)
from trocket.codecs.java_hashmap import hashmap_order
from trocket.remoting import ResponseCodeError

from .address import host_of
from .permission import ADMIN_CODES, PUB, RETRY_PREFIX, AclConfigError, check_permission
from .plain import Account, AclTable, PlainAccessConfig, load_acl
from .resource import needed_resources

__all__ = ["AclError", "AclValidator", "NAMESRV_WRITE_CODES", "NamesrvAclHook", "TRACE_TOPIC"]

log = logging.getLogger(__name__)

#: ``TopicValidator.RMQ_SYS_TRACE_TOPIC``
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

#: the session and field-order caches are cleared past this many entries
_CACHE_MAX = 4096
#: a session's published topics are cleared past this many (4096 sessions of 64 topics
#: at most: what an account allowed every topic name can make the broker keep is bounded)
_PUBLISHED_MAX = 64

_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
_VALIDATOR = "org.apache.rocketmq.acl.plain.PlainAccessValidator"


class AclError(ResponseCodeError):
    """A request ACL refuses: SYSTEM_ERROR with the remark a Java 4.9.8 broker gives
    (``exceptionSimpleDesc`` of the ``AclException``: its text and where it was thrown)."""

    code = 1

    def __init__(self, message: str, where: str) -> None:
        super().__init__(f"{_EXCEPTION}: {message}, {where}")
        self.message = message


def _where(method: str, line: int, cls: str = _MANAGER) -> str:
    return f"{cls}.{method}({cls.rpartition('.')[2]}.java:{line})"


def _need_admin(code: int, access_key: str) -> AclError:
    return AclError(
        f"Need admin permission for request code={code}, but accessKey={access_key} is not",
        _where("checkPerm", 581),
    )


def _print_resource(resource: str) -> str:
    """``PlainAccessResource.printStr``."""
    if resource.startswith(RETRY_PREFIX):
        return f"group:{resource[len(RETRY_PREFIX):]}"
    return f"topic:{resource}"


class _Session:
    """What the requests from one remote address share, for the send path's check: the
    host and whether it is globally white-listed, the account its last requests named
    and whether the host is in that account's white list, the signed names of its
    requests in signing order, and the topics the account may publish to. Valid for one
    table (a reload starts every session anew)."""

    __slots__ = ("table", "host", "open", "access_key", "account", "trusted", "signed", "published")

    def __init__(self, table: AclTable, host: str, open_: bool) -> None:
        self.table = table
        self.host = host
        self.open = open_
        self.access_key: str | None = None
        self.account: Account | None = None
        self.trusted = False
        self.signed: tuple[str, ...] = ()
        #: topics a send of ``account`` may publish to (checked once; a refusal is not kept)
        self.published: set[str] = set()


class AclValidator:
    """``plain_acl.yml`` loaded, checked against every request (see the module docstring).

    ``path``: the file; a missing file is an empty table (every unsigned request from a
    host not white-listed is refused), as Java creates an empty one.
    """

    __slots__ = ("path", "table", "reloads", "reload_failures", "_stamp", "_sessions", "_orders", "_internal")

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._stamp = self._file_stamp()
        self.table: AclTable = load_acl(self.path)
        self.reloads = 0
        self.reload_failures = 0
        self._sessions: dict[str | None, _Session] = {}
        self._orders: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._internal: dict[str, Account] = {}

    # -- the hook ---------------------------------------------------------------------------

    def do_before_request(self, remote_addr: str | None, request) -> None:
        """Check ``request`` (raises :class:`AclError`).

        A send from a connection whose account, signed names and topic were checked
        before (its :class:`_Session`) costs a session lookup and one compiled call
        (:func:`~trocket.codecs.acl.send_signature_matches`: the account, the topic and
        the signature); anything else, and every refusal, takes the whole check in
        Java's order (:meth:`_check`)."""
        session = self._sessions.get(remote_addr)
        if session is None or session.table is not self.table:
            session = self._session(remote_addr)
        if session.open:
            return
        code = request.code
        if (code == 310 or code == 320) and session.published and send_signature_matches(
            request.ext_fields, session.access_key, session.published, session.signed, request.body,
            session.account.mac,  # (published is filled only for a checked account: never None here)
        ):
            return
        self._check(session, request)

    def _check(self, session: _Session, request) -> None:
        """The whole check, in Java's order (the module docstring); fills ``session``."""
        host = session.host
        ext = request.ext_fields
        if ext is None:
            raise AclError("No accessKey is configured", _where("validate", 664))
        code = request.code
        if code == 310 or code == 320:  # the send path: needed_resources inlined
            topic = ext.get("b")
            needed = None if topic is None or topic.startswith(RETRY_PREFIX) else {topic: PUB}
            if needed is None:
                topic = None
                needed = needed_resources(code, ext, None)
        else:
            topic = None
            try:
                needed = needed_resources(code, ext, request.body)
            except Exception as exc:  # a heartbeat body that does not decode: Java's parse fails
                raise AclError(str(exc), _where("parse", 134, _VALIDATOR)) from None
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclError("No accessKey is configured", _where("validate", 664))
        account = session.table.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}", _where("validate", 668))
        if session.account is not account:
            session.access_key = access_key
            session.account = account
            session.trusted = account.white(host)
            session.published = set()
        if session.trusted:
            return
        self._check_signature(account, ext, request.body, session)
        if needed is None:
            if code in ADMIN_CODES and not account.admin:
                raise _need_admin(code, access_key)
            return
        if needed.get(TRACE_TOPIC) == PUB:
            return
        if code in ADMIN_CODES and not account.admin:
            raise _need_admin(code, access_key)
        owned = account.perms
        if owned is None and account.admin:
            return
        refused = None
        for resource, perm in needed.items():
            have = owned.get(resource) if owned is not None else None
            if have is None:
                have = account.default_group_perm if resource.startswith(RETRY_PREFIX) else account.default_topic_perm
                if not check_permission(perm, have):
                    refused = refused or {}
                    refused[resource] = 606
            elif not check_permission(perm, have):
                refused = refused or {}
                refused[resource] = 611
        if refused:
            first = hashmap_order(needed)  # the resource Java's HashMap reaches first
            resource = next(r for r in first if r in refused)
            raise AclError(f"No default permission for {_print_resource(resource)}", _where("checkPerm", refused[resource]))
        if topic is not None:  # a send to a topic it may publish to: the fast path's from now on
            if len(session.published) >= _PUBLISHED_MAX:
                session.published.clear()
            session.published.add(topic)

    def _check_signature(self, account: Account, ext: dict[str, str], body: bytes | None,
                         session: _Session | None = None) -> None:
        signature = ext.get(SIGNATURE)
        signed = session.signed if session is not None else self._order(ext)
        matches = signature_matches(ext, signed, body, account.mac, signature)
        if matches is None:  # other names than the session's last request
            signed = self._order(ext)
            if session is not None:
                session.signed = signed
            matches = signature_matches(ext, signed, body, account.mac, signature)
        if not matches:
            raise AclError(f"Check signature failed for accessKey={account.access_key}", _where("validate", 684))

    def check_admin(self, remote_addr: str | None, request) -> None:
        """A request only a white-listed host or an admin account may send (the name
        server's writes, :class:`NamesrvAclHook`): raises :class:`AclError`."""
        session = self._sessions.get(remote_addr)
        if session is None or session.table is not self.table:
            session = self._session(remote_addr)
        if session.open:
            return
        host = session.host
        table = session.table
        ext = request.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            raise AclError("No accessKey is configured", _where("validate", 664))
        account = table.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}", _where("validate", 668))
        if account.white(host):
            return
        self._check_signature(account, ext, request.body)
        if not account.admin:
            raise _need_admin(request.code, access_key)

    def add_internal_account(self, access_key: str, secret_key: str) -> None:
        """An admin account that is in no file (the broker's own, for its embedded name
        server); kept across reloads."""
        self._internal[access_key] = Account.build(PlainAccessConfig(
            access_key=access_key, secret_key=secret_key, admin=True))
        self.table.accounts.update(self._internal)
        self._sessions.clear()

    def _session(self, remote_addr: str | None) -> _Session:
        host = host_of(remote_addr) or ""
        table = self.table
        session = _Session(table, host, any(white(host) for white in table.global_white))
        if len(self._sessions) >= _CACHE_MAX:
            self._sessions.clear()
        self._sessions[remote_addr] = session
        return session

    def _order(self, ext: dict[str, str]) -> tuple[str, ...]:
        """The names of ``ext`` in the order their values are signed: sorted,
        ``Signature`` and ``_UNIQUE_KEY_QUERY`` left out; cached per set of names."""
        shape = tuple(ext)
        signed = self._orders.get(shape)
        if signed is None:
            signed = tuple(k for k in sorted(shape) if k != SIGNATURE and k != UNIQUE_MSG_QUERY_FLAG)
            if len(self._orders) >= _CACHE_MAX:
                self._orders.clear()
            self._orders[shape] = signed
        return signed

    # -- hosts (the HA port) ------------------------------------------------------------------

    def white_listed(self, host: str) -> bool:
        """``host`` is in ``globalWhiteRemoteAddresses``."""
        return any(white(host) for white in self.table.global_white)

    # -- reloading ---------------------------------------------------------------------------

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def reload(self) -> bool:
        """Load the file again (now); False, logged, when it does not parse (the last good
        table stays)."""
        self._stamp = self._file_stamp()
        try:
            table = load_acl(self.path)
        except AclConfigError as exc:
            self.reload_failures += 1
            log.error("ACL: %s; keeping the accounts loaded before", exc)
            return False
        table.accounts.update(self._internal)
        self.table = table
        self.reloads += 1
        log.info("ACL: reloaded %s (%d accounts, %d white-listed patterns)",
                 self.path, len(table.accounts), len(table.global_white))
        return True

    def reload_if_changed(self) -> bool:
        """Reload when the file's modification time, size or inode changed."""
        if self._file_stamp() == self._stamp:
            return False
        return self.reload()

    async def watch(self, interval: float = 1.0, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Reload the file whenever it changes (checked every ``interval`` seconds, a
        ``stat`` in a worker thread)."""
        task_status.started()
        while True:
            await trio.sleep(interval)
            changed = await trio.to_thread.run_sync(lambda: self._file_stamp() != self._stamp)
            if changed:
                self.reload()


#: The name server's writes (PUT_KV_CONFIG, DELETE_KV_CONFIG, REGISTER_BROKER,
#: UNREGISTER_BROKER, WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER,
#: DELETE_TOPIC_IN_NAMESRV, UPDATE_NAMESRV_CONFIG), and QUERY_DATA_VERSION: an unchanged
#: version refreshes the broker's last-update time, so anyone could keep a dead broker's
#: route alive.
NAMESRV_WRITE_CODES = frozenset({100, 102, 103, 104, 205, 216, 318, 322, 327})


class NamesrvAclHook:
    """trocket's extension (Java's name server has no ACL): on a name server with ACL, its
    writes (:data:`NAMESRV_WRITE_CODES`: registering or unregistering a broker, deleting a
    route, KV config) need a white-listed host or an admin account's signature, so nobody
    can point a route at themselves or unregister a broker; reads (routes, cluster info)
    stay open to every client, as Java's. A trocket broker signs its registrations (its
    embedded name server: an in-process account; another: broker.conf's ``accessKey``)."""

    __slots__ = ("acl",)

    def __init__(self, acl: AclValidator) -> None:
        self.acl = acl

    def do_before_request(self, remote_addr: str | None, request) -> None:
        if request.code in NAMESRV_WRITE_CODES:
            self.acl.check_admin(remote_addr, request)
