"""``trocket send`` and ``trocket admin`` (like RocketMQ's ``mqadmin`` and the Kafka console tools).

    trocket send --namesrv ADDR --topic T [--tag X] [--keys K] (--body TEXT | --body - | --file F | --size N)
                 [--count N] [--mode sync|async|oneway] [--batch K] [--delay LEVEL]
                 [--transaction commit|rollback|check]
    trocket admin topic create|list|route|delete ...
    trocket admin cluster | broker ... | topic stats | group ...   (trocket/cli_admin.py)

``send`` prints one result line for a single message; for several, a progress line on a
terminal's stderr and a summary: sent, failed, TPS, latency p50/p99. Admin commands print
tables, or JSON with ``--json``. Errors are one ``trocket: error: ...`` line and exit 1.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from trocket.argtypes import NAMESRV_HELP, namesrv_default, non_negative_int, positive_float, positive_int
from trocket.progress import ProgressLine
from trocket.send_input import add_input_arguments, read_bodies
from trocket.exit_codes import EXIT_FAIL, EXIT_OK

__all__ = ["add_client_commands"]


def _namesrv_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namesrv", "-n", default=namesrv_default(), metavar="ADDR", help=NAMESRV_HELP)
    p.add_argument("--timeout", type=positive_float, default=3.0, metavar="S",
                   help="per call / per send budget (default 3 s)")
    add_client_security_arguments(p)


# -- security (issue 24): ACL credentials and TLS, for every client command ---------------


def add_client_security_arguments(p: argparse.ArgumentParser) -> None:
    """``--access-key/--secret-key`` (default: $ROCKETMQ_ACCESS_KEY / $ROCKETMQ_SECRET_KEY)
    sign every request, as Java's ``AclClientRPCHook``; ``--tls`` (Java's ``tls.enable``;
    $ROCKETMQ_TLS_ENABLE), ``--tls-trust PEM`` (check the server's certificate against it:
    ``tls.client.authServer`` + ``trustCertPath``), ``--tls-config FILE`` (``tls.config.file``;
    $ROCKETMQ_TLS_CONFIG_FILE)."""
    g = p.add_argument_group("security (docs/security.md)")
    g.add_argument("--access-key", metavar="AK", help="ACL access key (default $ROCKETMQ_ACCESS_KEY)")
    g.add_argument("--secret-key", metavar="SK", help="ACL secret key (default $ROCKETMQ_SECRET_KEY)")
    g.add_argument("--tls", action="store_true", default=None, help="connect with TLS (tls.enable)")
    g.add_argument("--tls-trust", metavar="PEM", help="verify the servers' certificates against these CAs")
    g.add_argument("--tls-config", metavar="FILE", help="tls.config.file: tls.client.* keys")


def add_client_knob_arguments(p: argparse.ArgumentParser) -> None:
    """``--namespace NS`` (Java's ``ClientConfig.namespace``: the topic and group go on the
    wire as ``NS%name``) and ``--vip-channel`` (``vipChannelEnabled``: sends and the other
    calls Java makes there go to each broker's listen port - 2)."""
    p.add_argument("--namespace", metavar="NS",
                   help="wrap the topic and group as NS%%name on the wire (Java's namespace); names print without it")
    p.add_argument("--vip-channel", action="store_true",
                   help="use each broker's VIP channel, its port - 2 (Java's vipChannelEnabled; off by default)")


def client_config(args: argparse.Namespace, **kw: Any):
    """The :class:`~trocket.client.ClientConfig` of a client command: ``-n``, credentials
    and TLS from the flags, else from the environment."""
    from trocket.client.config import ClientConfig, credentials_from_env, tls_from_env

    env_ak, env_sk = credentials_from_env()
    ak = getattr(args, "access_key", None) or env_ak
    sk = getattr(args, "secret_key", None) or env_sk
    if bool(ak) != bool(sk):
        raise ValueError("ACL credentials need both --access-key and --secret-key")
    tls = tls_from_env()
    props = {}
    if getattr(args, "tls_config", None):
        props["tls.config.file"] = args.tls_config
    if getattr(args, "tls", None) or getattr(args, "tls_trust", None):
        props["tls.enable"] = "true"
    if getattr(args, "tls_trust", None):
        props.update({"tls.client.authServer": "true", "tls.client.trustCertPath": args.tls_trust})
    if props:
        tls = tls.from_properties(props, tls)
    if getattr(args, "vip_channel", False):
        kw.setdefault("vip_channel_enabled", True)
    return ClientConfig(namesrv=args.namesrv, access_key=ak, secret_key=sk, tls=tls, **kw)


def add_client_commands(sub: Any) -> None:
    """Add ``send`` and ``admin`` to the ``trocket`` subparsers ``sub``."""
    send = sub.add_parser(
        "send", help="send messages with the trocket producer",
        description="Send one or many messages. One message: one result line. Many: a progress "
        "line (on a terminal) and a summary with TPS and latency percentiles.",
    )
    _namesrv_arg(send)
    send.add_argument("--topic", "-t", required=True)
    send.add_argument("--group", "-g", default="trocket_cli_producer", help="producer group")
    send.add_argument("--tag", help="the TAGS property")
    send.add_argument("--keys", help="the KEYS property (space separated keys)")
    add_input_arguments(send, positive_int)  # --body TEXT|-, --file F, --size N (trocket/send_input.py)
    send.add_argument("--count", "-c", type=positive_int, default=1, metavar="N", help="messages to send (default 1)")
    send.add_argument("--mode", choices=("sync", "async", "oneway"), default="sync")
    send.add_argument("--batch", type=non_negative_int, default=0, metavar="K", help="send in batches of K messages")
    send.add_argument("--delay", type=non_negative_int, default=0, metavar="LEVEL",
                      help="delay level (1 = 1 s, ... 18 = 2 h)")
    send.add_argument("--property", "-p", action="append", default=[], metavar="K=V", help="a user property (repeatable)")
    send.add_argument("--inflight", type=positive_int, default=256, metavar="N",
                      help="async sends in flight (default 256)")
    send.add_argument(
        "--transaction", choices=("commit", "rollback", "check"),
        help="send in transactions (TransactionProducer) whose local transaction commits, rolls back, or says "
        "unknown and commits when the broker checks back (check: waits for the checks, see --check-wait)",
    )
    send.add_argument("--check-wait", type=positive_float, default=90.0, metavar="S",
                      help="with --transaction check: how long to wait for the broker's checks (default 90 s)")
    send.add_argument("--json", action="store_true", help="print the result or summary as JSON")
    add_client_knob_arguments(send)
    send.set_defaults(run=_run_send)

    admin = sub.add_parser("admin", help="topics, consumer groups and the cluster (like mqadmin)")
    asub = admin.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)

    topic = asub.add_parser("topic", help="create, list, route, delete topics")
    tsub = topic.add_subparsers(dest="topic_command", metavar="COMMAND", required=True)
    create = tsub.add_parser("create", help="create or update a topic on every master of a cluster (or one broker)")
    _namesrv_arg(create)
    create.add_argument("--topic", "-t", required=True)
    create.add_argument("--queues", type=positive_int, default=8, help="read and write queues (default 8)")
    create.add_argument("--perm", type=int, default=6, help="permission: 6 read+write, 4 read, 2 write")
    create.add_argument("--order", action="store_true", help="an ordered topic")
    where = create.add_mutually_exclusive_group()
    where.add_argument("--cluster", help="every master of this cluster (default: of every cluster)")
    where.add_argument("--broker", metavar="ADDR", help="this broker only")
    create.add_argument("--json", action="store_true")
    create.set_defaults(run=_run_topic_create)
    lst = tsub.add_parser("list", help="every topic the name servers know")
    _namesrv_arg(lst)
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(run=_run_topic_list)
    route = tsub.add_parser("route", help="a topic's route: brokers, queues, permissions")
    _namesrv_arg(route)
    route.add_argument("--topic", "-t", required=True)
    route.add_argument("--json", action="store_true")
    route.set_defaults(run=_run_topic_route)
    delete = tsub.add_parser("delete", help="delete a topic from the masters of a cluster and the name servers")
    _namesrv_arg(delete)
    delete.add_argument("--topic", "-t", required=True)
    delete.add_argument("--cluster", help="only this cluster's masters (default: every cluster)")
    delete.add_argument("--json", action="store_true")
    delete.set_defaults(run=_run_topic_delete)

    from trocket.cli_admin import add_admin_commands

    add_admin_commands(asub, tsub)  # cluster, broker, topic stats, group ... (trocket/cli_admin.py)

    from trocket.cli_acl import add_acl_commands

    add_acl_commands(asub)


