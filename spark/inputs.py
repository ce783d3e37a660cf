"""The captures named on the command line: files and folders (walked recursively),
sniffed by their first bytes, named, and what cannot be read turned into problems.

Runs in the driver before any JVM starts: when nothing is readable the job needs no
Spark at all. A file named on the command line that is missing, empty or not a capture
is a problem (the run is incomplete: exit status 1); a file found in a folder that is
not a capture (a README, a ``.truth.json``) is skipped with a warning. Names starting
with ``.`` or ``_`` (``_SUCCESS``, hidden files, a tap's file being written) are
skipped silently, as Hadoop and Spark do.

A capture's *name* (the ``capture`` column, the summary's keys) is its base name when
given directly, its path below the folder's parent when found in a folder
(``caps/2026/a.pcap``); two inputs with one name keep the paths as given.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence

import attrs

from .problems import Problem

__all__ = ["Capture", "Inputs", "resolve_inputs", "sniff_format", "local_path", "NATIVE_MAGIC"]

NATIVE_MAGIC = b"TRKCAP\r\n"
_PCAP_MAGICS = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


@attrs.frozen(slots=True)
class Capture:
    path: str  # absolute
    name: str
    size: int
    format: str  # "native", "pcap" or "pcapng"
    index: int  # its place among the captures named


@attrs.define(slots=True)
class Inputs:
    """The captures named on the command line, sorted by format."""

    names: list[str] = attrs.Factory(list)  # every capture named, in order (the summary's "captures")
    captures: list[Capture] = attrs.Factory(list)  # the readable ones
    problems: list[Problem] = attrs.Factory(list)
    skipped: list[str] = attrs.Factory(list)  # warnings: files in folders that are no captures

    @property
    def native(self) -> list[Capture]:
        return [c for c in self.captures if c.format == "native"]

    @property
    def pcap(self) -> list[Capture]:
        return [c for c in self.captures if c.format != "native"]


def sniff_format(head: bytes) -> str | None:
    if head.startswith(NATIVE_MAGIC):
        return "native"
    if head[:4] in _PCAP_MAGICS:
        return "pcap"
    if head[:4] == _PCAPNG_MAGIC:
        return "pcapng"
    return None


def _skipped_name(name: str) -> bool:
    return name.startswith((".", "_"))


def local_path(p: str) -> str | None:
    """The local path ``p`` names: itself, or a ``file:`` URI's path (``file:///x``,
    ``file://localhost/x``, ``file:/x``); None for a URI of another scheme (``s3a://``,
    ``hdfs://``: not read here)."""
    if not p.startswith("file:") and "://" not in p:
        return p
    u = urllib.parse.urlsplit(p)
    if u.scheme == "file" and u.netloc in ("", "localhost"):
        return urllib.parse.unquote(u.path)
    return None


def _expand(paths: Sequence[str]) -> list[tuple[str, str, bool]]:
    """(path, name, named directly) of every file, folders walked in sorted order; a
    URI this reader cannot open stays as given (the caller reports it)."""
    out: list[tuple[str, str, bool]] = []
    for given in paths:
        p = local_path(given)
        if p is None:
            out.append((given, given, True))
        elif os.path.isdir(p):
            parent = os.path.dirname(os.path.normpath(os.path.abspath(p)))
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not _skipped_name(d))
                for f in sorted(files):
                    if not _skipped_name(f):
                        full = os.path.join(root, f)
                        out.append((full, os.path.relpath(os.path.abspath(full), parent), False))
        else:
            out.append((p, os.path.basename(p) or p, True))
    names = [n for _, n, _ in out]
    return [(p, n if names.count(n) == 1 else os.path.normpath(p), direct) for p, n, direct in out]


def resolve_inputs(paths: Sequence[str]) -> Inputs:
    """Expand folders, sniff formats; what cannot be read becomes a problem."""
    inputs = Inputs()
    for path, name, direct in _expand(paths):
        if local_path(path) is None:
            inputs.names.append(name)
            scheme = path.partition(":")[0]
            inputs.problems.append(Problem("unreadable", name, f"{name}: {scheme}:// is not read (local paths and file:// URIs are; copy the capture here)"))
            continue
        path = local_path(path)
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            inputs.names.append(name)
            inputs.problems.append(Problem("missing", name, f"{name}: no such file"))
            continue
        except OSError as exc:
            inputs.names.append(name)
            inputs.problems.append(Problem("unreadable", name, f"{name}: cannot read ({exc.strerror or exc})"))
            continue
        fmt = sniff_format(head)
        if fmt is None and not direct:
            what = "an empty file" if size == 0 else "not a capture"
            inputs.skipped.append(f"{name}: skipped ({what})")
            continue
        inputs.names.append(name)
        if size == 0:
            inputs.problems.append(Problem("not-capture", name, f"{name}: empty file (not a capture)"))
        elif fmt is None:
            inputs.problems.append(
                Problem("not-capture", name, f"{name}: not a capture (neither a trocket capture nor pcap/pcapng; first bytes {head!r})")
            )
        else:
            inputs.captures.append(Capture(os.path.abspath(path), name, size, fmt, len(inputs.names) - 1))
    return inputs
