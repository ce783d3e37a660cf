"""The bodies ``trocket send`` sends: ``--body TEXT``, ``--size N`` (generated), or
input read to its end, ``--file F`` or ``--body -`` (stdin): one message per non-empty
line (the newline and a ``\\r`` before it dropped), or with ``--whole`` the whole input
as one message; ``--key-from-line`` takes each line's KEYS from its start, up to the
first ``--key-separator`` (a tab by default), as ``kafka-console-producer``'s
``parse.key``. No body source at all is an error: a test message must be asked for."""

from __future__ import annotations

import argparse
import sys

import attrs

__all__ = ["Bodies", "add_input_arguments", "read_bodies"]


@attrs.frozen(slots=True)
class Bodies:
    """One body per message (``from_input``), or one body every message shares."""

    bodies: list[bytes]
    keys: list[str] | None = None  # per message, from the lines
    from_input: bool = False

    def body(self, i: int) -> bytes:
        return self.bodies[i] if self.from_input else self.bodies[0]


def add_input_arguments(send: argparse.ArgumentParser, size_type) -> None:
    body = send.add_argument_group("the body (one of --body, --file, --size)")
    source = body.add_mutually_exclusive_group()
    source.add_argument("--body", metavar="TEXT", help="the body text (UTF-8); - reads stdin to its end")
    source.add_argument("--file", "-f", metavar="F", help="read the bodies from F")
    source.add_argument("--size", type=size_type, metavar="N", help="a generated body of N bytes")
    body.add_argument("--whole", action="store_true",
                      help="with --file / --body -: the whole input is one message (default: one per line)")
    body.add_argument("--key-from-line", action="store_true",
                      help="with --file / --body -: each line is KEY<separator>BODY; KEY becomes the message's KEYS")
    body.add_argument("--key-separator", default="\t", metavar="S", help="with --key-from-line (default: a tab)")


def read_bodies(args: argparse.Namespace) -> Bodies:
    """The bodies the options ask for; ``ValueError`` with the option's name when they
    do not fit together or the input is empty."""
    from_input = args.file is not None or args.body == "-"
    if not from_input and (args.whole or args.key_from_line):
        raise ValueError("--whole and --key-from-line go with --file F or --body - (stdin)")
    if args.body is not None and not from_input:
        return Bodies([args.body.encode("utf-8")])
    if args.size is not None:
        return Bodies([(b"trocket" * (args.size // 7 + 1))[: args.size]])
    if not from_input:
        raise ValueError("nothing to send: give --body TEXT, --body - (stdin), --file F or --size N")
    if args.count != 1:
        raise ValueError("--count goes with --body TEXT or --size N: with --file / --body - the input says how many")
    where = "stdin" if args.file is None else args.file
    try:
        data = sys.stdin.buffer.read() if args.file is None else open(args.file, "rb").read()
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc.strerror or exc}") from None
    if args.whole:
        if args.key_from_line:
            raise ValueError("--key-from-line reads lines: not with --whole")
        if not data:
            raise ValueError(f"{where} is empty: nothing to send")
        return Bodies([data], from_input=True)
    lines = [line[:-1] if line.endswith(b"\r") else line for line in data.split(b"\n")]
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line]
    if not numbered:
        raise ValueError(f"{where} has no non-empty line: nothing to send")
    if not args.key_from_line:
        return Bodies([line for _, line in numbered], from_input=True)
    sep = args.key_separator.encode("utf-8")
    if not sep:
        raise ValueError("--key-separator must not be empty")
    keys, bodies = [], []
    for n, line in numbered:
        key, found, body = line.partition(sep)
        if not found or not key or not body:
            raise ValueError(f"{where}:{n}: not KEY{args.key_separator!r}BODY (--key-from-line)")
        keys.append(key.decode("utf-8", "replace"))
        bodies.append(body)
    return Bodies(bodies, keys, from_input=True)