# -- helpers -----------------------------------------------------------------------------


def _error(message: str) -> int:
    print(f"trocket: error: {message}", file=sys.stderr)
    return EXIT_FAIL


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _run_trio(fn, args: argparse.Namespace) -> int:
    """Run ``fn(args)`` under trio; client errors and bad options become one error line."""
    import trio

    from trocket.client import ClientError
    from trocket.codecs.errors import CodecError

    try:
        return trio.run(fn, args)
    except ClientError as exc:
        return _error(f"{type(exc).__name__}: {exc}")
    except (CodecError, ValueError) as exc:
        return _error(str(exc))


def _instance(args: argparse.Namespace):
    from trocket.client import ClientInstance

    return ClientInstance(client_config(args, call_timeout=args.timeout))


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


# -- send --------------------------------------------------------------------------------


def _messages(args: argparse.Namespace):
    from trocket.client import new_message

    props = {}
    for item in args.property:
        k, sep, v = item.partition("=")
        if not sep:
            raise ValueError(f"--property {item!r} is not K=V")
        props[k] = v
    bodies = read_bodies(args)
    if bodies.from_input:
        args.count = len(bodies.bodies)  # a message per line (or the whole input)
    keys = bodies.keys

    def make(i: int):
        return new_message(args.topic, bodies.body(i), tags=args.tag, keys=keys[i] if keys else args.keys,
                           properties=props, delay_level=args.delay)

    return make


