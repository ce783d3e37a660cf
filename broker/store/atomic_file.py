"""Atomic file replacement: write a temp file, fsync it, rename it over, fsync the dir.

A reader (or a restart after a crash) sees either the old content or the new, never a
mix. Java's ``MixAll.string2File`` does tmp + rename without the fsyncs.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["read_json", "write_atomic", "write_json_atomic"]


def write_atomic(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_json_atomic(path: str, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False).encode("utf-8"))


def read_json(path: str) -> Any | None:
    """The parsed file, or None if it does not exist. A leftover ``.tmp`` is ignored."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return json.loads(data)
