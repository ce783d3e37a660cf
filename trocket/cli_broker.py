"""``trocket broker`` and ``trocket namesrv``: the two server commands
(:func:`add_broker_commands`, called by ``trocket/cli.py``).

``trocket broker`` with no arguments: an embedded name server on 127.0.0.1:9876 and a
broker on 127.0.0.1:10911 storing under ./trocket-store, topics auto-created with 4
queues. A ``--config broker.conf`` (RocketMQ's ``key=value`` names) is read first; flags
override it. SIGINT/SIGTERM shut down cleanly (unregister, drain, flush, persist
offsets); a second signal aborts the wait for in-flight requests. ``--tap FILE``
(both commands) records every frame the servers receive and send
(:class:`~trocket.remoting.tap.FileTap`; its summary, dropped frames included, is
printed on exit).

What is not the command line lives in the library: a program that runs a broker uses
``async with BrokerController(config)`` (:mod:`trocket.broker.controller`), a name
server ``async with NameServer(config)``; :func:`run_broker` and :func:`run_namesrv`
add the process's signal handling to them.
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from trocket import interrupt
from trocket.broker.config import BrokerConfig, BrokerConfigError, load_properties_file, parse_hostport
from trocket.remoting.tls import TlsSettings
from trocket.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from trocket.broker.acl import AclValidator
    from trocket.remoting.tap import FileTap, TapSink

__all__ = [
    "add_broker_commands",
    "add_broker_arguments",
    "add_namesrv_arguments",
    "config_from_args",
    "main_broker",
    "main_namesrv",
    "run_broker",
    "run_namesrv",
]

log = logging.getLogger("trocket.broker")


_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """``4194304``, ``4m``, ``4MiB``, ``1g`` -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: a number of bytes, optionally with k, m or g")
    unit = (m.group(2) or "").lower()[:1]
    return int(m.group(1)) * _UNITS[unit]