async def _send(args: argparse.Namespace) -> int:
    import trio

    from trocket.client import ClientError
    from trocket.client.producer import Producer
    from trocket.interrupt import stop_on_signal

    if args.count < 1:
        raise ValueError("--count must be at least 1")
    if args.batch < 0 or args.inflight < 1:
        raise ValueError("--batch must be >= 0 and --inflight >= 1")
    make = _messages(args)
    if args.transaction:
        return await _send_in_transactions(args, make)
    sent = failed = 0
    latencies: list[float] = []
    errors: dict[str, int] = {}
    last_result = None
    progress = ProgressLine(args.count, enabled=None if args.count > 1 else False)

    first_error: list[str] = []

    def fail(exc: BaseException, n: int = 1) -> None:
        nonlocal failed
        failed += n
        if not first_error:
            first_error.append(f"{type(exc).__name__}: {exc}")
        key = f"{type(exc).__name__}: {getattr(exc, 'summary', exc)}"
        errors[key] = errors.get(key, 0) + n

    begin = time.perf_counter()
    elapsed = None
    async with stop_on_signal() as stop, Producer(args.group, client_config=client_config(args),
                                                    send_timeout=args.timeout,
                                                    namespace=args.namespace) as producer:
        begin = time.perf_counter()
        if args.batch:
            i = 0
            while i < args.count:
                n = min(args.batch, args.count - i)
                t0 = time.perf_counter()
                try:
                    results = await producer.send_batch([make(i + k) for k in range(n)])
                    last_result = results[-1]
                    sent += n
                    latencies.append(time.perf_counter() - t0)
                except ClientError as exc:
                    fail(exc, n)
                i += n
                progress.update(sent + failed, f"failed {failed}")
        elif args.mode == "sync":
            for i in range(args.count):
                t0 = time.perf_counter()
                try:
                    last_result = await producer.send(make(i))
                    sent += 1
                    latencies.append(time.perf_counter() - t0)
                except ClientError as exc:
                    fail(exc)
                progress.update(sent + failed, f"failed {failed}")
        elif args.mode == "oneway":
            for i in range(args.count):
                t0 = time.perf_counter()
                try:
                    await producer.send_oneway(make(i))
                    sent += 1
                    latencies.append(time.perf_counter() - t0)
                except ClientError as exc:
                    fail(exc)
                progress.update(sent + failed, f"failed {failed}")
        else:
            slots = trio.Semaphore(args.inflight)

            def done(t0: float):
                def callback(result, error) -> None:
                    nonlocal sent, last_result
                    slots.release()
                    if error is None:
                        sent += 1
                        last_result = result
                        latencies.append(time.perf_counter() - t0)
                    else:
                        fail(error)
                    progress.update(sent + failed, f"failed {failed}")

                return callback

            for i in range(args.count):
                await slots.acquire()
                try:
                    await producer.send_async(make(i), done(time.perf_counter()))
                except ClientError as exc:
                    slots.release()
                    fail(exc)
            for _ in range(args.inflight):  # wait for the last ones
                await slots.acquire()
        elapsed = time.perf_counter() - begin
    if elapsed is None:  # interrupted: the summary so far
        elapsed = time.perf_counter() - begin
    progress.update(sent + failed, f"failed {failed}", force=True)
    progress.close()
    if args.count == 1 and not args.batch and not stop.interrupted:
        if failed:
            return _error(first_error[0])
        if args.mode == "oneway":
            line = {"status": "SENT_ONEWAY", "topic": args.topic}
            print(json.dumps(line) if args.json else f"SENT_ONEWAY topic={args.topic}")
            return EXIT_OK
        r = last_result
        doc = {"status": r.status.value, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id, "topic": r.queue.topic,
               "brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "queueOffset": r.queue_offset}
        if args.json:
            print(json.dumps(doc))
        else:
            print(f"{r.status.value} msgId={r.msg_id} offsetMsgId={r.offset_msg_id} "
                  f"queue={r.queue.broker_name}:{r.queue.queue_id} offset={r.queue_offset}")
        return EXIT_OK
    unit = "batch" if args.batch else "send"
    summary = {
        "sent": sent, "failed": failed, "seconds": round(elapsed, 3), "tps": round(sent / elapsed, 1) if elapsed else 0.0,
        f"{unit}_latency_ms_p50": round(_percentile(latencies, 50) * 1000, 3),
        f"{unit}_latency_ms_p99": round(_percentile(latencies, 99) * 1000, 3),
        "errors": errors,
    }
    if stop.interrupted:
        summary["interrupted"] = signal.Signals(stop.signum).name
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"sent {sent}, failed {failed} in {elapsed:.2f} s: {summary['tps']:,.0f} msg/s, "
              f"{unit} latency p50 {summary[f'{unit}_latency_ms_p50']:.2f} ms, "
              f"p99 {summary[f'{unit}_latency_ms_p99']:.2f} ms ({args.mode}{f', batch {args.batch}' if args.batch else ''})"
              f"{'; interrupted by ' + summary['interrupted'] if stop.interrupted else ''}")
        for text, n in errors.items():
            print(f"  {n} x {text}")
    return EXIT_OK if not failed else EXIT_FAIL


