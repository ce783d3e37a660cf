"""``trocket admin acl ...``: the ACL admin codes of a broker (like mqadmin's
``updateAclConfig``, ``deleteAclConfig``, ``updateGlobalWhiteAddr``,
``clusterAclConfigVersion``)::

    trocket admin acl update --account AK --secret SK [--admin] [--white ADDR]
                             [--default-topic-perm P] [--default-group-perm P]
                             [--topic-perms t1=PUB,t2=SUB] [--group-perms g1=SUB]
    trocket admin acl delete --account AK
    trocket admin acl white --addresses 10.0.0.*,192.168.1.7
    trocket admin acl info

Each goes to every master of ``--cluster`` (default: of every cluster), or to
``--broker ADDR`` only, signed with ``--access-key/--secret-key`` (an admin account)
like every client command.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_acl_commands"]


def add_acl_commands(asub: Any) -> None:
    """Add ``acl`` to ``trocket admin``'s subcommands."""
    from trocket.cli_client import _namesrv_arg

    acl = asub.add_parser("acl", help="ACL accounts and white list of the brokers (aclEnable)")
    sub = acl.add_subparsers(dest="acl_command", metavar="COMMAND", required=True)

    def target(p: argparse.ArgumentParser) -> None:
        _namesrv_arg(p)
        where = p.add_mutually_exclusive_group()
        where.add_argument("--cluster", help="every master of this cluster (default: of every cluster)")
        where.add_argument("--broker", metavar="ADDR", help="this broker only")
        p.add_argument("--json", action="store_true")

    update = sub.add_parser("update", help="create or update an account (UPDATE_AND_CREATE_ACL_CONFIG)")
    target(update)
    update.add_argument("--account", required=True, metavar="AK", help="the account's access key (longer than 6)")
    update.add_argument("--secret", metavar="SK", help="its secret key (longer than 6)")
    update.add_argument("--white", metavar="ADDR", help="whiteRemoteAddress: hosts served without a signature")
    update.add_argument("--admin", action="store_true", help="an admin account")
    update.add_argument("--default-topic-perm", metavar="P", help="PUB, SUB, PUB|SUB or DENY")
    update.add_argument("--default-group-perm", metavar="P", help="PUB, SUB, PUB|SUB or DENY")
    update.add_argument("--topic-perms", metavar="LIST", help="topicA=PUB,topicB=SUB,...")
    update.add_argument("--group-perms", metavar="LIST", help="groupA=SUB,...")
    update.set_defaults(run=lambda a: _run(_update, a))

    delete = sub.add_parser("delete", help="delete an account (DELETE_ACL_CONFIG)")
    target(delete)
    delete.add_argument("--account", required=True, metavar="AK")
    delete.set_defaults(run=lambda a: _run(_delete, a))

    white = sub.add_parser("white", help="replace globalWhiteRemoteAddresses (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)")
    target(white)
    white.add_argument("--addresses", required=True, metavar="LIST", help="comma separated patterns ('' clears)")
    white.set_defaults(run=lambda a: _run(_white, a))

    info = sub.add_parser("info", help="each broker's ACL file version (GET_BROKER_CLUSTER_ACL_INFO)")
    target(info)
    info.set_defaults(run=lambda a: _run(_info, a))


def _run(fn, args: argparse.Namespace) -> int:
    from trocket.cli_client import _run_trio

    return _run_trio(fn, args)


async def _each_broker(args: argparse.Namespace, call) -> list[dict[str, Any]]:
    from trocket.cli_client import _instance, _masters

    async with _instance(args) as inst:
        targets = [("-", "-", args.broker)] if args.broker else await _masters(inst, args.cluster)
        rows = []
        for cname, name, addr in targets:
            row = {"cluster": cname, "broker": name, "addr": addr}
            row.update(await call(inst.api, addr) or {})
            rows.append(row)
    return rows


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], what: str) -> int:
    if args.json:
        print(json.dumps(rows))
    else:
        for row in rows:
            print(f"{what} at {row['addr']} ({row['broker']}): success")
    return 0


async def _update(args: argparse.Namespace) -> int:
    from trocket.codecs.headers.acl import CreateAccessConfigRequestHeader

    header = CreateAccessConfigRequestHeader(
        accessKey=args.account, secretKey=args.secret, whiteRemoteAddress=args.white, admin=args.admin,
        defaultTopicPerm=args.default_topic_perm, defaultGroupPerm=args.default_group_perm,
        topicPerms=args.topic_perms, groupPerms=args.group_perms,
    )
    rows = await _each_broker(args, lambda api, addr: api.update_acl_config(addr, header))
    return _report(args, rows, f"update account {args.account}")


async def _delete(args: argparse.Namespace) -> int:
    rows = await _each_broker(args, lambda api, addr: api.delete_acl_config(addr, args.account))
    return _report(args, rows, f"delete account {args.account}")


async def _white(args: argparse.Namespace) -> int:
    addresses = [a for a in args.addresses.split(",") if a]
    rows = await _each_broker(args, lambda api, addr: api.update_global_white_addrs(addr, addresses))
    return _report(args, rows, "update the global white list")


async def _info(args: argparse.Namespace) -> int:
    async def call(api, addr):
        h = await api.get_broker_acl_info(addr)
        return {"version": json.loads(h.version), "files": json.loads(h.allAclFileVersion or "{}")}

    rows = await _each_broker(args, call)
    if args.json:
        print(json.dumps(rows))
    else:
        from trocket.cli_client import _table

        print(_table(["cluster", "broker", "address", "version counter", "timestamp"],
                     [[r["cluster"], r["broker"], r["addr"], r["version"]["counter"], r["version"]["timestamp"]]
                      for r in rows]))
    return 0