def _hostport(text: str) -> tuple[str, int]:
    try:
        return parse_hostport(text)
    except BrokerConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_broker_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``broker`` and ``namesrv`` to the ``trocket`` command's subparsers."""
    broker = sub.add_parser(
        "broker",
        help="run a broker (with an embedded name server unless --namesrv is given)",
        description="Run a RocketMQ broker. With no arguments: an embedded name server on "
        "127.0.0.1:9876 and a broker on 127.0.0.1:10911 storing under ./trocket-store. "
        "Ctrl-C shuts down cleanly.",
    )
    add_broker_arguments(broker)
    broker.set_defaults(run=main_broker)

    namesrv = sub.add_parser("namesrv", help="run a name server alone", description="Run a RocketMQ name server.")
    add_namesrv_arguments(namesrv)
    namesrv.set_defaults(run=main_namesrv)


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trocket broker`` flags (every one optional; see :class:`BrokerConfig`)."""
    parser.description = parser.description or (
        "Run a RocketMQ-compatible broker. With no --namesrv, an embedded name server runs "
        "in the same process."
    )
    g = parser.add_argument_group("broker")
    g.add_argument("-c", "--config", metavar="FILE", help="broker.conf (RocketMQ key=value names); flags override it")
    g.add_argument("--listen", type=_hostport, metavar="HOST:PORT", help="listen address (default 127.0.0.1:10911)")
    g.add_argument(
        "--advertise", type=_hostport, metavar="HOST:PORT",
        help="address given out in routes and message ids (brokerIP1; default: the listen address)",
    )
    g.add_argument(
        "-n", "--namesrv", action="append", metavar="ADDR",
        help="external name server(s), host:port, ';'-separated or repeated (default: namesrvAddr of --config, "
        "else $NAMESRV_ADDR); none = run an embedded one",
    )
    g.add_argument(
        "--namesrv-listen", type=_hostport, metavar="HOST:PORT",
        help="where the embedded name server listens (default 127.0.0.1:9876)",
    )
    g.add_argument("--store", metavar="DIR", help="store directory (default ./trocket-store)")
    g.add_argument("--flush", choices=("async", "sync"), help="flush mode: async (timed, default) or sync (group commit)")
    g.add_argument("--broker-name", metavar="NAME", help="broker name (default broker-a)")
    g.add_argument("--cluster", metavar="NAME", help="cluster name (default DefaultCluster)")
    g.add_argument("--broker-id", type=int, metavar="ID", help="broker id (0 = master, the default)")
    g.add_argument(
        "--auto-create-topic", action=argparse.BooleanOptionalAction, default=None,
        help="create unknown topics on first send (default on)",
    )
    g.add_argument("--default-queues", type=int, metavar="N", help="queues of auto-created topics (default 4)")
    g.add_argument("--max-message-size", type=parse_size, metavar="SIZE", help="largest message (default 4m)")
    g.add_argument("--segment-size", type=parse_size, metavar="SIZE", help="commit-log segment size (default 1g)")
    g.add_argument(
        "--long-polling", action=argparse.BooleanOptionalAction, default=None,
        help="hold pulls that find nothing until a message arrives (default on)",
    )
    g.add_argument("--log-level", default="INFO", metavar="LEVEL", help="logging level (default INFO)")
    g.add_argument("--metrics", type=_hostport, metavar="HOST:PORT",
                   help="serve Prometheus /metrics there (rocketmq-exporter's names; needs trocket[metrics])")
    # -- replication (broker/ha): brokerRole, haListenPort, haMasterAddress --
    h = parser.add_argument_group("replication")
    h.add_argument("--role", type=str.upper, choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
                   help="brokerRole (default ASYNC_MASTER; a SLAVE is broker id 1 unless --broker-id)")
    h.add_argument("--ha-listen", type=_hostport, metavar="HOST:PORT",
                   help="a master's HA listen address (default: listen port + 1, Java's haListenPort)")
    h.add_argument("--master-ha", type=_hostport, metavar="HOST:PORT",
                   help="a slave's master HA address (default: from the name server)")
    add_security_arguments(parser, acl=True)
    add_tap_arguments(parser)


def add_namesrv_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = parser.description or "Run a RocketMQ-compatible name server."
    parser.add_argument("--listen", type=_hostport, metavar="HOST:PORT", default=("127.0.0.1", 9876),
                        help="listen address (default 127.0.0.1:9876)")
    parser.add_argument("--log-level", default="INFO", metavar="LEVEL", help="logging level (default INFO)")
    add_security_arguments(parser, acl=True)
    parser.add_argument("--kv-config", metavar="FILE",
                        help="keep the KV configuration (PUT_KV_CONFIG ...) in FILE, Java's kvConfig.json "
                        "(default: in memory only)")
    parser.add_argument("--config-store", metavar="FILE",
                        help="write UPDATE_NAMESRV_CONFIG's changes to FILE (default: not written)")
    parser.add_argument("--metrics", type=_hostport, metavar="HOST:PORT",
                        help="serve Prometheus /metrics there (brokers, topics, connections; needs trocket[metrics])")
    add_tap_arguments(parser)


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    """Defaults, then ``--config FILE`` (else the runtime changes an earlier run wrote to
    ``<store>/config/broker.properties``), then the flags given. Raises
    :class:`BrokerConfigError` with a clear message for bad files or values."""
    path = getattr(args, "config", None)
    config = _with_flags(args, load_properties_file(path, BrokerConfig()) if path else BrokerConfig(), path)
    if path:
        return config.evolve(config_path=os.path.abspath(path))
    saved = os.path.join(config.store_dir, "config", "broker.properties")
    if os.path.exists(saved):  # UPDATE_BROKER_CONFIG's changes of a run without --config
        config = _with_flags(args, load_properties_file(saved, BrokerConfig()), saved)
    return config.evolve(config_path=os.path.abspath(saved))


def _with_flags(args: argparse.Namespace, config: BrokerConfig, path: str | None) -> BrokerConfig:
    """``config`` with the flags given applied on top."""
    changes: dict[str, Any] = {}
    if getattr(args, "listen", None) is not None:
        changes["listen"] = args.listen
        if config.advertise is not None and getattr(args, "advertise", None) is None and path:
            # brokerIP1 from the file keeps its host but follows the new port
            changes["advertise"] = (config.advertise[0], args.listen[1])
    mapping = {
        "advertise": "advertise",
        "namesrv_listen": "namesrv_listen",
        "store": "store_dir",
        "broker_name": "broker_name",
        "cluster": "cluster",
        "broker_id": "broker_id",
        "auto_create_topic": "auto_create_topic",
        "default_queues": "default_topic_queue_nums",
        "max_message_size": "max_message_size",
        "segment_size": "commit_log_segment_size",
        "long_polling": "long_polling",
        "flush": "flush",
        "role": "broker_role",
        "ha_listen": "ha_listen",
        "master_ha": "ha_master_address",
        "metrics": "metrics_listen",
    }
    for arg, field in mapping.items():
        value = getattr(args, arg, None)
        if value is not None:
            changes[field] = value
    namesrv = getattr(args, "namesrv", None)
    if namesrv:
        changes["namesrv_addrs"] = ";".join(namesrv)
    elif not config.namesrv_addrs and os.environ.get("NAMESRV_ADDR", "").strip():
        changes["namesrv_addrs"] = os.environ["NAMESRV_ADDR"].strip()  # Java's BrokerConfig reads it too
        log.info("name servers from $NAMESRV_ADDR: %s", changes["namesrv_addrs"])
    changes.update(security_changes(args, config))
    if changes:
        try:
            config = config.evolve(**changes)
        except BrokerConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise BrokerConfigError(str(exc)) from None
    return config


def _setup_logging(level: str) -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        logging.getLogger("trocket").setLevel(level.upper())
    except ValueError:
        logging.getLogger("trocket").setLevel(logging.INFO)


async def _until_signal(on_first, on_second, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        count = 0
        async for signum in signals:
            count += 1
            interrupt.note(signum)  # the exit status: 130 or 143 once shut down
            if count == 1:
                log.info("signal %s: shutting down (again to abort)", signal.Signals(signum).name)
                on_first()
            else:
                log.warning("second signal: aborting")
                on_second()
                return


async def run_broker(config: BrokerConfig, *, tap: TapSink | None = None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Run a broker until SIGINT/SIGTERM (or cancellation), then shut it down cleanly."""
    from trocket.broker.controller import BrokerController

    controller = BrokerController(config, tap=tap)
    async with trio.open_nursery() as nursery:
        # the signals first: one while the broker starts asks it to stop once started
        await nursery.start(_until_signal, controller.request_shutdown, nursery.cancel_scope.cancel)
        async with controller:
            task_status.started(controller)
            await controller.stopped.wait()
        nursery.cancel_scope.cancel()
    if controller.fatal is not None:
        raise controller.fatal


