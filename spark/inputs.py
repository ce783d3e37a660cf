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

A tap's rotated files (``trocket broker --tap FILE --tap-rotate-mb N`` writes ``FILE``,
``FILE.1``, ``FILE.2``, ...: one recording cut between records) are ONE capture, named
by its first file: native captures in one folder named ``X``, ``X.1``, ``X.2``, ...
(numbers following each other from the first present, ``X`` itself optional) whose
first records' times do not go back (:data:`~trocket.spark.streams.STITCH_TOLERANCE_NS`
allowed) form a set; each file is read on its own, its frames' ``seq`` offset by the
sizes of the set's files before it (:attr:`Capture.base`), so ``(capture,
connection_id, seq)`` stays unique and a connection cut by a rotation is one connection
of one capture. Files whose times go back stay captures of their own.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Sequence

import attrs

from .problems import Problem

__all__ = ["Capture", "Inputs", "resolve_inputs", "sniff_format", "local_path", "rotation_key", "NATIVE_MAGIC"]

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
    #: the ``seq`` of the file's first byte: the sizes of the files before it in its
    #: capture (a tap's rotation set), 0 for a capture of one file
    base: int = 0


@attrs.define(slots=True)
class Inputs:
    """The captures named on the command line, sorted by format."""

    names: list[str] = attrs.Factory(list)  # every capture named, in order (the summary's "captures")
    captures: list[Capture] = attrs.Factory(list)  # the readable ones
    problems: list[Problem] = attrs.Factory(list)
    skipped: list[str] = attrs.Factory(list)  # warnings: files in folders that are no captures
    #: capture name -> its files' names, for the captures that are a tap's rotation set
    rotated: dict[str, list[str]] = attrs.Factory(dict)

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
    _join_rotation_sets(inputs)
    return inputs


_ROTATED = re.compile(r"^(.*)\.(\d+)$")


def rotation_key(name: str) -> tuple[str, int]:
    """``FILE`` -> (FILE, 0), ``FILE.12`` -> (FILE, 12): the order a tap writes them in."""
    m = _ROTATED.match(name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def _first_record_ts(path: str) -> int | None:
    """The time of a native capture's first record (None: it has none, or no header)."""
    from .native import file_header_end, record_ts

    with open(path, "rb") as f:
        start = file_header_end(f, path, lambda p: None)
        if start is None or os.fstat(f.fileno()).st_size < start + 16:
            return None
        return record_ts(f, start)


def _join_rotation_sets(inputs: Inputs) -> None:
    """Make each tap rotation set among the native captures one capture (see the module
    docstring): its files renamed after the first, their ``base`` set, the later files'
    names dropped from :attr:`Inputs.names`."""
    from .streams import STITCH_TOLERANCE_NS

    groups: dict[str, dict[int, Capture]] = {}
    paths = [c.path for c in inputs.native]
    for c in inputs.native:
        if paths.count(c.path) > 1:
            continue  # a file named twice is two captures, as ever
        stem, n = rotation_key(c.path)
        groups.setdefault(stem, {})[n] = c
    renamed: dict[str, Capture] = {}  # path -> the capture it becomes
    for files in groups.values():
        order = sorted(files)
        run = [files[order[0]]]
        for n in order[1:]:
            if n != order[0] + len(run):
                break  # a file missing: the set ends before it
            run.append(files[n])
        if len(run) < 2:
            continue
        times = [_first_record_ts(c.path) for c in run]
        known = [t for t in times if t is not None]
        if any(b < a - STITCH_TOLERANCE_NS for a, b in zip(known, known[1:])):
            continue  # not one recording cut in order: captures of their own
        head, base = run[0], 0
        for c in run:
            renamed[c.path] = attrs.evolve(c, name=head.name, index=head.index, base=base)
            base += c.size
        inputs.rotated[head.name] = [c.name for c in run]
    if not renamed:
        return
    dropped = {c.name for c in inputs.captures if c.path in renamed and renamed[c.path].name != c.name}
    inputs.captures = [renamed.get(c.path, c) for c in inputs.captures]
    inputs.names = [n for n in inputs.names if n not in dropped]
    inputs.captures = [attrs.evolve(c, index=inputs.names.index(c.name)) for c in inputs.captures]
