"""The ``trocket`` command.

    trocket --version
    trocket decode FILE|HEX|-        one frame as JSON
    trocket conformance check DIR    golden frames: decode, re-encode, switch serializers
    trocket broker [options]         a broker (with an embedded name server by default)
    trocket namesrv [options]        a name server alone
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from trocket import __version__

EXIT_OK = 0
EXIT_FAIL = 1  # the command ran and found a problem (bad frame, nonconforming file)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trocket",
        description="Apache RocketMQ's remoting protocol on trio: codecs, conformance tools, broker.",
    )
    parser.add_argument("--version", action="version", version=f"trocket {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    decode = sub.add_parser(
        "decode",
        help="decode one frame and print it as JSON",
        description="Decode one RocketMQ remoting frame (with or without its 4-byte length "
        "prefix) and print the command as JSON: header, ext fields, the custom header when "
        "the code is known, and a preview of the body.",
    )
    decode.add_argument("frame", metavar="FILE|HEX", help="a file holding the frame, hex digits, or - for stdin")
    decode.add_argument(
        "--request-code", type=int, metavar="CODE",
        help="for a response: the code of the request it answers, to decode its custom header",
    )
    decode.add_argument("--preview", type=int, default=64, metavar="N", help="body bytes to preview (default 64)")
    decode.set_defaults(run=_run_decode)

    conformance = sub.add_parser("conformance", help="conformance tools")
    csub = conformance.add_subparsers(dest="conformance_command", metavar="COMMAND", required=True)
    check = csub.add_parser(
        "check",
        help="check golden frames against their manifest",
        description="For every manifest.json at or below DIR: each frame must decode to its "
        "manifest entry, re-encode to the same bytes, and keep its content when written in "
        "the other serialization.",
    )
    check.add_argument("dir", type=Path, metavar="DIR")
    check.add_argument("-v", "--verbose", action="store_true", help="list conforming frames too")
    check.set_defaults(run=_run_conformance_check)

    from trocket.broker.main import add_broker_arguments, add_namesrv_arguments

    broker = sub.add_parser(
        "broker",
        help="run a broker (with an embedded name server unless --namesrv is given)",
        description="Run a RocketMQ broker. With no arguments: an embedded name server on "
        "127.0.0.1:9876 and a broker on 127.0.0.1:10911 storing under ./trocket-store. "
        "Ctrl-C shuts down cleanly.",
    )
    add_broker_arguments(broker)
    broker.set_defaults(run=_run_broker)

    namesrv = sub.add_parser("namesrv", help="run a name server alone", description="Run a RocketMQ name server.")
    add_namesrv_arguments(namesrv)
    namesrv.set_defaults(run=_run_namesrv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def _error(message: str) -> int:
    print(f"trocket: error: {message}", file=sys.stderr)
    return EXIT_FAIL


# -- decode ---------------------------------------------------------------------------


def _read_frame_arg(arg: str) -> bytes:
    if arg == "-":
        return sys.stdin.buffer.read()
    path = Path(arg)
    try:
        is_file = path.is_file()
    except OSError:  # e.g. a long hex string is "File name too long"
        is_file = False
    if is_file:
        return path.read_bytes()
    digits = "".join(arg.split())
    if digits[:2].lower() == "0x":
        digits = digits[2:]
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise ValueError(f"{arg!r} is neither a file nor hex digits") from None


def _run_decode(args: argparse.Namespace) -> int:
    from trocket.codecs.describe import describe_frame
    from trocket.codecs.errors import CodecError

    try:
        data = _read_frame_arg(args.frame)
    except (OSError, ValueError) as exc:
        return _error(str(exc))
    try:
        described = describe_frame(data, request_code=args.request_code, preview=args.preview)
    except CodecError as exc:
        return _error(f"not a valid frame: {exc}")
    print(json.dumps(described, indent=2, ensure_ascii=False))
    return EXIT_OK


# -- broker and name server ------------------------------------------------------------


def _run_broker(args: argparse.Namespace) -> int:
    from trocket.broker.main import main_broker

    return main_broker(args)


def _run_namesrv(args: argparse.Namespace) -> int:
    from trocket.broker.main import main_namesrv

    return main_namesrv(args)


# -- conformance ----------------------------------------------------------------------


def _run_conformance_check(args: argparse.Namespace) -> int:
    from trocket.conformance.golden import check_dir, find_manifests

    if not args.dir.is_dir():
        return _error(f"{args.dir} is not a directory")
    if not find_manifests(args.dir):
        return _error(f"no manifest.json at or below {args.dir}")
    total = failed = 0
    for result in check_dir(args.dir):
        total += 1
        rel = result.entry.path
        if result.ok:
            if args.verbose:
                print(f"ok    {rel}")
            continue
        failed += 1
        print(f"FAIL  {rel}")
        for problem in result.problems:
            print(f"      {problem}")
    print(f"{total - failed}/{total} frames conform")
    return EXIT_OK if failed == 0 and total > 0 else EXIT_FAIL