async def run_namesrv(
    listen: tuple[str, int] = ("127.0.0.1", 9876), *, tap: TapSink | None = None, tls: TlsSettings | None = None,
    acl: AclValidator | None = None, kv_config: str | None = None, config_store: str | None = None,
    metrics: tuple[str, int] | None = None, task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a name server alone until SIGINT/SIGTERM (or cancellation); with ``acl``, its
    writes need an admin account (:class:`~trocket.broker.acl.NamesrvAclHook`)."""
    from trocket.broker.acl import NamesrvAclHook
    from trocket.broker.namesrv.server import NamesrvConfig, NameServer

    ns = NameServer(NamesrvConfig(listen_host=listen[0], listen_port=listen[1], tls=tls or TlsSettings(),
                                  kv_config_path=kv_config, config_store_path=config_store),
                    hooks=[NamesrvAclHook(acl)] if acl is not None else ())
    ns.remoting.tap = tap
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(_until_signal, stop.set, nursery.cancel_scope.cancel)
        if acl is not None:
            await nursery.start(acl.watch)
        await nursery.start(ns.serve)
        if metrics is not None:
            from trocket.broker.metrics import namesrv_endpoint

            await nursery.start(namesrv_endpoint(ns, *metrics).run)
        address = ns.address
        log.info("The Name Server boot success. serializeType=JSON, address %s", address)
        task_status.started(ns)
        try:
            await stop.wait()
        finally:
            # a signal or a cancellation: stop accepting, finish in-flight requests
            with trio.CancelScope(shield=True):
                with trio.move_on_after(5):
                    await ns.shutdown()
            log.info("The Name Server %s shut down", address)
            nursery.cancel_scope.cancel()


def main_broker(args: argparse.Namespace) -> int:
    _setup_logging(getattr(args, "log_level", "INFO"))
    try:
        config = config_from_args(args)
    except BrokerConfigError as exc:
        print(f"trocket broker: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if config.metrics_listen is not None:
        from trocket.broker.metrics import require_prometheus_client

        try:
            require_prometheus_client()
        except RuntimeError as exc:
            print(f"trocket broker: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    from trocket.broker.store import StoreError

    return _serve("broker", args, lambda tap: functools.partial(run_broker, config, tap=tap),
                  (OSError, StoreError, BrokerConfigError))


def main_namesrv(args: argparse.Namespace) -> int:
    _setup_logging(getattr(args, "log_level", "INFO"))
    listen = getattr(args, "listen", ("127.0.0.1", 9876))
    kv, store = getattr(args, "kv_config", None), getattr(args, "config_store", None)
    metrics = getattr(args, "metrics", None)
    try:
        changes = security_changes(args, None)
        tls = changes.get("tls", TlsSettings())
        tls.server_context()  # a missing or bad certificate: one error line now
        acl = None
        if changes.get("acl_enable"):
            from trocket.broker.acl import AclValidator

            acl = AclValidator(changes["acl_file"])
        if metrics is not None:
            from trocket.broker.metrics import require_prometheus_client

            require_prometheus_client()
    except (BrokerConfigError, ValueError, OSError, RuntimeError) as exc:
        print(f"trocket namesrv: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _serve("namesrv", args, lambda tap: functools.partial(
        run_namesrv, listen, tap=tap, tls=tls, acl=acl, kv_config=kv, config_store=store, metrics=metrics), (OSError,))


def _serve(
    what: str, args: argparse.Namespace, make_main: Callable[[FileTap | None], Callable[[], Awaitable[None]]],
    reported: tuple[type[BaseException], ...],
) -> int:
    """``trio.run`` the command's main with the tap ``--tap`` asks for; the exit status:
    130 after Ctrl-C, 1 with the message of a ``reported`` error (unwrapped from trio's
    exception groups), else 0. The tap's summary is printed however it ends."""
    try:
        tap = open_tap(args, what)
    except OSError as exc:
        print(f"trocket {what}: error: cannot open the tap file: {exc}", file=sys.stderr)
        return EXIT_FAIL
    try:
        trio.run(make_main(tap))
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:  # noqa: BLE001 - unwrap trio's exception groups
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):
            return 130
        if isinstance(leaf, reported):
            print(f"trocket {what}: error: {_explain(leaf, what)}", file=sys.stderr)
            return EXIT_FAIL
        raise
    finally:
        close_tap(tap, what)
    return EXIT_OK


