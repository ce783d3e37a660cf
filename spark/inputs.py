"""The captures named on the command line: files and folders (walked recursively),
sniffed by their first bytes, named, and what cannot be read turned into problems.
Local paths or URIs (``file://``, ``s3://``/``s3a://``, ``hdfs://``: a folder is then a
prefix), all reached through :mod:`trocket.spark.storage`.

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
import posixpath
import re
from collections.abc import Sequence

import attrs

from .problems import Problem
from .storage import (
    LOCAL, Stat, Storage, StorageError, error_reason, file_size, hidden_name, list_files, local_path, open_input, stat,
)

__all__ = ["Capture", "Inputs", "resolve_inputs", "sniff_format", "local_path", "rotation_key", "NATIVE_MAGIC"]

NATIVE_MAGIC = b"TRKCAP\r\n"
_PCAP_MAGICS = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


@attrs.frozen(slots=True)
class Capture:
    path: str  # absolute, or a URI (:mod:`trocket.spark.storage`)
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
    #: how the captures' store is reached: the readers in the executors get it too
    storage: Storage = LOCAL

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


def _expand(paths: Sequence[str], storage: Storage) -> list[tuple[str, str, bool, Stat | str]]:
    """(path or URI, name, named directly, its :class:`Stat` or why it cannot be reached)
    of every file, folders walked in sorted order (as ``os.walk`` would: the keys of a
    store's prefix by their path segments)."""
    out: list[tuple[str, str, bool, Stat | str, str]] = []  # ... and the path as given (for names given twice)
    for given in paths:
        local = local_path(given)
        p = os.path.abspath(os.path.expanduser(local)) if local is not None else given.rstrip("/")
        try:
            st = stat(p, storage)
            if st.kind == "dir":
                found = list_files(p, storage, hidden_name)
        except StorageError as exc:
            out.append((given, posixpath.basename(p) or given, True, str(exc), given))
            continue
        except OSError as exc:
            out.append((given, posixpath.basename(p) or given, True, f"cannot read ({error_reason(exc)})", given))
            continue
        if st.kind == "dir":
            top = posixpath.basename(os.path.normpath(p) if local is not None else p)
            for f, rel, size in found:
                shown = os.path.normpath(os.path.join(local, rel)) if local is not None else f
                out.append((f, posixpath.join(top, rel) if top else rel, False, Stat("file", size), shown))
        else:
            out.append((p, posixpath.basename(p) or p, True, st, os.path.normpath(local) if local is not None else p))
    names = [n for _, n, _, _, _ in out]
    return [(p, n if names.count(n) == 1 else shown, direct, st) for p, n, direct, st, shown in out]


def resolve_inputs(paths: Sequence[str], storage: Storage = LOCAL) -> Inputs:
    """Expand folders, sniff formats; what cannot be read becomes a problem. ``storage``:
    how remote stores are reached (:mod:`trocket.spark.storage`)."""
    inputs = Inputs(storage=storage)
    for path, name, direct, st in _expand(paths, storage):
        if isinstance(st, str) or st.kind == "missing":
            inputs.names.append(name)
            if isinstance(st, str):
                inputs.problems.append(Problem("unreadable", name, f"{name}: {st}"))
            else:
                inputs.problems.append(Problem("missing", name, f"{name}: no such file"))
            continue
        size = st.size
        try:
            with open_input(path, storage) as f:
                head = f.read(8)
        except FileNotFoundError:
            inputs.names.append(name)
            inputs.problems.append(Problem("missing", name, f"{name}: no such file"))
            continue
        except OSError as exc:
            inputs.names.append(name)
            inputs.problems.append(Problem("unreadable", name, f"{name}: cannot read ({error_reason(exc)})"))
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
            inputs.captures.append(Capture(path, name, size, fmt, len(inputs.names) - 1))
    _join_rotation_sets(inputs)
    return inputs


_ROTATED = re.compile(r"^(.*)\.(\d+)$")


def rotation_key(name: str) -> tuple[str, int]:
    """``FILE`` -> (FILE, 0), ``FILE.12`` -> (FILE, 12): the order a tap writes them in."""
    m = _ROTATED.match(name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def _first_record_ts(path: str, storage: Storage) -> int | None:
    """The time of a native capture's first record (None: it has none, or no header)."""
    from .native import file_header_end, record_ts

    with open_input(path, storage) as f:
        start = file_header_end(f, path, lambda p: None)
        if start is None or file_size(f) < start + 16:
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
        times = [_first_record_ts(c.path, inputs.storage) for c in run]
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