async def _send_in_transactions(args: argparse.Namespace, make) -> int:
    """``send --transaction``: one line per message (its send status and local
    transaction state), then, for ``check``, one per check the broker made."""
    import trio

    from trocket.client import LocalTransactionState, TransactionProducer

    if args.batch or args.mode != "sync":
        raise ValueError("--transaction sends one message at a time (no --batch, --mode sync)")
    commit = LocalTransactionState.COMMIT_MESSAGE
    local = {"commit": commit, "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
             "check": LocalTransactionState.UNKNOW}[args.transaction]
    checked: set[str] = set()

    class CliListener:
        async def execute(self, msg, arg):
            return local

        async def check(self, msg):
            key = msg.transaction_id or msg.client_msg_id
            if key not in checked:
                checked.add(key)
                _print_line(args, {"checked": key, "topic": msg.topic, "checkTimes": msg.properties.get(
                    "TRANSACTION_CHECK_TIMES"), "answer": commit.value}, f"CHECKED msgId={key} -> {commit.value}")
            return commit

    from trocket.interrupt import stop_on_signal

    ids = []
    async with stop_on_signal() as stop, TransactionProducer(
        args.group, client_config=client_config(args), listener=CliListener(), send_timeout=args.timeout,
        namespace=args.namespace,
    ) as producer:
        for i in range(args.count):
            r = await producer.send_in_transaction(make(i))
            ids.append(r.msg_id)
            _print_line(args, {"status": r.status.value, "localTransactionState": r.local_transaction_state.value,
                               "msgId": r.msg_id, "topic": r.queue.topic, "brokerName": r.queue.broker_name,
                               "queueId": r.queue.queue_id, "queueOffset": r.queue_offset},
                        f"{r.status.value} {r.local_transaction_state.value} msgId={r.msg_id} "
                        f"queue={r.queue.broker_name}:{r.queue.queue_id} halfOffset={r.queue_offset}")
        if args.transaction == "check":
            with trio.move_on_after(args.check_wait):
                while not checked.issuperset(ids):
                    await trio.sleep(0.1)
    if stop.interrupted:
        why = signal.Signals(stop.signum).name
        _print_line(args, {"transactions": len(ids), "checked": len(checked & set(ids)), "interrupted": why},
                    f"{len(ids)} transaction(s) sent, {len(checked & set(ids))} checked; interrupted by {why}")
        return EXIT_OK  # the rule makes it 130/143
    missing = [i for i in ids if args.transaction == "check" and i not in checked]
    if missing:
        return _error(f"{len(missing)} transaction(s) not checked by the broker within {args.check_wait:g} s")
    return EXIT_OK