def _explain(exc: BaseException, what: str) -> str:
    """The error line's text; for a port in use, which flags choose another."""
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        flags = "--listen" if what == "namesrv" else "--listen, --namesrv-listen or --ha-listen"
        return f"{exc.strerror} (another broker or name server? stop it, or choose another port: {flags})"
    return str(exc)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


# -- security (issue 24): --acl FILE, --tls-* ---------------------------------------------


def add_security_arguments(parser: argparse.ArgumentParser, *, acl: bool) -> None:
    """``--acl FILE`` (the broker) and the TLS flags (Java's ``tls.*`` settings; a
    broker.conf may give the same keys, and ``--tls-config FILE`` is Java's
    ``tls.config.file``)."""
    g = parser.add_argument_group("security (docs/security.md)")
    if acl:
        g.add_argument("--acl", metavar="FILE",
                       help="turn ACL on (aclEnable) with this plain_acl.yml; reloaded when it changes (a name "
                       "server: its writes, broker registration among them, need an admin account or a "
                       "white-listed host)")
    g.add_argument("--tls-mode", choices=("disabled", "permissive", "enforcing"),
                   help="tls.server.mode: TLS only (enforcing), TLS and plain on one port (permissive); default disabled")
    g.add_argument("--tls-cert", metavar="PEM", help="tls.server.certPath: the server's certificate chain")
    g.add_argument("--tls-key", metavar="PEM", help="tls.server.keyPath: its private key")
    g.add_argument("--tls-trust", metavar="PEM",
                   help="tls.server.trustCertPath: the CAs client certificates are checked against")
    g.add_argument("--tls-client-auth", choices=("none", "optional", "require"),
                   help="tls.server.need.client.auth (default none)")
    g.add_argument("--tls-config", metavar="FILE", help="tls.config.file: a properties file of tls.* keys")


