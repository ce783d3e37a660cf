"""The ``trocket`` command.

    trocket --version                the version, and whether the compiled codec accelerator is on
    trocket decode FILE|HEX|-        one frame as JSON (a file or stdin: raw bytes or hex digits)
    trocket conformance check DIR    golden frames: decode, re-encode, switch serializers
    trocket broker [options]         a broker (with an embedded name server by default; trocket/cli_broker.py)
    trocket namesrv [options]        a name server alone (trocket/cli_broker.py)
    trocket capture show FILE...     frames of captures (trocket, pcap, pcapng), one a line or JSON
    trocket capture stats FILE...    counts by code, unanswered requests, per connection
    trocket capture proxy ...        a transparent proxy recording every frame
    trocket replay FILE --target H:P  replay a captured session, compare the answers
    trocket send [options]           send messages (trocket/cli_client.py)
    trocket consume [options]        consume messages with a push consumer (trocket/cli_consume.py)
    trocket admin topic|group|cluster  topics, consumer progress, the cluster (trocket/cli_client.py)
    trocket capture synth --frames N --out FILE [--pcap]   a synthetic capture and its ground truth
    trocket analyze CAPTURE... --out DIR   Spark analysis of captures (the 'spark' extra)
    trocket cluster up|status        a local multi-process cluster (trocket/cli_cluster.py)
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trocket._version import version
from trocket.exit_codes import EXIT_FAIL, EXIT_OK


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, printed as one line: its formatter wraps the text
    at the terminal's width."""

    def __init__(self, option_strings: Sequence[str], version: str, dest: str = argparse.SUPPRESS,
                 help: str = "show the version and whether the codec accelerator is on, and exit") -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)
        self.version = version

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None) -> None:
        print(self.version)
        parser.exit()


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class _Parser(argparse.ArgumentParser):
    """Every ``trocket`` parser (subcommands inherit the class): an unknown option is
    reported by the subcommand it was given to, with its usage and the nearest options
    (``--bdoy``: did you mean --body?), not by the top-level parser."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def error(self, message: str):  # type: ignore[override]
        m = _INVALID_CHOICE.search(message)
        if m:  # a mistyped subcommand or choice: the nearest one
            near = difflib.get_close_matches(m.group(1), re.findall(r"'([^']*)'", m.group(2)), n=1)
            if near:
                message = f"{message} (did you mean {near[0]}?)"
        super().error(message)

    def _unrecognized(self, extras: list[str]) -> str:
        known = [opt for action in self._actions for opt in action.option_strings]
        text = f"unrecognized arguments: {' '.join(extras)}"
        for extra in extras:
            if extra.startswith("-"):
                near = difflib.get_close_matches(extra.partition("=")[0], known, n=2)
                if near:
                    text += f" (did you mean {' or '.join(near)}?)"
                    break
        return text


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trocket",
        description="Apache RocketMQ's remoting protocol on trio: codecs, conformance tools, broker.",
    )
    from trocket.codecs import accel

    parser.add_argument("--version", action=_VersionAction, version=f"trocket {version()} ({accel.describe()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    decode = sub.add_parser(
        "decode",
        help="decode one frame and print it as JSON",
        description="Decode one RocketMQ remoting frame (with or without its 4-byte length "
        "prefix) and print the command as JSON: header, ext fields, the custom header when "
        "the code is known, and a preview of the body.",
    )
    decode.add_argument(
        "frame", metavar="FILE|HEX",
        help="a file holding the frame, hex digits, or - for stdin (a file or stdin: raw bytes or hex digits)",
    )
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

    from trocket.cli_broker import add_broker_commands

    add_broker_commands(sub)

    from trocket.cli_analyze import add_analyze_command, add_synth_command
    from trocket.cli_capture import add_capture_parser
    from trocket.cli_client import add_client_commands
    from trocket.cli_consume import add_consume_command
    from trocket.cli_replay import add_proxy_command, add_replay_command

    capture_commands = add_capture_parser(sub)  # show, stats; then the ones other modules add
    add_proxy_command(capture_commands)
    add_synth_command(capture_commands)
    add_replay_command(sub)
    add_analyze_command(sub)
    add_client_commands(sub)
    add_consume_command(sub)
    from trocket.cli_cluster import add_cluster_commands

    add_cluster_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from trocket import interrupt

    return interrupt.run(_main, argv)  # the one Ctrl-C rule: 130 / 143, no traceback


def _main(argv: Sequence[str] | None) -> int:
    parser = _build_parser()
    _complete(parser)
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except BrokenPipeError:  # stdout closed by the reader (| head)
        return EXIT_OK


def _complete(parser: argparse.ArgumentParser) -> None:
    """Shell completion (argcomplete): answers and exits when the shell asks (its
    ``_ARGCOMPLETE`` environment), returns at once otherwise. Set up once per shell with
    ``eval "$(register-python-argcomplete trocket)"`` (README)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def _error(message: str) -> int:
    print(f"trocket: error: {message}", file=sys.stderr)
    return EXIT_FAIL


# -- decode ---------------------------------------------------------------------------


_HEX = re.compile(rb"\s*(?:0[xX])?[0-9a-fA-F\s]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _hex_bytes(data: bytes) -> bytes | None:
    """The bytes ``data``'s hex digits spell (whitespace and a ``0x`` ignored), or None
    when ``data`` is not hex digits. Raises ``ValueError`` on an odd number of digits."""
    if _HEX.fullmatch(data) is None:
        return None
    digits = b"".join(data.split())
    if digits[:2].lower() == b"0x":
        digits = digits[2:]
    if not digits:  # whitespace alone is no hex
        return None
    if len(digits) % 2:
        raise ValueError(f"odd number of hex digits ({len(digits)})")
    return bytes.fromhex(digits.decode("ascii"))


def _frame_bytes(data: bytes) -> bytes:
    """A file's or stdin's content: the frame's bytes, or their hex digits.

    A frame's bytes are never all hex digits: a frame starts with a length whose first
    byte is 0x00 (under 16 MiB), a bare payload with its serialization byte, 0 or 1.
    """
    decoded = _hex_bytes(data)
    return data if decoded is None else decoded


def _read_frame_arg(arg: str) -> bytes:
    """The frame named by the ``decode`` argument: ``-`` (stdin), a file or hex digits."""
    if arg == "-":
        return _frame_bytes(sys.stdin.buffer.read())
    path = Path(arg)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # "File name too long"; a NUL in the name
        is_file = False
    if is_file:
        return _frame_bytes(path.read_bytes())
    decoded = _hex_bytes(arg.encode("utf-8", "surrogateescape")) if arg else b""
    if decoded is None:
        raise ValueError(f"{arg!r} is neither a file nor hex digits")
    return decoded


def _json_text(doc: Any) -> str:
    """``doc`` as indented JSON that any stdout can print: lone surrogates (a JSON header
    may escape one, ``"\\udfff"``) stay escaped, and so does all non-ASCII text when
    stdout cannot encode it."""
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(doc, indent=2, ensure_ascii=False))
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        text = json.dumps(doc, indent=2)
    return text


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
    print(_json_text(described))
    return EXIT_OK


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