def _print_line(args: argparse.Namespace, doc: dict, text: str) -> None:
    print(json.dumps(doc) if args.json else text, flush=True)


def _run_send(args: argparse.Namespace) -> int:
    return _run_trio(_send, args)


# -- admin: topics -----------------------------------------------------------------------


async def _brokers(inst, cluster: str | None = None, broker: str | None = None) -> list[tuple[str, str, int, str]]:
    """(cluster, broker name, id, address) of every broker (of ``cluster``; or just the
    broker at address ``broker``, named ``-``)."""
    if broker is not None:
        return [("-", "-", -1, broker)]
    info = await inst.api.get_cluster_info()
    out = []
    for cname, names in sorted(info.cluster_addr_table.items()):
        if cluster is not None and cname != cluster:
            continue
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            if bd is not None:
                out.extend((cname, name, bid, addr) for bid, addr in sorted(bd.broker_addrs.items()))
    if cluster is not None and not out:
        raise ValueError(f"no broker in cluster {cluster!r} (known: {sorted(info.cluster_addr_table)})")
    return out


async def _broker_runtimes(
    inst, cluster: str | None = None, broker: str | None = None
) -> list[tuple[str, str, int, str, dict[str, str], str | None]]:
    """Every broker of :func:`_brokers` with its runtime figures (GET_BROKER_RUNTIME_INFO,
    asked one after another): (cluster, broker name, id, address, figures, error); when
    the call failed, the figures are ``{}`` and the error is its summary, else None."""
    from trocket.client import ClientError

    out = []
    for cname, name, bid, addr in await _brokers(inst, cluster, broker):
        try:
            rt, error = await inst.api.get_broker_runtime_info(addr), None
        except ClientError as exc:
            rt, error = {}, exc.summary
        out.append((cname, name, bid, addr, rt, error))
    return out


async def _masters(inst, cluster: str | None) -> list[tuple[str, str, str]]:
    """(cluster, broker name, master address) of every master (of ``cluster``)."""
    out = [(cname, name, addr) for cname, name, bid, addr in await _brokers(inst, cluster) if bid == 0]
    if cluster is not None and not out:
        raise ValueError(f"no master broker in cluster {cluster!r}")
    return out


async def _topic_create(args: argparse.Namespace) -> int:
    from trocket.codecs.headers import CreateTopicRequestHeader
    from trocket.codecs.names import validate_topic

    validate_topic(args.topic)
    header = CreateTopicRequestHeader(
        topic=args.topic, defaultTopic="TBW102", readQueueNums=args.queues, writeQueueNums=args.queues,
        perm=args.perm, topicFilterType="SINGLE_TAG", topicSysFlag=0, order=args.order,
    )
    async with _instance(args) as inst:
        targets = [("-", "-", args.broker)] if args.broker else await _masters(inst, args.cluster)
        rows = []
        for cname, name, addr in targets:
            await inst.api.create_topic(addr, header)
            rows.append({"cluster": cname, "broker": name, "addr": addr, "topic": args.topic, "queues": args.queues})
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"create topic to {r['addr']} ({r['broker']}) success: {args.topic}, {args.queues} queues, perm {args.perm}")
    return EXIT_OK