def security_changes(args: argparse.Namespace, config: BrokerConfig | None) -> dict[str, Any]:
    """The config changes ``--acl`` and the TLS flags ask for (on top of ``config``'s TLS)."""
    changes: dict[str, Any] = {}
    if getattr(args, "acl", None):
        changes["acl_enable"] = True
        changes["acl_file"] = args.acl
    props = {
        key: value
        for key, value in (
            ("tls.config.file", getattr(args, "tls_config", None)),
            ("tls.server.mode", getattr(args, "tls_mode", None)),
            ("tls.server.certPath", getattr(args, "tls_cert", None)),
            ("tls.server.keyPath", getattr(args, "tls_key", None)),
            ("tls.server.trustCertPath", getattr(args, "tls_trust", None)),
            ("tls.server.need.client.auth", getattr(args, "tls_client_auth", None)),
        )
        if value is not None
    }
    if props:
        try:
            changes["tls"] = TlsSettings.from_properties(props, config.tls if config is not None else None)
        except (OSError, ValueError) as exc:
            raise BrokerConfigError(str(exc)) from None
    return changes


# -- capture tap (issue 8): --tap FILE, --tap-rotate-mb N ---------------------------------


def add_tap_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("capture")
    g.add_argument(
        "--tap", metavar="FILE",
        help="record every frame the server(s) receive and send to FILE (native capture format; "
        "appends; a slow disk drops frames, counted and reported on exit, never blocks)",
    )
    g.add_argument(
        "--tap-rotate-mb", type=float, metavar="N",
        help="with --tap: continue in FILE.1, FILE.2, ... each time the current file reaches N MiB",
    )


def open_tap(args: argparse.Namespace, what: str) -> FileTap | None:
    """The FileTap ``--tap`` asks for, or None. Raises OSError for a bad path."""
    path = getattr(args, "tap", None)
    if not path:
        return None
    from trocket.remoting.tap import FileTap

    mb = getattr(args, "tap_rotate_mb", None)
    rotate = max(int(mb * (1 << 20)), 1024) if mb else None
    tap = FileTap(path, rotate_bytes=rotate)
    log.info("%s: recording every frame to %s%s", what, path, f" (rotating every {mb:g} MiB)" if mb else "")
    return tap


def close_tap(tap: FileTap | None, what: str) -> None:
    """Write what the tap holds and report on stderr (dropped frames included)."""
    if tap is None:
        return
    tap.close()
    print(f"trocket {what}: {tap.summary()}", file=sys.stderr)