async def _topic_list(args: argparse.Namespace) -> int:
    async with _instance(args) as inst:
        topics = sorted(await inst.api.get_topic_list())
    print(json.dumps(topics) if args.json else "\n".join(topics))
    return EXIT_OK


async def _topic_route(args: argparse.Namespace) -> int:
    from trocket.client import NoRouteError

    async with _instance(args) as inst:
        route = await inst.api.get_route(args.topic)
        if route is None:
            raise NoRouteError(await inst.no_route_reason(args.topic))
    if args.json:
        from trocket.codecs.bodies.fastjson import loads

        print(json.dumps(loads(route.to_body())))  # plain JSON: broker ids as quoted keys
        return EXIT_OK
    print(_table(["broker", "cluster", "id", "address"],
                 [[bd.broker_name, bd.cluster, bid, addr] for bd in route.broker_datas
                  for bid, addr in sorted(bd.broker_addrs.items())]))
    print()
    print(_table(["broker", "read queues", "write queues", "perm"],
                 [[qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm] for qd in route.queue_datas]))
    return EXIT_OK


async def _topic_delete(args: argparse.Namespace) -> int:
    """``mqadmin deleteTopic``: DELETE_TOPIC_IN_BROKER on every master, then
    DELETE_TOPIC_IN_NAMESRV on every name server; each answer reported. A system topic
    (TBW102, SCHEDULE_TOPIC_XXXX, ``rmq_sys_*``, ...) is refused before anything is
    asked, and every master must answer first (GET_BROKER_RUNTIME_INFO): a broker that
    is down is not found out after the others deleted the topic. The first broker that
    refuses or fails stops it, and the name servers are asked only once every broker
    has deleted the topic (a route the name server keeps for a broker that deleted it
    sends a producer there to create it again: run the delete again, it is idempotent)."""
    from trocket.client import ClientError
    from trocket.codecs.names import is_system_topic, validate_topic

    validate_topic(args.topic)
    if is_system_topic(args.topic):
        raise ValueError(f"{args.topic} is a system topic (the broker needs it): it cannot be deleted")
    rows = []
    async with _instance(args) as inst:
        masters = await _masters(inst, args.cluster)
        for cname, name, addr in masters:
            try:
                await inst.api.get_broker_runtime_info(addr)
            except ClientError as exc:
                raise ValueError(f"nothing deleted: broker {name} {addr} does not answer ({exc.summary})") from None
        for cname, name, addr in masters:
            try:
                await inst.api.delete_topic_in_broker(addr, args.topic)
                rows.append({"where": f"broker {name} {addr}", "ok": True, "answer": "deleted"})
            except ClientError as exc:
                rows.append({"where": f"broker {name} {addr}", "ok": False, "answer": exc.summary})
                break
        if all(r["ok"] for r in rows):
            for ns in inst.config.namesrv:
                try:
                    await inst.api.delete_topic_in_namesrv(ns, args.topic)
                    rows.append({"where": f"namesrv {ns}", "ok": True, "answer": "deleted"})
                except ClientError as exc:
                    rows.append({"where": f"namesrv {ns}", "ok": False, "answer": exc.summary})
    stopped = not all(r["ok"] for r in rows) and rows[-1]["where"].startswith("broker")
    if args.json:
        print(json.dumps(rows))
    else:
        print(_table(["where", "result"], [[r["where"], r["answer"]] for r in rows]))
        if stopped:
            print(f"\nstopped at the first refusal; the name servers were not asked. Brokers that deleted "
                  f"{args.topic} may still be routed to: run the delete again once the refusal is solved")
    return EXIT_OK if all(r["ok"] for r in rows) else EXIT_FAIL


def _run_topic_create(args):
    return _run_trio(_topic_create, args)


def _run_topic_list(args):
    return _run_trio(_topic_list, args)


def _run_topic_route(args):
    return _run_trio(_topic_route, args)


def _run_topic_delete(args):
    return _run_trio(_topic_delete, args)
